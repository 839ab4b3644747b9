package sandbox

import (
	"os"

	"golang.org/x/sys/unix"
)

// pipeUnread returns how many bytes the pipe f holds that its reader has
// not read yet (FIONREAD, named TIOCINQ in x/sys); ok is false when that cannot be told.
func pipeUnread(f *os.File) (n int, ok bool) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, false
	}
	var ierr error
	if err := rc.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }); err != nil || ierr != nil {
		return 0, false
	}
	return n, true
}
