package deliverable

import "errors"

// Sentinel errors. Every error returned by this package that a caller may branch
// on wraps one of these; test with errors.Is. Path errors are *fs.PathError values
// whose Err wraps the sentinel.
var (
	// ErrPathDenied: ContentRef is absolute, a URL, escapes the workspace, names
	// something other than a regular file, or is otherwise not a plain
	// workspace-relative path.
	ErrPathDenied = errors.New("deliverable: path denied")
	// ErrSymlinkDenied: a component of ContentRef (leaf or directory) is a symbolic link.
	ErrSymlinkDenied = errors.New("deliverable: symbolic link denied")
	// ErrHardlinkDenied: the file has more than one hard link (or its link count
	// cannot be read on this platform).
	ErrHardlinkDenied = errors.New("deliverable: hard link denied")
	// ErrFileChanged: the file's identity or size changed before, during or after the read.
	ErrFileChanged = errors.New("deliverable: file changed while it was read")
	// ErrSizeMismatch: the file's size differs from the declared ByteSize.
	ErrSizeMismatch = errors.New("deliverable: size mismatch")
	// ErrSizeDenied: the declared ByteSize is not in 1..MaxBytes.
	ErrSizeDenied = errors.New("deliverable: size denied")
	// ErrHashMismatch: the streamed SHA-256 differs from the declared one, or a
	// stored copy does not match what was written.
	ErrHashMismatch = errors.New("deliverable: SHA-256 mismatch")
	// ErrInvalidRequest: a request or evidence field is missing, malformed or too long.
	ErrInvalidRequest = errors.New("deliverable: invalid request")
	// ErrIdempotencyConflict: the idempotency key was already used by this task
	// and run for a different request.
	ErrIdempotencyConflict = errors.New("deliverable: idempotency key reused with a different request")
	// ErrEvidence: a completion report's citations do not prove the delivery.
	ErrEvidence = errors.New("deliverable: evidence rejected")
	// ErrNotFound: a store or a Tasks implementation has no such attachment,
	// receipt or task. Host implementations of Tasks wrap it (or fs.ErrNotExist)
	// for unknown ids so that ValidateEvidence can tell an unknown citation from
	// a failing host.
	ErrNotFound = errors.New("deliverable: not found")
	// ErrBusy: rows needed by ValidateEvidence are locked by a concurrent writer.
	// The check may be retried. A Locker returns an error wrapping ErrBusy when
	// its lock cannot be taken without waiting.
	ErrBusy = errors.New("deliverable: rows are busy; retry")
)
