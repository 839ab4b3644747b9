package stage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/airlockdev/airlock/internal/shell"
	"github.com/airlockdev/airlock/sandbox"
)

// A sandbox may share the host's file system (sandbox.Local, a container
// or bwrap with a bind mount). A publish replaces what is at root/name,
// and deletes it: were that the Source, or a directory above it, Stage
// would delete the user's files (the links and excluded files the copy
// leaves out, or all of a directory above). The publish refuses when the
// copy's place is, through links, one of the directories sourceIDs names
// (shell.SourceExit); Dir compares them itself.

// sourceIDs returns the device and inode of src and of every directory
// above it, by its path as given and by its physical path.
func sourceIDs(src string) []shell.FileID {
	var ids []shell.FileID
	add := func(p string) {
		for {
			if fi, err := os.Stat(p); err == nil {
				if st, ok := fi.Sys().(*syscall.Stat_t); ok {
					ids = append(ids, shell.FileID{Dev: uint64(st.Dev), Ino: uint64(st.Ino), OK: true}) // Dev is an int32 on macOS
				}
			}
			if p == filepath.Dir(p) {
				return
			}
			p = filepath.Dir(p)
		}
	}
	add(src)
	if phys, err := filepath.EvalSymlinks(src); err == nil && phys != src {
		add(phys)
	}
	return ids
}

// isSource reports whether fi is one of ids.
func isSource(fi os.FileInfo, ids []shell.FileID) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	id := shell.FileID{Dev: uint64(st.Dev), Ino: uint64(st.Ino), OK: true}
	for _, g := range ids {
		if g == id {
			return true
		}
	}
	return false
}

// overlapped returns err as an ErrBadRoot error when the publish refused
// to replace the Source (shell.SourceExit), else err.
func overlapped(err error, dst, src string) error {
	if ee := (*sandbox.ExitError)(nil); errors.As(err, &ee) && ee.Status == shell.SourceExit {
		return overlapErr(dst, src)
	}
	return err
}

// overlapErr is the error of a publish whose copy's place dst is the
// Source src or a directory above it.
func overlapErr(dst, src string) error {
	return fmt.Errorf("%w: the copy's place %s is the Source %s, or a directory above it (the sandbox shares the host's file system): publishing would delete it, and nothing was moved; stage into another root or under another name", ErrBadRoot, dst, src)
}
