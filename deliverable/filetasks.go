package deliverable

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"unicode/utf8"

	"github.com/spf13/afero"

	"github.com/airlockdev/airlock/internal/digest"
	"github.com/airlockdev/airlock/internal/statedir"
)

// TaskRecord is a task as FileTasks keeps it: the Task that
// ValidateEvidence reads, and the task's own request text.
type TaskRecord struct {
	ID       string // the task's id, checked like every task id (no surrounding space or control characters, at most 256 bytes)
	ParentID string // its parent task's id; "" for a top-level task
	Status   Status // its status; "" is taken as StatusTodo
	// Objective is the task's own request text: what Complete passes to
	// ValidateEvidence as Evidence.Objective (DetectRequests reads it for
	// the files the task asks for). Valid UTF-8, at most 1 MiB.
	Objective string
}

// Task returns the part of r that ValidateEvidence reads.
func (r TaskRecord) Task() Task { return Task{ID: r.ID, ParentID: r.ParentID, Status: r.Status} }

// maxObjectiveBytes bounds TaskRecord.Objective.
const maxObjectiveBytes = 1 << 20

// FileTasks is a ready Tasks for a host with no task table of its own: the
// tasks it records (Put, SetStatus) are kept as files in the directory of
// the FileStore it came from (FileStore.Tasks), beside the attachments,
// and the attachments and work products it serves are that store's. It
// implements Tasks, WorkProducts and Locker, so ValidateEvidence judges
// every citation through it, and Complete does what a completion needs:
// check the evidence against the task's recorded objective, then mark the
// task done.
//
// Layout: tasks/<hash>.json under the store's directory, one strictly
// decoded record per task, named by a hash of its id (no id is ever a path
// component), replaced atomically (temporary file, sync, rename).
//
// Concurrency: safe for concurrent use. Changes to one task (Put,
// SetStatus, Complete) are serialized, and while ValidateEvidence checks
// evidence through a FileTasks (Lock) the tasks it reads cannot change;
// attachments never change once stored. As with FileStore, on the
// operating system's file system this holds across processes sharing the
// directory too (a flock(2) lock file per task under locks/); on another
// afero.Fs, within one FileStore value. Readers always read whole records.
type FileTasks struct {
	s *FileStore
}

var (
	_ Tasks        = (*FileTasks)(nil)
	_ WorkProducts = (*FileTasks)(nil)
	_ Locker       = (*FileTasks)(nil)
)

// Tasks returns the task table kept in the store's directory. Every
// FileTasks of one FileStore shares its locks.
func (s *FileStore) Tasks() *FileTasks { return &FileTasks{s: s} }

type taskFile struct {
	Version int        `json:"version"`
	Task    taskFields `json:"task"`
}

type taskFields struct {
	ID        string `json:"id"`
	ParentID  string `json:"parentId"`
	Status    Status `json:"status"`
	Objective string `json:"objective"`
}

func (t *FileTasks) path(id string) string {
	return filepath.Join(t.s.dir, "tasks", digest.Fields("airlock.deliverable.task.v1", id)+".json")
}

// checkTask validates a record for Put and normalizes its status.
func checkTask(r TaskRecord) (TaskRecord, error) {
	if err := checkID("task id", r.ID); err != nil {
		return r, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	if r.ParentID != "" {
		if err := checkID("parent task id", r.ParentID); err != nil {
			return r, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
		}
		if r.ParentID == r.ID {
			return r, fmt.Errorf("%w: task %q is its own parent", ErrInvalidRequest, clip(r.ID))
		}
	}
	if r.Status == "" {
		r.Status = StatusTodo
	}
	if err := checkStatus(r.Status); err != nil {
		return r, err
	}
	switch {
	case len(r.Objective) > maxObjectiveBytes:
		return r, fmt.Errorf("%w: the objective of task %q is %d bytes; the limit is %d", ErrInvalidRequest, clip(r.ID), len(r.Objective), maxObjectiveBytes)
	case !utf8.ValidString(r.Objective):
		return r, fmt.Errorf("%w: the objective of task %q is not valid UTF-8", ErrInvalidRequest, clip(r.ID))
	}
	return r, nil
}

func checkStatus(s Status) error {
	if !slices.Contains([]Status{StatusTodo, StatusInProgress, StatusBlocked, StatusDone, StatusCancelled}, s) {
		return fmt.Errorf("%w: status %q is not one of %q, %q, %q, %q, %q", ErrInvalidRequest, clip(string(s)),
			StatusTodo, StatusInProgress, StatusBlocked, StatusDone, StatusCancelled)
	}
	return nil
}

// Put records r, creating the task or replacing what was recorded under
// its id. An invalid record wraps ErrInvalidRequest; nothing is written.
func (t *FileTasks) Put(ctx context.Context, r TaskRecord) error {
	r, err := checkTask(r)
	if err != nil {
		return err
	}
	unlock, err := t.s.lockTask(ctx, r.ID)
	if err != nil {
		return err
	}
	defer unlock()
	return t.write(ctx, r)
}

func (t *FileTasks) write(ctx context.Context, r TaskRecord) error {
	return t.s.writeJSON(ctx, t.path(r.ID), taskFile{Version: fileStoreVersion,
		Task: taskFields(r)})
}

// Record returns the record of task id, or an error wrapping ErrNotFound.
func (t *FileTasks) Record(ctx context.Context, id string) (TaskRecord, error) {
	if err := ctx.Err(); err != nil {
		return TaskRecord{}, err
	}
	if err := checkID("task id", id); err != nil {
		return TaskRecord{}, fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	var f taskFile
	if err := t.s.readJSON(t.path(id), &f); err != nil {
		if errors.Is(err, ErrNotFound) {
			return TaskRecord{}, fmt.Errorf("%w: task %q (record it with FileTasks.Put)", ErrNotFound, clip(id))
		}
		return TaskRecord{}, err
	}
	r := TaskRecord{ID: f.Task.ID, ParentID: f.Task.ParentID, Status: f.Task.Status, Objective: f.Task.Objective}
	if _, err := checkTask(r); err != nil || f.Version != fileStoreVersion || r.ID != id {
		return TaskRecord{}, fmt.Errorf("deliverable: task record %s has version %d and id %q (%v); the store file is damaged", t.path(id), f.Version, clip(r.ID), err)
	}
	return r, nil
}

// Task implements Tasks: the recorded task id, or an error wrapping
// ErrNotFound.
func (t *FileTasks) Task(ctx context.Context, id string) (Task, error) {
	r, err := t.Record(ctx, id)
	return r.Task(), err
}

// SetStatus changes the status of the recorded task id; an unknown id
// wraps ErrNotFound, an unknown status ErrInvalidRequest.
func (t *FileTasks) SetStatus(ctx context.Context, id string, s Status) error {
	if err := checkStatus(s); err != nil {
		return err
	}
	unlock, err := t.s.lockTask(ctx, id)
	if err != nil {
		return err
	}
	defer unlock()
	r, err := t.Record(ctx, id)
	if err != nil {
		return err
	}
	r.Status = s
	return t.write(ctx, r)
}

// Attachment implements Tasks: the store's attachment (FileStore.Attachment).
func (t *FileTasks) Attachment(ctx context.Context, id string) (Attachment, error) {
	return t.s.Attachment(ctx, id)
}

// WorkProduct implements WorkProducts: the store's work product
// (FileStore.WorkProduct).
func (t *FileTasks) WorkProduct(ctx context.Context, id string) (WorkProduct, error) {
	return t.s.WorkProduct(ctx, id)
}

// Lock implements Locker: it holds the tasks taskIDs (in sorted order, so
// two checks never wait on each other) until unlock is called, so that
// Put, SetStatus and Complete on them wait, in every process sharing the
// directory when the store is on the operating system's file system. Attachments never change once
// stored and are not locked. It waits as long as ctx allows.
func (t *FileTasks) Lock(ctx context.Context, taskIDs, attachmentIDs []string) (unlock func(), err error) {
	ids := slices.Compact(slices.Sorted(slices.Values(taskIDs)))
	var held []func()
	release := func() {
		for _, u := range slices.Backward(held) {
			u()
		}
	}
	for _, id := range ids {
		u, err := t.s.lockTask(ctx, id)
		if err != nil {
			release()
			return nil, err
		}
		held = append(held, u)
	}
	return release, nil
}

// Complete checks a completion of task ev.TaskID in run ev.RunID and, when
// the evidence proves it, marks the task done: ValidateEvidence through t,
// with Evidence.Objective the task's recorded objective (an ev.Objective
// that is not empty must equal it), then SetStatus(StatusDone), the check
// and the change made under one lock of the tasks read, so a child task's
// status cannot change in between. Completing a done task again checks the
// evidence again and changes nothing.
//
// A rejection is the *EvidenceError of ValidateEvidence, and the task keeps
// its status. Every other failure is a *HostError: an unknown task
// (wrapping ErrNotFound), a cancelled one, an objective that differs from
// the record, a failing store.
func (t *FileTasks) Complete(ctx context.Context, ev Evidence) error {
	const op = "complete task"
	rec, err := t.Record(ctx, ev.TaskID)
	if err != nil {
		return hostErr(op, err)
	}
	switch {
	case ev.Objective != "" && ev.Objective != rec.Objective:
		return hostErr(op, fmt.Errorf("%w: Evidence.Objective differs from the objective recorded for task %q; leave it empty to use the record", ErrInvalidRequest, clip(ev.TaskID)))
	case rec.Status == StatusCancelled:
		return hostErr(op, fmt.Errorf("task %q is cancelled; a completion does not revive it (SetStatus first)", clip(ev.TaskID)))
	}
	ev.Objective = rec.Objective
	c := &completion{FileTasks: t}
	defer c.release()
	if err := ValidateEvidence(ctx, c, ev); err != nil {
		return err
	}
	if c.unlock == nil { // nothing cited: the check read no task; hold this one
		if c.unlock, err = t.Lock(ctx, []string{ev.TaskID}, nil); err != nil {
			return hostErr(op, err)
		}
	}
	if rec, err = t.Record(ctx, ev.TaskID); err != nil { // under the lock now
		return hostErr(op, err)
	}
	if rec.Status == StatusDone {
		return nil
	}
	if rec.Status == StatusCancelled {
		return hostErr(op, fmt.Errorf("task %q was cancelled while its completion was checked", clip(ev.TaskID)))
	}
	rec.Status = StatusDone
	if err := t.write(ctx, rec); err != nil {
		return hostErr(op, err)
	}
	return nil
}

// completion is the FileTasks that Complete checks through: its Lock holds
// the tasks until Complete has written the status.
type completion struct {
	*FileTasks
	unlock func()
}

// Lock implements Locker: it takes the locks for the whole Complete, and
// returns an unlock that leaves them held.
func (c *completion) Lock(ctx context.Context, taskIDs, attachmentIDs []string) (func(), error) {
	if c.unlock != nil {
		return nil, errors.New("deliverable: the evidence check locked twice")
	}
	u, err := c.FileTasks.Lock(ctx, taskIDs, attachmentIDs)
	if err != nil {
		return nil, err
	}
	c.unlock = u
	return func() {}, nil
}

func (c *completion) release() {
	if c.unlock != nil {
		c.unlock()
	}
}

// OpenFileStore returns a FileStore keeping its files under the host
// directory dir, on the operating system's file system:
// NewFileStore(afero.NewOsFs(), dir). It creates dir and its missing
// parents (mode 0700), as every airlock state directory is created (see
// the package documentation): a dangling link is never followed to create
// anything, and a dir that resolves to a filesystem root is refused
// (ErrInvalidRequest). NewFileStore takes any afero.Fs: tests, an
// in-memory or another store.
func OpenFileStore(dir string) (*FileStore, error) {
	if dir == "" {
		return nil, fmt.Errorf("%w: deliverable.OpenFileStore: dir is empty; pass the store's directory", ErrInvalidRequest)
	}
	if _, err := statedir.Make(dir); err != nil {
		return nil, fmt.Errorf("%w: deliverable.OpenFileStore: the store's directory %s: %w", ErrInvalidRequest, dir, err)
	}
	return NewFileStore(afero.NewOsFs(), dir)
}
