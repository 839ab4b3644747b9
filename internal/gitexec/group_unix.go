//go:build unix

package gitexec

import (
	"os/exec"
	"syscall"
)

// killGroup runs c in its own process group and kills the whole group
// when c's context ends: a filter driver or other child git started (a
// smudge that hangs) ends with it, and does not hold git's output open.
func killGroup(c *exec.Cmd) {
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
}
