//go:build unix

package sandbox

import (
	"os/exec"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// killGroup runs c in its own process group and kills the whole group when
// c's context ends, so that no child (tar, cat) outlives it.
func killGroup(c *exec.Cmd) {
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
}

// signalName returns sig's name without "SIG" ("KILL", "TERM").
func signalName(sig syscall.Signal) string {
	if name := unix.SignalName(sig); name != "" {
		return strings.TrimPrefix(name, "SIG")
	}
	return ""
}
