package deliverable_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable"
)

// wpTasks is a host's Tasks that also serves work products from the store.
type wpTasks struct{ storeTasks }

func (w wpTasks) WorkProduct(ctx context.Context, id string) (deliverable.WorkProduct, error) {
	return w.store.WorkProduct(ctx, id)
}

func issueRef(t *testing.T, rel string, line int) deliverable.WorkspaceRef {
	t.Helper()
	r, err := deliverable.NewWorkspaceRef(deliverable.WorkspaceRef{IssueID: "I1", WorkspaceKind: deliverable.ExecutionWorkspace, WorkspaceID: "E1", RelativePath: rel, Line: line})
	require.NoError(t, err)
	return r
}

func TestRecordWorkspaceFile(t *testing.T) {
	f := newFixture(t)
	b := deliverable.Binding{TaskID: "T", RunID: "R"}
	ref := issueRef(t, "./src//parser.go", 42)
	wp, err := f.reg.RecordWorkspaceFile(t.Context(), b, ref, "")
	require.NoError(t, err)
	assert.Regexp(t, uuidV4, wp.ID)
	assert.Equal(t, deliverable.WorkProductWorkspaceFile, wp.Type)
	assert.Equal(t, deliverable.Provider, wp.Provider)
	assert.Equal(t, "src/parser.go:42", wp.Title, "the title defaults to the display path")
	assert.Equal(t, `{"kind":"workspace_file","issueId":"I1","workspaceKind":"execution_workspace","workspaceId":"E1","relativePath":"src/parser.go","line":42,"displayPath":"src/parser.go:42"}`,
		string(wp.Metadata))
	back, err := wp.WorkspaceRef()
	require.NoError(t, err)
	assert.Equal(t, ref, back)

	got, err := f.store.WorkProduct(t.Context(), strings.ToUpper(wp.ID))
	require.NoError(t, err)
	assert.Equal(t, wp, got)
	assert.Equal(t, "work_product:"+wp.ID, got.Citation())

	// Recording it again is a no-op; another under its id is a conflict.
	require.NoError(t, f.store.RecordWorkProduct(t.Context(), wp))
	other, err := deliverable.WorkspaceFileWorkProduct(wp.ID, "T", "R", "other", issueRef(t, "b.go", 0))
	require.NoError(t, err)
	require.ErrorIs(t, f.store.RecordWorkProduct(t.Context(), other), deliverable.ErrIdempotencyConflict)
	// A non-canonical record is refused.
	bad := wp
	bad.Metadata = json.RawMessage(`{"kind":"workspace_file","relativePath":"src/parser.go","issueId":"I1","workspaceKind":"execution_workspace","workspaceId":"E1","line":42,"displayPath":"src/parser.go:42"}`)
	require.ErrorIs(t, f.store.RecordWorkProduct(t.Context(), bad), deliverable.ErrInvalidRequest)

	_, err = f.store.WorkProduct(t.Context(), "00000000-0000-4000-8000-000000000000")
	require.ErrorIs(t, err, deliverable.ErrNotFound)

	// A store that cannot record them says so, as the host's error.
	reg := &deliverable.Registrar{Store: plainStore{f.store}}
	_, err = reg.RecordWorkspaceFile(t.Context(), b, ref, "")
	he := requireHostError(t, err)
	assert.Contains(t, he.Error(), "does not implement WorkProductRecorder")
}

// plainStore hides FileStore's optional interfaces.
type plainStore struct{ deliverable.Store }

func TestArtifactWorkProductAndBinding(t *testing.T) {
	f := newFixture(t)
	data := []byte("%PDF-1.7")
	writeFile(t, f.ws, "r.pdf", data)
	req := requestFor("r.pdf", "k", data)
	req.ContentType = "application/pdf"
	b := deliverable.Binding{TaskID: "T", RunID: "R", Command: "cmd-1", Revision: "7", Entities: []deliverable.EntityRef{{Type: "issue", ID: "ISS-1"}}}
	rc, err := f.reg.RegisterFor(t.Context(), local(t, f.ws), b, req)
	require.NoError(t, err)
	assert.Equal(t, "cmd-1", rc.Command)
	assert.Equal(t, "7", rc.Revision)
	assert.Equal(t, b.Entities, rc.EntityRefs.List())
	assert.Equal(t, rc.AttachmentID, rc.WorkProductID)
	wp, err := f.store.WorkProduct(t.Context(), rc.WorkProductID)
	require.NoError(t, err)
	assert.Equal(t, deliverable.WorkProduct{ID: rc.AttachmentID, Type: "artifact", Provider: "airlock", TaskID: "T", RunID: "R", Title: "Results",
		Metadata: json.RawMessage(`{"attachmentId":"` + rc.AttachmentID + `","contentPath":"/api/attachments/` + rc.AttachmentID +
			`/content","downloadPath":"/api/attachments/` + rc.AttachmentID + `/content?download=1"}`)}, wp)
	raw, err := json.Marshal(rc)
	require.NoError(t, err)
	assert.Contains(t, string(raw), `"command":"cmd-1","revision":"7","entityRefs":[{"type":"issue","id":"ISS-1"}],"workProductId":"`+rc.AttachmentID+`"}`)
	var back deliverable.Receipt
	require.NoError(t, json.Unmarshal(raw, &back))
	assert.True(t, back == rc, "a receipt survives JSON and stays comparable")

	// A replay under other host ids returns the stored receipt.
	b2 := b
	b2.Command, b2.Revision, b2.Entities = "cmd-2", "8", nil
	again, err := f.reg.RegisterFor(t.Context(), local(t, f.ws), b2, req)
	require.NoError(t, err)
	assert.Equal(t, rc, again)

	for _, bad := range []deliverable.Binding{
		{TaskID: "T", RunID: "R", Command: " cmd"},
		{TaskID: "T", RunID: "R", Revision: "a\nb"},
		{TaskID: "T", RunID: "R", Entities: []deliverable.EntityRef{{Type: "", ID: "x"}}},
		{TaskID: "T", RunID: "R", Entities: make([]deliverable.EntityRef, 17)},
	} {
		_, err := f.reg.RegisterFor(t.Context(), local(t, f.ws), bad, req)
		requireHostError(t, err)
	}
}

func TestContentTypeAllowList(t *testing.T) {
	f := newFixture(t)
	f.reg.ContentTypes = deliverable.DeliverableContentTypes()
	data := []byte("MZ\x90\x00")
	writeFile(t, f.ws, "tool.exe", data)
	req := requestFor("tool.exe", "k", data)
	req.ContentType = "application/x-msdownload"
	_, err := f.reg.Register(t.Context(), local(t, f.ws), "T", "R", req)
	require.ErrorIs(t, err, deliverable.ErrContentTypeDenied)
	var re *deliverable.RequestError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, "contentType", re.Field)
	assert.True(t, strings.HasPrefix(re.Message, `register_deliverable: contentType "application/x-msdownload" is not accepted here; deliver the file in one of these types, converting it if needed: video/*, application/pdf, image/*,`), re.Message)

	for _, ct := range []string{"image/PNG", "video/mp4", "text/plain; charset=utf-8", "application/zip", "text/html",
		"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"} {
		req.ContentType, req.IdempotencyKey = ct, "k-"+ct
		_, err := f.reg.Register(t.Context(), local(t, f.ws), "T", "R", req)
		require.NoError(t, err, ct)
	}
	f.reg.ContentTypes = nil
	req.ContentType, req.IdempotencyKey = "application/x-msdownload", "k-any"
	_, err = f.reg.Register(t.Context(), local(t, f.ws), "T", "R", req)
	require.NoError(t, err, "no allow-list allows any media type")
}

// TestEvidenceWorkspaceFiles: a workspace_file work product is evidence of a
// code fix, never the delivery of a requested file.
func TestEvidenceWorkspaceFiles(t *testing.T) {
	f := newFixture(t)
	tasks := newMemTasks()
	tasks.addTask("T", "", deliverable.StatusInProgress)
	tasks.addTask("U", "", deliverable.StatusInProgress)
	host := wpTasks{storeTasks{memTasks: tasks, store: f.store}}
	wp, err := f.reg.RecordWorkspaceFile(t.Context(), deliverable.Binding{TaskID: "T", RunID: "R"}, issueRef(t, "src/parser.go", 0), "the fix")
	require.NoError(t, err)

	fix := deliverable.Evidence{TaskID: "T", RunID: "R", Objective: "Fix the crash when the configuration is empty.", Refs: []string{wp.Citation()}}
	require.NoError(t, deliverable.ValidateEvidence(t.Context(), host, fix))

	want := deliverable.Evidence{TaskID: "T", RunID: "R", Objective: "Write the summary as summary.md.", Refs: []string{wp.Citation()}}
	err = deliverable.ValidateEvidence(t.Context(), host, want)
	var ee *deliverable.EvidenceError
	require.ErrorAs(t, err, &ee)
	require.ErrorIs(t, err, deliverable.ErrEvidence)
	assert.Equal(t, []string{"summary.md"}, ee.Missing)
	assert.Equal(t, "The task asks for summary.md, but the completion cites no attachment registered for it on this task in run R; "+
		"a child task's file does not count. Use register_deliverable for summary.md and cite deliverable:<attachmentId> from its receipt. "+
		wp.Citation()+" (src/parser.go) names a file that stays in the workspace: it is a signpost, not an upload, and delivers no requested file.", ee.Message)

	// Another task's work product, an unknown one, a malformed one.
	other, err := f.reg.RecordWorkspaceFile(t.Context(), deliverable.Binding{TaskID: "U", RunID: "R"}, issueRef(t, "a.go", 0), "")
	require.NoError(t, err)
	for ref, detail := range map[string]string{
		other.Citation(): `it belongs to task "U"`,
		"work_product:00000000-0000-4000-8000-000000000000": "no such work product",
		"work_product:42":   "no such work product",
		"work_product:a\tb": `work product id "a\tb" contains the control character U+0009`,
	} {
		fix.Refs = []string{ref}
		err := deliverable.ValidateEvidence(t.Context(), host, fix)
		require.ErrorAs(t, err, &ee, ref)
		assert.Equal(t, detail, ee.Detail)
		assert.Equal(t, fmt.Sprintf("Completion cites %q, which is not a work product of this task. Cite this task's work products, "+
			"or use register_deliverable for a file and cite deliverable:<attachmentId> from its receipt.", ref), ee.Message)
	}

	// An artifact's work product is its attachment: it delivers the file.
	data := []byte("# Summary\n")
	writeFile(t, f.ws, "summary.md", data)
	req := requestFor("summary.md", "k", data)
	req.ContentType = "text/markdown"
	rc, err := f.reg.Register(t.Context(), local(t, f.ws), "T", "R", req)
	require.NoError(t, err)
	art, err := f.store.WorkProduct(t.Context(), rc.WorkProductID)
	require.NoError(t, err)
	want.Refs = []string{art.Citation()}
	assert.Equal(t, "deliverable:"+rc.AttachmentID, want.Refs[0])
	require.NoError(t, deliverable.ValidateEvidence(t.Context(), host, want))
	want.Refs = []string{"work_product:" + rc.AttachmentID, wp.Citation()}
	require.NoError(t, deliverable.ValidateEvidence(t.Context(), host, want))

	// The host's own kinds of work product are not judged here.
	pr := prTasks{host}
	fix.Refs = []string{"work_product:PR-7"}
	require.NoError(t, deliverable.ValidateEvidence(t.Context(), pr, fix))
	want.Refs = []string{"work_product:PR-7"}
	require.ErrorAs(t, deliverable.ValidateEvidence(t.Context(), pr, want), &ee)
	assert.Equal(t, []string{"summary.md"}, ee.Missing)

	// Without WorkProducts, such citations are ignored, as before.
	fix.Refs = []string{"work_product:42"}
	require.NoError(t, deliverable.ValidateEvidence(t.Context(), storeTasks{memTasks: tasks, store: f.store}, fix))
}

// prTasks also knows the host's own pull-request work products.
type prTasks struct{ wpTasks }

func (p prTasks) WorkProduct(ctx context.Context, id string) (deliverable.WorkProduct, error) {
	if id == "PR-7" {
		return deliverable.WorkProduct{ID: id, Type: "pull_request", Provider: "github", TaskID: "T"}, nil
	}
	return p.wpTasks.WorkProduct(ctx, id)
}
