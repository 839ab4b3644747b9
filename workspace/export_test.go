package workspace

import (
	"context"
	"os"
	"path/filepath"
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

// WithPrepareLockWait has a prepare script wait secs seconds for another
// prepare of its work tree.
func WithPrepareLockWait(secs int) Option {
	return func(o *options) { o.prepareWait = secs }
}

// CASRetries is how many times a restore tries to install its result.
const CASRetries = defaultCASTries

// WithBeforePlace runs fn before a restore renames a temporary file or
// link (tmp, a work-tree path) over rel.
func WithBeforePlace(fn func(tmp, rel string)) Option {
	return func(o *options) { o.beforePlace = fn }
}

// TmpNameOf is a temporary name owned by owner (an OwnerTagOf).
func TmpNameOf(owner string) string { return tmpPrefix + owner + "-" + tmpRand() }

// WriteJournal writes the journal a restore owned by owner leaves in
// journalDir, listing the work-tree directories dirs.
func WriteJournal(journalDir, owner string, dirs ...string) error {
	if err := os.MkdirAll(journalDir, 0o700); err != nil {
		return err
	}
	var b []byte
	for _, d := range dirs {
		b = append(b, d+"\x00"...)
	}
	return os.WriteFile(filepath.Join(journalDir, journalPrefix+owner+"-"+tmpRand()+journalSuffix), b, 0o600)
}
