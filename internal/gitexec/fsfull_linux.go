package gitexec

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// fsCause returns ENOSPC when the file system of dir has no block or no
// inode left for this process, EROFS when it is mounted read-only, and 0
// otherwise (or when it cannot be looked at, or has no blocks at all).
func fsCause(dir string) syscall.Errno {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0
	}
	switch {
	case st.Flags&unix.ST_RDONLY != 0:
		return syscall.EROFS
	case st.Blocks == 0: // a file system without blocks (proc, sysfs) says nothing
	case os.Geteuid() == 0 && st.Bfree == 0, os.Geteuid() != 0 && st.Bavail == 0, st.Files > 0 && st.Ffree == 0:
		return syscall.ENOSPC
	}
	return 0
}
