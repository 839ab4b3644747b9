package tree

import (
	"bytes"
	"io/fs"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// creationMask returns the process's umask and whether modes given at
// creation below the directory dir are exact up to it: true when the umask
// is known (from /proc/self/status; reading it through umask(2) would
// change it for the whole process) and dir carries no default ACL, which
// replaces the umask for what is created below it. A directory the copy
// creates inherits dir's default ACL, so one check covers the copy.
func creationMask(dir int) (fs.FileMode, bool) {
	mask, ok := readUmask()
	if !ok {
		return 0, false
	}
	_, err := unix.Fgetxattr(dir, "system.posix_acl_default", nil)
	switch err {
	case unix.ENODATA, unix.ENOTSUP:
		return mask, true
	}
	return 0, false // a default ACL (the size came back), or unknown
}

// Umask returns the process's umask, read from /proc/self/status (umask(2)
// would change it for the whole process while it reads it); 022, the
// common one, where that cannot be read.
func Umask() fs.FileMode {
	if mask, ok := readUmask(); ok {
		return mask
	}
	return 0o022
}

func readUmask() (fs.FileMode, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	_, rest, ok := bytes.Cut(b, []byte("\nUmask:"))
	if !ok {
		return 0, false
	}
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	mask, err := strconv.ParseUint(string(bytes.TrimSpace(line)), 8, 32)
	if err != nil {
		return 0, false
	}
	return fs.FileMode(mask) & fs.ModePerm, true
}
