package tree

import (
	"errors"
	"fmt"

	"github.com/airlockdev/airlock/internal/sentinel"
)

var (
	// ErrLimit is wrapped by every *LimitError.
	ErrLimit = errors.New("tree limit exceeded")
	// ErrTooManyFiles: more regular files than Limits.MaxFiles.
	ErrTooManyFiles = errors.New("too many files")
	// ErrTooManyBytes: more file bytes in total than Limits.MaxBytes.
	ErrTooManyBytes = errors.New("too many bytes in total")
	// ErrFileTooLarge: one file larger than Limits.MaxFileBytes.
	ErrFileTooLarge = errors.New("file too large")
	// ErrTooDeep: a path deeper than Limits.MaxDepth components.
	ErrTooDeep = errors.New("tree too deep")
	// ErrPathTooLong: a relative path longer than Limits.MaxPathLen bytes.
	ErrPathTooLong = errors.New("path too long")

	// ErrLink reports a symbolic link where none may be: any link under
	// RejectLinks, a link whose target leaves the root under
	// FollowLinksWithin, or a link in any component of an OpenFile path.
	ErrLink = errors.New("symbolic link not allowed")
	// ErrChanged reports a file or directory that changed while it was read.
	// Retryable (sandbox.Retryable): reading again once the tree is quiet
	// succeeds. A package that reports an agent's file that changed wraps
	// it in a sentinel that answers for itself (deliverable.ErrFileChanged).
	ErrChanged = sentinel.Temporary("changed while being read")
	// ErrNotDir reports a walk root that is missing, a link or not a directory.
	ErrNotDir = errors.New("not a directory")
	// ErrEscape reports a path that is absolute, not clean, or leaves its root.
	ErrEscape = errors.New("path escapes its root")
	// ErrNotRegular reports an OpenFile target that is not a regular file.
	ErrNotRegular = errors.New("not a regular file")
)

// LimitError reports which limit a tree exceeded and where.
type LimitError struct {
	Limit  string // "files", "directories", "bytes", "file bytes", "depth" or "path length"
	Max    int64  // the limit in force
	Path   string // the relative path that crossed it
	err    error  // the specific sentinel
	advice string // Limits.Advice
}

func (e *LimitError) Error() string {
	advice := e.advice
	if advice == "" {
		advice = "raise Limits." + e.field() + " or shrink the tree"
	}
	return fmt.Sprintf("%s: %s limit of %d exceeded at %q; %s", e.err, e.Limit, e.Max, e.Path, advice)
}

// Is matches ErrLimit and the specific sentinel.
func (e *LimitError) Is(target error) bool { return target == ErrLimit || target == e.err }

// Unwrap returns the specific sentinel.
func (e *LimitError) Unwrap() error { return e.err }

// field names the Limits field that sets this limit.
func (e *LimitError) field() string {
	switch e.err {
	case ErrTooManyFiles:
		return "MaxFiles"
	case ErrTooManyBytes:
		return "MaxBytes"
	case ErrFileTooLarge:
		return "MaxFileBytes"
	case ErrTooDeep:
		return "MaxDepth"
	default:
		return "MaxPathLen"
	}
}
