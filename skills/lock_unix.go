//go:build unix

package skills

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlockdev/airlock/internal/flock"
	"github.com/airlockdev/airlock/internal/statedir"
	"github.com/airlockdev/airlock/internal/tree"

	"golang.org/x/sys/unix"
)

// lock takes an exclusive flock(2) on path, waiting until ctx ends (see
// internal/flock: a lock file left by a crashed process is simply taken
// again).
func lock(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|flock.NoFollow, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening bundle lock %s: %w", path, err)
	}
	if err := flock.Wait(ctx, f); err != nil {
		f.Close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("waiting for bundle lock %s: %w", path, err)
		}
		return nil, fmt.Errorf("locking bundle %s: %w", path, err)
	}
	return func() { f.Close() }, nil // closing drops the lock
}

// A writer copies into a temporary directory of the state directory,
// named tmpPrefix and tmpNameLen characters of rand.Text, and holds an
// exclusive flock(2) on it until it is done. It makes the directory under
// newPrefix and renames it once locked, so that every directory named
// tmpPrefix has been locked by its writer: one that can be locked is a
// dead writer's leftover.
const (
	tmpPrefix  = ".tmp-"
	newPrefix  = ".new-"
	tmpNameLen = 16
)

// tempDir creates stateDir if it is missing (statedir.Make), makes a fresh
// temporary directory in it and locks it, after removing the leftovers of
// dead writers (sweepTemp). done unlocks it.
func tempDir(stateDir string) (tmp string, done func(), err error) {
	if _, err := statedir.Make(stateDir); err != nil {
		return "", nil, fmt.Errorf("creating skills state directory %s: %w", stateDir, err)
	}
	sweepTemp(stateDir)
	name := rand.Text()[:tmpNameLen]
	fresh := filepath.Join(stateDir, newPrefix+name)
	if err := os.Mkdir(fresh, 0o700); err != nil {
		return "", nil, fmt.Errorf("creating temporary bundle: %w%s", err, spaceAdvice(err))
	}
	f, err := os.OpenFile(fresh, os.O_RDONLY|unix.O_DIRECTORY|flock.NoFollow, 0)
	if err != nil {
		os.Remove(fresh)
		return "", nil, fmt.Errorf("locking temporary bundle %s: %w", fresh, err)
	}
	tmp = filepath.Join(stateDir, tmpPrefix+name)
	if err := flock.Claim(f, fresh, tmp); err != nil {
		f.Close()
		os.Remove(fresh)
		return "", nil, fmt.Errorf("locking and naming temporary bundle %s: %w", tmp, err)
	}
	return tmp, func() { f.Close() }, nil
}

// sweepTemp removes what dead writers left in stateDir: a temporary
// directory (tmpPrefix) whose lock can be taken, at once, and a directory
// that never got its lock (newPrefix, empty) after a day. Names of any
// other shape, and anything that is not a directory, are not airlock's
// and are left alone.
func sweepTemp(stateDir string) {
	entries, err := os.ReadDir(stateDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || !tempName(name) {
			continue
		}
		p := filepath.Join(stateDir, name)
		if strings.HasPrefix(name, newPrefix) {
			if fi, err := os.Lstat(p); err == nil && time.Since(fi.ModTime()) > 24*time.Hour {
				os.Remove(p)
			}
			continue
		}
		flock.RemoveIfFree(p, tree.RemoveAll) // a writer that is gone: the kernel dropped its lock
	}
}

// tempName reports a name tempDir makes: a prefix and tmpNameLen
// characters of rand.Text's alphabet.
func tempName(name string) bool {
	if rest, ok := strings.CutPrefix(name, tmpPrefix); ok {
		return flock.RandPart(rest, tmpNameLen)
	}
	rest, ok := strings.CutPrefix(name, newPrefix)
	return ok && flock.RandPart(rest, tmpNameLen)
}
