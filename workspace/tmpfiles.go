package workspace

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/airlockdev/airlock/internal/owner"
	"github.com/airlockdev/airlock/internal/tree"
)

// Temporary files in the work tree. A restore writes each file and link
// under a temporary name in the target's directory and renames it into
// place; a large file of a plain directory's round is spooled the same way
// in the runtime directory. The name is .airlock-tmp-<owner>-<rand>: its
// length does not depend on the target's (a target of NAME_MAX bytes is
// written like any other), and it carries its owner (see owner.go).
//
// Before its first temporary file in a directory, a restore appends the
// directory (NUL-terminated, relative to the work tree) to its journal,
// <journal dir>/writes-<owner>-<rand>.journal, where the journal directory
// is <git dir>/airlock for a git work tree and <work tree>/.airlock for a
// plain directory (beside the restore lock). The journal goes when the
// restore returns with no temporary file left. A host killed meanwhile
// leaves both: the next Prepare or Restore of the work tree reads each
// journal whose owner is gone, removes the temporary files in the
// directories it lists whose owner is gone, and then the journal. No walk
// of the work tree is needed, and a temporary file whose owner runs is
// never touched, but for this: a write whose temporary file is not where
// it was made (its directory was renamed away, and may come back) keeps
// the journal too, and the next Restore of this process, which holds the
// work tree's restore lock (so none of this process's restores of it
// runs), sweeps this process's journals and temporary files as it sweeps
// a dead one's. Prepare never ships a temporary file to the sandbox, and
// a sandbox entry with such a name is refused. The state files of a
// round are written through the same kind of name in the state
// directory, which the next Prepare or Restore sweeps the same way.

const (
	tmpPrefix     = ".airlock-tmp-"
	tmpRandLen    = 16
	journalPrefix = "writes-"
	journalSuffix = ".journal"
)

// whyTmpName is why a sandbox entry named like a temporary file is refused.
const whyTmpName = "a name airlock reserves for its temporary files (" + tmpPrefix + "<owner>-<random>)"

// whyName is why an entry whose name the host cannot hold is refused.
const whyName = "the host's file system does not accept the name %s (%v)"

func tmpRand() string { return strings.ToLower(rand.Text()[:tmpRandLen]) }

// tmpBase is a new temporary name owned by this process.
func tmpBase() string { return tmpPrefix + owner.Tag() + "-" + tmpRand() }

// tmpOwner returns the owner tag of the temporary name n; ok is false when
// n is not one.
func tmpOwner(n string) (tag string, ok bool) {
	rest, found := strings.CutPrefix(n, tmpPrefix)
	if !found {
		return "", false
	}
	i := strings.LastIndexByte(rest, '-')
	if i < 0 || len(rest)-i-1 != tmpRandLen {
		return "", false
	}
	for _, c := range rest[i+1:] {
		if (c < 'a' || c > 'z') && (c < '2' || c > '7') {
			return "", false
		}
	}
	tag = rest[:i]
	if _, _, ok := owner.Parse(tag); !ok {
		return "", false
	}
	return tag, true
}

// isTmpName reports whether n is a temporary name of airlock's.
func isTmpName(n string) bool {
	_, ok := tmpOwner(n)
	return ok
}

// hasTmpName reports whether a component of the path p is a temporary
// name.
func hasTmpName(p string) bool {
	for _, c := range strings.Split(p, "/") {
		if isTmpName(c) {
			return true
		}
	}
	return false
}

// nameError is a write that failed because the host's file system does
// not accept a name (too long, or an encoding or a character it does not
// store): the entry is refused and the restore goes on.
type nameError struct {
	name string // the work-tree path whose name was not accepted
	err  error
}

func (e *nameError) Error() string { return e.name + ": " + e.err.Error() }
func (e *nameError) Unwrap() error { return e.err }

// asNameError wraps err, from creating the work-tree path name, when it
// says the name is not accepted.
func asNameError(name string, err error) error {
	if errors.Is(err, syscall.ENAMETOOLONG) || errors.Is(err, syscall.EILSEQ) || errors.Is(err, syscall.EINVAL) {
		var errno syscall.Errno
		if errors.As(err, &errno) {
			err = errno
		}
		return &nameError{name: name, err: err}
	}
	return err
}

// nameRefused returns why the entry p is refused when err says the host
// does not accept a name on its way, "" otherwise.
func nameRefused(err error) string {
	var ne *nameError
	if errors.As(err, &ne) {
		return fmt.Sprintf(whyName, ne.name, ne.err)
	}
	return ""
}

// note records dir in the journal before the first temporary file there.
func (l *local) note(dir string) error {
	if l.journalDir == "" || l.noted[dir] {
		return nil
	}
	if l.jf == nil {
		if err := os.MkdirAll(l.journalDir, 0o700); err != nil {
			return fmt.Errorf("creating the journal directory %s: %w", l.journalDir, err)
		}
		p := filepath.Join(l.journalDir, journalPrefix+owner.Tag()+"-"+tmpRand()+journalSuffix)
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			return fmt.Errorf("creating the journal of temporary files: %w", err)
		}
		l.jf = f
	}
	if _, err := l.jf.Write([]byte(dir + "\x00")); err != nil {
		return fmt.Errorf("recording %s in the journal %s: %w", dir, l.jf.Name(), err)
	}
	l.noted[dir] = true
	return nil
}

// replacing records in the journal, before the local directory rel goes,
// that the temporary file or link tmp beside it is to be renamed over rel.
// A host killed between the two leaves neither the directory nor the
// sandbox's entry at rel; the sweep then completes the rename (finishReplace)
// rather than removing tmp, so that the next Restore does not read the
// missing directory as a local deletion. The record is "/" + tmp, NUL,
// rel, NUL: no work-tree directory the journal lists starts with "/".
func (l *local) replacing(tmp, rel string) error {
	if l.jf == nil {
		return nil // no journal (tmp's directory was noted otherwise)
	}
	if _, err := l.jf.Write([]byte("/" + tmp + "\x00" + rel + "\x00")); err != nil {
		return fmt.Errorf("recording the replacement of %s in the journal %s: %w", rel, l.jf.Name(), err)
	}
	return nil
}

// removeTmp removes a temporary file of this restore (one a write failed
// to use: a file used is not removed here); one that cannot be removed
// keeps the journal for the next sweep. So does one not found: its
// directory may have been renamed away (the file went with it) and may
// come back, and the next Restore's sweep, which takes this process's
// journals, finds it where the journal says.
func (l *local) removeTmp(tmp string) {
	if err := l.root.Remove(tmp); err != nil {
		l.leftover = true
	}
}

// closeJournal removes the journal unless a temporary file stayed.
func (l *local) closeJournal() {
	if l.jf == nil {
		return
	}
	l.jf.Close()
	if !l.leftover {
		os.Remove(l.jf.Name())
	}
	l.jf = nil
}

// journalDir is where restores of the round's work tree keep their
// journals: beside the restore lock.
func (r *Round) journalDir() string { return filepath.Dir(r.lockPath()) }

// sweepTmp removes the temporary files that restores of the round's work
// tree left when their host was killed: the journals whose owner is gone
// name the directories. A failure is logged, and the journal stays for the
// next sweep.
//
// self, for a Restore that holds the work tree's restore lock, takes this
// process's journals and temporary files too: every restore of the work
// tree is serialized by that lock, so a temporary file this process left
// there belongs to one that returned (a failed write whose file moved
// with its directory; see removeTmp).
func (r *Round) sweepTmp(self bool) {
	sweepTmp(r.o.log, r.spec.Local, r.journalDir(), self)
	if r.state != "" {
		sweepTmpState(r.o.log, r.state)
	}
}

// sweepTmpState removes the temporary files of state files (see
// saveState) in the state directory dir whose owner is gone.
func sweepTmpState(log *slog.Logger, dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return // none yet
	}
	for _, e := range ents {
		tag, ok := tmpOwner(e.Name())
		if !ok || !e.Type().IsRegular() || owner.Alive(tag) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			log.Warn("removing a killed Prepare's temporary state file", "path", filepath.Join(dir, e.Name()), "error", err)
		}
	}
}

func sweepTmp(log *slog.Logger, work, dir string, self bool) {
	gone := func(tag string) bool { return !owner.Alive(tag) || (self && tag == owner.Tag()) }
	ents, err := os.ReadDir(dir)
	if err != nil {
		return // none yet
	}
	var root *os.Root
	defer func() {
		if root != nil {
			root.Close()
		}
	}()
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), journalPrefix)
		if !ok || !strings.HasSuffix(rest, journalSuffix) || !e.Type().IsRegular() {
			continue
		}
		tag, _, _ := strings.Cut(rest, "-")
		if _, _, owned := owner.Parse(tag); !owned || !gone(tag) {
			continue
		}
		data, err := readState(dir, e.Name())
		if err != nil {
			log.Warn("reading the journal of a killed restore", "path", filepath.Join(dir, e.Name()), "error", err)
			continue
		}
		if root == nil {
			if root, err = os.OpenRoot(work); err != nil {
				log.Warn("opening the work tree to remove a killed restore's temporary files", "path", work, "error", err)
				return
			}
		}
		done := true
		items := strings.Split(string(data), "\x00")
		items = items[:len(items)-1] // the last one is unterminated: no file was made there
		var dirs []string
		keep := map[string]bool{}
		for i := 0; i < len(items); i++ {
			tmp, isRename := strings.CutPrefix(items[i], "/")
			switch {
			case !isRename:
				dirs = append(dirs, items[i])
			case i+1 < len(items): // a rename recorded whole (see replacing)
				i++
				if !finishReplace(log, root, work, tmp, items[i]) {
					keep[tmp], done = true, false
				}
			}
		}
		for _, d := range dirs {
			if d != "." && !tree.ValidPath(d) {
				continue
			}
			if !sweepTmpDir(log, root, work, d, keep, gone) {
				done = false
			}
		}
		if done {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				log.Warn("removing the journal of a killed restore", "path", filepath.Join(dir, e.Name()), "error", err)
			}
		}
	}
}

// sweepTmpDir removes the temporary files in the work-tree directory d
// whose owner is gone; false when one stays for a reason other than its
// owner running.
func sweepTmpDir(log *slog.Logger, root *os.Root, work, d string, keep map[string]bool, gone func(tag string) bool) bool {
	f, err := root.Open(d)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return true
	}
	if err != nil {
		log.Warn("reading a directory a killed restore wrote in", "path", filepath.Join(work, d), "error", err)
		return false
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		log.Warn("reading a directory a killed restore wrote in", "path", filepath.Join(work, d), "error", err)
		return false
	}
	ok := true
	for _, n := range names {
		tag, isTmp := tmpOwner(n)
		if !isTmp || !gone(tag) {
			continue
		}
		p := path.Join(d, n)
		if keep[p] {
			continue
		}
		if err := root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			log.Warn("removing a killed restore's temporary file", "path", filepath.Join(work, p), "error", err)
			ok = false
		}
	}
	return ok
}

// finishReplace completes the rename of a killed restore's temporary file
// or link tmp over the work-tree path rel, whose local directory it had
// removed (see replacing): when rel is absent and tmp is there, tmp
// becomes rel. Anything else (rel made again meanwhile, the directory's
// removal cut short, tmp already renamed) leaves tmp to the sweep; the
// next Restore compares rel as it finds it, and the sandbox still holds
// its entry. It returns false when tmp must stay: the rename failed.
func finishReplace(log *slog.Logger, root *os.Root, work, tmp, rel string) bool {
	if !tree.ValidPath(tmp) || !tree.ValidPath(rel) || path.Dir(tmp) != path.Dir(rel) || !isTmpName(path.Base(tmp)) || hasTmpName(rel) {
		return true // not a record replacing writes
	}
	if _, err := root.Lstat(rel); !errors.Is(err, fs.ErrNotExist) {
		return true
	}
	fi, err := root.Lstat(tmp)
	if err != nil || (!fi.Mode().IsRegular() && fi.Mode()&fs.ModeSymlink == 0) {
		return true
	}
	if err := root.Rename(tmp, rel); err != nil {
		log.Warn("completing a killed restore's replacement of a directory by the sandbox's entry", "path", filepath.Join(work, rel), "from", filepath.Join(work, tmp), "error", err)
		return false
	}
	log.Info("completed a killed restore's replacement of a directory by the sandbox's entry", "path", filepath.Join(work, rel))
	return true
}
