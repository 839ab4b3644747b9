package session_test

// Attack tests written from go doc only: Bind creating its StateDir,
// OpenStore, and the state-directory rule they share with
// deliverable.OpenFileStore.

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable"
	"github.com/airlockdev/airlock/session"
)

// a23Config is a valid Config whose StateDir is state.
func a23Config(t *testing.T, state string) session.Config {
	t.Helper()
	ws := filepath.Join(t.TempDir(), "ws")
	require.NoError(t, os.Mkdir(ws, 0o755))
	return session.Config{SessionID: "sess", Workspace: ws, StateDir: state,
		Profile: session.Profile{Agent: "a", Model: "m"}, PermissionMode: session.ApproveAll}
}

// a23Real is a fresh directory by its real path.
func a23Real(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	return d
}

// a23Within runs fn and fails the test if it does not return within d.
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

// TestAttack23ConcurrentStateDirCreation: many goroutines create the same
// missing state directory (and its missing parents) at once, through
// Bind, OpenStore and deliverable.OpenFileStore. Each must succeed: a
// directory that another caller made a moment earlier is "an existing
// one", used as it is, never an error.
func TestAttack23ConcurrentStateDirCreation(t *testing.T) {
	for round := range 10 {
		base := a23Real(t)
		state := filepath.Join(base, "a", "b", "c", "state")
		cfg := a23Config(t, state)
		const n = 24
		errs := make([]error, n)
		var bindings [n]session.Binding
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				switch i % 3 {
				case 0:
					bindings[i], errs[i] = session.Bind(cfg)
				case 1:
					_, errs[i] = session.OpenStore(state)
				default:
					_, errs[i] = deliverable.OpenFileStore(state)
				}
			})
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			require.NoError(t, err, "round %d, caller %d (%s)", round, i, []string{"Bind", "OpenStore", "OpenFileStore"}[i%3])
		}
		for i := 3; i < n; i += 3 {
			assert.Equal(t, bindings[0], bindings[i])
		}
		fi, err := os.Lstat(state)
		require.NoError(t, err)
		assert.True(t, fi.IsDir())
	}
}

// TestAttack23StateDirOddPaths: what is at or on the state directory's
// path. A file, a link to a file, a link loop, a FIFO, a NUL byte: each
// fails with ErrInvalidStateDir in a *fs.PathError naming the path as
// given, quickly; a "." component or a trailing slash is a plain path.
func TestAttack23StateDirOddPaths(t *testing.T) {
	base := a23Real(t)
	file := filepath.Join(base, "file")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o600))
	linkToFile := filepath.Join(base, "link-to-file")
	require.NoError(t, os.Symlink(file, linkToFile))
	loopA, loopB := filepath.Join(base, "loopA"), filepath.Join(base, "loopB")
	require.NoError(t, os.Symlink(loopB, loopA))
	require.NoError(t, os.Symlink(loopA, loopB))
	fifo := filepath.Join(base, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	for _, c := range []struct{ name, path string }{
		{"file", file},
		{"link to a file", linkToFile},
		{"link loop", loopA},
		{"under a link loop", filepath.Join(loopA, "state")},
		{"fifo", fifo},
		{"under a fifo", filepath.Join(fifo, "state")},
		{"NUL", filepath.Join(base, "st\x00ate")},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b session.Binding
			var err error
			a23Within(t, 3*time.Second, "Bind", func() { b, err = session.Bind(a23Config(t, c.path)) })
			require.Error(t, err, "bound: %+v", b)
			assert.ErrorIs(t, err, session.ErrInvalidStateDir)
			var pe *fs.PathError
			if assert.ErrorAs(t, err, &pe) {
				assert.Equal(t, c.path, pe.Path)
			}
			a23Within(t, 3*time.Second, "OpenStore", func() { _, err = session.OpenStore(c.path) })
			require.Error(t, err)
			if assert.ErrorAs(t, err, &pe, "OpenStore: errors are *fs.PathError values naming dir: %v", err) {
				assert.Equal(t, c.path, pe.Path)
			}
			a23Within(t, 3*time.Second, "OpenFileStore", func() { _, err = deliverable.OpenFileStore(c.path) })
			require.Error(t, err)
		})
	}
	for _, root := range []string{"/", "/../../"} {
		t.Run("root "+root, func(t *testing.T) {
			_, err := session.Bind(a23Config(t, root))
			assert.ErrorIs(t, err, session.ErrInvalidStateDir)
		})
	}
	for _, c := range []struct{ name, path, real string }{
		{"dot component", base + "/new/./state", filepath.Join(base, "new", "state")},
		{"trailing slash", base + "/new2/state/", filepath.Join(base, "new2", "state")},
		{"double slash", base + "//new3//state", filepath.Join(base, "new3", "state")},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := session.Bind(a23Config(t, c.path))
			require.NoError(t, err)
			assert.Equal(t, filepath.Join(c.real, "sessions"), filepath.Dir(b.SessionDir))
			assert.DirExists(t, c.real)
		})
	}
}

// TestAttack23StateDirLinkToDirectory: a state directory that is a link to
// a directory (the host's own) is followed; the binding records the
// real path; OpenStore saves through it.
func TestAttack23StateDirLinkToDirectory(t *testing.T) {
	base := a23Real(t)
	real := filepath.Join(base, "real")
	require.NoError(t, os.Mkdir(real, 0o700))
	link := filepath.Join(base, "link")
	require.NoError(t, os.Symlink(real, link))
	b, err := session.Bind(a23Config(t, link))
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(b.SessionDir, real+string(filepath.Separator)), b.SessionDir)
	st, err := session.OpenStore(link)
	require.NoError(t, err)
	require.NoError(t, st.Save(t.Context(), b.NewRecord(session.RecordIDs{RecordID: "r", BackendSessionID: "b", AgentSessionID: "a"})))
	ents, err := os.ReadDir(real)
	require.NoError(t, err)
	assert.Len(t, ents, 1)
}

// TestAttack23SessionDirsStayInside: whatever the session id (separators,
// dots, NUL-free control-free bytes of every kind, the longest allowed),
// SessionDir is one directory directly under <state>/sessions, and the
// Store's record is one file directly in its directory.
func TestAttack23SessionDirsStayInside(t *testing.T) {
	state := a23Real(t)
	recs := filepath.Join(a23Real(t), "records")
	st, err := session.OpenStore(recs)
	require.NoError(t, err)
	ids := []string{"..", ".", "/", "../../../etc/passwd", "a/../../b", "\\..\\..", "....", ". .",
		strings.Repeat("é", 120), strings.Repeat("../", 80), "~root", "-rf", "*", "\u202e"}
	seen := map[string]string{}
	for _, id := range ids {
		cfg := a23Config(t, state)
		cfg.SessionID = id
		b, err := session.Bind(cfg)
		require.NoError(t, err, "%q", id)
		assert.Equal(t, filepath.Join(state, "sessions"), filepath.Dir(b.SessionDir), "%q", id)
		name := filepath.Base(b.SessionDir)
		assert.NotContains(t, []string{".", "..", ""}, name)
		assert.LessOrEqual(t, len(name), 80+1+16)
		if other, dup := seen[name]; dup {
			t.Errorf("ids %q and %q share the session directory %s", other, id, name)
		}
		seen[name] = id
		require.NoError(t, st.Save(t.Context(), b.NewRecord(session.RecordIDs{RecordID: "r", BackendSessionID: "b", AgentSessionID: "a"})))
		got, err := st.Load(t.Context(), b)
		require.NoError(t, err, "%q", id)
		assert.Equal(t, id, got.SessionID)
	}
	ents, err := os.ReadDir(recs)
	require.NoError(t, err)
	assert.Len(t, ents, len(ids), "one record file per id, all directly in the store's directory")
	for _, e := range ents {
		assert.True(t, e.Type().IsRegular(), e.Name())
	}
	_, err = os.Stat(filepath.Join(filepath.Dir(recs), "etc"))
	assert.True(t, errors.Is(err, fs.ErrNotExist))
}

// TestAttack23OpenStoreRoot: Bind refuses a state directory that is a
// filesystem root; OpenStore, which follows "one rule for the host's state
// directories", should refuse "/" too rather than keep session records
// in the root directory. (OpenFileStore("/") is not run: it would create
// its directories in /.)
func TestAttack23OpenStoreRoot(t *testing.T) {
	for _, root := range []string{"/", "/../../"} {
		_, err := session.OpenStore(root)
		assert.Error(t, err, "OpenStore(%q) accepted the filesystem root", root)
	}
}
