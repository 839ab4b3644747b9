//go:build linux

package main

import "github.com/airlockdev/airlock/sandbox"

// Runner returns the Runner of the sandbox: sandbox.Exec's protocol (env
// on stdin, a completion record, a watchdog) over Box's own exec, which
// starts bwrap as described on Box.
func (b *Box) Runner() sandbox.Runner { return sandbox.FromExec(b.exec) }
