package workspace

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/airlockdev/airlock/internal/shell"
	"github.com/airlockdev/airlock/internal/tree"
	"github.com/airlockdev/airlock/sandbox"
)

func (r *Round) preparePlain(ctx context.Context) (err error) {
	pr, err := r.probe(ctx)
	if err != nil {
		return err
	}
	if err := checkTools(pr, false); err != nil {
		return err
	}
	if err := r.checkOverlap(ctx, pr); err != nil {
		return err
	}
	rp, wp, err := os.Pipe()
	if err != nil {
		return err
	}
	defer rp.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type walked struct {
		res *tree.Result
		err error
	}
	wdone := make(chan walked, 1)
	var localFailed atomic.Bool
	pats := r.spec.Exclude
	// The stream's directories' modes travel as its last member, a
	// temporary name (which the walk leaves out) at the top.
	modes := tmpBase()
	go func() {
		res, err := writeTar(ctx, wp, r.spec.Local, modes, func(rel string, _ bool) bool { return excluded(pats, rel) || isTmpName(path.Base(rel)) })
		wp.Close()
		if err != nil {
			localFailed.Store(true) // before the command is stopped: the cause
			cancel()
		}
		wdone <- walked{res, err}
	}()
	script := shell.PlainPrepareScript(r.spec.Remote, modes, r.rec.ID, r.prepareTurn())
	rerr := prepareLocked(runGuest(ctx, r.spec.Runner, "sending the tree to "+r.spec.Remote, sandbox.Command{Script: script, Stdin: rp}, nil))
	if rerr != nil && !localFailed.Load() {
		// Nobody reads the stream any more (a cut connection stops the
		// Runner's copy): stop the writer rather than wait for it forever.
		cancel()
		rp.Close()
		<-wdone
		return rerr
	}
	w := <-wdone
	if w.err != nil {
		return fmt.Errorf("workspace: reading %s: %w", r.spec.Local, w.err)
	}
	if rerr != nil {
		return rerr
	}
	r.base = w.res.Manifest
	r.rec.Marked = true
	r.o.report(sandbox.Progress{Asset: "prepare", Files: r.base.Files(), TotalFiles: r.base.Files(), Bytes: r.base.Bytes(), TotalBytes: r.base.Bytes()})
	return r.saveState(ctx)
}

// restorePlainScript streams the sandbox directory back
// (shell.PlainRestoreScript), its report named by a token of its own.
func (r *Round) restorePlainScript() string {
	return shell.PlainRestoreScript(r.spec.Remote, r.rec.ID, strings.ToLower(rand.Text()[:12]), r.rec.Marked)
}

// spoolMax is the largest file held in memory while it is compared; a
// larger one is spooled into the local runtime directory.
const spoolMax = 8 << 20

func (r *Round) restorePlain(ctx context.Context) (out *Result, err error) {
	res := &Result{}
	l, err := openLocal(r.spec.Local, hashSHA256, r.journalDir())
	if err != nil {
		return nil, err
	}
	l.beforePlace = r.o.beforePlace
	defer l.close()
	// The work tree does not change until the whole stream has arrived
	// (its end line) and the sandbox's command succeeded: a file that
	// arrives is spooled in the runtime directory, and a directory the
	// stream needs (created, below) is taken as made; both are written
	// only then. A host killed meanwhile leaves only spooled files, which
	// the next Prepare or Restore sweeps (see tmpfiles.go).
	var pending []placement // the files to place, in the stream's order
	defer func() {
		for _, pl := range pending {
			if pl.spool != "" {
				l.removeTmp(pl.spool)
			}
		}
	}()
	umask := tree.Umask()
	base := map[string]state{}
	baseDirPerm := map[string]fs.FileMode{}
	for _, e := range r.base.Entries {
		if e.Type == tree.Dir {
			base[e.Path] = state{kind: 'd'}
			baseDirPerm[e.Path] = e.Mode.Perm()
		} else {
			base[e.Path] = state{kind: 'f', perm: e.Mode.Perm(), id: e.SHA256}
		}
	}
	for p, id := range r.baseLinks() {
		base[p] = state{kind: 'l', id: id}
	}
	seen := map[string]bool{}
	sent := map[string]byte{} // the kind of each entry of the stream looked at
	var skip []string         // refused or excluded directories: nothing below them is looked at
	blocked := map[string]string{}
	refuse := func(p, why string) { r.refuse(res, p, why) }
	under := func(p string) bool {
		for _, s := range skip {
			if strings.HasPrefix(p, s+"/") {
				return true
			}
		}
		return false
	}
	// belowWhy says why nothing below p's parents may arrive, "" when it may.
	belowWhy := func(p string) string {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if k := sent[d]; k != 0 && k != 'd' {
				return fmt.Sprintf(whyBelowNonDir, d)
			}
			if why, ok := blocked[d]; ok {
				return why
			}
		}
		return ""
	}
	// localWins lists p, where a local entry loc that is not the baseline's
	// stands in the sandbox entry's way: a local edit is kept; a local link
	// or special file, which the round never sent, refuses the entry.
	localWins := func(p string, loc state) {
		if base[p].kind != 0 || loc.kind == 'f' || loc.kind == 'd' {
			res.Kept = append(res.Kept, p)
			blocked[p] = fmt.Sprintf(whyBelowKept, p)
			return
		}
		refuse(p, whyLocalLink)
		blocked[p] = fmt.Sprintf(whyBelowLocal, p)
	}
	type newDir struct {
		path     string
		perm     fs.FileMode
		replaces bool // a local file equal to the baseline's, removed first
	}
	var created []newDir              // directories to make once the stream is whole, parents first
	var rebit []newDir                // existing directories whose bits the sandbox changed
	toMake := map[string]bool{}       // created's paths
	belowNew := func(p string) bool { // nothing local lies below a directory to make
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if toMake[d] {
				return true
			}
		}
		return false
	}
	// lstat is l.stat in the tree as the stream would leave it so far.
	lstat := func(p string) (state, error) {
		if belowNew(p) {
			return state{}, nil
		}
		return l.stat(p)
	}
	// dir makes p a directory for a sandbox directory (in created, when
	// it is not one now): false when a local entry that stays is in the
	// way (p is then in blocked).
	isDir := map[string]bool{} // directories known to be, or to become, local directories
	var dir func(p string, perm fs.FileMode) (bool, error)
	dir = func(p string, perm fs.FileMode) (bool, error) {
		if isDir[p] {
			return true, nil
		}
		var loc state
		if !belowNew(p) {
			var blocker string
			var err error
			if loc, blocker, err = l.statAt(p); err != nil {
				return false, err
			}
			if blocker != "" {
				if ok, err := dir(blocker, 0o755); !ok || err != nil {
					return false, err
				}
				if loc, err = lstat(p); err != nil {
					return false, err
				}
			}
		}
		nd := newDir{path: p, perm: perm}
		switch {
		case loc.kind == 'd':
			isDir[p] = true
			return true, nil
		case (loc.kind == 'f' || loc.kind == 'l') && loc.eq(base[p]):
			// A file (or a link that arrived) the sandbox replaced by a
			// directory.
			nd.replaces = true
			res.Deleted = append(res.Deleted, p)
		case loc.kind != 0:
			localWins(p, loc)
			return false, nil
		}
		created = append(created, nd)
		toMake[p], isDir[p] = true, true
		return true, nil
	}
	// goneLocally reports whether p, a directory of the baseline, is gone
	// from the work tree (the user deleted or renamed it): the user's
	// deletion wins, and the sandbox's directory entry does not make it
	// again (a file the sandbox changed or added in it does, through dir).
	goneLocally := func(p string) (bool, error) {
		if base[p].kind != 'd' {
			return false, nil
		}
		if belowNew(p) {
			return true, nil
		}
		loc, blocker, err := l.statAt(p)
		return err == nil && blocker == "" && loc.kind == 0, err
	}
	// Entries written last, once the whole stream is known: links, and
	// files that replace a local directory (spooled meanwhile).
	type deferred struct {
		rem     state
		target  string // links
		spool   string // files
		typeDir bool   // replaces a local directory
	}
	later := map[string]*deferred{}
	defer func() {
		for _, d := range later {
			if d.spool != "" {
				l.removeTmp(d.spool)
			}
		}
	}()
	rems := map[string]remEntry{} // the stream's entries looked at
	removed := map[string]bool{}  // local directories removed for an entry of another type
	tooLarge := ""                // the file past the byte limit
	var h header
	written := 0
	err = r.restoreStream(ctx, "reading the sandbox directory "+r.spec.Remote, r.restorePlainScript(), nil, func(br *bufio.Reader) error {
		var err error
		if h, err = readHeader(br, false); err != nil {
			return err
		}
		r.refuseReported(h.Special, res)
		for p, c := range h.Special {
			if !writtenStripped(c) {
				// Refused: its tar member is not looked at, and the local
				// entry there (a directory with all below it) stays.
				seen[p] = true
				skip = append(skip, p)
			}
		}
		if h.Tail == shell.TailEmpty {
			return hostile(shell.ReadRestoreEnd(br))
		}
		err = readTar(br, r.o.maxBytes, func(e tarEntry, body io.Reader) error {
			p := e.Path
			switch {
			case p == "":
				// The sandbox's path as written (its tar names
				// each member ./<path>).
				name := strings.TrimPrefix(e.Name, "./")
				if e.Mode.IsDir() {
					name = strings.TrimSuffix(name, "/")
				}
				if tree.ValidPath(name) && (under(name) || seen[name]) {
					return nil
				}
				why := "not a clean relative path"
				switch {
				case !tree.ValidPath(name):
				case strings.Contains(name, "\\"):
					why = "a name with a backslash, which a host may read as a path separator"
				case len(name) > tree.DefaultMaxPathLen:
					why = fmt.Sprintf("a path longer than %d bytes", tree.DefaultMaxPathLen)
				}
				refuse(name, why)
				if tree.ValidPath(name) {
					// A name the local tree may hold (Prepare sent it): the
					// local entry, and all below it, stay as they are.
					seen[name] = true
					skip = append(skip, name)
				}
				return nil
			case sent[p] != 0:
				// A sandbox's tar writes each entry once: a second member
				// of the name is refused, and reported, not taken.
				refuse(p, "a second member of this name in the sandbox's stream; the first was taken")
				return nil
			case under(p) || seen[p]:
				return nil
			case !reserved(p) && excluded(r.rec.Exclude, p):
				if e.Mode.IsDir() {
					skip = append(skip, p)
				}
				return nil
			}
			seen[p] = true
			// A refused entry leaves the local one there as it is, with
			// all below it (a local directory the sandbox replaced by a
			// refused file keeps its files).
			if reserved(p) {
				refuse(p, whyReserved(p))
				skip = append(skip, p)
				return nil
			}
			if hasTmpName(p) {
				refuse(p, whyTmpName)
				skip = append(skip, p)
				return nil
			}
			if why := belowWhy(p); why != "" {
				refuse(p, why)
				if e.Mode.IsDir() {
					blocked[p] = why
				} else {
					skip = append(skip, p)
				}
				return nil
			}
			e.Mode = withheld(e.Mode, umask, base[p], baseDirPerm[p])
			switch {
			case e.Mode.IsDir():
				sent[p] = 'd'
			case e.Mode&fs.ModeSymlink != 0:
				sent[p] = 'l'
			default:
				sent[p] = 'f'
			}
			if body == nil {
				tooLarge = p // readTar stops after it
				return nil
			}
			if e.Mode.IsDir() {
				rems[p] = remEntry{st: state{kind: 'd'}, perm: e.Mode.Perm()}
				if gone, err := goneLocally(p); err != nil || gone {
					return err
				}
				ok, err := dir(p, e.Mode.Perm())
				if bp, had := baseDirPerm[p]; had && ok && err == nil && !toMake[p] && bp != e.Mode.Perm() {
					// The sandbox changed an existing directory's bits:
					// they arrive when the local ones are the baseline's.
					var fi fs.FileInfo
					if fi, err = l.root.Lstat(p); err == nil && fi.IsDir() && fi.Mode().Perm() == bp {
						rebit = append(rebit, newDir{path: p, perm: e.Mode.Perm()})
					}
				}
				return err
			}
			parentGone := false
			if d := path.Dir(p); d != "." && base[p].kind != 0 && !isDir[d] {
				// A file of the baseline in a directory the user deleted:
				// gone locally too, so the user's deletion wins (or is
				// Kept against the sandbox's change) and nothing is
				// written there.
				var err error
				if parentGone, err = goneLocally(d); err != nil {
					return err
				}
			}
			if d := path.Dir(p); d != "." && !parentGone {
				// The sandbox's stream lists a directory before what is
				// in it; this makes sure of it.
				if ok, err := dir(d, 0o755); err != nil || !ok {
					if err == nil {
						refuse(p, belowWhy(p))
					}
					return err
				}
			}
			loc, err := lstat(p)
			if err != nil {
				return err
			}
			b := base[p]
			switch {
			case e.Mode&fs.ModeSymlink != 0:
				hh := sha256.Sum256([]byte(e.Linkname))
				rem := state{kind: 'l', id: hex.EncodeToString(hh[:])}
				rems[p] = remEntry{st: rem}
				switch {
				case loc.eq(rem):
				case loc.eq(b):
					later[p] = &deferred{rem: rem, target: e.Linkname, typeDir: loc.kind == 'd'}
				default:
					localWins(p, loc)
				}
				return nil
			case !e.Mode.IsRegular():
				refuse(p, "a "+tree.Kind(e.Mode)+" or hard link")
				return nil
			case e.Mode&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0:
				// Written below without those bits (plainFile keeps
				// only the permission bits), and reported.
				refuse(p, reportReason('u'))
			}
			if loc.kind == 'd' && b.kind == 'd' {
				// A directory the sandbox replaced by a file: spooled
				// until the directory is gone.
				hs := sha256.New()
				sp, err := spoolBody(l, p, io.TeeReader(body, hs), e.Mode.Perm())
				if err != nil {
					return err
				}
				rems[p] = remEntry{st: state{kind: 'f', perm: e.Mode.Perm(), id: hex.EncodeToString(hs.Sum(nil))}, size: e.Size}
				later[p] = &deferred{rem: state{kind: 'f', perm: e.Mode.Perm()}, spool: sp, typeDir: true}
				return nil
			}
			rem, err := r.plainFile(l, p, e, body, b, loc, &pending, localWins)
			if err == nil {
				rems[p] = remEntry{st: rem, size: e.Size}
			}
			return err
		})
		if errors.Is(err, shell.ErrTruncated) {
			// The host stops reading here: what follows in the stream
			// never arrives, so the restore fails (and changes nothing).
			return fmt.Errorf("%w: %s holds more than %d bytes of files (%s is the one past the limit); nothing was written or deleted and the entries after it did not arrive: raise WithMaxBytes (or remove the file in the sandbox) and run Restore again", ErrTooLarge, r.spec.Remote, r.o.maxBytes, tooLarge)
		}
		if err != nil {
			return err
		}
		return hostile(shell.ReadRestoreEnd(br))
	})
	if err != nil {
		return nil, err
	}
	// The stream is whole: its directories, then its files. What is
	// written is the sandbox's now, whether or not the Restore gets to its
	// end: the baseline follows it (rebase.go).
	defer func() {
		listed := func(p string) bool { return seen[p] || under(p) }
		rerr := r.rebasePlain(ctx, l, rems, listed, removed)
		switch {
		case rerr == nil:
		case err == nil:
			out, err = nil, rerr
		default:
			r.o.log.Warn("workspace: the round's baseline did not move after a failed restore", "round", r.rec.ID, "error", rerr)
		}
	}()
	unmade := map[string]string{} // directories whose name the host refuses: why
	unmadeAbove := func(p string) string {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if why, ok := unmade[d]; ok {
				return why
			}
		}
		return ""
	}
	for _, nd := range created {
		if why := unmadeAbove(nd.path); why != "" {
			refuse(nd.path, why)
			unmade[nd.path] = why
			continue
		}
		if nd.replaces {
			if err := l.remove(nd.path); err != nil {
				return nil, l.writeError(nd.path, err)
			}
		}
		err := l.mkdirs(nd.path)
		if err == nil {
			if err = l.root.Mkdir(nd.path, 0o700); err == nil {
				err = l.root.Chmod(nd.path, nd.perm|0o700)
			} else if errors.Is(err, fs.ErrExist) {
				err = nil
			}
			err = asNameError(nd.path, err)
		}
		if why := nameRefused(err); why != "" {
			refuse(nd.path, why)
			unmade[nd.path] = why
			continue
		}
		if err != nil {
			return nil, l.writeError(nd.path, err)
		}
	}
	for i := range pending {
		pl := &pending[i]
		if why := unmadeAbove(pl.path); why != "" {
			refuse(pl.path, why)
			continue
		}
		err := l.placeSpool(pl.spool, pl.path, pl.perm)
		pl.spool = ""
		if why := nameRefused(err); why != "" {
			refuse(pl.path, why)
			continue
		}
		if err != nil {
			return nil, l.writeError(pl.path, err)
		}
		written++
		res.Updated = append(res.Updated, pl.path)
	}
	deleted := map[string]bool{}
	var dirs []string
	for p, b := range base {
		if seen[p] || under(p) {
			continue
		}
		if b.kind == 'd' {
			dirs = append(dirs, p)
			continue
		}
		loc, _, err := l.statAt(p) // absent below a local non-directory
		if err != nil {
			return nil, err
		}
		switch {
		case loc.kind == 0:
		case !loc.eq(b):
			res.Kept = append(res.Kept, p)
		default:
			deleted[p] = true
		}
	}
	// withdraw refuses the deferred entry p and keeps what its change of
	// type would delete.
	withdraw := func(p, why string) {
		refuse(p, why)
		d := later[p]
		delete(later, p)
		if d.spool != "" {
			l.removeTmp(d.spool)
		}
		if !d.typeDir {
			return
		}
		for x := range deleted {
			if below(x, p) {
				delete(deleted, x)
				refuse(x, fmt.Sprintf(whyBelowRefused, p))
			}
		}
	}
	for _, p := range slices.Sorted(maps.Keys(later)) {
		if !later[p].typeDir {
			continue
		}
		hold, err := l.holds(p, func(e string) bool { return deleted[e] })
		if err != nil {
			return nil, err
		}
		if hold != "" {
			withdraw(p, fmt.Sprintf(whyDirHolds, hold))
		}
	}
	links := map[string]string{}
	files := map[string]bool{}
	for p, d := range later {
		if d.rem.kind == 'l' {
			links[p] = d.target
		} else {
			files[p] = true
		}
	}
	bad, err := newLinkCheck(l, links, files).decide()
	if err != nil {
		return nil, err
	}
	for _, p := range slices.Sorted(maps.Keys(bad)) {
		withdraw(p, bad[p])
	}

	for _, p := range slices.Sorted(maps.Keys(deleted)) {
		if err := l.remove(p); err != nil {
			return nil, l.writeError(p, err)
		}
		res.Deleted = append(res.Deleted, p)
	}
	slices.SortFunc(dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	for _, d := range dirs {
		if fi, err := l.root.Lstat(d); err == nil && fi.IsDir() && l.root.Remove(d) == nil {
			res.Deleted = append(res.Deleted, d)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(later)) {
		d := later[p]
		if why := unmadeAbove(p); why != "" {
			refuse(p, why)
			continue
		}
		// The entry is made under a temporary name beside p first, so
		// that a failure to make it (a full disk, a runtime directory on
		// another file system) leaves a local directory p whole.
		err := l.mkdirs(p)
		var tmp string
		if err == nil {
			if d.rem.kind == 'l' {
				tmp, err = l.tmpLink(path.Dir(p), d.target)
			} else {
				tmp, err = l.moveIn(d.spool, path.Dir(p), d.rem.perm)
				d.spool = ""
			}
		}
		if err == nil && d.typeDir {
			if err = l.replacing(tmp, p); err == nil {
				if err = l.removeDir(p); err == nil {
					removed[p] = true
				}
			}
			if err != nil {
				l.removeTmp(tmp)
				return nil, err
			}
		}
		if err == nil {
			err = l.place(tmp, p)
		}
		if why := nameRefused(asNameError(p, err)); why != "" {
			refuse(p, why)
			continue
		}
		if err != nil {
			return nil, l.writeError(p, err)
		}
		if d.rem.kind != 'l' {
			written++
		}
		res.Updated = append(res.Updated, p)
	}
	for i := len(created) - 1; i >= 0; i-- {
		if nd := created[i]; nd.perm != nd.perm|0o700 && unmade[nd.path] == "" {
			l.root.Chmod(nd.path, nd.perm)
		}
	}
	for _, nd := range rebit {
		if err := l.root.Chmod(nd.path, nd.perm); err != nil {
			return nil, l.writeError(nd.path, err)
		}
		res.Updated = append(res.Updated, nd.path)
	}
	r.o.report(sandbox.Progress{Asset: "restore", Files: written, TotalFiles: written})
	return res, nil
}

// withheld is the mode m of a sandbox entry as a plain round writes and
// compares it: less the permission bits the host's umask withholds, unless
// the user's entry at Prepare (the baseline b, or a directory's bits
// dirPerm) had them. A hostile sandbox's chmod 0777 must not make the
// user's files writable by every local user (an outside tester's
// finding); bits the user's own file had (a group-writable 0664) come back
// as they went. Links keep theirs (their bits mean nothing).
func withheld(m, umask fs.FileMode, b state, dirPerm fs.FileMode) fs.FileMode {
	if m&fs.ModeSymlink != 0 {
		return m
	}
	had := dirPerm
	if b.kind == 'f' {
		had = b.perm
	}
	return m &^ (umask &^ had)
}

// spoolBody spools the body of the sandbox's file p (l.spool): a body
// that ends early is the stream's failure (cutStream), anything else the
// host's.
func spoolBody(l *local, p string, body io.Reader, perm fs.FileMode) (string, error) {
	src := &shell.ReadTracker{R: body}
	sp, err := l.spool(src, perm)
	if err != nil {
		if src.Err != nil {
			return "", cutStream("reading "+p+" from the sandbox", src.Err)
		}
		return "", fmt.Errorf("workspace: spooling %s: %w", p, err)
	}
	return sp, nil
}

// A placement is a file of the sandbox's stream to write into the work
// tree once the whole stream has arrived: spool, a temporary file in the
// runtime directory, is renamed to path.
type placement struct {
	path, spool string
	perm        fs.FileMode
}

// plainFile compares one regular file from the sandbox with the baseline
// and the local copy, and spools it to be placed (pending) when the
// remote change wins; a local entry that stays goes to localWins. It
// returns the sandbox's file as compared. A spool that fails is an error.
func (r *Round) plainFile(l *local, p string, e tarEntry, body io.Reader, b, loc state, pending *[]placement, localWins func(string, state)) (state, error) {
	hs := sha256.New()
	var content io.Reader
	var spool string
	if e.Size <= spoolMax {
		data, err := io.ReadAll(io.TeeReader(io.LimitReader(body, e.Size), hs))
		if err != nil {
			return state{}, cutStream("reading "+p+" from the sandbox", err)
		}
		content = bytes.NewReader(data)
	} else {
		var err error
		if spool, err = spoolBody(l, p, io.TeeReader(body, hs), e.Mode.Perm()); err != nil {
			return state{}, err
		}
		defer func() {
			if spool != "" {
				l.removeTmp(spool)
			}
		}()
	}
	rem := state{kind: 'f', perm: e.Mode.Perm(), id: hex.EncodeToString(hs.Sum(nil))}
	switch {
	case loc.eq(rem), rem.eq(b): // nothing to bring, or nothing changed in the sandbox
		return rem, nil
	case !loc.eq(b):
		localWins(p, loc)
		return rem, nil
	}
	if spool == "" {
		var err error
		if spool, err = l.spool(content, rem.perm); err != nil {
			return state{}, fmt.Errorf("workspace: spooling %s: %w", p, err)
		}
	}
	*pending = append(*pending, placement{path: p, spool: spool, perm: rem.perm})
	spool = ""
	return rem, nil
}
