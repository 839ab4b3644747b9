//go:build unix

package tree

import (
	"io/fs"
	"syscall"
)

// fileKey is a file's identity: device and inode number.
type fileKey struct{ dev, ino uint64 }

// keyOf returns fi's identity; false when the platform does not report it.
func keyOf(fi fs.FileInfo) (fileKey, bool) {
	sys, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileKey{}, false
	}
	return fileKey{dev: uint64(sys.Dev), ino: uint64(sys.Ino)}, true //nolint:unconvert // Dev is int32 on darwin
}
