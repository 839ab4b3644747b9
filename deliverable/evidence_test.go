package deliverable_test

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable"
)

const (
	idOwn        = "10000000-0000-4000-8000-000000000001" // on P, run R, output.json
	idOwnOldRun  = "10000000-0000-4000-8000-000000000002" // on P, run R0, output.json
	idOwnOther   = "10000000-0000-4000-8000-000000000003" // on P, run R, notes.txt
	idDoneChild  = "20000000-0000-4000-8000-000000000001" // on C-done, output.json
	idBusyChild  = "20000000-0000-4000-8000-000000000002" // on C-progress
	idBlocked    = "20000000-0000-4000-8000-000000000003" // on C-blocked
	idCancelled  = "20000000-0000-4000-8000-000000000004" // on C-cancelled
	idGrandchild = "30000000-0000-4000-8000-000000000001" // on G (child of C-done), done
	idUnrelated  = "40000000-0000-4000-8000-000000000001" // on U
	idGhostTask  = "40000000-0000-4000-8000-000000000002" // on a task that does not exist
	idUnknown    = "50000000-0000-4000-8000-000000000001" // no such attachment

	objNone    = "Explain how a newsletter works."
	objNamed   = "Write the parsed records to output.json."
	objUnnamed = "Export the results as a CSV."
)

func evidenceTasks() *memTasks {
	m := newMemTasks()
	m.addTask("P", "", deliverable.StatusInProgress)
	m.addTask("C-done", "P", deliverable.StatusDone)
	m.addTask("C-progress", "P", deliverable.StatusInProgress)
	m.addTask("C-blocked", "P", deliverable.StatusBlocked)
	m.addTask("C-cancelled", "P", deliverable.StatusCancelled)
	m.addTask("G", "C-done", deliverable.StatusDone)
	m.addTask("U", "X", deliverable.StatusDone)
	for _, a := range []deliverable.Attachment{
		{ID: idOwn, TaskID: "P", RunID: "R", Filename: "output.json"},
		{ID: idOwnOldRun, TaskID: "P", RunID: "R0", Filename: "output.json"},
		{ID: idOwnOther, TaskID: "P", RunID: "R", Filename: "notes.txt"},
		{ID: idDoneChild, TaskID: "C-done", RunID: "RC", Filename: "output.json"},
		{ID: idBusyChild, TaskID: "C-progress", RunID: "RC", Filename: "output.json"},
		{ID: idBlocked, TaskID: "C-blocked", RunID: "RC", Filename: "output.json"},
		{ID: idCancelled, TaskID: "C-cancelled", RunID: "RC", Filename: "output.json"},
		{ID: idGrandchild, TaskID: "G", RunID: "RG", Filename: "output.json"},
		{ID: idUnrelated, TaskID: "U", RunID: "RU", Filename: "output.json"},
		{ID: idGhostTask, TaskID: "ghost", RunID: "RX", Filename: "output.json"},
	} {
		a.ContentType, a.SHA256, a.ByteSize = "application/json", strings.Repeat("a", 64), 1
		m.addAttachment(a)
	}
	return m
}

func cite(id string) string { return "deliverable:" + id }

func TestValidateEvidence(t *testing.T) {
	const (
		ok       = ""
		rejected = "rejected"
		local    = "local"
		missing  = "missing"
	)
	cases := []struct {
		name      string
		objective string
		refs      []string
		want      string
		cited     string   // for rejected: the attachment id in the error
		missing   []string // for missing
	}{
		{"on the task, deliverable form", objNone, []string{cite(idOwn)}, ok, "", nil},
		{"on the task, path form", objNone, []string{"/api/attachments/" + idOwn + "/content"}, ok, "", nil},
		{"on the task, path form with query and spaces", objNone, []string{"  /api/attachments/" + idOwn + "/content?download=1 \n"}, ok, "", nil},
		{"on the task, upper-case id", objNone, []string{"Deliverable:" + strings.ToUpper(idOwn)}, ok, "", nil},
		{"on the task from an earlier run", objNone, []string{cite(idOwnOldRun)}, ok, "", nil},
		{"on a done child", objNone, []string{cite(idDoneChild)}, ok, "", nil},
		{"child in progress", objNone, []string{cite(idOwn), cite(idBusyChild)}, rejected, idBusyChild, nil},
		{"child blocked", objNone, []string{cite(idBlocked)}, rejected, idBlocked, nil},
		{"child cancelled", objNone, []string{cite(idCancelled)}, rejected, idCancelled, nil},
		{"grandchild, done", objNone, []string{cite(idGrandchild)}, rejected, idGrandchild, nil},
		{"unrelated task", objNone, []string{cite(idUnrelated)}, rejected, idUnrelated, nil},
		{"task that does not exist", objNone, []string{cite(idGhostTask)}, rejected, idGhostTask, nil},
		{"unknown id, deliverable form", objNone, []string{cite(idUnknown)}, rejected, idUnknown, nil},
		{"unknown id, path form", objNone, []string{"/api/attachments/" + idUnknown + "/content"}, rejected, idUnknown, nil},
		{"malformed id", objNone, []string{"deliverable:report.pdf"}, rejected, "", nil},
		{"malformed path citation", objNone, []string{"/api/attachments/" + idOwn + "/raw"}, rejected, "", nil},
		{"relative file", objNone, []string{"./output.json"}, local, "", nil},
		{"absolute file", objNone, []string{"/workspace/output.json"}, local, "", nil},
		{"file scheme", objNone, []string{"file:output.json"}, local, "", nil},
		{"bare filename", objNone, []string{"report.pdf"}, local, "", nil},
		{"file with line", objNone, []string{"notes.md:12"}, local, "", nil},
		{"file with line and column", objNone, []string{"src/main.go:12:3"}, local, "", nil},
		{"nested file", objNone, []string{"dist/index.html"}, local, "", nil},
		{"home file", objNone, []string{"~/out.csv"}, local, "", nil},
		{"windows file", objNone, []string{`C:\out\report.pdf`}, local, "", nil},
		{"dotfile", objNone, []string{".env"}, local, "", nil},
		{"file scheme with a domain-like name", objNone, []string{"file:example.com"}, local, "", nil},
		{"relative domain-like name", objNone, []string{"./go.dev"}, local, "", nil},
		{"bare domains and framework names are ignored", objNone, []string{
			"example.com", "go.dev", "bit.ly", "docs.rs", "node.js", "Node.js:3", "EXAMPLE.COM", "v1.2.3",
		}, ok, "", nil},
		{"URL, work product and prose are ignored", objNone, []string{
			"https://example.com/report.pdf", "work_product:42", "see the summary above", "v1.2", "PR #12", "",
		}, ok, "", nil},
		{"no refs, nothing requested", objNone, nil, ok, "", nil},
		{"named file delivered", objNamed, []string{cite(idOwn)}, ok, "", nil},
		{"named file delivered, child file as context", objNamed, []string{cite(idDoneChild), cite(idOwn)}, ok, "", nil},
		{"named file with only the child's file", objNamed, []string{cite(idDoneChild)}, missing, "", []string{"output.json"}},
		{"named file from an earlier run", objNamed, []string{cite(idOwnOldRun)}, missing, "", []string{"output.json"}},
		{"named file under another name", objNamed, []string{cite(idOwnOther)}, missing, "", []string{"output.json"}},
		{"named file, no refs", objNamed, nil, missing, "", []string{"output.json"}},
		{"named file, only a URL", objNamed, []string{"https://example.com/output.json"}, missing, "", []string{"output.json"}},
		{"a file requested, own attachment", objUnnamed, []string{cite(idOwnOther)}, ok, "", nil},
		{"a file requested, only the child's", objUnnamed, []string{cite(idDoneChild)}, missing, "", []string{"a file"}},
		{"a file requested, none cited", objUnnamed, nil, missing, "", []string{"a file"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := deliverable.ValidateEvidence(t.Context(), evidenceTasks(), deliverable.Evidence{
				TaskID: "P", RunID: "R", Objective: tc.objective, Refs: tc.refs,
			})
			if tc.want == ok {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, deliverable.ErrEvidence)
			var ee *deliverable.EvidenceError
			require.ErrorAs(t, err, &ee)
			switch tc.want {
			case rejected:
				assert.Equal(t, deliverable.RejectedCitationMessage, ee.Message)
				assert.Equal(t, deliverable.RejectedCitationMessage, err.Error())
				assert.NotEmpty(t, ee.Detail)
				assert.Equal(t, tc.cited, ee.AttachmentID)
			case local:
				assert.Equal(t, tc.refs[0], ee.Ref)
				assert.Contains(t, ee.Message, "a workspace file, not a registered attachment")
				assert.Contains(t, ee.Message, "register_deliverable")
			case missing:
				assert.Equal(t, tc.missing, ee.Missing)
				assert.Contains(t, ee.Message, "register_deliverable")
				assert.Contains(t, ee.Message, tc.missing[0])
			}
		})
	}
}

func TestValidateEvidenceBoundsCitations(t *testing.T) {
	m := evidenceTasks()
	var refs []string
	for i := range 257 {
		refs = append(refs, cite(fmt.Sprintf("60000000-0000-4000-8000-%012d", i)))
	}
	err := deliverable.ValidateEvidence(t.Context(), m, deliverable.Evidence{TaskID: "P", RunID: "R", Refs: refs})
	assert.ErrorIs(t, err, deliverable.ErrEvidence)
	assert.ErrorContains(t, err, "at most 256")
	assert.Zero(t, m.reads, "nothing is read for an oversized report")
}

func TestValidateEvidenceRejectedMessageIsExact(t *testing.T) {
	err := deliverable.ValidateEvidence(t.Context(), evidenceTasks(), deliverable.Evidence{
		TaskID: "P", RunID: "R", Refs: []string{cite(idGrandchild)},
	})
	require.ErrorIs(t, err, deliverable.ErrEvidence)
	assert.Equal(t, "Completion cites no registered attachment on this task or its completed child tasks. "+
		"Use register_deliverable for the requested file and cite deliverable:<attachmentId> from its receipt.", deliverable.RejectedCitationMessage)
	var ee *deliverable.EvidenceError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, deliverable.RejectedCitationMessage, err.Error())
	assert.Contains(t, ee.Detail, idGrandchild)
}

func TestValidateEvidenceHostFailures(t *testing.T) {
	ctx := t.Context()
	m := evidenceTasks()
	m.failWith = errInjected
	err := deliverable.ValidateEvidence(ctx, m, deliverable.Evidence{TaskID: "P", RunID: "R", Refs: []string{cite(idOwn)}})
	assert.ErrorIs(t, err, errInjected)
	assert.NotErrorIs(t, err, deliverable.ErrEvidence, "a failing host is not a rejected citation")

	requireHostError(t, err)

	err = deliverable.ValidateEvidence(ctx, nil, deliverable.Evidence{TaskID: "P", RunID: "R"})
	requireHostError(t, err)
	assert.EqualError(t, err, "deliverable: validate evidence: tasks is nil")
	err = deliverable.ValidateEvidence(ctx, evidenceTasks(), deliverable.Evidence{RunID: "R"})
	requireHostError(t, err)
	assert.EqualError(t, err, "deliverable: validate evidence: field TaskID of Evidence is empty")
	err = deliverable.ValidateEvidence(ctx, evidenceTasks(), deliverable.Evidence{TaskID: "P", RunID: " "})
	requireHostError(t, err)
	assert.EqualError(t, err, "deliverable: validate evidence: field RunID of Evidence is empty")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	err = deliverable.ValidateEvidence(cancelled, evidenceTasks(), deliverable.Evidence{TaskID: "P", RunID: "R", Refs: []string{cite(idOwn)}})
	assert.ErrorIs(t, err, context.Canceled)
	requireHostError(t, err)
}

// A host whose store reports an unknown id with fs.ErrNotExist (os, afero
// and many stores do) gets the same rejection as with ErrNotFound, not a
// host failure.
func TestValidateEvidenceNotExistIsNotFound(t *testing.T) {
	for _, tc := range []struct {
		name string
		id   string
	}{
		{"unknown attachment", idUnknown},
		{"attachment on a task that does not exist", idGhostTask},
	} {
		for _, locking := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, locker %v", tc.name, locking), func(t *testing.T) {
				m := evidenceTasks()
				m.notExist = true
				var tasks deliverable.Tasks = m
				if locking {
					tasks = &lockingTasks{memTasks: m}
				}
				err := deliverable.ValidateEvidence(t.Context(), tasks, deliverable.Evidence{
					TaskID: "P", RunID: "R", Refs: []string{cite(tc.id)},
				})
				require.ErrorIs(t, err, deliverable.ErrEvidence)
				assert.NotErrorIs(t, err, fs.ErrNotExist, "the host's error is not passed on as a failure")
				var ee *deliverable.EvidenceError
				require.ErrorAs(t, err, &ee)
				assert.Equal(t, deliverable.RejectedCitationMessage, err.Error())
				assert.Equal(t, tc.id, ee.AttachmentID)
				assert.Equal(t, cite(tc.id), ee.Ref)
			})
		}
	}
}

func TestValidateEvidenceLocks(t *testing.T) {
	ctx := t.Context()
	ev := deliverable.Evidence{TaskID: "P", RunID: "R", Objective: objNamed, Refs: []string{cite(idOwn), cite(idDoneChild), cite(idOwn)}}

	t.Run("holds the lock for the whole check", func(t *testing.T) {
		lt := &lockingTasks{memTasks: evidenceTasks()}
		require.NoError(t, deliverable.ValidateEvidence(ctx, lt, ev))
		require.Len(t, lt.calls, 1)
		assert.Equal(t, []string{"C-done", "P"}, lt.calls[0][0], "the task and the child that owns a cited attachment")
		assert.Equal(t, []string{idOwn, idDoneChild}, lt.calls[0][1])
		assert.Equal(t, 1, lt.unlocks)
		assert.Equal(t, 3, lt.readsHeld, "both attachments and the child are read under the lock")
	})
	t.Run("busy lock is retryable", func(t *testing.T) {
		lt := &lockingTasks{memTasks: evidenceTasks(), lockErr: fmt.Errorf("FOR SHARE NOWAIT: %w", deliverable.ErrBusy)}
		err := deliverable.ValidateEvidence(ctx, lt, ev)
		assert.ErrorIs(t, err, deliverable.ErrBusy)
		assert.NotErrorIs(t, err, deliverable.ErrEvidence)
	})
	t.Run("other lock failures are returned", func(t *testing.T) {
		lt := &lockingTasks{memTasks: evidenceTasks(), lockErr: errInjected}
		err := deliverable.ValidateEvidence(ctx, lt, ev)
		assert.ErrorIs(t, err, errInjected)
		assert.NotErrorIs(t, err, deliverable.ErrEvidence)
	})
	t.Run("a child reopened before the lock was taken is read under it", func(t *testing.T) {
		lt := &lockingTasks{memTasks: evidenceTasks()}
		lt.onLock = func() { lt.addTask("C-done", "P", deliverable.StatusInProgress) }
		err := deliverable.ValidateEvidence(ctx, lt, ev)
		var ee *deliverable.EvidenceError
		require.ErrorAs(t, err, &ee)
		assert.Equal(t, idDoneChild, ee.AttachmentID)
		assert.Equal(t, 1, lt.unlocks)
	})
	t.Run("an attachment that moved to an unlocked task", func(t *testing.T) {
		lt := &lockingTasks{memTasks: evidenceTasks()}
		lt.onLock = func() {
			lt.addAttachment(deliverable.Attachment{ID: idDoneChild, TaskID: "C-progress", RunID: "RC", Filename: "output.json"})
		}
		err := deliverable.ValidateEvidence(ctx, lt, ev)
		assert.ErrorIs(t, err, deliverable.ErrBusy)
		assert.Equal(t, 1, lt.unlocks)
	})
	t.Run("unknown ids are locked and rejected", func(t *testing.T) {
		lt := &lockingTasks{memTasks: evidenceTasks()}
		err := deliverable.ValidateEvidence(ctx, lt, deliverable.Evidence{TaskID: "P", RunID: "R", Refs: []string{cite(idUnknown)}})
		assert.ErrorIs(t, err, deliverable.ErrEvidence)
		require.Len(t, lt.calls, 1)
		assert.Equal(t, []string{"P"}, lt.calls[0][0])
		assert.Equal(t, []string{idUnknown}, lt.calls[0][1])
	})
	t.Run("nothing cited, nothing locked", func(t *testing.T) {
		lt := &lockingTasks{memTasks: evidenceTasks()}
		require.NoError(t, deliverable.ValidateEvidence(ctx, lt, deliverable.Evidence{TaskID: "P", RunID: "R", Objective: objNone}))
		assert.Empty(t, lt.calls)
	})
}

func TestValidateEvidenceWithRegisteredFiles(t *testing.T) {
	// End to end: the parent registers nothing itself, a done child registered
	// output.json; the parent's own request names output.json.
	f := newFixture(t)
	data := []byte(`{"ok":true}`)
	writeFile(t, f.ws, "output.json", data)
	req := requestFor("output.json", "k", data)
	req.ContentType = "application/json"
	child, err := f.reg.Register(t.Context(), local(t, f.ws), "C", "RC", req)
	require.NoError(t, err)

	tasks := newMemTasks()
	tasks.addTask("P", "", deliverable.StatusInProgress)
	tasks.addTask("C", "P", deliverable.StatusDone)
	hosted := storeTasks{memTasks: tasks, store: f.store}

	ev := deliverable.Evidence{TaskID: "P", RunID: "RP", Objective: objNamed, Refs: []string{cite(child.AttachmentID)}}
	err = deliverable.ValidateEvidence(t.Context(), hosted, ev)
	var ee *deliverable.EvidenceError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, []string{"output.json"}, ee.Missing)

	own, err := f.reg.Register(t.Context(), local(t, f.ws), "P", "RP", req)
	require.NoError(t, err)
	ev.Refs = append(ev.Refs, own.DownloadPath)
	assert.NoError(t, deliverable.ValidateEvidence(t.Context(), hosted, ev))
}

// storeTasks serves attachments from a FileStore, as a host would.
type storeTasks struct {
	*memTasks
	store *deliverable.FileStore
}

func (s storeTasks) Attachment(ctx context.Context, id string) (deliverable.Attachment, error) {
	return s.store.Attachment(ctx, id)
}

func TestParseCitation(t *testing.T) {
	const id = "0f8fad5b-d9cb-469f-a165-70867728950e"
	cases := []struct {
		ref    string
		wantID string
		ok     bool
	}{
		{"deliverable:" + id, id, true},
		{"  deliverable:" + id + "\t", id, true},
		{"DELIVERABLE:" + strings.ToUpper(id), id, true},
		{"deliverable:" + id + "#x", id, true},
		{"/api/attachments/" + id + "/content", id, true},
		{"/api/attachments/" + strings.ToUpper(id) + "/content?download=1", id, true},
		{"/api/attachments/" + id + "/content#page=2", id, true},
		{"deliverable: " + id, "", false},
		{"deliverable:" + id[:35], "", false},
		{"deliverable:" + id + "0", "", false},
		{"deliverable:" + strings.ReplaceAll(id, "-", "_"), "", false},
		{"deliverable:g" + id[1:], "", false},
		{"/api/attachments/" + id, "", false},
		{"/api/attachments/" + id + "/content/", "", false},
		{"/api/attachments/" + id + "/contents", "", false},
		{"/API/attachments/" + id + "/content", "", false},
		{"https://host/api/attachments/" + id + "/content", "", false},
		{"attachment:" + id, "", false},
		{"example.com", "", false},
		{"docs.rs", "", false},
		{"report.md:12", "", false},
		{id, "", false},
		{"", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.ref, func(t *testing.T) {
			got, ok := deliverable.ParseCitation(tc.ref)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.wantID, got)
		})
	}
}

func FuzzParseCitation(f *testing.F) {
	for _, s := range []string{
		"deliverable:0f8fad5b-d9cb-469f-a165-70867728950e",
		"/api/attachments/0F8FAD5B-D9CB-469F-A165-70867728950E/content?download=1",
		"deliverable:", "/api/attachments//content", "x.pdf", " \t",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ref string) {
		id, ok := deliverable.ParseCitation(ref)
		if !ok {
			if id != "" {
				t.Fatalf("ParseCitation(%q) = %q, false", ref, id)
			}
			return
		}
		if id != strings.ToLower(id) || len(id) != 36 {
			t.Fatalf("ParseCitation(%q) = %q: not a lowercase UUID", ref, id)
		}
		for _, form := range []string{"deliverable:" + id, "/api/attachments/" + id + "/content"} {
			if again, ok := deliverable.ParseCitation(form); !ok || again != id {
				t.Fatalf("round trip of %q through %q gave %q, %v", ref, form, again, ok)
			}
		}
		if again, _ := deliverable.ParseCitation(ref); again != id {
			t.Fatalf("ParseCitation(%q) is not deterministic", ref)
		}
	})
}
