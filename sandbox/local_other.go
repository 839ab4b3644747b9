//go:build !unix

package sandbox

import (
	"os/exec"
	"syscall"
)

// killGroup: without process groups only the shell itself is killed.
func killGroup(*exec.Cmd) {}

// signalName: signal names are not known here.
func signalName(syscall.Signal) string { return "" }
