package remote

import "time"

// SetForwardTimeouts shortens ServeInSandbox's header and idle timeouts
// for a test and returns the function that restores them.
func SetForwardTimeouts(header, idle time.Duration) (restore func()) {
	h, i := forwardHeaderTimeout, forwardIdleTimeout
	forwardHeaderTimeout, forwardIdleTimeout = header, idle
	return func() { forwardHeaderTimeout, forwardIdleTimeout = h, i }
}
