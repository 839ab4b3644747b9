//go:build !unix

package gitexec

import "os/exec"

// killGroup leaves c as it is: only git itself is killed when c's
// context ends (WaitDelay still bounds the wait for its output).
func killGroup(*exec.Cmd) {}
