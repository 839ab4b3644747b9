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
