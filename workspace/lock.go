package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// lockWorkTree takes the restore lock at p: an flock(2) on a file holding
// the owner's pid. The kernel drops the lock when its owner dies, so a lock
// left by a dead process (its file still naming the pid) is recovered at
// once. It waits up to wait, polling, and then fails with ErrLocked naming
// the owner. Releasing removes the file (and its directory, when the lock
// made it and it is empty): a restore leaves nothing of its own behind.
// A waiter whose file was removed meanwhile (it holds the lock of a file
// no longer at p) opens p again.
func lockWorkTree(ctx context.Context, p string, wait time.Duration) (func(), error) {
	dir := filepath.Dir(p)
	madeDir := false
	deadline := time.Now().Add(wait)
	var f *os.File
	for f == nil {
		if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, &fs.PathError{Op: "lock", Path: p, Err: err}
			}
			madeDir = true
		}
		g, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
		if errors.Is(err, fs.ErrNotExist) && time.Now().Before(deadline) {
			continue // its directory went with a released lock
		}
		if err != nil {
			return nil, &fs.PathError{Op: "lock", Path: p, Err: err}
		}
		for {
			err := syscall.Flock(int(g.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
			if err == nil {
				break
			}
			if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
				g.Close()
				return nil, &fs.PathError{Op: "lock", Path: p, Err: err}
			}
			if time.Now().After(deadline) {
				owner := make([]byte, 32)
				n, _ := g.ReadAt(owner, 0)
				g.Close()
				return nil, &fs.PathError{Op: "lock", Path: p, Err: fmt.Errorf("%w: another restore of this work tree (pid %s) held it for %s; wait for it to finish or stop it", ErrLocked, strings.TrimSpace(string(owner[:n])), wait)}
			}
			select {
			case <-ctx.Done():
				g.Close()
				return nil, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
		// Held; but the holder before may have removed the file since it
		// was opened: then the lock is on a file nobody else finds.
		held, herr := g.Stat()
		now, nerr := os.Lstat(p)
		if herr != nil || nerr != nil || !os.SameFile(held, now) {
			g.Close()
			continue
		}
		f = g
	}
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() {
		os.Remove(p) // while held: a waiter then finds it gone and opens p again
		if madeDir {
			os.Remove(dir) // only when empty
		}
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
