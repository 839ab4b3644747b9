package attack

import (
	"os"
	"syscall"
)

// allocate gives f n bytes of real blocks (not a sparse hole).
func allocate(f *os.File, n int64) error { return syscall.Fallocate(int(f.Fd()), 0, 0, n) }
