package session

import (
	"fmt"
	"path/filepath"

	"github.com/airlockdev/airlock/internal/digest"
)

// Identity returns the identity a controller resuming this session must claim.
func (b Binding) Identity() Identity {
	return Identity{
		SessionID:       b.SessionID,
		WorkspaceDigest: b.WorkspaceDigest,
		ProfileDigest:   b.ProfileDigest,
		SkillsDigest:    b.SkillsDigest,
		Model:           b.Model,
		PermissionMode:  b.PermissionMode,
	}
}

// RecordIDs are the ids a new [Record] carries besides the binding's own:
// each 1–240 bytes of UTF-8 without control characters. All three are
// required: a record with an empty one does not encode, and [Store.Save]
// refuses it with [ErrMalformedRecord] (a bug in the caller, not a reason
// to start fresh). A host whose sandbox has no backend session of its own
// (an SSH machine, a local directory) passes the sandbox's own name for it,
// such as "ssh://user@host:22/work" or the directory, so that a record
// says where its session ran.
type RecordIDs struct {
	RecordID         string // the host's id for the record; see [Record.RecordID]
	BackendSessionID string // the backend's id, e.g. a hosted sandbox or provider session id; see [Record.BackendSessionID]
	AgentSessionID   string // the agent's id, e.g. the sessionId ACP session/new returned; see [Record.AgentSessionID]
}

// NewRecord returns the record ([Schema]) that persists this binding
// together with ids. The ids are validated by [Record.Encode] (and so by [Store.Save]).
func (b Binding) NewRecord(ids RecordIDs) Record {
	return Record{
		Schema:           Schema,
		SessionID:        b.SessionID,
		RecordID:         ids.RecordID,
		BackendSessionID: ids.BackendSessionID,
		AgentSessionID:   ids.AgentSessionID,
		ProfileDigest:    b.ProfileDigest,
		WorkspaceDigest:  b.WorkspaceDigest,
		SkillsDigest:     b.SkillsDigest,
		Model:            b.Model,
		PermissionMode:   b.PermissionMode,
	}
}

// Verify compares a controller's claimed identity with the binding. Every
// immutable field is compared exactly; an empty claimed field (for example an
// absent permission mode) is a difference, never a wildcard. On a mismatch
// the error is a [*DriftError] naming each differing field (errors.Is(err,
// ErrDrift)). A binding not produced by [Bind] fails with [ErrInvalidBinding]:
// its fields must have Bind's form, and its Key, WorkspaceDigest and
// SessionDir must be what Bind derives from the others, so a binding
// changed after Bind is refused.
func (b Binding) Verify(id Identity) error {
	if err := b.validate(); err != nil {
		return err
	}
	return drift(b, id, "")
}

// Check compares a persisted record with the binding. The record must be a
// valid record ([ErrUnsupportedSchema], [ErrMalformedRecord]); then every
// immutable field is compared exactly and a mismatch is a [*DriftError]
// naming each differing field. A [SchemaV1] record cannot prove the skill
// binding and always drifts in skills_digest ([DriftError.Unproven]), even
// for a binding without skills. A binding not produced by [Bind] (or
// changed after it) fails with [ErrInvalidBinding], as in [Binding.Verify].
// The record is never repaired: on any error, start a fresh session.
func (b Binding) Check(r Record) error {
	if err := b.validate(); err != nil {
		return err
	}
	if err := validateRecord(r); err != nil {
		return fmt.Errorf("session: check record: %w; start a fresh session", err)
	}
	id := Identity{SessionID: r.SessionID, WorkspaceDigest: r.WorkspaceDigest, ProfileDigest: r.ProfileDigest,
		SkillsDigest: r.SkillsDigest, Model: r.Model, PermissionMode: r.PermissionMode}
	return drift(b, id, r.Schema)
}

// drift compares id with b field by field; schema is the schema of the
// record id comes from ("" for a controller's claim).
func drift(b Binding, id Identity, schema string) error {
	var fields, unproven []string
	if id.SessionID != b.SessionID {
		fields = append(fields, "session_id")
	}
	if id.WorkspaceDigest != b.WorkspaceDigest {
		fields = append(fields, "workspace_digest")
	}
	if id.ProfileDigest != b.ProfileDigest {
		fields = append(fields, "profile_digest")
	}
	switch {
	case schema == SchemaV1:
		fields = append(fields, "skills_digest")
		unproven = []string{"skills_digest"}
	case id.SkillsDigest != b.SkillsDigest:
		fields = append(fields, "skills_digest")
	}
	if id.Model != b.Model {
		fields = append(fields, "model")
	}
	if id.PermissionMode != b.PermissionMode {
		fields = append(fields, "permission_mode")
	}
	if len(fields) == 0 {
		return nil
	}
	d := &DriftError{Fields: fields}
	if unproven != nil {
		d.Unproven, d.Schema = unproven, schema
	}
	return d
}

// validate rejects a binding that [Bind] did not produce, so that two
// empty identities never match and a binding edited after Bind is never
// used as if Bind had made it.
//
// What it checks, without touching the file system:
//   - every field has Bind's form (ids, digests, model, permission mode),
//     which refuses the zero value;
//   - Workspace is an absolute, clean path that is not a filesystem root,
//     and WorkspaceDigest is its digest;
//   - SessionDir is <an absolute directory that is not a root>/sessions/
//     <label of SessionID>, as Bind derives it;
//   - Key is the key Bind derives ([bindingKey]) from SessionID,
//     Workspace, WorkspaceDigest, ProfileDigest, SkillsDigest, Model and
//     PermissionMode, so changing any of them after Bind is refused.
//
// What it does not check: that Workspace and the state directory above
// SessionDir exist or are real paths (that needs the disk; Bind checked it
// once), which state directory SessionDir is under (Config.StateDir is
// neither kept nor in the key), and which profile ProfileDigest digests
// (the profile is not kept). The key is a checksum, not a secret: a
// binding assembled by hand whose Key is recomputed as Bind computes it
// passes, as does one a host stored and restored field by field.
func (b Binding) validate() error {
	bad := func(what string, err error) error {
		return fmt.Errorf("session: %w: %s: %w; create the binding with Bind", ErrInvalidBinding, what, err)
	}
	if err := checkID(b.SessionID); err != nil {
		return bad("session id", err)
	}
	if err := checkDigest(b.WorkspaceDigest); err != nil {
		return bad("workspace digest", err)
	}
	if err := checkDigest(b.ProfileDigest); err != nil {
		return bad("profile digest", err)
	}
	if err := checkSkillsDigest(b.SkillsDigest); err != nil {
		return bad("skills digest", err)
	}
	if err := checkModel(b.Model); err != nil {
		return bad("model", err)
	}
	if !b.PermissionMode.valid() {
		return bad("permission mode", fmt.Errorf("unknown mode %q", b.PermissionMode))
	}
	// The fields are well formed; now they must be the ones Bind derives.
	notBound := func(format string, args ...any) error {
		return fmt.Errorf("session: %w: %s: the binding was changed after Bind or was not made by Bind; create the binding with Bind",
			ErrInvalidBinding, fmt.Sprintf(format, args...))
	}
	if !isBoundDir(b.Workspace) {
		return notBound("workspace %q is not an absolute, clean path below a filesystem root, as Bind resolves it", b.Workspace)
	}
	if want := digest.Of([]byte(b.Workspace)); b.WorkspaceDigest != want {
		return notBound("workspace digest %q is not the digest of workspace %q (%q)", b.WorkspaceDigest, b.Workspace, want)
	}
	sessions := filepath.Dir(b.SessionDir)
	if filepath.Base(b.SessionDir) != label(b.SessionID) || filepath.Base(sessions) != "sessions" || !isBoundDir(filepath.Dir(sessions)) ||
		filepath.Clean(b.SessionDir) != b.SessionDir {
		return notBound("session directory %q is not <state directory>/sessions/%s, as Bind derives it from session id %q",
			b.SessionDir, label(b.SessionID), b.SessionID)
	}
	if b.Key != bindingKey(b) {
		return notBound("key %q is not the key Bind derives from the binding's session id, workspace, digests, model and permission mode", b.Key)
	}
	return nil
}

// isBoundDir reports whether p has the form of a real directory path as
// Bind resolves one: absolute, clean, and not a filesystem root.
func isBoundDir(p string) bool {
	return filepath.IsAbs(p) && filepath.Clean(p) == p && filepath.Dir(p) != p
}
