package session

import (
	"errors"
	"strings"
)

// Sentinel errors. Every error returned by this package that a caller may
// branch on wraps one of them (test with [errors.Is]); path errors are
// [*fs.PathError] values whose Err wraps the sentinel.
var (
	// ErrDrift reports that a controller identity or a persisted record does
	// not match the binding. The error is a [*DriftError] naming each field.
	// Start a fresh session: nothing is repaired from the current request.
	ErrDrift = errors.New("session identity drift")

	// ErrUnsupportedSchema reports a record without a schema (the draft,
	// schema-less format) or with a schema other than [Schema] and
	// [SchemaV1].
	ErrUnsupportedSchema = errors.New("unsupported session record schema")

	// ErrUnknownField reports a record field that is not part of its
	// schema's format, including a known field spelled in a different case.
	ErrUnknownField = errors.New("unknown session record field")

	// ErrMalformedRecord reports a record that is not exactly one JSON object
	// of its schema's format: bad syntax, invalid UTF-8, trailing data, a duplicate
	// key, a missing field, a null, a wrong type, or an invalid value.
	ErrMalformedRecord = errors.New("malformed session record")

	// ErrInvalidWorkspace reports a workspace path that is blank, does not
	// exist, is not a directory, or resolves to a filesystem root.
	ErrInvalidWorkspace = errors.New("invalid session workspace")

	// ErrInvalidStateDir reports a state directory that is blank, cannot
	// be created (a dangling link, a file on its path, a link planted
	// while it was created, no permission), is not a directory, or
	// resolves to a filesystem root.
	ErrInvalidStateDir = errors.New("invalid session state directory")

	// ErrUnqualifiedModel reports a Profile.Model that is blank (empty, or
	// made only of white space and format characters such as U+00A0,
	// U+3000 and U+200B) or invalid, or a non-empty Config.Model that
	// differs from Profile.Model.
	ErrUnqualifiedModel = errors.New("unqualified session model")

	// ErrInvalidSessionID reports a session id that is empty, longer than
	// 240 bytes, not valid UTF-8, or contains a control character.
	ErrInvalidSessionID = errors.New("invalid session id")

	// ErrInvalidPermissionMode reports a permission mode that is not one of
	// [ApproveAll], [ApproveReads] or [DenyAll].
	ErrInvalidPermissionMode = errors.New("invalid session permission mode")

	// ErrInvalidSkillsDigest reports a Config.SkillsDigest that is neither
	// "" nor "sha256:" + 64 lowercase hex.
	ErrInvalidSkillsDigest = errors.New("invalid session skills digest")

	// ErrInvalidBinding reports a [Binding] that was not produced by [Bind],
	// used with Verify, Check or a [Store]: the zero value, a field that
	// Bind could not have produced, or fields that are not the ones Bind
	// derives (a Key, WorkspaceDigest or SessionDir that does not match the
	// other fields, as after a field is changed or a literal is built by
	// hand).
	ErrInvalidBinding = errors.New("invalid session binding")
)

// DriftError lists the immutable fields that differ between a binding and a
// controller identity ([Binding.Verify]) or a persisted record
// ([Binding.Check]). Fields holds the record's JSON names (see the package
// documentation) in the fixed order session_id, workspace_digest,
// profile_digest, skills_digest, model, permission_mode.
//
// errors.Is(err, ErrDrift) holds for every *DriftError.
type DriftError struct {
	Fields []string // the drifted fields' JSON names
	// Unproven lists the fields among Fields that the record cannot prove
	// because its schema predates them (skills_digest for a [SchemaV1]
	// record), whatever the binding holds; nil otherwise.
	Unproven []string
	// Schema is the record's schema when Unproven is set, else "".
	Schema string
}

// Error names the drifted fields and says to start a fresh session.
func (e *DriftError) Error() string {
	msg := "session: identity drift in " + strings.Join(e.Fields, ", ")
	if len(e.Unproven) > 0 {
		msg += " (the record, schema " + e.Schema + ", predates " + strings.Join(e.Unproven, ", ") + " and cannot prove it)"
	}
	return msg + ": the session was created under a different binding; start a fresh session"
}

// Is reports whether target is [ErrDrift].
func (e *DriftError) Is(target error) bool { return target == ErrDrift }
