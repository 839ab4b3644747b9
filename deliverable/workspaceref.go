package deliverable

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/airlockdev/airlock/internal/jsonlit"
)

// KindWorkspaceFile is the Kind of a reference to a file in a workspace.
const KindWorkspaceFile = "workspace_file"

// WorkspaceKind says which kind of registered workspace a reference points into.
type WorkspaceKind string

// The workspace kinds. Any other value is rejected.
const (
	// ExecutionWorkspace is the workspace an issue's run executes in.
	ExecutionWorkspace WorkspaceKind = "execution_workspace"
	// ProjectWorkspace is a project's own workspace.
	ProjectWorkspace WorkspaceKind = "project_workspace"
)

// Limits of a workspace reference.
const (
	maxLineCol     = 1<<31 - 1 // largest line or column
	maxRefJSONSize = 16 << 10  // largest encoded reference DecodeWorkspaceRef reads
)

// WorkspaceRef is a stored reference to a place in a file of a registered
// workspace. It holds ids and a workspace-relative path, never a host path;
// WorkspaceRef.Open resolves it through the host's WorkspaceLookup.
//
// Its JSON form is one object with these keys, in this order as written by
// Encode (optional ones omitted when empty):
//
//	kind           "workspace_file"
//	issueId        the issue the reference belongs to
//	projectId      optional: the project of a project workspace other than the issue's own
//	workspaceKind  "execution_workspace" or "project_workspace"
//	workspaceId    the workspace's id
//	relativePath   clean, slash-separated path relative to the workspace root
//	line           optional: 1-based line
//	column         optional: 1-based column; only with line
//	displayPath    relativePath, then ":line" and ":column" when present
//
// Ids are 1–256 bytes of printable UTF-8 without white space, "/" or "\",
// so no field but relativePath can hold a path, and relativePath is never
// absolute, a home path, a URL, or one with a ".." component.
type WorkspaceRef struct {
	Kind          string        // KindWorkspaceFile
	IssueID       string        // the issue the reference belongs to
	ProjectID     string        // optional; see WorkspaceRef.Open
	WorkspaceKind WorkspaceKind // ExecutionWorkspace or ProjectWorkspace
	WorkspaceID   string        // the workspace's id
	RelativePath  string        // clean, slash-separated, relative to the workspace root
	Line          int           // 1-based; 0 means none
	Column        int           // 1-based; 0 means none; needs Line
	DisplayPath   string        // RelativePath[:Line[:Column]]
}

// NewWorkspaceRef returns the reference described by r, completed: Kind is
// set to KindWorkspaceFile, r.RelativePath (untrusted) is checked lexically
// and cleaned ("./src//main.go" becomes "src/main.go"), and DisplayPath is
// derived. r.Kind and r.DisplayPath must be empty or already what they will
// be. The result passes Validate.
func NewWorkspaceRef(r WorkspaceRef) (WorkspaceRef, error) {
	if r.Kind != "" && r.Kind != KindWorkspaceFile {
		return WorkspaceRef{}, refErr("kind %q is not %q", clip(r.Kind), KindWorkspaceFile)
	}
	r.Kind = KindWorkspaceFile
	unsafePath := r.RelativePath
	rel, why := cleanRef(strings.TrimSpace(unsafePath))
	if why != "" {
		return WorkspaceRef{}, pathDenied("reference", unsafePath, why)
	}
	r.RelativePath = rel
	display := r.displayPath()
	if r.DisplayPath != "" && r.DisplayPath != display {
		return WorkspaceRef{}, refErr("displayPath %q is not %q, what relativePath, line and column give; leave it empty", clip(r.DisplayPath), clip(display))
	}
	r.DisplayPath = display
	if err := r.Validate(); err != nil {
		return WorkspaceRef{}, err
	}
	return r, nil
}

// displayPath returns RelativePath[:Line[:Column]].
func (r WorkspaceRef) displayPath() string {
	s := r.RelativePath
	if r.Line > 0 {
		s += ":" + strconv.Itoa(r.Line)
		if r.Column > 0 {
			s += ":" + strconv.Itoa(r.Column)
		}
	}
	return s
}

func refErr(format string, args ...any) error {
	return fmt.Errorf("%w: workspace reference: "+format, append([]any{ErrInvalidRequest}, args...)...)
}

// Validate checks every field: Kind, the ids, WorkspaceKind, a clean
// RelativePath (ErrPathDenied inside an *fs.PathError), line and column in
// 1..2³¹-1 or zero (a column only with a line), and DisplayPath equal to
// what they imply. Other failures wrap ErrInvalidRequest.
func (r WorkspaceRef) Validate() error {
	if r.Kind != KindWorkspaceFile {
		return refErr("kind %q is not %q", clip(r.Kind), KindWorkspaceFile)
	}
	ids := []struct{ name, v string }{{"issueId", r.IssueID}, {"workspaceId", r.WorkspaceID}}
	if r.ProjectID != "" {
		ids = append(ids, struct{ name, v string }{"projectId", r.ProjectID})
	}
	for _, id := range ids {
		if why := refIDProblem(id.v); why != "" {
			return refErr("%s %q %s", id.name, clip(id.v), why)
		}
	}
	if r.WorkspaceKind != ExecutionWorkspace && r.WorkspaceKind != ProjectWorkspace {
		return refErr("workspaceKind %q is not %q or %q", clip(string(r.WorkspaceKind)), ExecutionWorkspace, ProjectWorkspace)
	}
	if clean, why := cleanRef(r.RelativePath); why != "" {
		return pathDenied("reference", r.RelativePath, why)
	} else if clean != r.RelativePath {
		return pathDenied("reference", r.RelativePath, fmt.Sprintf("is not clean (%q)", clip(clean)))
	}
	if r.Line < 0 || r.Column < 0 || r.Line > maxLineCol || r.Column > maxLineCol || (r.Column > 0 && r.Line == 0) {
		return refErr("line %d column %d; use 1-based numbers, and a column only with a line", r.Line, r.Column)
	}
	if d := r.displayPath(); r.DisplayPath != d {
		return refErr("displayPath %q is not %q, what relativePath, line and column give", clip(r.DisplayPath), clip(d))
	}
	return nil
}

// refIDProblem says what is wrong with an id of a reference, or "".
func refIDProblem(id string) string {
	switch {
	case id == "":
		return "is empty"
	case len(id) > maxIDLen:
		return fmt.Sprintf("is longer than %d bytes", maxIDLen)
	case !utf8.ValidString(id):
		return "is not valid UTF-8"
	}
	for _, c := range id {
		if c == '/' || c == '\\' || unicode.IsSpace(c) || !unicode.IsPrint(c) || isBidiControl(c) {
			return fmt.Sprintf("contains %U; an id has no white space, control characters, \"/\" or \"\\\"", c)
		}
	}
	return ""
}

// refKeys lists the JSON keys in encoding order.
var refKeys = [...]string{"kind", "issueId", "projectId", "workspaceKind", "workspaceId", "relativePath", "line", "column", "displayPath"}

// Encode returns the canonical JSON encoding of r: one compact object with
// the keys in the documented order, optional ones omitted when empty, no
// HTML escaping, no trailing newline. It validates r first, so whatever
// Encode returns, DecodeWorkspaceRef decodes to r.
func (r WorkspaceRef) Encode() ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteByte('{')
	field := func(key, value string) {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Quote(key))
		b.WriteByte(':')
		b.WriteString(value)
	}
	field("kind", jsonString(r.Kind))
	field("issueId", jsonString(r.IssueID))
	if r.ProjectID != "" {
		field("projectId", jsonString(r.ProjectID))
	}
	field("workspaceKind", jsonString(string(r.WorkspaceKind)))
	field("workspaceId", jsonString(r.WorkspaceID))
	field("relativePath", jsonString(r.RelativePath))
	if r.Line > 0 {
		field("line", strconv.Itoa(r.Line))
	}
	if r.Column > 0 {
		field("column", strconv.Itoa(r.Column))
	}
	field("displayPath", jsonString(r.DisplayPath))
	b.WriteByte('}')
	return b.Bytes(), nil
}

// jsonString encodes s (valid UTF-8) as a JSON string without HTML escaping.
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		panic(err) // a string always encodes
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// MarshalJSON is Encode, for use inside other JSON documents.
func (r WorkspaceRef) MarshalJSON() ([]byte, error) { return r.Encode() }

// UnmarshalJSON is DecodeWorkspaceRef, for use inside other JSON documents.
// Following encoding/json's convention, a JSON null leaves r unchanged.
func (r *WorkspaceRef) UnmarshalJSON(data []byte) error {
	if string(bytes.TrimSpace(data)) == "null" {
		return nil
	}
	v, err := DecodeWorkspaceRef(data)
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// DecodeWorkspaceRef strictly decodes one workspace reference: exactly one
// JSON object (surrounding white space allowed, key order free) of the
// documented keys, each at most once and spelled exactly (a known key in
// another case is refused by name), strings as strings, line and column as
// plain positive integers (no sign, fraction, exponent or leading zero), no
// escaped lone surrogate, no trailing data, at most 16 KiB; then Validate,
// so displayPath must be what the other fields imply. Errors wrap
// ErrInvalidRequest, or ErrPathDenied for relativePath.
//
// Whatever it accepts, Encode re-encodes to canonical bytes that decode to
// the same reference.
func DecodeWorkspaceRef(data []byte) (WorkspaceRef, error) {
	if len(data) > maxRefJSONSize {
		return WorkspaceRef{}, refErr("%d bytes, more than %d", len(data), maxRefJSONSize)
	}
	if !utf8.Valid(data) {
		return WorkspaceRef{}, refErr("not valid UTF-8")
	}
	members, err := jsonlit.Object(data)
	if err != nil {
		return WorkspaceRef{}, refErr("%v", err)
	}
	values := make(map[string]json.RawMessage, len(members))
	for _, m := range members {
		if !slices.Contains(refKeys[:], m.Key) {
			for _, k := range refKeys {
				if strings.EqualFold(k, m.Key) {
					return WorkspaceRef{}, refErr("key %q is %q in the wrong case (keys are case-sensitive)", clip(m.Key), k)
				}
			}
			return WorkspaceRef{}, refErr("unknown key %q", clip(m.Key))
		}
		values[m.Key] = m.Value
	}

	var r WorkspaceRef
	str := func(key string, dst *string, required bool) error {
		raw, ok := values[key]
		if !ok {
			if required {
				return refErr("missing key %q", key)
			}
			return nil
		}
		if len(raw) == 0 || raw[0] != '"' {
			return refErr("%q is not a string", key)
		}
		if err := jsonlit.CheckSurrogates(raw); err != nil {
			return refErr("%q: %v", key, err)
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			return refErr("%q: %v", key, err)
		}
		if !required && *dst == "" {
			return refErr("%q is empty; omit it instead", key)
		}
		return nil
	}
	num := func(key string, dst *int) error {
		raw, ok := values[key]
		if !ok {
			return nil
		}
		s := string(raw)
		if !isDigits(s) || s[0] == '0' || len(s) > 10 {
			return refErr("%q is %s, not a positive integer", key, clip(s))
		}
		n, err := strconv.Atoi(s)
		if err != nil || n > maxLineCol {
			return refErr("%q is %s, larger than %d", key, s, maxLineCol)
		}
		*dst = n
		return nil
	}
	var kind string
	for _, err := range []error{
		str("kind", &r.Kind, true),
		str("issueId", &r.IssueID, true),
		str("projectId", &r.ProjectID, false),
		str("workspaceKind", &kind, true),
		str("workspaceId", &r.WorkspaceID, true),
		str("relativePath", &r.RelativePath, true),
		num("line", &r.Line),
		num("column", &r.Column),
		str("displayPath", &r.DisplayPath, true),
	} {
		if err != nil {
			return WorkspaceRef{}, err
		}
	}
	r.WorkspaceKind = WorkspaceKind(kind)
	if err := r.Validate(); err != nil {
		return WorkspaceRef{}, err
	}
	return r, nil
}

// WorkspaceLookup is implemented by the host: which workspaces an issue has
// and where each lives. WorkspaceRef.Open consumes it. Both methods return
// an error wrapping ErrNotFound (or fs.ErrNotExist) for an unknown id; any
// other error is taken as a failing host.
type WorkspaceLookup interface {
	// IssueWorkspaces returns the workspaces registered for issue issueID.
	IssueWorkspaces(ctx context.Context, issueID string) (IssueWorkspaces, error)
	// ProjectWorkspace returns the project workspace workspaceID of project
	// projectID.
	ProjectWorkspace(ctx context.Context, projectID, workspaceID string) (RegisteredWorkspace, error)
}

// IssueWorkspaces is what a host knows about one issue's workspaces.
type IssueWorkspaces struct {
	CompanyID string               // the company the issue belongs to
	ProjectID string               // the issue's project; "" when none
	Execution *RegisteredWorkspace // the issue's execution workspace; nil when none
	Project   *RegisteredWorkspace // its project's workspace; nil when none
}

// RegisteredWorkspace is one workspace the host registered, and where it lives.
type RegisteredWorkspace struct {
	Kind      WorkspaceKind // ExecutionWorkspace or ProjectWorkspace
	ID        string        // the workspace's id, as references carry it
	ProjectID string        // the project it belongs to
	CompanyID string        // the company it belongs to
	Workspace Workspace     // where it lives: LocalWorkspace or RemoteWorkspace
}

// Open resolves r for the issue issueID (the issue the host is acting for,
// bound by the host, never taken from the reference) and opens the file.
//
// Resolution happens only inside workspaces registered through lookup:
//
//   - r.IssueID must be issueID: a reference copied into another issue is
//     refused (ErrPathDenied).
//   - Without a ProjectID, or with the issue's own, the workspace is the
//     first of the issue's execution workspace, then its project workspace,
//     whose kind and id are r's.
//   - With the ProjectID of another project, only that project's workspace
//     r.WorkspaceID of kind ProjectWorkspace is considered, and only when it
//     belongs to the issue's company (ErrPathDenied otherwise).
//
// No workspace matching is ErrNotFound. The file is then opened with
// Workspace.Open, following no link in any component (ErrSymlinkDenied),
// and must be a regular file (ErrPathDenied) with one hard link
// (ErrHardlinkDenied). Path errors are *fs.PathError values naming
// r.RelativePath; a failing lookup or workspace is a *HostError. The
// returned File reads exactly its Stat().Size bytes and returns io.EOF only
// once the workspace confirmed the file unchanged; the caller closes it.
func (r WorkspaceRef) Open(ctx context.Context, lookup WorkspaceLookup, issueID string) (File, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	if lookup == nil {
		return nil, &HostError{Op: "open reference", Err: errors.New("the WorkspaceLookup is nil")}
	}
	deny := func(sentinel error, format string, args ...any) error {
		return &fs.PathError{Op: "open reference", Path: r.RelativePath, Err: fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)}
	}
	if r.IssueID != issueID {
		return nil, deny(ErrPathDenied, "the reference belongs to issue %q, not %q", clip(r.IssueID), clip(issueID))
	}
	iw, err := lookup.IssueWorkspaces(ctx, issueID)
	if isNotFound(err) {
		return nil, deny(ErrNotFound, "issue %q is unknown", clip(issueID))
	}
	if err != nil {
		return nil, hostErr("open reference", fmt.Errorf("look up the workspaces of issue %q: %w", clip(issueID), err))
	}
	var ws *RegisteredWorkspace
	if r.ProjectID == "" || r.ProjectID == iw.ProjectID {
		for _, c := range []*RegisteredWorkspace{iw.Execution, iw.Project} {
			if c != nil && c.Kind == r.WorkspaceKind && c.ID == r.WorkspaceID {
				ws = c
				break
			}
		}
		if ws == nil {
			return nil, deny(ErrNotFound, "issue %q has no %s %q", clip(issueID), r.WorkspaceKind, clip(r.WorkspaceID))
		}
	} else {
		if r.WorkspaceKind != ProjectWorkspace {
			return nil, deny(ErrPathDenied, "a reference into another project (%q) can only name a %s", clip(r.ProjectID), ProjectWorkspace)
		}
		pw, err := lookup.ProjectWorkspace(ctx, r.ProjectID, r.WorkspaceID)
		if isNotFound(err) {
			return nil, deny(ErrNotFound, "project %q has no %s %q", clip(r.ProjectID), ProjectWorkspace, clip(r.WorkspaceID))
		}
		if err != nil {
			return nil, hostErr("open reference", fmt.Errorf("look up workspace %q of project %q: %w", clip(r.WorkspaceID), clip(r.ProjectID), err))
		}
		if pw.Kind != ProjectWorkspace || pw.ID != r.WorkspaceID || pw.ProjectID != r.ProjectID {
			return nil, &HostError{Op: "open reference", Err: fmt.Errorf("WorkspaceLookup.ProjectWorkspace(%q, %q) returned %s %q of project %q; the host's lookup is faulty",
				clip(r.ProjectID), clip(r.WorkspaceID), pw.Kind, clip(pw.ID), clip(pw.ProjectID))}
		}
		if iw.CompanyID == "" || pw.CompanyID != iw.CompanyID {
			return nil, deny(ErrPathDenied, "workspace %q of project %q does not belong to the company of issue %q", clip(r.WorkspaceID), clip(r.ProjectID), clip(issueID))
		}
		ws = &pw
	}
	if ws.Workspace == nil {
		return nil, &HostError{Op: "open reference", Err: fmt.Errorf("%s %q has no Workspace", ws.Kind, clip(ws.ID))}
	}

	f, err := ws.Workspace.Open(ctx, r.RelativePath)
	if err != nil {
		var pe *fs.PathError
		for _, s := range []error{ErrSymlinkDenied, ErrPathDenied, ErrFileChanged, fs.ErrNotExist} {
			if errors.Is(err, s) {
				if errors.As(err, &pe) {
					err = pe.Err
				}
				return nil, &fs.PathError{Op: "open reference", Path: r.RelativePath, Err: err}
			}
		}
		return nil, hostErr("open reference", err)
	}
	st := f.Stat()
	switch {
	case !st.Mode.IsRegular():
		err = deny(ErrPathDenied, "not a regular file")
	case st.Links == 0:
		err = deny(ErrFileChanged, "the file was replaced or removed while it was opened")
	case st.Links != 1:
		err = deny(ErrHardlinkDenied, "the file has %d hard links", st.Links)
	}
	if err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return &boundedFile{File: f, remain: st.Size, name: r.RelativePath}, nil
}

// boundedFile holds a File to its contract: at most Stat().Size bytes, and
// io.EOF only after exactly that many.
type boundedFile struct {
	File
	name   string
	remain int64
	err    error
}

func (b *boundedFile) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.File.Read(p)
	if int64(n) > b.remain {
		b.err = &fs.PathError{Op: "read", Path: b.name, Err: fmt.Errorf("%w: more bytes than its size", ErrFileChanged)}
		return 0, b.err
	}
	b.remain -= int64(n)
	if errors.Is(err, io.EOF) && b.remain != 0 {
		b.err = &fs.PathError{Op: "read", Path: b.name, Err: fmt.Errorf("%w: it ended %d bytes short of its size", ErrFileChanged, b.remain)}
		return n, b.err
	}
	return n, err
}

func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}
