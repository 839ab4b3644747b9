package shell

import (
	"os"
	"syscall"
)

// IDOf returns the device and inode of the file fi describes (OK false
// when its system gives none).
func IDOf(fi os.FileInfo) FileID {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return FileID{}
	}
	return FileID{Dev: uint64(st.Dev), Ino: uint64(st.Ino), OK: true} // Dev is an int32 on macOS
}

// StatID returns the device and inode of p, following links (OK false
// when p cannot be stat'ed).
func StatID(p string) FileID {
	fi, err := os.Stat(p)
	if err != nil {
		return FileID{}
	}
	return IDOf(fi)
}

// Levels returns p and each directory above it, up to the root (dir is
// path.Dir or filepath.Dir).
func Levels(p string, dir func(string) string) []string {
	out := []string{p}
	for p != dir(p) {
		p = dir(p)
		out = append(out, p)
	}
	return out
}
