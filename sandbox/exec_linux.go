package sandbox

import (
	"os/exec"
	"syscall"
)

// clientProcAttr runs c in its own process group, killed whole when its
// context ends, and killed by the kernel if the thread that started it
// (locked by the caller) ends: this process dying takes the client along.
func clientProcAttr(c *exec.Cmd) {
	killGroup(c)
	c.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
