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
