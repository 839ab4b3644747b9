package remote

import "time"

// SetForwardTimeouts shortens ServeInSandbox's header and idle timeouts
// for a test and returns the function that restores them.
func SetForwardTimeouts(header, idle time.Duration) (restore func()) {
	h, i := forwardHeaderTimeout, forwardIdleTimeout
	forwardHeaderTimeout, forwardIdleTimeout = header, idle
	return func() { forwardHeaderTimeout, forwardIdleTimeout = h, i }
}

// SetForwardWriteTimeout shortens ServeInSandbox's write timeout for a test
// and returns the function that restores it.
func SetForwardWriteTimeout(d time.Duration) (restore func()) {
	w := forwardWriteTimeout
	forwardWriteTimeout = d
	return func() { forwardWriteTimeout = w }
}

// SetKnownHostsLockWait shortens how long accept-new waits for another
// process's lock on known_hosts, for a test, and returns the function
// that restores it.
func SetKnownHostsLockWait(d time.Duration) (restore func()) {
	w := knownHostsLockWait
	knownHostsLockWait = d
	return func() { knownHostsLockWait = w }
}
