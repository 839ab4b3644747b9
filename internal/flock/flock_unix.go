//go:build unix

package flock

import (
	"context"
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Supported reports whether this platform has flock(2).
const Supported = true

// NoFollow is O_NOFOLLOW: a lock or temporary file that is a link is never
// followed.
const NoFollow = unix.O_NOFOLLOW

// Try takes an exclusive lock on f if no one holds it: ok is false, with
// no error, when another open file holds it.
func Try(f *os.File) (ok bool, err error) {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EWOULDBLOCK):
			return false, nil
		}
		return false, err
	}
}

// Wait takes an exclusive lock on f, polling (1 ms, doubling to 50 ms) so
// that ctx can end the wait.
func Wait(ctx context.Context, f *os.File) error {
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		ok, err := Try(f)
		if ok || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
	}
}

// nonBlock opens a FIFO planted at a lock's name without waiting.
const nonBlock = unix.O_NONBLOCK
