package tree

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"runtime"
	"slices"
	"strings"
)

// LinkPolicy says what the walker does with a symbolic link.
type LinkPolicy int

const (
	// SkipLinks (the zero value) leaves a link out and reports its relative
	// path in Result.Skipped.
	SkipLinks LinkPolicy = iota
	// RejectLinks fails the walk on any link with ErrLink.
	RejectLinks
	// FollowLinksWithin follows a link only when its target resolves inside
	// the walked root; a link that leaves the root fails with ErrLink. A
	// dangling link or a link cycle is skipped and reported.
	//
	// Each directory (by device and inode) is walked at most once through
	// links: a link to a directory that the walk has already entered through
	// a link (this one or another, at any depth) is not followed again, and
	// a directory reached below a followed link that was already walked
	// through a link is not entered again; both are left out and reported in
	// Skipped. So every directory is walked at most twice (once at its real
	// place, once through the first link that reaches it) and a walk costs
	// time linear in what is on disk, however many link paths lead to a
	// directory. Which link wins is the first in walk order, so the result
	// is deterministic.
	FollowLinksWithin
)

func (p LinkPolicy) String() string {
	switch p {
	case SkipLinks:
		return "SkipLinks"
	case RejectLinks:
		return "RejectLinks"
	case FollowLinksWithin:
		return "FollowLinksWithin"
	}
	return fmt.Sprintf("LinkPolicy(%d)", int(p))
}

// Default limits, applied to each zero field of Limits.
const (
	DefaultMaxFiles     = 100_000
	DefaultMaxBytes     = 4 << 30
	DefaultMaxFileBytes = 1 << 30
	DefaultMaxDepth     = 64
	DefaultMaxPathLen   = 4096
)

// Limits bound a walk. A zero field takes its default.
type Limits struct {
	MaxFiles     int   // regular files, and separately directories; default DefaultMaxFiles
	MaxBytes     int64 // file bytes in total; default DefaultMaxBytes
	MaxFileBytes int64 // bytes of one file; default DefaultMaxFileBytes
	MaxDepth     int   // path components below the root; default DefaultMaxDepth
	MaxPathLen   int   // bytes of a relative path; default DefaultMaxPathLen
	// Advice is what a LimitError tells the caller to do, for a caller
	// whose limits are not these fields (default: "raise Limits.<field>
	// or shrink the tree").
	Advice string
}

// WithDefaults returns l with every zero field set to its default.
func (l Limits) WithDefaults() Limits {
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultMaxFiles
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = DefaultMaxFileBytes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	if l.MaxPathLen <= 0 {
		l.MaxPathLen = DefaultMaxPathLen
	}
	return l
}

// Options configure Walk and Copy. The zero value skips links, applies the
// default limits and uses GOMAXPROCS workers.
type Options struct {
	Links  LinkPolicy
	Limits Limits
	// Exclude, when set, is asked about every entry by its slash-separated
	// relative path; true leaves it out of the walk, the manifest and
	// Skipped. An excluded directory is not descended into. It is called
	// on the goroutine that called Walk or Copy, in walk order.
	Exclude func(rel string, isDir bool) bool
	// ForceFallback makes the walker use the os.Root reader even where
	// openat2 works. For tests.
	ForceFallback bool
	// Compact leaves Result.Manifest empty: the walk's entries are then
	// in Result.Listing only, which holds them in about a third of the
	// memory and can stream the canonical manifest.
	Compact bool
	// SkipContent, when set, is asked about every regular file (e: path,
	// permission bits and size, no hash) on the goroutine that called
	// Walk, in walk order; true leaves the file unopened and unread. It
	// still counts against the limits and is listed, without a hash (see
	// Listing.Unread). For a walk that only needs to hash the files that
	// might equal a known manifest's. Walk only (not Copy), and only
	// without a callback.
	SkipContent func(e Entry) bool
	// Stamps makes the Listing keep each read file's Stamp (Listing.Sum).
	Stamps bool
	// Known, when set, is asked about every regular file whose lstat gave
	// a full Stamp (st), by its relative path, on the goroutine that called
	// Walk, in walk order, before SkipContent; ok means the caller knows the
	// file's SHA-256 from an earlier read that found the same Stamp (and a
	// change time old enough that a later write would have moved it): the
	// file is listed with sum, and its Stamp, without being opened; a
	// Walk's callback is not called for it (the caller accounts for it in
	// Known). Walk only (not Copy). With Seen, st is the fingerprint
	// pass's lstat where the walk took the pass's (a write since the pass
	// is then not seen: a caller that must see it lstat's again, as a later
	// walk does).
	Known func(rel string, st Stamp) (sum [32]byte, ok bool)
	// Seen, when set, is what a fingerprint pass of the same root saw
	// (FingerprintSeen): the walk takes each directory's listing and its
	// entries' lstat from it where it can, instead of from the file system
	// (see Seen).
	Seen *Seen
	// Workers bounds the goroutines that open, read, hash and (for Copy)
	// write regular files at once; default (0) GOMAXPROCS. 1 does
	// everything on the calling goroutine; a Walk with a callback always
	// reads on it. The walk proper (listing, lstat, links, limits,
	// Exclude) stays on the calling goroutine in walk order whatever the
	// number, so the Result, and the error a failing walk reports, do
	// not depend on it.
	Workers int
}

// workers returns the number of file workers o asks for.
func (o Options) workers() int {
	if o.Workers > 0 {
		return o.Workers
	}
	return max(1, runtime.GOMAXPROCS(0))
}

// Mode names the reader a walk used.
type Mode string

// Readers.
const (
	ModeOpenat2 Mode = "openat2"
	ModeRoot    Mode = "os.Root"
)

// Result is what a walk saw.
type Result struct {
	Manifest Manifest
	// Skipped lists what was left out, as sorted relative paths: links
	// (under SkipLinks; under FollowLinksWithin a dangling link, a link to
	// a special file, a cycle or a revisit, see FollowLinksWithin),
	// directories below a followed link that were already walked through a
	// link, and special files.
	Skipped  []string
	Mode     Mode        // the reader used
	RootMode fs.FileMode // permission bits of the root, from its open descriptor
	// Listing holds the same entries as Manifest, compactly; with
	// Options.Compact it is the only copy.
	Listing *Listing
}

// Item is one directory or regular file handed to a Walk callback. Reading a
// file's Item yields exactly Entry.Size bytes and hashes them.
type Item struct {
	Entry
	src     *srcFile
	st      stat // the baseline the file must still match at the end
	h       hash.Hash
	remain  int64
	readErr error
	known   *[32]byte // see UseKnown
}

// UseKnown, called by a Walk callback that read nothing of the file,
// offers the walk the file's SHA-256 from an earlier walk, with the Stamp
// that walk took (Listing.Sum). When the file still shows that Stamp —
// same identity, size, modification and change time: the evidence a walk
// has that a file did not change while it was read — the walk takes sum as
// the file's hash and does not read the file; it reports whether it did.
// For a caller that did not need the bytes (a Target that put a checked
// copy in place from elsewhere): bytes that a caller reads are always
// hashed as read.
func (it *Item) UseKnown(sum [32]byte, st Stamp) bool {
	if it.src == nil || it.remain != it.Size || it.readErr != nil || !st.matches(it.st) {
		return false
	}
	it.known = &sum
	it.remain = 0
	return true
}

// NewReader returns an Item that reads the regular file f (as OpenFile
// returned it) the way Walk reads a file: exactly the size f has now,
// hashed as it goes. After reading, call Verify. rel names the file in
// errors.
func NewReader(f *os.File, rel string) (*Item, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("fstat %q: %w", rel, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %q is a %s", ErrNotRegular, rel, Kind(fi.Mode()))
	}
	return newItem(&srcFile{fd: -1, f: f}, rel, statInfo(fi), sha256.New()), nil
}

func newItem(f *srcFile, rel string, st stat, h hash.Hash) *Item {
	return &Item{Entry: Entry{Path: rel, Type: File, Mode: st.mode.Perm(), Size: st.size}, src: f, st: st, h: h, remain: st.size}
}

// Verify reads and hashes whatever the caller left unread, then checks that
// the file did not change while read: same size, modification and change
// time, and identity as at the start, and, for a file changed moments
// before the check, the same bytes when read again (see settleWindow). It
// fills SHA256, or returns an error wrapping ErrChanged.
func (it *Item) Verify() error { return it.verify(nil) }

func (it *Item) verify(buf []byte) error {
	if it.remain > 0 {
		if buf == nil {
			buf = make([]byte, 64<<10)
		}
		if _, err := io.CopyBuffer(io.Discard, onlyReader{it}, buf); err != nil {
			return err
		}
	}
	if it.readErr != nil {
		return it.readErr
	}
	if err := checkUnchanged(it.src, it.st, it.Path); err != nil {
		return err
	}
	var sum [32]byte
	it.h.Sum(sum[:0])
	if err := checkSettled(it.src, it.st, it.Path, &sum, it.h, buf); err != nil {
		return err
	}
	it.SHA256 = hex.EncodeToString(sum[:])
	return nil
}

// checkUnchanged fstat's f after exactly st.size bytes of it were read and
// requires the file st described when the read began: same identity,
// size, modification and change time. That is also how growth shows (a
// new size and times), so no read for end of file is needed.
func checkUnchanged(f *srcFile, st stat, rel string) error {
	now, err := f.stat()
	if err != nil {
		return fmt.Errorf("fstat %q: %w", rel, err)
	}
	switch {
	case st.unchanged(now):
		return nil
	case now.size > st.size:
		return fmt.Errorf("%w: %s: file grew while read", ErrChanged, rel)
	}
	return fmt.Errorf("%w: %s: size, time or identity changed while read; retry when the tree is quiet", ErrChanged, rel)
}

// Read reads the file's content. For a directory it returns io.EOF.
func (it *Item) Read(p []byte) (int, error) {
	if it.readErr != nil {
		return 0, it.readErr
	}
	if it.remain <= 0 || it.src == nil {
		return 0, io.EOF
	}
	if int64(len(p)) > it.remain {
		p = p[:it.remain]
	}
	n, err := it.src.read(p)
	hashWrite(it.h, p[:n])
	it.remain -= int64(n)
	if err == io.EOF {
		if it.remain > 0 {
			err = fmt.Errorf("%w: %s: file shrank while read", ErrChanged, it.Path)
			it.readErr = err
		} else {
			err = nil
		}
	} else if err != nil {
		it.readErr = readFailed(it.src, it.st, it.Path, fmt.Errorf("reading %s: %w", it.Path, err))
		err = it.readErr
	}
	if err == nil && it.remain == 0 {
		return n, nil
	}
	return n, err
}

// node is an open directory of one reader (openat2 or os.Root).
type node interface {
	names() ([]string, error)
	lstat(name string) (stat, error)
	openDir(name string, want stat) (node, error)
	openFile(name string, want stat) (srcFile, error)
	// lstatBelow, called on the walk root, lstat's the slash-separated
	// path p below it, following no link in any component (a component
	// replaced by a link fails with ErrChanged; a missing one with
	// fs.ErrNotExist), and reads the link when p is one. openDir and
	// openFile, called on the walk root, accept such a path too.
	lstatBelow(p string) (st stat, target string, err error)
	info() (fs.FileInfo, error)
	close() error
}

type walker struct {
	ctx     context.Context
	opts    Options
	lim     Limits
	fn      func(*Item) error
	root    *dirRef
	cp      *copier  // the destination of a copy; nil for Walk
	pool    *pool    // file workers; nil does every file inline
	inline  *scratch // the calling goroutine's buffers
	files   int
	dirs    int
	bytes   int64
	seq     int // entries met so far, in walk order
	list    *Listing
	skipped []string
	fail    failure
	ances   []fs.FileInfo // open directories from the root down, for cycle checks
	// linked holds every directory entered through a followed link, and
	// via counts the followed links above the current directory: below a
	// link, no directory in linked is entered again (see FollowLinksWithin).
	linked map[fileKey]bool
	via    int
}

// limitErr is the *LimitError of limit (its value n) crossed at rel,
// with the walk's Limits.Advice.
func (w *walker) limitErr(limit string, n int64, rel string, err error) error {
	return &LimitError{Limit: limit, Max: n, Path: rel, err: err, advice: w.lim.Advice}
}

// Walk reads the tree at root and calls fn for every directory and regular
// file below it (not root itself): depth first, names sorted within a
// directory, a directory before its contents. fn may read a file's Item fully,
// partly or not at all; the walker reads and hashes the rest, then checks that
// the file did not change. fn may be nil; then the files are read and
// hashed by opts.Workers workers. Item.SHA256 is empty while fn runs.
//
// root must be a directory and not a symbolic link; the components above it
// are trusted.
func Walk(ctx context.Context, root string, opts Options, fn func(*Item) error) (*Result, error) {
	return walk(ctx, root, opts, fn, nil)
}

// walk is Walk, and with cp a copy: the walker (this goroutine) lists,
// lstat's, checks limits and creates directories in walk order; each
// regular file is a job that a worker opens, reads, hashes, writes and
// checks. A job for entry n that fails is reported only if nothing before n
// in walk order failed, so the error does not depend on the schedule.
func walk(ctx context.Context, root string, opts Options, fn func(*Item) error, cp *copier) (*Result, error) {
	top, mode, err := openRoot(root, opts.ForceFallback)
	if err != nil {
		return nil, err
	}
	defer top.close()
	fi, err := top.info()
	if err != nil {
		return nil, &fs.PathError{Op: "walk", Path: root, Err: err}
	}
	if fn != nil || cp != nil {
		opts.SkipContent = nil
	}
	if cp != nil {
		opts.Known = nil
	}
	w := &walker{ctx: ctx, opts: opts, lim: opts.Limits.WithDefaults(), fn: fn, cp: cp, inline: newScratch(ctx), list: newListing()}
	if opts.Stamps {
		w.list.stamps = &stampList{}
	}
	w.root = &dirRef{n: top, dst: -1, root: true}
	if cp != nil {
		w.root.dst = cp.root
	}
	w.root.refs.Store(1)
	w.ances = append(w.ances, fi)
	if n := opts.workers(); fn == nil && n > 1 {
		w.pool = startPool(w, n)
	}
	err = w.dir(w.root, "", "", opts.Seen.dir("", fi))
	if err != nil && err != errStop {
		w.fail.record(w.seq, err)
	}
	if w.pool != nil {
		w.pool.stop()
	}
	w.root.release(w)
	if cp != nil && w.fail.first() == nil {
		cp.deliver()
	}
	if err := w.fail.first(); err != nil {
		return nil, err
	}
	slices.Sort(w.skipped)
	w.list.finish()
	res := &Result{Skipped: w.skipped, Mode: mode, RootMode: fi.Mode().Perm(), Listing: w.list}
	if !opts.Compact {
		res.Manifest = w.list.Manifest()
	}
	return res, nil
}

func openRoot(root string, forceFallback bool) (node, Mode, error) {
	fi, err := os.Lstat(root)
	if err != nil {
		return nil, "", &fs.PathError{Op: "walk", Path: root, Err: fmt.Errorf("%w: %w", ErrNotDir, err)}
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, "", &fs.PathError{Op: "walk", Path: root, Err: fmt.Errorf("%w: it is a symbolic link; pass the real directory", ErrNotDir)}
	}
	if !fi.IsDir() {
		return nil, "", &fs.PathError{Op: "walk", Path: root, Err: fmt.Errorf("%w: it is a %s", ErrNotDir, Kind(fi.Mode()))}
	}
	if !forceFallback {
		n, err := openat2Root(root, fi)
		if err == nil {
			return n, ModeOpenat2, nil
		}
		if !errors.Is(err, errNoOpenat2) {
			return nil, "", err
		}
	}
	n, err := osRootOpen(root, fi)
	if err != nil {
		return nil, "", err
	}
	return n, ModeRoot, nil
}

// Kind names the type of a file mode for messages: "regular file",
// "directory", "symbolic link", "FIFO", "socket", "device" or "special file".
func Kind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "regular file"
	case m.IsDir():
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}

func (w *walker) checkPath(rel string) error {
	if len(rel) > w.lim.MaxPathLen {
		return w.limitErr("path length", int64(w.lim.MaxPathLen), rel, ErrPathTooLong)
	}
	depth := 1
	for i := 0; i < len(rel); i++ {
		if rel[i] == '/' {
			depth++
		}
	}
	if depth > w.lim.MaxDepth {
		return w.limitErr("depth", int64(w.lim.MaxDepth), rel, ErrTooDeep)
	}
	return nil
}

// dir walks the directory d, which is at prefix in the walk and at real
// below the root (real has no link in it; it differs from prefix below a
// followed link). With seen (d as a fingerprint pass saw it) it takes the
// names and their lstat from there.
func (w *walker) dir(d *dirRef, prefix, real string, seen *seenDir) error {
	var names []string
	if seen != nil {
		names = seen.names
	} else {
		var err error
		if names, err = d.n.names(); err != nil {
			return fmt.Errorf("reading directory %q: %w", displayPath(prefix), err)
		}
		slices.Sort(names)
	}
	for i, name := range names {
		w.seq++
		if w.fail.failed() {
			return errStop
		}
		if w.cp != nil {
			w.cp.deliver()
		}
		if err := w.ctx.Err(); err != nil {
			return err
		}
		rel, at := name, name
		if prefix != "" {
			rel = prefix + "/" + name
		}
		if real != "" {
			at = real + "/" + name
		}
		if err := w.checkPath(rel); err != nil {
			return err
		}
		var st stat
		if seen != nil && seen.took[i] {
			st = seen.stats[i]
		} else {
			var err error
			st, err = d.n.lstat(name)
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed since the listing: it is simply not part of the tree
			}
			if err != nil {
				return fmt.Errorf("lstat %q: %w", rel, err)
			}
		}
		if w.opts.Exclude != nil && w.opts.Exclude(rel, st.mode.IsDir()) {
			continue
		}
		switch {
		case st.mode.IsDir():
			sub, err := d.n.openDir(name, st)
			if err != nil {
				return fmt.Errorf("opening directory %q: %w", rel, err)
			}
			if err := w.enterDir(d, sub, rel, at, st.mode.Perm()); err != nil {
				return err
			}
		case st.mode.IsRegular():
			if err := w.file(job{from: d, into: d, name: name, leaf: name, rel: rel, st: st}); err != nil {
				return err
			}
		case st.mode&fs.ModeSymlink != 0:
			if err := w.link(d, rel, at); err != nil {
				return err
			}
		default:
			w.skipped = append(w.skipped, rel)
		}
	}
	if w.pool != nil {
		w.pool.flush()
	}
	return nil
}

// listFull reports a path the Listing cannot hold: longer than
// maxListedPath (32 KiB), or past its 4 GiB of records.
func listFull(rel string) error {
	return &LimitError{Limit: "path length", Max: maxListedPath, Path: rel, err: ErrPathTooLong}
}

func displayPath(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
}

// enterDir walks the directory sub at rel, a child of parent in the walk
// (and in the copy); it takes over sub. Below a followed link it first
// checks that sub was not walked through a link before, and skips it if so.
func (w *walker) enterDir(parent *dirRef, sub node, rel, real string, perm fs.FileMode) error {
	fi, err := sub.info()
	if err != nil {
		sub.close()
		return fmt.Errorf("fstat %q: %w", rel, err)
	}
	if w.via > 0 {
		key, ok := keyOf(fi)
		if !ok || w.linked[key] {
			// Walked through a link already (or of unknown identity, so
			// it might have been): once is enough.
			sub.close()
			w.skipped = append(w.skipped, rel)
			return nil
		}
		if w.linked == nil {
			w.linked = make(map[fileKey]bool)
		}
		w.linked[key] = true
	}
	// Directories count against MaxFiles too (separately from files).
	if w.dirs++; w.dirs > w.lim.MaxFiles {
		sub.close()
		return w.limitErr("directories", int64(w.lim.MaxFiles), rel, ErrTooManyFiles)
	}
	if _, _, ok := w.list.add(rel, 0, perm, recDir); !ok {
		sub.close()
		return listFull(rel)
	}
	d := &dirRef{n: sub, dst: -1, rel: rel, seq: w.seq}
	d.refs.Store(1)
	defer d.release(w)
	if w.fn != nil {
		if err := w.fn(&Item{Entry: Entry{Path: rel, Type: Dir, Mode: perm}}); err != nil {
			return err
		}
	}
	if w.cp != nil {
		if err := w.cp.mkdir(parent, d, path.Base(rel), rel, perm); err != nil {
			return err
		}
	}
	w.ances = append(w.ances, fi)
	defer func() { w.ances = w.ances[:len(w.ances)-1] }()
	return w.dir(d, rel, real, w.opts.Seen.dir(real, fi))
}

// link handles the link at rel in the walk (in the directory d), at real
// below the root.
func (w *walker) link(d *dirRef, rel, real string) error {
	switch w.opts.Links {
	case RejectLinks:
		return fmt.Errorf("%w: %q is a symbolic link and the policy rejects links", ErrLink, rel)
	case FollowLinksWithin:
	default:
		w.skipped = append(w.skipped, rel)
		return nil
	}
	target, st, err := w.resolve(real)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errLoop) {
		w.skipped = append(w.skipped, rel) // dangling, or a link loop
		return nil
	}
	if err != nil {
		return fmt.Errorf("following link %q: %w", rel, err)
	}
	switch {
	case target == "":
		w.skipped = append(w.skipped, rel) // the root: a cycle
		return nil
	case st.mode.IsDir():
		sub, err := w.root.n.openDir(target, st)
		if err != nil {
			return fmt.Errorf("following link %q: %w", rel, err)
		}
		fi, err := sub.info()
		if err != nil {
			sub.close()
			return fmt.Errorf("following link %q: %w", rel, err)
		}
		for _, a := range w.ances {
			if os.SameFile(a, fi) {
				sub.close()
				w.skipped = append(w.skipped, rel) // a cycle
				return nil
			}
		}
		w.via++
		defer func() { w.via-- }()
		return w.enterDir(d, sub, rel, target, st.mode.Perm())
	case st.mode.IsRegular():
		return w.file(job{from: w.root, into: d, name: target, leaf: path.Base(rel), rel: rel, st: st, link: true})
	default:
		w.skipped = append(w.skipped, rel) // a special file
		return nil
	}
}

// maxLinkHops bounds the links one resolution may pass, as the kernel's
// MAXSYMLINKS does; more is reported as a loop.
const maxLinkHops = 40

// errLoop: a link resolution passed more than maxLinkHops links.
var errLoop = errors.New("too many levels of symbolic links")

// resolve resolves the link at real (a path below the root with no link
// in it but the last component) one component at a time, the way the
// kernel would, but relative to the link's real place and confined to the
// root: a ".." above the root or an absolute target fails with ErrLink.
// It returns the target's path below the root, with no link in it ("" for
// the root itself), and the target's lstat. Every lookup is lstatBelow on
// a path with no link in it, so the walker, not the kernel, follows each
// link, and the result does not depend on how deep the link sits in the
// walk or which reader runs.
func (w *walker) resolve(real string) (string, stat, error) {
	type comp struct {
		name  string
		st    stat
		known bool // st was taken by this resolution
	}
	var stack []comp // the resolved path so far: directories only, no links
	dir, base := path.Split(real)
	for _, c := range strings.Split(strings.TrimSuffix(dir, "/"), "/") {
		if c != "" {
			stack = append(stack, comp{name: c, st: stat{mode: fs.ModeDir}})
		}
	}
	join := func(extra string) string {
		var sb strings.Builder
		for _, c := range stack {
			sb.WriteString(c.name)
			sb.WriteByte('/')
		}
		sb.WriteString(extra)
		return strings.TrimSuffix(sb.String(), "/")
	}
	pending := []string{base}
	hops := 0
	for len(pending) > 0 {
		c := pending[0]
		pending = pending[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(stack) == 0 {
				return "", stat{}, fmt.Errorf("%w: its target resolves outside the root", ErrLink)
			}
			stack = stack[:len(stack)-1]
			continue
		}
		p := join(c)
		st, target, err := w.root.n.lstatBelow(p)
		if err != nil {
			return "", stat{}, err
		}
		if st.mode&fs.ModeSymlink != 0 {
			if hops++; hops > maxLinkHops {
				return "", stat{}, errLoop
			}
			if strings.HasPrefix(target, "/") {
				return "", stat{}, fmt.Errorf("%w: its target is an absolute path", ErrLink)
			}
			if target == "" {
				return "", stat{}, fs.ErrNotExist
			}
			pending = append(strings.Split(target, "/"), pending...)
			continue
		}
		if !st.mode.IsDir() && len(pending) > 0 {
			return "", stat{}, fs.ErrNotExist // a path through a file: ENOTDIR
		}
		stack = append(stack, comp{name: c, st: st, known: true})
	}
	if len(stack) == 0 {
		return "", stat{}, nil
	}
	last := stack[len(stack)-1]
	if !last.known {
		// Reached by ".." back into the link's own directories, whose
		// lstat this resolution did not take: take it now.
		st, _, err := w.root.n.lstatBelow(join(""))
		if err != nil {
			return "", stat{}, err
		}
		last.st = st
	}
	return join(""), last.st, nil
}

// job is one regular file of the walk: name in the directory from (a path
// below the root for a followed link), copied (when copying) to leaf in
// into. rec is where its result goes.
type job struct {
	from, into *dirRef
	name, leaf string
	rel        string
	st         stat // its lstat: the baseline it is checked against
	link       bool // reached through a followed link
	seq        int
	sum        *[32]byte // where its hash goes, in the Listing
	stamp      *Stamp    // where its Stamp goes, with Options.Stamps
}

// file checks the limits for j's file in walk order and has it done:
// inline, or by a worker while the walk goes on.
func (w *walker) file(j job) error {
	if w.files+1 > w.lim.MaxFiles {
		return w.limitErr("files", int64(w.lim.MaxFiles), j.rel, ErrTooManyFiles)
	}
	if j.st.size > w.lim.MaxFileBytes {
		return w.limitErr("file bytes", w.lim.MaxFileBytes, j.rel, ErrFileTooLarge)
	}
	if w.bytes+j.st.size > w.lim.MaxBytes {
		return w.limitErr("bytes", w.lim.MaxBytes, j.rel, ErrTooManyBytes)
	}
	w.files++
	w.bytes += j.st.size
	j.seq = w.seq
	if w.opts.Known != nil && j.st.full {
		st := stampOf(j.st)
		if sum, ok := w.opts.Known(j.rel, st); ok {
			var listed bool
			if j.sum, j.stamp, listed = w.list.add(j.rel, j.st.size, j.st.mode, 0); !listed {
				return listFull(j.rel)
			}
			*j.sum = sum
			if j.stamp != nil {
				*j.stamp = st
			}
			return nil
		}
	}
	var flags uint16
	if w.opts.SkipContent != nil && w.opts.SkipContent(Entry{Path: j.rel, Type: File, Mode: j.st.mode.Perm(), Size: j.st.size}) {
		flags = recUnread
	}
	var ok bool
	if j.sum, j.stamp, ok = w.list.add(j.rel, j.st.size, j.st.mode, flags); !ok {
		return listFull(j.rel)
	}
	if flags != 0 {
		return nil
	}
	if w.pool == nil {
		return w.doFile(&j, w.inline)
	}
	j.from.refs.Add(1)
	j.into.refs.Add(1)
	w.pool.add(j)
	return nil
}

// doFile opens, reads, hashes (and, copying, writes) j's file, and checks
// that it did not change while read.
func (w *walker) doFile(j *job, s *scratch) error {
	var err error
	if w.cp != nil {
		err = w.cp.copyFile(j, s)
	} else {
		err = w.readFile(j, s)
	}
	if err == nil && j.stamp != nil {
		*j.stamp = stampOf(j.st)
	}
	return err
}

// open opens j's source file.
func (j *job) open() (srcFile, error) {
	if c := opened.Load(); c != nil {
		c.Add(1)
	}
	f, err := j.from.n.openFile(j.name, j.st)
	if err != nil {
		if j.link {
			return srcFile{}, fmt.Errorf("following link %q: %w", j.rel, err)
		}
		return srcFile{}, fmt.Errorf("opening %q: %w", j.rel, err)
	}
	return f, nil
}

// readFile is doFile for Walk.
func (w *walker) readFile(j *job, s *scratch) error {
	f, err := j.open()
	if err != nil {
		return err
	}
	defer f.close()
	if w.fn == nil {
		return s.stream(&f, j.st, j.rel, -1, j.sum)
	}
	s.h.Reset()
	it := newItem(&f, j.rel, j.st, s.h)
	if err := w.fn(it); err != nil {
		return err
	}
	if it.known != nil {
		if err := checkUnchanged(&f, j.st, j.rel); err != nil {
			return err
		}
		*j.sum = *it.known
		return nil
	}
	if err := it.verify(s.buffer(j.st.size)); err != nil {
		return err
	}
	s.h.Sum(j.sum[:0])
	return nil
}

// onlyReader hides every method but Read, so io.CopyBuffer uses our buffer.
type onlyReader struct{ io.Reader }
