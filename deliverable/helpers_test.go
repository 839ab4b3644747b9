package deliverable_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable"
)

// memTasks is an in-memory deliverable.Tasks for tests.
type memTasks struct {
	mu          sync.Mutex
	tasks       map[string]deliverable.Task
	attachments map[string]deliverable.Attachment
	reads       int
	failWith    error // returned by every read when set
	// notExist makes an unknown id fail with an *fs.PathError wrapping
	// fs.ErrNotExist, as a file-backed host store does, not ErrNotFound.
	notExist bool
}

var _ deliverable.Tasks = (*memTasks)(nil)

func newMemTasks() *memTasks {
	return &memTasks{tasks: map[string]deliverable.Task{}, attachments: map[string]deliverable.Attachment{}}
}

func (m *memTasks) addTask(id, parent string, st deliverable.Status) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tasks[id] = deliverable.Task{ID: id, ParentID: parent, Status: st}
}

func (m *memTasks) addAttachment(a deliverable.Attachment) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.attachments[a.ID] = a
}

func (m *memTasks) Task(ctx context.Context, id string) (deliverable.Task, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	if m.failWith != nil {
		return deliverable.Task{}, m.failWith
	}
	t, ok := m.tasks[id]
	if !ok {
		return deliverable.Task{}, m.unknown("task", id)
	}
	return t, nil
}

func (m *memTasks) Attachment(ctx context.Context, id string) (deliverable.Attachment, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	if m.failWith != nil {
		return deliverable.Attachment{}, m.failWith
	}
	a, ok := m.attachments[strings.ToLower(id)]
	if !ok {
		return deliverable.Attachment{}, m.unknown("attachment", id)
	}
	return a, nil
}

// unknown is the error for an unknown id of a kind.
func (m *memTasks) unknown(kind, id string) error {
	if m.notExist {
		return &fs.PathError{Op: "open", Path: "/host/" + kind + "s/" + id + ".json", Err: fs.ErrNotExist}
	}
	return fmt.Errorf("%s %q: %w", kind, id, deliverable.ErrNotFound)
}

// lockingTasks adds the optional Locker interface.
type lockingTasks struct {
	*memTasks
	lockErr   error
	onLock    func() // runs inside Lock, as a concurrent writer that got in first
	locked    bool
	calls     [][2][]string
	unlocks   int
	readsHeld int // reads made while the lock was held
}

var _ deliverable.Locker = (*lockingTasks)(nil)

func (l *lockingTasks) Lock(ctx context.Context, taskIDs, attachmentIDs []string) (func(), error) {
	l.calls = append(l.calls, [2][]string{taskIDs, attachmentIDs})
	if l.lockErr != nil {
		return nil, l.lockErr
	}
	if l.onLock != nil {
		l.onLock()
	}
	l.locked = true
	before := l.reads
	return func() {
		l.readsHeld = l.reads - before
		l.locked = false
		l.unlocks++
	}, nil
}

// requireHostError requires err to be a *HostError and no *RequestError:
// a failure the agent cannot fix by changing its request.
func requireHostError(t *testing.T, err error) *deliverable.HostError {
	t.Helper()
	var he *deliverable.HostError
	require.ErrorAs(t, err, &he)
	var re *deliverable.RequestError
	require.False(t, errors.As(err, &re), "a host failure must not read as the agent's mistake: %v", err)
	return he
}

// local returns the LocalWorkspace rooted at dir.
func local(t *testing.T, dir string) deliverable.Workspace {
	t.Helper()
	ws, err := deliverable.LocalWorkspace(dir)
	require.NoError(t, err)
	return ws
}

func sum(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// writeFile creates rel (slash-separated) under dir with data.
func writeFile(t *testing.T, dir, rel string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, data, 0o644))
	return p
}

func requestFor(rel, key string, data []byte) deliverable.Request {
	return deliverable.Request{
		ContentRef:     rel,
		Filename:       filepath.Base(rel),
		ContentType:    "text/csv",
		ByteSize:       int64(len(data)),
		SHA256:         sum(data),
		Title:          "Results",
		IdempotencyKey: key,
	}
}

// storeFiles lists every file under the store directory with its content,
// to compare store states.
func storeFiles(t *testing.T, fsys afero.Fs, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, afero.Walk(fsys, dir, func(p string, info fs.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		data, err := afero.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		out[filepath.ToSlash(rel)] = string(data)
		return nil
	}))
	return out
}

// filesUnder returns the sorted names in one store subdirectory.
func filesUnder(t *testing.T, fsys afero.Fs, dir, sub string) []string {
	t.Helper()
	var names []string
	for name := range storeFiles(t, fsys, dir) {
		if after, ok := strings.CutPrefix(name, sub+"/"); ok {
			names = append(names, after)
		}
	}
	sort.Strings(names)
	return names
}

type fixture struct {
	fs    afero.Fs
	dir   string
	store *deliverable.FileStore
	ws    string
	reg   *deliverable.Registrar
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{fs: afero.NewMemMapFs(), dir: "/store", ws: t.TempDir()}
	var err error
	f.store, err = deliverable.NewFileStore(f.fs, f.dir)
	require.NoError(t, err)
	f.reg = &deliverable.Registrar{Store: f.store}
	return f
}
