package deliverable_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable"
)

// taskFixture is a FileStore on the host's disk with its FileTasks and a
// workspace to register files from.
type taskFixture struct {
	dir   string
	store *deliverable.FileStore
	tasks *deliverable.FileTasks
	reg   *deliverable.Registrar
	ws    string
}

func newTaskFixture(t *testing.T) *taskFixture {
	t.Helper()
	f := &taskFixture{dir: filepath.Join(t.TempDir(), "state", "attachments"), ws: t.TempDir()}
	var err error
	f.store, err = deliverable.OpenFileStore(f.dir)
	require.NoError(t, err)
	f.tasks = f.store.Tasks()
	f.reg = &deliverable.Registrar{Store: f.store}
	return f
}

func (f *taskFixture) put(t *testing.T, r deliverable.TaskRecord) {
	t.Helper()
	require.NoError(t, f.tasks.Put(t.Context(), r))
}

// register registers rel (written with data) for task and run and
// returns its citation.
func (f *taskFixture) register(t *testing.T, task, run, rel string, data []byte) string {
	t.Helper()
	writeFile(t, f.ws, rel, data)
	rc, err := f.reg.Register(t.Context(), local(t, f.ws), task, run, requestFor(rel, task+"/"+rel, data))
	require.NoError(t, err)
	return "deliverable:" + rc.AttachmentID
}

func TestFileTasksRecords(t *testing.T) {
	f := newTaskFixture(t)
	ctx := t.Context()
	f.put(t, deliverable.TaskRecord{ID: "P", Objective: objNamed})
	f.put(t, deliverable.TaskRecord{ID: "C", ParentID: "P", Status: deliverable.StatusInProgress, Objective: "line one\nline two"})

	got, err := f.tasks.Record(ctx, "P")
	require.NoError(t, err)
	assert.Equal(t, deliverable.TaskRecord{ID: "P", Status: deliverable.StatusTodo, Objective: objNamed}, got, "an empty status is todo")
	task, err := f.tasks.Task(ctx, "C")
	require.NoError(t, err)
	assert.Equal(t, deliverable.Task{ID: "C", ParentID: "P", Status: deliverable.StatusInProgress}, task)

	require.NoError(t, f.tasks.SetStatus(ctx, "C", deliverable.StatusDone))
	// Another process (a new store on the directory) reads what was recorded.
	again, err := deliverable.OpenFileStore(f.dir)
	require.NoError(t, err)
	got, err = again.Tasks().Record(ctx, "C")
	require.NoError(t, err)
	assert.Equal(t, deliverable.TaskRecord{ID: "C", ParentID: "P", Status: deliverable.StatusDone, Objective: "line one\nline two"}, got)

	// Put replaces.
	f.put(t, deliverable.TaskRecord{ID: "C", Status: deliverable.StatusBlocked})
	task, err = f.tasks.Task(ctx, "C")
	require.NoError(t, err)
	assert.Equal(t, deliverable.Task{ID: "C", Status: deliverable.StatusBlocked}, task)

	for _, id := range []string{"nope", "", " P"} {
		_, err = f.tasks.Task(ctx, id)
		assert.ErrorIs(t, err, deliverable.ErrNotFound, "%q", id)
	}
	assert.ErrorIs(t, f.tasks.SetStatus(ctx, "nope", deliverable.StatusDone), deliverable.ErrNotFound)
	assert.ErrorIs(t, f.tasks.SetStatus(ctx, "C", "finished"), deliverable.ErrInvalidRequest)
	_, err = f.tasks.Task(ctx, "nope")
	assert.ErrorIs(t, err, deliverable.ErrNotFound, "SetStatus of an unknown task creates none")
}

func TestFileTasksRejectsBadRecords(t *testing.T) {
	f := newTaskFixture(t)
	for _, r := range []deliverable.TaskRecord{
		{ID: ""},
		{ID: " padded"},
		{ID: "a\nb"},
		{ID: strings.Repeat("x", 257)},
		{ID: "T", ParentID: "T"},
		{ID: "T", ParentID: "bad\x00parent"},
		{ID: "T", Status: "finished"},
		{ID: "T", Objective: "bad \xff UTF-8"},
		{ID: "T", Objective: strings.Repeat("x", 1<<20+1)},
	} {
		err := f.tasks.Put(t.Context(), r)
		assert.ErrorIs(t, err, deliverable.ErrInvalidRequest, "%+.40v", r)
	}
	ents, err := os.ReadDir(filepath.Join(f.dir, "tasks"))
	require.NoError(t, err)
	assert.Empty(t, ents, "a rejected record writes nothing")
}

func TestFileTasksValidateEvidence(t *testing.T) {
	f := newTaskFixture(t)
	f.put(t, deliverable.TaskRecord{ID: "P", Status: deliverable.StatusInProgress, Objective: objNamed})
	f.put(t, deliverable.TaskRecord{ID: "C-done", ParentID: "P", Status: deliverable.StatusDone})
	f.put(t, deliverable.TaskRecord{ID: "C-busy", ParentID: "P", Status: deliverable.StatusInProgress})
	f.put(t, deliverable.TaskRecord{ID: "G", ParentID: "C-done", Status: deliverable.StatusDone})
	own := f.register(t, "P", "R", "output.json", []byte(`{"own":1}`))
	done := f.register(t, "C-done", "RC", "child.csv", []byte("a,b\n"))
	busy := f.register(t, "C-busy", "RC", "busy.csv", []byte("c,d\n"))
	grand := f.register(t, "G", "RG", "grand.csv", []byte("e,f\n"))
	ghost := f.register(t, "ghost", "RX", "ghost.csv", []byte("g,h\n"))

	ev := func(refs ...string) deliverable.Evidence {
		return deliverable.Evidence{TaskID: "P", RunID: "R", Objective: objNamed, Refs: refs}
	}
	assert.NoError(t, deliverable.ValidateEvidence(t.Context(), f.tasks, ev(own)))
	assert.NoError(t, deliverable.ValidateEvidence(t.Context(), f.tasks, ev(own, done)))
	wp := "work_product:" + strings.TrimPrefix(own, "deliverable:")
	assert.NoError(t, deliverable.ValidateEvidence(t.Context(), f.tasks, ev(wp)), "an artifact's work product cites its attachment")
	for name, refs := range map[string][]string{
		"child not done": {own, busy},
		"grandchild":     {own, grand},
		"unknown task":   {own, ghost},
		"child alone":    {done},
	} {
		var ee *deliverable.EvidenceError
		require.ErrorAs(t, deliverable.ValidateEvidence(t.Context(), f.tasks, ev(refs...)), &ee, name)
	}

	// An Evidence without its objective is judged by the recorded one: it
	// names output.json, so a completion citing nothing is refused, and
	// one citing the file passes.
	bare := deliverable.Evidence{TaskID: "P", RunID: "R"}
	var ee *deliverable.EvidenceError
	require.ErrorAs(t, deliverable.ValidateEvidence(t.Context(), f.tasks, bare), &ee)
	assert.Equal(t, []string{"output.json"}, ee.Missing)
	bare.Refs = []string{own}
	assert.NoError(t, deliverable.ValidateEvidence(t.Context(), f.tasks, bare))
	// A task that is not recorded is the host's failure, not a pass.
	err := deliverable.ValidateEvidence(t.Context(), f.tasks, deliverable.Evidence{TaskID: "nobody", RunID: "R"})
	var he *deliverable.HostError
	require.ErrorAs(t, err, &he)
	assert.ErrorIs(t, err, deliverable.ErrNotFound)
}

func TestFileTasksComplete(t *testing.T) {
	f := newTaskFixture(t)
	ctx := t.Context()
	f.put(t, deliverable.TaskRecord{ID: "P", Status: deliverable.StatusInProgress, Objective: objNamed})
	f.put(t, deliverable.TaskRecord{ID: "C", ParentID: "P", Status: deliverable.StatusInProgress, Objective: "Write the changelog to CHANGES.md."})
	status := func(id string) deliverable.Status {
		task, err := f.tasks.Task(ctx, id)
		require.NoError(t, err)
		return task.Status
	}

	// The child's file does not count while the child is not done.
	child := f.register(t, "C", "RC", "CHANGES.md", []byte("- fixed\n"))
	own := f.register(t, "P", "RP", "output.json", []byte(`{"ok":true}`))
	var ee *deliverable.EvidenceError
	require.ErrorAs(t, f.tasks.Complete(ctx, deliverable.Evidence{TaskID: "P", RunID: "RP", Refs: []string{own, child}}), &ee)
	assert.Equal(t, deliverable.StatusInProgress, status("P"), "a rejected completion changes nothing")

	// The requested file missing: rejected with what is missing, from the recorded objective.
	require.ErrorAs(t, f.tasks.Complete(ctx, deliverable.Evidence{TaskID: "C", RunID: "RC"}), &ee)
	assert.Equal(t, []string{"CHANGES.md"}, ee.Missing)
	assert.Equal(t, deliverable.StatusInProgress, status("C"))

	require.NoError(t, f.tasks.Complete(ctx, deliverable.Evidence{TaskID: "C", RunID: "RC", Refs: []string{child}}))
	assert.Equal(t, deliverable.StatusDone, status("C"))
	require.NoError(t, f.tasks.Complete(ctx, deliverable.Evidence{TaskID: "P", RunID: "RP", Objective: objNamed, Refs: []string{own, child}}),
		"the done child's file is context now")
	assert.Equal(t, deliverable.StatusDone, status("P"))
	require.NoError(t, f.tasks.Complete(ctx, deliverable.Evidence{TaskID: "P", RunID: "RP", Refs: []string{own}}), "completing a done task again")
	assert.Equal(t, deliverable.StatusDone, status("P"))

	// A task asking for no file completes on no citation.
	f.put(t, deliverable.TaskRecord{ID: "fix", Status: deliverable.StatusInProgress, Objective: "Fix the flaky test."})
	require.NoError(t, f.tasks.Complete(ctx, deliverable.Evidence{TaskID: "fix", RunID: "R1"}))
	assert.Equal(t, deliverable.StatusDone, status("fix"))

	// Host failures.
	f.put(t, deliverable.TaskRecord{ID: "gone", Status: deliverable.StatusCancelled, Objective: "Fix it."})
	for name, c := range map[string]struct {
		ev   deliverable.Evidence
		is   error
		want string
	}{
		"unknown task":      {deliverable.Evidence{TaskID: "nope", RunID: "R"}, deliverable.ErrNotFound, `task "nope"`},
		"other objective":   {deliverable.Evidence{TaskID: "C", RunID: "RC", Objective: "Something else."}, deliverable.ErrInvalidRequest, "differs from the objective recorded"},
		"cancelled":         {deliverable.Evidence{TaskID: "gone", RunID: "R"}, nil, "cancelled"},
		"empty run":         {deliverable.Evidence{TaskID: "C", RunID: ""}, nil, "RunID"},
		"cancelled context": {deliverable.Evidence{TaskID: "C", RunID: "RC"}, context.Canceled, "canceled"},
	} {
		cctx := ctx
		if errors.Is(c.is, context.Canceled) {
			var cancel context.CancelFunc
			cctx, cancel = context.WithCancel(ctx)
			cancel()
		}
		err := f.tasks.Complete(cctx, c.ev)
		he := requireHostError(t, err)
		if name == "empty run" {
			assert.Equal(t, "validate evidence", he.Op, name) // ValidateEvidence's own
		} else {
			assert.Equal(t, "complete task", he.Op, name)
		}
		if c.is != nil {
			assert.ErrorIs(t, err, c.is, name)
		}
		assert.Contains(t, err.Error(), c.want, name)
	}
	assert.Equal(t, deliverable.StatusCancelled, status("gone"), "a completion never revives a cancelled task")
}

// TestFileTasksLockHoldsStatus: while an evidence check holds the lock of
// a task, its status cannot change; the wait honours the context.
func TestFileTasksLockHoldsStatus(t *testing.T) {
	f := newTaskFixture(t)
	ctx := t.Context()
	f.put(t, deliverable.TaskRecord{ID: "C", Status: deliverable.StatusDone})
	unlock, err := f.tasks.Lock(ctx, []string{"C", "P", "C"}, nil)
	require.NoError(t, err)

	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, f.tasks.SetStatus(short, "C", deliverable.StatusInProgress), context.DeadlineExceeded)
	_, err = f.tasks.Lock(short, []string{"C"}, nil)
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	changed := make(chan error, 1)
	go func() { changed <- f.tasks.SetStatus(ctx, "C", deliverable.StatusInProgress) }()
	select {
	case err := <-changed:
		t.Fatalf("the status changed under the lock: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	task, err := f.tasks.Task(ctx, "C")
	require.NoError(t, err)
	assert.Equal(t, deliverable.StatusDone, task.Status, "reads do not wait")
	unlock()
	require.NoError(t, <-changed)
	task, err = f.tasks.Task(ctx, "C")
	require.NoError(t, err)
	assert.Equal(t, deliverable.StatusInProgress, task.Status)
}

// TestFileTasksConcurrentCompletions: a parent and its child completing at
// once, each citing the other's file, never wait on each other forever;
// concurrent writers of one task leave one whole record.
func TestFileTasksConcurrentCompletions(t *testing.T) {
	f := newTaskFixture(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	f.put(t, deliverable.TaskRecord{ID: "P", Status: deliverable.StatusInProgress, Objective: "Fix it."})
	f.put(t, deliverable.TaskRecord{ID: "C", ParentID: "P", Status: deliverable.StatusInProgress, Objective: "Fix it too."})
	ofP := f.register(t, "P", "R", "p.csv", []byte("p\n"))
	ofC := f.register(t, "C", "R", "c.csv", []byte("c\n"))
	var wg sync.WaitGroup
	errs := make([]error, 40)
	for i := range errs {
		wg.Go(func() {
			switch i % 4 {
			case 0:
				errs[i] = f.tasks.Complete(ctx, deliverable.Evidence{TaskID: "P", RunID: "R", Refs: []string{ofP, ofC}})
			case 1:
				errs[i] = f.tasks.Complete(ctx, deliverable.Evidence{TaskID: "C", RunID: "R", Refs: []string{ofC, ofP}})
			case 2:
				errs[i] = f.tasks.SetStatus(ctx, "C", deliverable.StatusInProgress)
			default:
				errs[i] = f.tasks.Put(ctx, deliverable.TaskRecord{ID: "P", Status: deliverable.StatusInProgress, Objective: "Fix it."})
			}
		})
	}
	wg.Wait()
	require.NoError(t, ctx.Err(), "the completions deadlocked")
	for i, err := range errs {
		var ee *deliverable.EvidenceError
		switch {
		case i%4 == 1:
			require.ErrorAs(t, err, &ee, "C cites its parent's file") // never accepted
		case i%4 == 0 && err != nil:
			require.ErrorAs(t, err, &ee, "P cites C's file while C is not done")
		default:
			require.NoError(t, err)
		}
	}
	for _, id := range []string{"P", "C"} {
		_, err := f.tasks.Record(ctx, id)
		require.NoError(t, err, "whole record of %s", id)
	}
}

func TestOpenFileStore(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "state", "attachments")
	s, err := deliverable.OpenFileStore(dir)
	require.NoError(t, err)
	require.NotNil(t, s)
	for _, p := range []string{"state", "state/attachments", "state/attachments/tasks", "state/attachments/blobs"} {
		fi, err := os.Lstat(filepath.Join(base, p))
		require.NoError(t, err)
		assert.True(t, fi.IsDir(), p)
		assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), p)
	}

	_, err = deliverable.OpenFileStore("")
	assert.ErrorIs(t, err, deliverable.ErrInvalidRequest)
	dangling := filepath.Join(base, "dangling")
	require.NoError(t, os.Symlink(filepath.Join(base, "nowhere"), dangling))
	_, err = deliverable.OpenFileStore(dangling)
	require.Error(t, err)
	assert.Contains(t, err.Error(), dangling)
	assert.NoDirExists(t, filepath.Join(base, "nowhere"), "a dangling link's target is never created")

	for _, root := range []string{"/", "//", "/etc/.."} {
		_, err = deliverable.OpenFileStore(root)
		require.ErrorIs(t, err, deliverable.ErrInvalidRequest, root)
		assert.Contains(t, err.Error(), "is a filesystem root; pass a dedicated directory")
	}
	assert.NoDirExists(t, "/blobs", "nothing is made in the root")
}
