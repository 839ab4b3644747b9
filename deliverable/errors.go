package deliverable

import (
	"errors"
	"strings"

	"github.com/airlockdev/airlock/internal/sentinel"
	"github.com/airlockdev/airlock/internal/shell"
)

// Sentinel errors. Every error returned by this package that a caller may branch
// on wraps one of these; test with errors.Is. Path errors are *fs.PathError values
// whose Err wraps the sentinel. sandbox.Retryable answers true for ErrBusy and
// for a transport failure reading a remote workspace (sandbox.ErrTransport, in a
// *HostError), false for the rest and for every *RequestError.
var (
	// ErrPathDenied: ContentRef is absolute, a URL, escapes the workspace, is
	// in or names .airlock (sandbox.RuntimeDir) or .git in any case, names
	// something other than a regular file, or is otherwise not a plain
	// workspace-relative path.
	ErrPathDenied = errors.New("deliverable: path denied")
	// ErrSymlinkDenied: a component of ContentRef (leaf or directory) is a symbolic link.
	ErrSymlinkDenied = errors.New("deliverable: symbolic link denied")
	// ErrHardlinkDenied: the file has more than one hard link (or its link count
	// cannot be read on this platform).
	ErrHardlinkDenied = errors.New("deliverable: hard link denied")
	// ErrFileChanged: the file's identity or size changed before, during or after the read.
	// Not retryable (sandbox.Retryable), though it may wrap a temporary
	// read error: the agent is still writing its file, and it registers
	// the file again once it is complete (a *RequestError tells it so).
	ErrFileChanged = sentinel.Permanent("deliverable: file changed while it was read")
	// ErrSizeMismatch: the file's size differs from the declared ByteSize.
	ErrSizeMismatch = errors.New("deliverable: size mismatch")
	// ErrSizeDenied: the declared ByteSize is not in 1..MaxBytes.
	ErrSizeDenied = errors.New("deliverable: size denied")
	// ErrHashMismatch: the SHA-256 of the bytes read differs from the declared
	// one.
	ErrHashMismatch = errors.New("deliverable: SHA-256 mismatch")
	// ErrInvalidRequest: a request field or a workspace reference is missing,
	// malformed or too long.
	ErrInvalidRequest = errors.New("deliverable: invalid request")
	// ErrIdempotencyConflict: the idempotency key was already used by this task
	// and run for a different request.
	ErrIdempotencyConflict = errors.New("deliverable: idempotency key reused with a different request")
	// ErrEvidence: a completion report's citations do not prove the delivery.
	ErrEvidence = errors.New("deliverable: evidence rejected")
	// ErrNotFound: a store, a Tasks or a WorkspaceLookup implementation has no
	// such attachment, receipt, task or workspace. Host implementations wrap it
	// (or fs.ErrNotExist) for unknown ids so that this package can tell an
	// unknown id from a failing host.
	ErrNotFound = errors.New("deliverable: not found")
	// ErrBusy: rows needed by ValidateEvidence are locked by a concurrent writer.
	// The check may be retried: sandbox.Retryable answers true. A Locker returns
	// an error wrapping ErrBusy when its lock cannot be taken without waiting.
	ErrBusy = sentinel.Temporary("deliverable: rows are busy; retry")
	// ErrProtocol: a remote workspace's reply broke the file protocol (a
	// malformed header or trailer, numbers out of range, unexpected output).
	// It comes from the sandbox, so it is never taken as the agent's request
	// being wrong; it is returned inside a *HostError. errors.Is matches it
	// to sandbox.ErrProtocol too, the class every package gives a sandbox
	// that broke the protocol; a transport failure is never ErrProtocol.
	ErrProtocol = shell.ProtocolSentinel("deliverable: remote workspace broke the file protocol")
)

// DefaultToolName is the name of the agent's registration tool that messages
// use when Registrar.ToolName or Evidence.ToolName is empty.
const DefaultToolName = "register_deliverable"

// toolName returns name, or DefaultToolName when name is empty.
func toolName(name string) string {
	if name == "" {
		return DefaultToolName
	}
	return name
}

// RequestError is a rejection of the agent's request: something the agent can
// fix by calling the tool again with other arguments, or by fixing the file
// first. Register returns every rejection as a *RequestError; anything else
// it returns is a *HostError.
//
// Message is written for the agent, once, in the request's JSON field names
// (contentRef, filename, contentType, byteSize, sha256, title,
// idempotencyKey): what is wrong and what to do next. Error returns it
// unchanged so a host can pass it on as it is. Err is the technical cause for
// the host's logs; it wraps one of the sentinels (ErrPathDenied,
// ErrSizeMismatch, …) and, for a problem with the file, is an *fs.PathError
// whose Path is the contentRef as given.
type RequestError struct {
	Field   string // JSON name of the field at fault; "" when it is no one field
	Message string // for the agent
	Err     error  // the cause; wraps a sentinel
}

// Error returns Message.
func (e *RequestError) Error() string { return e.Message }

// Unwrap returns Err.
func (e *RequestError) Unwrap() error { return e.Err }

// Retryable answers sandbox.Retryable: false, whatever Err wraps. The agent
// fixes its request or its file and calls the tool again; the host never
// replays the request unchanged.
func (e *RequestError) Retryable() bool { return false }

// HostError is a failure on the host's side: an unusable Registrar or
// Workspace, a host-supplied id, a failing Store or Tasks, a workspace that
// cannot be read (a broken transport, a sandbox that breaks the file
// protocol), or a cancelled context. It is never the agent's fault, and its
// message never asks the agent to change its request; the host decides what
// to tell the agent (typically: retry later). errors.Is and errors.As see
// through it to Err.
type HostError struct {
	Op  string // what failed: "register", "read workspace", "store", …
	Err error  // the failure; wraps ErrProtocol, ErrBusy, context.Canceled, … when one applies
}

// Error returns "deliverable: " + Op + ": " + Err.Error(), said once: an
// Err whose message starts with "deliverable: " (a FileStore's) does not
// repeat it.
func (e *HostError) Error() string {
	return "deliverable: " + e.Op + ": " + strings.TrimPrefix(e.Err.Error(), "deliverable: ")
}

// Unwrap returns Err.
func (e *HostError) Unwrap() error { return e.Err }

// hostErr wraps err in a *HostError unless it already is one or is a
// *RequestError.
func hostErr(op string, err error) error {
	var he *HostError
	var re *RequestError
	if errors.As(err, &he) || errors.As(err, &re) {
		return err
	}
	return &HostError{Op: op, Err: err}
}
