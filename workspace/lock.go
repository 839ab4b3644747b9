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
// the owner.
func lockWorkTree(ctx context.Context, p string, wait time.Duration) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return nil, &fs.PathError{Op: "lock", Path: p, Err: err}
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, &fs.PathError{Op: "lock", Path: p, Err: err}
	}
	deadline := time.Now().Add(wait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, &fs.PathError{Op: "lock", Path: p, Err: err}
		}
		if time.Now().After(deadline) {
			owner := make([]byte, 32)
			n, _ := f.ReadAt(owner, 0)
			f.Close()
			return nil, &fs.PathError{Op: "lock", Path: p, Err: fmt.Errorf("%w: another restore of this work tree (pid %s) held it for %s; wait for it to finish or stop it", ErrLocked, strings.TrimSpace(string(owner[:n])), wait)}
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() {
		f.Truncate(0)
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
