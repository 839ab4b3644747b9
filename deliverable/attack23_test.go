package deliverable_test

// Attack tests written from go doc only: FileStore.Tasks (FileTasks)
// under concurrent goroutines, malformed task files on disk, hostile ids,
// and OpenFileStore's state directory.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable"
)

// a23Within runs fn and fails the test when it does not return within d.
func a23Within(t *testing.T, d time.Duration, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %s", what, d)
	}
}

// a23TaskFile puts r and returns the file FileTasks keeps it in: the one
// file of tasks/ that was not there before.
func a23TaskFile(t *testing.T, f *taskFixture, r deliverable.TaskRecord) string {
	t.Helper()
	dir := filepath.Join(f.dir, "tasks")
	before, err := os.ReadDir(dir)
	require.NoError(t, err)
	f.put(t, r)
	after, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, after, len(before)+1)
	old := map[string]bool{}
	for _, e := range before {
		old[e.Name()] = true
	}
	for _, e := range after {
		if !old[e.Name()] {
			return filepath.Join(dir, e.Name())
		}
	}
	t.Fatal("no new task file")
	return ""
}

// TestAttack23MalformedTaskFiles: a task file on disk that is not a whole
// record of its task. Reading it is an error that is not ErrNotFound (a
// broken record is the host's failure, not a task that does not exist,
// which ValidateEvidence would turn into a rejection of the agent's
// citation); it never returns another task's record; it does not hang.
// Put replaces it.
func TestAttack23MalformedTaskFiles(t *testing.T) {
	swapped := func(t *testing.T, f *taskFixture, file string) {
		other := a23TaskFile(t, f, deliverable.TaskRecord{ID: "U", Status: deliverable.StatusDone, Objective: "u"})
		b, err := os.ReadFile(other)
		require.NoError(t, err)
		require.NoError(t, os.Remove(file))
		require.NoError(t, os.WriteFile(file, b, 0o600))
	}
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, f *taskFixture, file string)
	}{
		{"truncated", func(t *testing.T, f *taskFixture, file string) {
			b, err := os.ReadFile(file)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(file, b[:len(b)/2], 0o600))
		}},
		{"empty", func(t *testing.T, f *taskFixture, file string) { require.NoError(t, os.WriteFile(file, nil, 0o600)) }},
		{"empty object", func(t *testing.T, f *taskFixture, file string) {
			require.NoError(t, os.WriteFile(file, []byte("{}"), 0o600))
		}},
		{"trailing data", func(t *testing.T, f *taskFixture, file string) {
			b, err := os.ReadFile(file)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(file, append(b, []byte(`{"x":1}`)...), 0o600))
		}},
		{"another task's record", swapped},
		{"directory", func(t *testing.T, f *taskFixture, file string) {
			require.NoError(t, os.Remove(file))
			require.NoError(t, os.Mkdir(file, 0o700))
		}},
		{"link to passwd", func(t *testing.T, f *taskFixture, file string) {
			require.NoError(t, os.Remove(file))
			require.NoError(t, os.Symlink("/etc/passwd", file))
		}},
		{"fifo", func(t *testing.T, f *taskFixture, file string) {
			require.NoError(t, os.Remove(file))
			require.NoError(t, syscall.Mkfifo(file, 0o600))
			t.Cleanup(func() { // let a reader blocked in open(2) go
				for range 50 {
					if w, err := os.OpenFile(file, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
						w.Close()
					}
					time.Sleep(2 * time.Millisecond)
				}
			})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTaskFixture(t)
			file := a23TaskFile(t, f, deliverable.TaskRecord{ID: "T", Status: deliverable.StatusInProgress, Objective: "t"})
			tc.plant(t, f, file)
			ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
			defer cancel()
			var task deliverable.Task
			var err error
			a23Within(t, 1500*time.Millisecond, "Task", func() { task, err = f.tasks.Task(ctx, "T") })
			require.Error(t, err, "a malformed record was read as %+v", task)
			assert.NotErrorIs(t, err, deliverable.ErrNotFound, "a broken record reads as a missing task")
			assert.Contains(t, err.Error(), filepath.Base(file), "the error names the file")

			a23Within(t, 3*time.Second, "SetStatus", func() { err = f.tasks.SetStatus(ctx, "T", deliverable.StatusDone) })
			require.Error(t, err)
			assert.NotErrorIs(t, err, deliverable.ErrNotFound)

			if tc.name == "another task's record" || tc.name == "truncated" || tc.name == "empty" || tc.name == "empty object" || tc.name == "trailing data" {
				a23Within(t, 3*time.Second, "Put", func() {
					err = f.tasks.Put(ctx, deliverable.TaskRecord{ID: "T", Status: deliverable.StatusTodo, Objective: "again"})
				})
				require.NoError(t, err, "Put replaces a broken record")
				got, err := f.tasks.Record(ctx, "T")
				require.NoError(t, err)
				assert.Equal(t, "again", got.Objective)
			}
		})
	}
}

// TestAttack23TaskIDsAreNeverPaths: ids with separators, dots and other
// path syntax are names, not paths: each round-trips, every file stays a
// regular file directly in tasks/, and nothing appears outside the store.
// An id with NUL (or another control character) is refused, not stored.
func TestAttack23TaskIDsAreNeverPaths(t *testing.T) {
	f := newTaskFixture(t)
	ctx := t.Context()
	ids := []string{"../../../escape", "a/b", "..", ".", "/abs", `a\b`, "~", "-rf", "*", "tasks", "T", "t", "é", strings.Repeat("x", 256), "con", "a b"}
	for i, id := range ids {
		f.put(t, deliverable.TaskRecord{ID: id, Objective: fmt.Sprint(i)})
	}
	for i, id := range ids {
		got, err := f.tasks.Record(ctx, id)
		require.NoError(t, err, "%q", id)
		assert.Equal(t, fmt.Sprint(i), got.Objective, "%q read another task's record", id)
	}
	ents, err := os.ReadDir(filepath.Join(f.dir, "tasks"))
	require.NoError(t, err)
	assert.Len(t, ents, len(ids), "T and t, and every other pair, are two tasks")
	for _, e := range ents {
		assert.True(t, e.Type().IsRegular(), e.Name())
	}
	assert.NoFileExists(t, filepath.Join(filepath.Dir(filepath.Dir(f.dir)), "escape"))
	for _, bad := range []string{"a\x00b", "\x00", "a\x7f", "a\tb", "a\rb"} {
		err := f.tasks.Put(ctx, deliverable.TaskRecord{ID: bad})
		assert.ErrorIs(t, err, deliverable.ErrInvalidRequest, "%q", bad)
		_, err = f.tasks.Task(ctx, bad)
		assert.Error(t, err, "%q", bad)
		assert.ErrorIs(t, f.tasks.SetStatus(ctx, bad, deliverable.StatusDone), deliverable.ErrNotFound, "%q", bad)
	}
	ents, err = os.ReadDir(filepath.Join(f.dir, "tasks"))
	require.NoError(t, err)
	assert.Len(t, ents, len(ids))
}

// TestAttack23ConcurrentWritersOneTask: Put, SetStatus and Record of one
// task from many goroutines: every read is a whole record that one writer
// wrote, the last record is one of them, and tmp/ is left empty.
func TestAttack23ConcurrentWritersOneTask(t *testing.T) {
	f := newTaskFixture(t)
	ctx := t.Context()
	f.put(t, deliverable.TaskRecord{ID: "T", Objective: "o0"})
	var wg sync.WaitGroup
	const n = 64
	errs := make(chan error, 4*n)
	for i := range n {
		wg.Go(func() {
			errs <- f.tasks.Put(ctx, deliverable.TaskRecord{ID: "T", ParentID: fmt.Sprintf("p%d", i), Objective: fmt.Sprintf("o%d", i)})
		})
		wg.Go(func() {
			errs <- f.tasks.SetStatus(ctx, "T", []deliverable.Status{deliverable.StatusDone, deliverable.StatusBlocked}[i%2])
		})
		wg.Go(func() {
			r, err := f.tasks.Record(ctx, "T")
			if err == nil && r.ParentID != "" && "o"+strings.TrimPrefix(r.ParentID, "p") != r.Objective {
				err = fmt.Errorf("a torn record: parent %q with objective %q", r.ParentID, r.Objective)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	tmp, err := os.ReadDir(filepath.Join(f.dir, "tmp"))
	if !errors.Is(err, os.ErrNotExist) {
		require.NoError(t, err)
		assert.Empty(t, tmp, "temporary files left behind")
	}
}

// TestAttack23TwoStoresOneDirectory: two FileStores on one directory (two
// processes, as the documentation allows): writes are not serialized, but
// every read is a whole record ("always read whole records").
func TestAttack23TwoStoresOneDirectory(t *testing.T) {
	f := newTaskFixture(t)
	other, err := deliverable.OpenFileStore(f.dir)
	require.NoError(t, err)
	ctx := t.Context()
	f.put(t, deliverable.TaskRecord{ID: "T", Objective: strings.Repeat("0", 4096)})
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 50 {
		tasks := []*deliverable.FileTasks{f.tasks, other.Tasks()}[i%2]
		wg.Go(func() {
			errs <- tasks.Put(ctx, deliverable.TaskRecord{ID: "T", Objective: strings.Repeat(fmt.Sprint(i%10), 4096)})
		})
		wg.Go(func() {
			r, err := []*deliverable.FileTasks{other.Tasks(), f.tasks}[i%2].Record(ctx, "T")
			if err == nil && strings.Count(r.Objective, r.Objective[:1]) != 4096 {
				err = errors.New("a torn record")
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// TestAttack23LockUnlockTwice: calling the unlock func Lock returned a
// second time (a deferred unlock after an explicit one, a common slip)
// must not crash the host process. Run in a child process: an unlock of
// an unlocked sync.Mutex is a fatal error no recover catches.
func TestAttack23LockUnlockTwice(t *testing.T) {
	if os.Getenv("AIRLOCK_A23_CHILD") == "unlock-twice" {
		f := newTaskFixture(t)
		f.put(t, deliverable.TaskRecord{ID: "T"})
		unlock, err := f.tasks.Lock(t.Context(), []string{"T"}, nil)
		require.NoError(t, err)
		unlock()
		unlock()
		// The lock must still work after the double call.
		again, err := f.tasks.Lock(t.Context(), []string{"T"}, nil)
		require.NoError(t, err)
		again()
		require.NoError(t, f.tasks.SetStatus(t.Context(), "T", deliverable.StatusDone))
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAttack23LockUnlockTwice$", "-test.count=1")
	cmd.Env = append(os.Environ(), "AIRLOCK_A23_CHILD=unlock-twice")
	out, err := cmd.CombinedOutput()
	assert.NoError(t, err, "a second unlock() crashed or broke the lock:\n%s", out)
}

// TestAttack23LockUnlockTwiceDoesNotFreeAnotherHolder: a stale second
// unlock must not release a lock another caller took in between.
func TestAttack23LockUnlockTwiceDoesNotFreeAnotherHolder(t *testing.T) {
	if os.Getenv("AIRLOCK_A23_CHILD") == "stale-unlock" {
		f := newTaskFixture(t)
		f.put(t, deliverable.TaskRecord{ID: "T", Status: deliverable.StatusDone})
		unlock, err := f.tasks.Lock(t.Context(), []string{"T"}, nil)
		require.NoError(t, err)
		unlock()
		held, err := f.tasks.Lock(t.Context(), []string{"T"}, nil)
		require.NoError(t, err)
		defer held()
		unlock() // stale
		short, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		err = f.tasks.SetStatus(short, "T", deliverable.StatusInProgress)
		require.ErrorIs(t, err, context.DeadlineExceeded, "the status changed while another caller held the lock")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAttack23LockUnlockTwiceDoesNotFreeAnotherHolder$", "-test.count=1")
	cmd.Env = append(os.Environ(), "AIRLOCK_A23_CHILD=stale-unlock")
	out, err := cmd.CombinedOutput()
	assert.NoError(t, err, "%s", out)
}

// TestAttack23LockCancelledContext: Lock with a context already done
// fails at once, and holds nothing afterwards.
func TestAttack23LockCancelledContext(t *testing.T) {
	f := newTaskFixture(t)
	f.put(t, deliverable.TaskRecord{ID: "T"})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	unlock, err := f.tasks.Lock(ctx, []string{"T", "U"}, []string{"x"})
	if err == nil {
		unlock()
	}
	require.NoError(t, f.tasks.SetStatus(t.Context(), "T", deliverable.StatusDone), "a failed Lock left T locked")
}
