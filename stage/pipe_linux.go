package stage

import (
	"os"

	"golang.org/x/sys/unix"
)

// growPipe asks for a 1 MiB pipe buffer (the default is 64 KiB), so the tar
// stream crosses to the sandbox side in fewer, larger steps. Failure is
// harmless: the pipe keeps its default size. It goes through SyscallConn,
// not Fd, so that f stays non-blocking and its write deadline keeps working.
func growPipe(f *os.File) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) { _, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, 1<<20) })
}

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
