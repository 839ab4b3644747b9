package workspace

import (
	"context"
	"time"
)

// RestoreWithLockWait restores with a shorter lock wait.
func RestoreWithLockWait(ctx context.Context, r *Round, d time.Duration) (*Result, error) {
	old := r.o.lockWait
	r.o.lockWait = d
	defer func() { r.o.lockWait = old }()
	return r.Restore(ctx)
}

// WithBeforeCAS runs fn before each compare-and-swap of the local ref in a
// restore (attempt counts from 0).
func WithBeforeCAS(fn func(attempt int)) Option {
	return func(o *options) { o.beforeCAS = fn }
}

// CASRetries is how many times a restore tries to install its result.
const CASRetries = defaultCASTries
