package stage

import (
	"os"

	"golang.org/x/sys/unix"
)

// growPipe asks for a 1 MiB pipe buffer (the default is 64 KiB), so the tar
// stream crosses to the sandbox side in fewer, larger steps. Failure is
// harmless: the pipe keeps its default size.
func growPipe(f *os.File) { _, _ = unix.FcntlInt(f.Fd(), unix.F_SETPIPE_SZ, 1<<20) }
