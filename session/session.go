package session

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/airlockdev/airlock/internal/statedir"

	"github.com/airlockdev/airlock/internal/digest"
)

// Schema is the schema of the records this package writes: v2, which binds
// the skill set (skills_digest).
const Schema = "airlock.session-identity.v2"

// SchemaV1 is the schema of the records written before skills_digest
// existed. [DecodeRecord] still reads them under the closed v1 rules, and
// [Binding.Check] always finds them drifted in skills_digest: a v1 record
// cannot prove which skills its session was told about, so its session is
// never resumed (start fresh; the new record is v2).
const SchemaV1 = "airlock.session-identity.v1"

// maxIDLen is the longest session id, record id or model, in bytes.
const maxIDLen = 240

// maxLabelLen is the longest readable part of a session directory or store file name.
const maxLabelLen = 80

// PermissionMode is the permission policy a session runs under.
type PermissionMode string

// The known permission modes. Any other value is rejected.
const (
	ApproveAll   PermissionMode = "approve-all"
	ApproveReads PermissionMode = "approve-reads"
	DenyAll      PermissionMode = "deny-all"
)

// valid reports whether m is one of the known permission modes.
func (m PermissionMode) valid() bool {
	switch m {
	case ApproveAll, ApproveReads, DenyAll:
		return true
	}
	return false
}

// Profile is the qualified agent profile a session runs under. Every field
// takes part in [Profile.Digest]; none is interpreted by this package except
// Model, the session's one source for its model (see [Config.Model]).
type Profile struct {
	Driver           string // the adapter driver, e.g. "acp"
	Protocol         string // the protocol and version the driver speaks
	Agent            string // the agent, e.g. "claude-code"
	AgentVersion     string // the agent's version
	ServerPackage    string // the package of the agent's server (an ACP adapter)
	ServerVersion    string // that package's version
	CommandDigest    string // a digest of the command line that starts it
	Model            string // the qualified model the session runs; Binding.Model is this
	PermissionPolicy string // the agent's own permission policy, as configured
}

// Digest returns "sha256:" followed by the 64 lowercase hex digits of the
// SHA-256 of a canonical, length-prefixed encoding of every field, so two
// profiles have the same digest exactly when all their fields are equal.
func (p Profile) Digest() string {
	return digest.Of(digest.Encode("airlock.session-profile.v1",
		"driver", p.Driver,
		"protocol", p.Protocol,
		"agent", p.Agent,
		"agent_version", p.AgentVersion,
		"server_package", p.ServerPackage,
		"server_version", p.ServerVersion,
		"command_digest", p.CommandDigest,
		"model", p.Model,
		"permission_policy", p.PermissionPolicy,
	))
}

// Config is the input of [Bind].
//
// On the word "runtime": this package uses it nowhere. sandbox.RuntimeDir is
// the ".airlock" directory every workspace reserves, stage.Runtime maps host
// sources to their paths in the sandbox, and the stage root is the sandbox
// directory passed to stage.Stage. Config.StateDir and Binding.SessionDir
// are directories on the host, outside every workspace and sandbox.
type Config struct {
	// SessionID is the caller's session id: 1–240 bytes of UTF-8 without
	// control characters. It may contain any other byte, including '/'.
	SessionID string
	// Workspace is the host workspace directory; it is resolved to its real
	// path (absolute, symbolic links evaluated).
	Workspace string
	// StateDir is the host's own state directory (not inside the workspace,
	// not in the sandbox) under which each session gets its SessionDir; it
	// is created when missing (with its parents, mode 0700, as
	// skills.Materialize and deliverable.FileStore create theirs) and
	// resolved to its real path. It does not take part in the Key, so
	// moving it does not invalidate a session.
	StateDir string
	// Profile is the qualified agent profile.
	Profile Profile
	// Model is optional: Profile.Model is the one source of the session's
	// model, and an empty Model means Profile.Model. A non-empty Model must
	// equal Profile.Model exactly, or Bind fails with [ErrUnqualifiedModel]
	// (a caller that names the model twice gets its two names checked,
	// never one silently preferred). New code leaves it empty.
	Model string
	// PermissionMode must be one of the known modes.
	PermissionMode PermissionMode
	// SkillsDigest is the identity of the skill bundle the agent is told
	// about: skills.Bundle.Identity.Digest ("sha256:" + 64 lowercase hex),
	// or "" when the run selected no skill. It takes part in the Key and is
	// persisted, so a session is never resumed under another skill set
	// (its prompt would list the old skills). The digest holds no path: the
	// same skills staged at another sandbox path, or materialized under
	// another state directory, keep it.
	SkillsDigest string
}

// Binding is the canonical identity of a session, produced by [Bind]. Its
// paths are real host paths; its digests are "sha256:<64 lowercase hex>".
type Binding struct {
	SessionID       string // Config.SessionID
	Workspace       string // real path of the workspace
	WorkspaceDigest string // "sha256:" + hex SHA-256 of Workspace

	// SessionDir is this session's own directory on the host:
	// <real StateDir>/sessions/<readable>-<16 hex>. It is where a host keeps
	// per-session files (scratch space, logs, a local sandbox copy), one
	// directory per session id that no other id can share. It is not the
	// stage root: that is a path in the sandbox, chosen by the host (for
	// example <sandbox workspace>/.airlock/...), and only when the sandbox
	// is a local directory may the host choose to put it under SessionDir.
	// Bind does not create it.
	SessionDir string

	ProfileDigest  string         // Profile.Digest()
	SkillsDigest   string         // Config.SkillsDigest ("" when no skill was selected)
	Model          string         // Profile.Model (which a non-empty Config.Model equals)
	PermissionMode PermissionMode // Config.PermissionMode

	// Key is the provider session key: "airlock-" + 64 hex of SHA-256 over
	// the session id, workspace path and digest, profile digest, skills
	// digest, model and permission mode. Pass it wherever a provider or a cache names the
	// session (an ACP session key, a stage.Cache key): any change to a
	// bound input gives another key, so state kept under the old one is
	// never reused under a different binding. Verify, Check and a [Store]
	// recompute it, so a binding whose fields were changed after Bind
	// fails with [ErrInvalidBinding].
	Key string
}

// Identity is what a controller claims about the session it wants to
// resume: the immutable fields of a [Binding], compared by [Binding.Verify].
type Identity struct {
	SessionID       string         // the session id
	WorkspaceDigest string         // "sha256:" + 64 lowercase hex
	ProfileDigest   string         // "sha256:" + 64 lowercase hex
	SkillsDigest    string         // "sha256:" + 64 lowercase hex, or "" for no skill
	Model           string         // the qualified model
	PermissionMode  PermissionMode // the permission mode
}

// Bind validates cfg and derives the session's canonical binding. It
// touches the file system only to resolve and stat the two directories and
// to create a missing StateDir (with its missing parents, mode 0700; see
// the package documentation for the rule on links); the workspace must
// exist.
//
// Errors: [ErrInvalidSessionID], [ErrInvalidPermissionMode],
// [ErrUnqualifiedModel], [ErrInvalidSkillsDigest], and, as a
// [*fs.PathError] carrying the path as given, [ErrInvalidWorkspace] or
// [ErrInvalidStateDir] (also wrapping the underlying error, e.g.
// [fs.ErrNotExist], when there is one).
func Bind(cfg Config) (Binding, error) {
	if err := checkID(cfg.SessionID); err != nil {
		return Binding{}, fmt.Errorf("session: bind: %w: %w; pass a non-empty session id without control characters", ErrInvalidSessionID, err)
	}
	if err := checkSkillsDigest(cfg.SkillsDigest); err != nil {
		return Binding{}, fmt.Errorf("session: bind: %w: %w; pass the skills bundle's Identity.Digest, or \"\" when no skill was selected", ErrInvalidSkillsDigest, err)
	}
	if !cfg.PermissionMode.valid() {
		return Binding{}, fmt.Errorf("session: bind: %w %q; use %q, %q or %q",
			ErrInvalidPermissionMode, cfg.PermissionMode, ApproveAll, ApproveReads, DenyAll)
	}
	model, err := bindModel(cfg)
	if err != nil {
		return Binding{}, err
	}
	ws, err := realDir("workspace", cfg.Workspace, ErrInvalidWorkspace)
	if err != nil {
		return Binding{}, err
	}
	rt, err := stateDir(cfg.StateDir)
	if err != nil {
		return Binding{}, err
	}
	b := Binding{
		SessionID:       cfg.SessionID,
		Workspace:       ws,
		WorkspaceDigest: digest.Of([]byte(ws)),
		SessionDir:      filepath.Join(rt, "sessions", label(cfg.SessionID)),
		ProfileDigest:   cfg.Profile.Digest(),
		SkillsDigest:    cfg.SkillsDigest,
		Model:           model,
		PermissionMode:  cfg.PermissionMode,
	}
	b.Key = bindingKey(b)
	return b, nil
}

// bindingKey derives b's Key from its other fields, as [Bind] sets it and
// [Binding.validate] checks it: "airlock-" + hex SHA-256 over the
// length-prefixed session id, workspace, workspace digest, profile digest,
// skills digest, model and permission mode. SessionDir is not part of it.
func bindingKey(b Binding) string {
	return "airlock-" + digest.Hex(digest.Encode("airlock.session-key.v2",
		"session_id", b.SessionID,
		"workspace", b.Workspace,
		"workspace_digest", b.WorkspaceDigest,
		"profile_digest", b.ProfileDigest,
		"skills_digest", b.SkillsDigest,
		"model", b.Model,
		"permission_mode", string(b.PermissionMode),
	))
}

// bindModel returns the session's model: Profile.Model, which a non-empty
// Config.Model must equal.
func bindModel(cfg Config) (string, error) {
	if cfg.Model != "" && cfg.Model != cfg.Profile.Model {
		return "", fmt.Errorf("session: bind: %w: Config.Model %q differs from Profile.Model %q; leave Config.Model empty (it defaults to Profile.Model) or qualify the profile for this model",
			ErrUnqualifiedModel, cfg.Model, cfg.Profile.Model)
	}
	if err := checkModel(cfg.Profile.Model); err != nil {
		return "", fmt.Errorf("session: bind: %w: Profile.Model: %w; set Profile.Model to the qualified model", ErrUnqualifiedModel, err)
	}
	return cfg.Profile.Model, nil
}

// realDir resolves p to an absolute path with every symbolic link evaluated
// and requires a directory that is not a filesystem root.
func realDir(what, p string, sentinel error) (string, error) {
	real, err := statedir.Real(p)
	if err != nil {
		return "", &fs.PathError{Op: "session.Bind " + what, Path: p, Err: fmt.Errorf("%w: %w", sentinel, err)}
	}
	return real, nil
}

// label returns the collision-resistant file name derived from a session id:
// a readable part (every byte outside [A-Za-z0-9._-] replaced by '_', an
// all-dots result replaced by "session", cut to 80 bytes, "session" if
// empty — in that order, as the v1 rules say), '-', and the first 16 hex digits
// of the SHA-256 of the raw id. The result is never "." or ".." and never
// contains a separator.
func label(id string) string {
	b := []byte(id)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	readable := string(b)
	if strings.Trim(readable, ".") == "" {
		readable = "session"
	}
	if len(readable) > maxLabelLen {
		readable = readable[:maxLabelLen]
	}
	return readable + "-" + digest.Hex([]byte(id))[:16]
}

// checkID enforces the rule for ids and models: 1–240 bytes of valid UTF-8
// without control characters.
func checkID(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("empty")
	case len(s) > maxIDLen:
		return fmt.Errorf("%d bytes, longer than %d", len(s), maxIDLen)
	case !utf8.ValidString(s):
		return fmt.Errorf("not valid UTF-8")
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("contains control character %U", r)
		}
	}
	return nil
}

// checkModel enforces the rule for models: an id ([checkID]) with at least
// one visible character. A model made only of invisible characters names
// no model, however it is spelled; a model with a visible character may
// also hold such characters, as before.
func checkModel(s string) error {
	if err := checkID(s); err != nil {
		return err
	}
	for _, r := range s {
		if !invisible(r) {
			return nil
		}
	}
	return fmt.Errorf("%q has no visible character (only white space, format and other invisible characters)", s)
}

// invisible reports whether r shows as nothing: white space (Unicode
// White_Space, such as U+0020, U+00A0, U+3000), a format character
// (category Cf, such as U+200B, U+2060, U+FEFF), another default-ignorable
// code point (the Hangul fillers U+115F, U+1160, U+3164, U+FFA0, the
// combining grapheme joiner U+034F, the variation selectors), or the
// Braille pattern blank U+2800.
func invisible(r rune) bool {
	return unicode.IsSpace(r) || unicode.In(r, unicode.Cf, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector) || r == '\u2800'
}

// checkSkillsDigest allows "" (no skill selected) or a digest.
func checkSkillsDigest(s string) error {
	if s == "" {
		return nil
	}
	return checkDigest(s)
}

// checkDigest enforces "sha256:" followed by exactly 64 lowercase hex digits.
func checkDigest(s string) error {
	const prefix = "sha256:"
	if !strings.HasPrefix(s, prefix) {
		return fmt.Errorf("%q lacks the %q prefix (an early digest format)", s, prefix)
	}
	h := s[len(prefix):]
	if len(h) != 64 {
		return fmt.Errorf("%q has %d hex digits, want 64", s, len(h))
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return fmt.Errorf("%q is not lowercase hex", s)
		}
	}
	return nil
}
