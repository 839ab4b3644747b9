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
