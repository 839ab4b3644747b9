package deliverable

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// Work product types.
const (
	// WorkProductArtifact is a registered, stored file: one per attachment.
	WorkProductArtifact = "artifact"
	// WorkProductWorkspaceFile is a file that stays in a workspace, named by
	// a WorkspaceRef. It is a signpost, not an upload: it never delivers a
	// file a task asks for.
	WorkProductWorkspaceFile = "workspace_file"
)

// Provider is the Provider of the work products this package makes.
const Provider = "airlock"

// workProductScheme is how a completion cites a work product.
const workProductScheme = "work_product:"

// WorkProduct is what a task produced, as the host lists it beside the
// task: an artifact (a registered attachment) or a workspace file.
//
// Metadata is canonical JSON, derived from nothing but the record it
// describes: for an artifact, {"attachmentId","contentPath","downloadPath"}
// of its attachment; for a workspace file, the WorkspaceRef's encoding (the
// resourceRef shape DecodeWorkspaceRef reads).
type WorkProduct struct {
	ID       string          `json:"id"`       // an artifact's is its attachment's id
	Type     string          `json:"type"`     // WorkProductArtifact or WorkProductWorkspaceFile
	Provider string          `json:"provider"` // Provider
	TaskID   string          `json:"taskId"`   // the task it belongs to
	RunID    string          `json:"runId"`    // the run that produced it
	Title    string          `json:"title"`    // a short description for the user
	Metadata json.RawMessage `json:"metadata"` // canonical JSON; see WorkProduct
}

// ArtifactWorkProduct returns the artifact work product of a: its id is
// a.ID and its metadata is canonicalized from a.ID alone, so every store
// and every replay gives the same bytes.
func ArtifactWorkProduct(a Attachment) WorkProduct {
	meta := `{"attachmentId":` + jsonString(a.ID) + `,"contentPath":` + jsonString(ContentPath(a.ID)) +
		`,"downloadPath":` + jsonString(DownloadPath(a.ID)) + `}`
	return WorkProduct{ID: a.ID, Type: WorkProductArtifact, Provider: Provider, TaskID: a.TaskID, RunID: a.RunID,
		Title: a.Title, Metadata: json.RawMessage(meta)}
}

// WorkspaceFileWorkProduct returns the workspace_file work product with id
// (a UUID, lowercased) for the file ref names, of task taskID in run runID.
// Its metadata is ref's canonical encoding; ref must pass Validate.
func WorkspaceFileWorkProduct(id, taskID, runID, title string, ref WorkspaceRef) (WorkProduct, error) {
	canon, ok := parseUUID(id)
	if !ok {
		return WorkProduct{}, fmt.Errorf("%w: work product id %q is not a UUID", ErrInvalidRequest, clip(id))
	}
	for _, f := range []struct{ name, v string }{{"task id", taskID}, {"run id", runID}} {
		if err := checkID(f.name, f.v); err != nil {
			return WorkProduct{}, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
		}
	}
	meta, err := ref.Encode()
	if err != nil {
		return WorkProduct{}, err
	}
	title = strings.TrimSpace(title)
	if title == "" {
		title = ref.DisplayPath
	}
	return WorkProduct{ID: canon, Type: WorkProductWorkspaceFile, Provider: Provider, TaskID: taskID, RunID: runID,
		Title: clip(title), Metadata: meta}, nil
}

// WorkspaceRef decodes the reference of a workspace_file work product.
func (w WorkProduct) WorkspaceRef() (WorkspaceRef, error) {
	if w.Type != WorkProductWorkspaceFile {
		return WorkspaceRef{}, fmt.Errorf("%w: work product %s is of type %q, not %q", ErrInvalidRequest, clip(w.ID), clip(w.Type), WorkProductWorkspaceFile)
	}
	return DecodeWorkspaceRef(w.Metadata)
}

// Citation returns how a completion cites w: "deliverable:<id>" for an
// artifact, "work_product:<id>" for a workspace file.
func (w WorkProduct) Citation() string {
	if w.Type == WorkProductArtifact {
		return citationScheme + w.ID
	}
	return workProductScheme + w.ID
}

// WorkProducts is an optional interface of Tasks (and Store): the work
// product with id, or an error wrapping ErrNotFound. When Tasks implements
// it, ValidateEvidence judges "work_product:<id>" citations; otherwise it
// ignores them. FileStore implements it.
type WorkProducts interface {
	WorkProduct(ctx context.Context, id string) (WorkProduct, error)
}

// WorkProductRecorder is an optional interface of Store: it records a
// workspace_file work product for a task and run. FileStore implements it;
// Registrar.RecordWorkspaceFile needs it.
type WorkProductRecorder interface {
	RecordWorkProduct(ctx context.Context, wp WorkProduct) error
}

// EntityRef names one of the host's own records (a comment, an issue, a
// message) that a registration is bound to. airlock has no tracker of its
// own: it checks the ids' shape and echoes them in the receipt.
type EntityRef struct {
	Type string `json:"type"` // the host's kind of record, such as "issue" or "comment"
	ID   string `json:"id"`   // its id
}

// Binding is the host's side of one registration: the task and run, and
// the host's own ids that the receipt echoes back. Every id is checked like
// a task id (no surrounding space or control characters, at most 256
// bytes); the optional ones may be empty.
type Binding struct {
	TaskID   string      // the task the file is delivered for; required
	RunID    string      // the run delivering it; required
	Command  string      // optional: the host's id of the command that registers (the agent's tool call, a job)
	Revision string      // optional: the host's revision of the task the file is bound to
	Entities []EntityRef // optional: the host's records the delivery belongs to; at most 16
}

// maxEntities bounds Binding.Entities.
const maxEntities = 16

func (b Binding) check() error {
	for _, id := range []struct{ name, v string }{{"task id", b.TaskID}, {"run id", b.RunID}} {
		if err := checkID(id.name, id.v); err != nil {
			return err
		}
	}
	for _, id := range []struct{ name, v string }{{"Binding.Command", b.Command}, {"Binding.Revision", b.Revision}} {
		if id.v == "" {
			continue
		}
		if err := checkID(id.name, id.v); err != nil {
			return err
		}
	}
	if len(b.Entities) > maxEntities {
		return fmt.Errorf("Binding.Entities has %d references; the limit is %d", len(b.Entities), maxEntities)
	}
	for i, e := range b.Entities {
		if err := checkID(fmt.Sprintf("Binding.Entities[%d].Type", i), e.Type); err != nil {
			return err
		}
		if err := checkID(fmt.Sprintf("Binding.Entities[%d].ID", i), e.ID); err != nil {
			return err
		}
	}
	return nil
}

// bindReceipt completes a receipt a Store returned: the artifact work
// product's id when the Store left it out.
func bindReceipt(rc Receipt) Receipt {
	if rc.WorkProductID == "" {
		rc.WorkProductID = rc.AttachmentID
	}
	return rc
}

// entryReceipt is receiptFor plus what e carries of the host's binding and
// the attachment's artifact work product: what a Store returns and keeps.
func entryReceipt(a Attachment, d Disposition, e Entry) Receipt {
	rc := receiptFor(a, d)
	rc.Command, rc.Revision, rc.EntityRefs = e.Command, e.Revision, e.Entities
	rc.WorkProductID = ArtifactWorkProduct(a).ID
	return rc
}

// EntityRefs is a list of EntityRef that keeps Receipt comparable with ==:
// it holds the list's canonical JSON. Its JSON form is the array of
// {"type","id"} objects; the zero value is the empty list.
type EntityRefs struct{ enc string }

// NewEntityRefs returns the list refs (nil or empty: the zero value).
func NewEntityRefs(refs ...EntityRef) EntityRefs {
	if len(refs) == 0 {
		return EntityRefs{}
	}
	var b strings.Builder
	b.WriteByte('[')
	for i, r := range refs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"type":` + jsonString(r.Type) + `,"id":` + jsonString(r.ID) + `}`)
	}
	b.WriteByte(']')
	return EntityRefs{enc: b.String()}
}

// List returns the references, nil for none.
func (e EntityRefs) List() []EntityRef {
	if e.enc == "" {
		return nil
	}
	var out []EntityRef
	if err := json.Unmarshal([]byte(e.enc), &out); err != nil {
		panic(fmt.Sprintf("deliverable: EntityRefs holds %q: %v", e.enc, err)) // built by NewEntityRefs or UnmarshalJSON only
	}
	return out
}

// IsZero reports whether the list is empty (for omitzero).
func (e EntityRefs) IsZero() bool { return e.enc == "" }

// MarshalJSON returns the JSON array ([] for none).
func (e EntityRefs) MarshalJSON() ([]byte, error) {
	if e.enc == "" {
		return []byte("[]"), nil
	}
	return []byte(e.enc), nil
}

// UnmarshalJSON reads a JSON array of {"type","id"} objects, or null.
func (e *EntityRefs) UnmarshalJSON(data []byte) error {
	var refs []EntityRef
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&refs); err != nil {
		return fmt.Errorf("%w: entity references: %w", ErrInvalidRequest, err)
	}
	*e = NewEntityRefs(refs...)
	return nil
}

// RecordWorkspaceFile records a workspace_file work product: a file that
// stays in a workspace, named by ref (see WorkspaceRef), for the task and
// run of b. It is a signpost for the user and for a code-fix completion
// (ValidateEvidence accepts it as a citation when the objective asks for no
// file); it stores no bytes and never delivers a requested file. Its id is
// fresh; the work product is returned. Registrar.Store must implement
// WorkProductRecorder (FileStore does). Errors are *HostError values, but
// an invalid ref, which wraps ErrInvalidRequest or ErrPathDenied.
func (r *Registrar) RecordWorkspaceFile(ctx context.Context, b Binding, ref WorkspaceRef, title string) (WorkProduct, error) {
	rec, ok := r.Store.(WorkProductRecorder)
	if !ok {
		return WorkProduct{}, hostErr("record workspace file", fmt.Errorf("Registrar.Store (%T) does not implement WorkProductRecorder; use a FileStore or implement RecordWorkProduct", r.Store))
	}
	if err := b.check(); err != nil {
		return WorkProduct{}, hostErr("record workspace file", err)
	}
	wp, err := WorkspaceFileWorkProduct(newUUID(), b.TaskID, b.RunID, title, ref)
	if err != nil {
		return WorkProduct{}, err
	}
	if err := rec.RecordWorkProduct(ctx, wp); err != nil {
		return WorkProduct{}, hostErr("record workspace file", err)
	}
	return wp, nil
}
