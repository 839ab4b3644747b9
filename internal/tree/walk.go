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
	"slices"
	"sort"
	"strings"
	"time"
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

// Options configure Walk and Copy. The zero value skips links and applies the
// default limits.
type Options struct {
	Links  LinkPolicy
	Limits Limits
	// Exclude, when set, is asked about every entry by its slash-separated
	// relative path; true leaves it out of the walk, the manifest and
	// Skipped. An excluded directory is not descended into.
	Exclude func(rel string, isDir bool) bool
	// ForceFallback makes the walker use the os.Root reader even where
	// openat2 works. For tests.
	ForceFallback bool
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
}

// Item is one directory or regular file handed to a Walk callback. Reading a
// file's Item yields exactly Entry.Size bytes and hashes them.
type Item struct {
	Entry
	f       *os.File
	st      stat // the baseline the file must still match at the end
	h       hash.Hash
	remain  int64
	readErr error
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
	return newItem(f, rel, statInfo(fi)), nil
}

func newItem(f *os.File, rel string, st stat) *Item {
	return &Item{Entry: Entry{Path: rel, Type: File, Mode: st.mode.Perm(), Size: st.size}, f: f, st: st, h: sha256.New(), remain: st.size}
}

// Verify reads and hashes whatever the caller left unread, then checks that
// the file ended at Size and did not change while read: same size,
// modification and change time, and identity as at the start. It fills
// SHA256, or returns an error wrapping ErrChanged.
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
	var one [1]byte
	if n, _ := it.f.Read(one[:]); n != 0 {
		return fmt.Errorf("%w: %s: file grew while read", ErrChanged, it.Path)
	}
	fi, err := it.f.Stat()
	if err != nil {
		return fmt.Errorf("fstat %q: %w", it.Path, err)
	}
	st := it.st
	if fi.Size() != st.size || !fi.ModTime().Equal(st.mtime) || !st.same(fi) || !st.sameCtime(fi) {
		return fmt.Errorf("%w: %s: size, time or identity changed while read; retry when the tree is quiet", ErrChanged, it.Path)
	}
	it.SHA256 = hex.EncodeToString(it.h.Sum(nil))
	return nil
}

// Read reads the file's content. For a directory it returns io.EOF.
func (it *Item) Read(p []byte) (int, error) {
	if it.readErr != nil {
		return 0, it.readErr
	}
	if it.remain <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > it.remain {
		p = p[:it.remain]
	}
	n, err := it.f.Read(p)
	it.h.Write(p[:n])
	it.remain -= int64(n)
	if err == io.EOF {
		if it.remain > 0 {
			err = fmt.Errorf("%w: %s: file shrank while read", ErrChanged, it.Path)
			it.readErr = err
		} else {
			err = nil
		}
	} else if err != nil {
		it.readErr = fmt.Errorf("reading %s: %w", it.Path, err)
		err = it.readErr
	}
	if err == nil && it.remain == 0 {
		return n, nil
	}
	return n, err
}

// stat is what the walker knows about an entry before opening it.
type stat struct {
	mode  fs.FileMode // type and permission bits
	size  int64
	mtime time.Time
	same  func(fi fs.FileInfo) bool // is fi the same file as this lstat
	// For Fingerprint: the platform's raw mode word, identity and change
	// time; full says they are known.
	raw      uint32
	ino, dev uint64
	ctime    int64
	full     bool
}

// sameCtime reports whether fi (an fstat after the read) has the change
// time this lstat saw. A file rewritten in place with its size and
// modification time restored still has a new change time.
func (st stat) sameCtime(fi fs.FileInfo) bool {
	if !st.full {
		return true
	}
	c, ok := ctimeOf(fi)
	return !ok || c == st.ctime
}

// node is an open directory of one reader (openat2 or os.Root).
type node interface {
	names() ([]string, error)
	lstat(name string) (stat, error)
	openDir(name string, want stat) (node, error)
	openFile(name string, want stat) (*os.File, error)
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
	root    node
	files   int
	dirs    int
	bytes   int64
	entries []Entry
	skipped []string
	buf     []byte
	ances   []fs.FileInfo // open directories from the root down, for cycle checks
	// linked holds every directory entered through a followed link, and
	// via counts the followed links above the current directory: below a
	// link, no directory in linked is entered again (see FollowLinksWithin).
	linked map[fileKey]bool
	via    int
}

// Walk reads the tree at root and calls fn for every directory and regular
// file below it (not root itself): depth first, names sorted within a
// directory, a directory before its contents. fn may read a file's Item fully,
// partly or not at all; the walker reads and hashes the rest, then checks that
// the file did not change. fn may be nil. Item.SHA256 is empty while fn runs.
//
// root must be a directory and not a symbolic link; the components above it
// are trusted.
func Walk(ctx context.Context, root string, opts Options, fn func(*Item) error) (*Result, error) {
	top, mode, err := openRoot(root, opts.ForceFallback)
	if err != nil {
		return nil, err
	}
	defer top.close()
	w := &walker{ctx: ctx, opts: opts, lim: opts.Limits.WithDefaults(), fn: fn, root: top}
	fi, err := top.info()
	if err != nil {
		return nil, &fs.PathError{Op: "walk", Path: root, Err: err}
	}
	w.ances = append(w.ances, fi)
	if err := w.dir(top, "", ""); err != nil {
		return nil, err
	}
	sort.Slice(w.entries, func(i, j int) bool { return w.entries[i].Path < w.entries[j].Path })
	sort.Strings(w.skipped)
	return &Result{Manifest: Manifest{Entries: w.entries}, Skipped: w.skipped, Mode: mode, RootMode: fi.Mode().Perm()}, nil
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
		return &LimitError{Limit: "path length", Max: int64(w.lim.MaxPathLen), Path: rel, err: ErrPathTooLong}
	}
	depth := 1
	for i := 0; i < len(rel); i++ {
		if rel[i] == '/' {
			depth++
		}
	}
	if depth > w.lim.MaxDepth {
		return &LimitError{Limit: "depth", Max: int64(w.lim.MaxDepth), Path: rel, err: ErrTooDeep}
	}
	return nil
}

// dir walks the directory n, which is at prefix in the walk and at real
// below the root (real has no link in it; it differs from prefix below a
// followed link).
func (w *walker) dir(n node, prefix, real string) error {
	names, err := n.names()
	if err != nil {
		return fmt.Errorf("reading directory %q: %w", displayPath(prefix), err)
	}
	slices.Sort(names)
	for _, name := range names {
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
		st, err := n.lstat(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since the listing: it is simply not part of the tree
		}
		if err != nil {
			return fmt.Errorf("lstat %q: %w", rel, err)
		}
		if w.opts.Exclude != nil && w.opts.Exclude(rel, st.mode.IsDir()) {
			continue
		}
		switch {
		case st.mode.IsDir():
			sub, err := n.openDir(name, st)
			if err != nil {
				return fmt.Errorf("opening directory %q: %w", rel, err)
			}
			err = w.enterDir(sub, rel, at, st.mode.Perm())
			sub.close()
			if err != nil {
				return err
			}
		case st.mode.IsRegular():
			f, err := n.openFile(name, st)
			if err != nil {
				return fmt.Errorf("opening %q: %w", rel, err)
			}
			err = w.file(f, rel, st)
			f.Close()
			if err != nil {
				return err
			}
		case st.mode&fs.ModeSymlink != 0:
			if err := w.link(rel, at); err != nil {
				return err
			}
		default:
			w.skipped = append(w.skipped, rel)
		}
	}
	return nil
}

func displayPath(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
}

// enterDir walks the directory sub at rel. Below a followed link it first
// checks that sub was not walked through a link before, and skips it if so.
func (w *walker) enterDir(sub node, rel, real string, perm fs.FileMode) error {
	fi, err := sub.info()
	if err != nil {
		return fmt.Errorf("fstat %q: %w", rel, err)
	}
	if w.via > 0 {
		key, ok := keyOf(fi)
		if !ok || w.linked[key] {
			// Walked through a link already (or of unknown identity, so
			// it might have been): once is enough.
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
		return &LimitError{Limit: "directories", Max: int64(w.lim.MaxFiles), Path: rel, err: ErrTooManyFiles}
	}
	e := Entry{Path: rel, Type: Dir, Mode: perm}
	w.entries = append(w.entries, e)
	if w.fn != nil {
		if err := w.fn(&Item{Entry: e}); err != nil {
			return err
		}
	}
	w.ances = append(w.ances, fi)
	defer func() { w.ances = w.ances[:len(w.ances)-1] }()
	return w.dir(sub, rel, real)
}

// link handles the link at rel in the walk, at real below the root.
func (w *walker) link(rel, real string) error {
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
		sub, err := w.root.openDir(target, st)
		if err != nil {
			return fmt.Errorf("following link %q: %w", rel, err)
		}
		defer sub.close()
		fi, err := sub.info()
		if err != nil {
			return fmt.Errorf("following link %q: %w", rel, err)
		}
		for _, a := range w.ances {
			if os.SameFile(a, fi) {
				w.skipped = append(w.skipped, rel) // a cycle
				return nil
			}
		}
		w.via++
		defer func() { w.via-- }()
		return w.enterDir(sub, rel, target, st.mode.Perm())
	case st.mode.IsRegular():
		f, err := w.root.openFile(target, st)
		if err != nil {
			return fmt.Errorf("following link %q: %w", rel, err)
		}
		defer f.Close()
		return w.file(f, rel, st)
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
		name string
		st   stat
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
		st, target, err := w.root.lstatBelow(p)
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
		stack = append(stack, comp{name: c, st: st})
	}
	if len(stack) == 0 {
		return "", stat{}, nil
	}
	last := stack[len(stack)-1]
	if last.st.same == nil {
		// Reached by ".." back into the link's own directories, whose
		// lstat this resolution did not take: take it now.
		st, _, err := w.root.lstatBelow(join(""))
		if err != nil {
			return "", stat{}, err
		}
		last.st = st
	}
	return join(""), last.st, nil
}

func (w *walker) file(f *os.File, rel string, st stat) error {
	if w.files+1 > w.lim.MaxFiles {
		return &LimitError{Limit: "files", Max: int64(w.lim.MaxFiles), Path: rel, err: ErrTooManyFiles}
	}
	if st.size > w.lim.MaxFileBytes {
		return &LimitError{Limit: "file bytes", Max: w.lim.MaxFileBytes, Path: rel, err: ErrFileTooLarge}
	}
	if w.bytes+st.size > w.lim.MaxBytes {
		return &LimitError{Limit: "bytes", Max: w.lim.MaxBytes, Path: rel, err: ErrTooManyBytes}
	}
	w.files++
	w.bytes += st.size
	it := newItem(f, rel, st)
	if w.fn != nil {
		if err := w.fn(it); err != nil {
			return err
		}
	}
	if w.buf == nil {
		w.buf = make([]byte, 256<<10)
	}
	// The file must end where lstat said it ends, and still be the same file.
	if err := it.verify(w.buf); err != nil {
		return err
	}
	w.entries = append(w.entries, it.Entry)
	return nil
}

// onlyReader hides every method but Read, so io.CopyBuffer uses our buffer.
type onlyReader struct{ io.Reader }

// onlyWriter hides every method but Write, so io.CopyBuffer uses our buffer.
type onlyWriter struct{ io.Writer }
