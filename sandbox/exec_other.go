//go:build !linux

package sandbox

import "os/exec"

// clientProcAttr runs c in its own process group where there are groups;
// there is no parent-death signal here.
func clientProcAttr(c *exec.Cmd) { killGroup(c) }
