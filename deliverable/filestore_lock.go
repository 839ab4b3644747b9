package deliverable

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/afero"

	"github.com/airlockdev/airlock/internal/digest"
	"github.com/airlockdev/airlock/internal/flock"
)

// Locks and temporary files.
//
// A FileStore on the operating system's file system (OpenFileStore, or
// NewFileStore with afero.NewOsFs) also locks across processes, with
// flock(2) on files under locks/: "store" while a Put or RecordWorkProduct
// reads and rewrites a run file (and publishes a blob, whose undo must
// not remove one another Put relies on), and one file per task while
// FileTasks changes or checks it. Each holder takes the in-process lock
// first, then the file's, and no holder of one takes another of the same
// kind, except FileTasks.Lock, which takes its tasks' in sorted order.
//
// Every temporary file of tmp/ is made under a name ".new-<random>",
// locked (flock(2)) by its writer, and only then given its working name
// ("blob-<random>", ".<target>.tmp-<random>"); the writer keeps it locked
// until it has renamed it into place or removed it. So a working name
// whose lock is free is a dead writer's leftover: sweepTemp removes those
// when the store is opened.

// lockStore takes the store-wide lock (see above) and returns its unlock,
// which may be called more than once.
func (s *FileStore) lockStore(ctx context.Context) (func(), error) {
	return s.lockPair(ctx, &s.storeLk, "", filepath.Join(s.dir, "locks", "store"))
}

// lockTask takes the lock of task id.
func (s *FileStore) lockTask(ctx context.Context, id string) (func(), error) {
	return s.lockPair(ctx, &s.tasks, id, filepath.Join(s.dir, "locks", "task-"+digest.Fields("airlock.deliverable.task.v1", id)))
}

// lockPair takes key of the in-process map m, then, when the store locks
// across processes, an exclusive flock(2) on the file name.
func (s *FileStore) lockPair(ctx context.Context, m interface {
	Lock(context.Context, string) (func(), error)
}, key, name string) (func(), error) {
	unlock, err := m.Lock(ctx, key)
	if err != nil {
		return nil, err
	}
	if !s.crossProcess {
		return unlock, nil
	}
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|flock.NoFollow, 0o600)
	if err != nil {
		unlock()
		return nil, fmt.Errorf("deliverable: open the lock file %s: %w%s", name, err, lockAdvice(name, err, s.spaceAdvice(err)))
	}
	if err := flock.Wait(ctx, f); err != nil {
		_ = f.Close() // nothing was locked
		unlock()
		return nil, fmt.Errorf("deliverable: lock %s: %w", name, err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			_ = f.Close() // closing drops the flock; a read-only use, nothing to flush
			unlock()
		})
	}, nil
}

// lockAdvice says what to do about a lock file that cannot be opened:
// space (the store's file system is full), or something else at its name
// (a link, a directory: a damaged store), which the store never follows
// or removes itself.
func lockAdvice(name string, err error, space string) string {
	if space != "" {
		return space
	}
	if errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENXIO) {
		return "; something other than a lock file stands at its name (a link or a directory: the store was tampered with): remove " + name + " and retry (the store makes it again)"
	}
	return ""
}

// tmpRandLen is the length of the random part of a temporary name, in
// characters of rand.Text's alphabet (A–Z, 2–7): 80 bits.
const tmpRandLen = 16

// tempFile is a temporary file of tmp/ being written. Its writer holds
// it (and, across processes, its flock) until publish or discard.
type tempFile struct {
	s    *FileStore
	f    afero.File
	name string
	done bool
}

// createTemp makes a new temporary file in tmp/ named prefix and a random
// part, locked by this process when the store locks across processes.
func (s *FileStore) createTemp(prefix string) (*tempFile, error) {
	dir := filepath.Join(s.dir, "tmp")
	r := rand.Text()[:tmpRandLen]
	name := filepath.Join(dir, prefix+r)
	if !s.crossProcess {
		f, err := s.fs.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, s.ioError(err, "create temporary file %s", name)
		}
		return &tempFile{s: s, f: f, name: name}, nil
	}
	fresh := filepath.Join(dir, ".new-"+r)
	f, err := os.OpenFile(fresh, os.O_RDWR|os.O_CREATE|os.O_EXCL|flock.NoFollow, 0o600)
	if err != nil {
		return nil, s.ioError(err, "create temporary file %s", fresh)
	}
	if err := flock.Claim(f, fresh, name); err != nil {
		_ = os.Remove(fresh) // already failing; the sweep takes what is left after a day
		_ = f.Close()
		return nil, s.ioError(err, "lock temporary file %s", name)
	}
	return &tempFile{s: s, f: f, name: name}, nil
}

// publish renames the temporary file to dst. Its content must have been
// synced: the file is closed (and its lock dropped) after the rename.
func (t *tempFile) publish(dst string) error {
	if err := t.s.fs.Rename(t.name, dst); err != nil {
		return err
	}
	t.done = true
	_ = t.f.Close() // synced before the rename; the close only drops the descriptor and its lock
	return nil
}

// discard removes the temporary file unless it was published; it may be
// called more than once.
func (t *tempFile) discard() {
	if t.done {
		return
	}
	t.done = true
	_ = t.s.fs.Remove(t.name) // removed before the lock is dropped; a missing file is fine
	_ = t.f.Close()
}

// ioError is a failure to write a store file: what was done, to which
// path, and, for a full file system, what to do.
func (s *FileStore) ioError(err error, format string, args ...any) error {
	return fmt.Errorf("deliverable: "+format+": %w%s", append(args, err, s.spaceAdvice(err))...)
}

// spaceAdvice says what to do about a full file system, or "".
func (s *FileStore) spaceAdvice(err error) string {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Sprintf("; the file system of the store %s is full: free space (or inodes) on it, then retry: the same call succeeds once there is room", s.dir)
	}
	return ""
}

// staleAge is how old a temporary file that was never locked by its
// writer must be before sweepTemp takes it: no write of a store file takes
// that long.
const staleAge = 24 * time.Hour

// sweepTemp removes from tmp/ what dead writers left: a working name whose
// lock is free, at once; a ".new-" name (its writer died before it took the
// lock) and the names of earlier versions of this package (never locked)
// once they are a day old. Any other name, and anything that is not a
// regular file, is left alone. It is best effort: what it cannot check
// stays.
func (s *FileStore) sweepTemp() {
	dir := filepath.Join(s.dir, "tmp")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		kind := tempKind(e.Name())
		if kind == tempNotOurs || !e.Type().IsRegular() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if kind == tempUnlocked {
			if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() && time.Since(fi.ModTime()) > staleAge {
				_ = os.Remove(p) // best effort
			}
			continue
		}
		flock.RemoveIfFree(p, os.Remove)
	}
}

// The kinds of names in tmp/.
const (
	tempNotOurs  = iota // not a name this package makes: left alone
	tempLocked          // a working name: its writer holds its lock
	tempUnlocked        // never locked: ".new-", or an earlier version's
)

// tempKind says which kind of name name is.
func tempKind(name string) int {
	if r, ok := strings.CutPrefix(name, ".new-"); ok && flock.RandPart(r, tmpRandLen) {
		return tempUnlocked
	}
	if r, ok := strings.CutPrefix(name, "blob-"); ok {
		switch {
		case flock.RandPart(r, tmpRandLen):
			return tempLocked
		case r != "" && len(r) <= 10 && strings.Trim(r, "0123456789") == "":
			return tempUnlocked // afero.TempFile's name, before locking
		}
	}
	if i := strings.LastIndex(name, ".tmp-"); strings.HasPrefix(name, ".") && i > 1 {
		switch r := name[i+len(".tmp-"):]; {
		case flock.RandPart(r, tmpRandLen):
			return tempLocked
		case flock.RandPart(r, 26):
			return tempUnlocked // atomicfile's name, before locking
		}
	}
	return tempNotOurs
}
