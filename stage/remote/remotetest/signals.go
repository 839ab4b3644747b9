package remotetest

import (
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// signalName returns sig's name without "SIG" as RFC 4254 section 6.10
// spells it ("KILL", "TERM", ...).
func signalName(sig syscall.Signal) string {
	if name := unix.SignalName(sig); name != "" {
		return strings.TrimPrefix(name, "SIG")
	}
	return sig.String()
}

// signalByName maps an RFC 4254 signal name ("TERM", without "SIG") to the
// signal.
func signalByName(name string) (syscall.Signal, bool) {
	if name == "" || strings.HasPrefix(name, "SIG") {
		return 0, false
	}
	sig := unix.SignalNum("SIG" + name)
	return sig, sig != 0
}
