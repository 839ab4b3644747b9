//go:build !linux

package gitexec

import "syscall"

// fsCause looks at no file system off Linux: a write failure whose cause
// git does not name stays ErrWrite alone.
func fsCause(string) syscall.Errno { return 0 }
