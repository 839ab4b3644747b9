//go:build unix

package stage

import (
	"os/exec"
	"syscall"
)

// killGroup runs c in its own process group and kills the whole group when
// c's context ends, so that no child (tar, cat) outlives it.
func killGroup(c *exec.Cmd) {
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
}
