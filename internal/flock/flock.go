// Package flock takes exclusive flock(2) locks on open files, the way
// every airlock state directory marks what a live process is writing: the
// kernel drops a lock when its file is closed or its holder exits, so a
// lock that can be taken is a dead writer's, and a lock file left by a
// killed process is simply taken again.
package flock

import (
	"errors"
	"os"
)

// RandPart reports whether s is n characters of rand.Text's alphabet
// (A–Z, 2–7): the random part of a temporary name that its writer locks.
func RandPart(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'A' && c <= 'Z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}

// Claim takes the lock of f, the file or directory just made at fresh,
// and renames fresh to name: a name of the working kind is only ever seen
// locked by its writer, so one whose lock is free is a dead writer's.
func Claim(f *os.File, fresh, name string) error {
	ok, err := Try(f)
	if err == nil && !ok {
		err = errors.New("another process holds the lock of " + fresh + ", which this one just made")
	}
	if err != nil {
		return err
	}
	return os.Rename(fresh, name)
}

// RemoveIfFree removes p with remove when no one holds its lock: its
// writer is gone (the kernel dropped the lock). p is opened without
// following a link, and must still be what Lstat saw; anything that
// cannot be checked stays.
func RemoveIfFree(p string, remove func(string) error) {
	before, err := os.Lstat(p)
	if err != nil || !(before.Mode().IsRegular() || before.IsDir()) {
		return
	}
	f, err := os.OpenFile(p, os.O_RDONLY|NoFollow|nonBlock, 0)
	if err != nil {
		return
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !os.SameFile(before, fi) {
		return
	}
	if ok, err := Try(f); ok && err == nil {
		_ = remove(p) // best effort: what stays is swept next time
	}
}
