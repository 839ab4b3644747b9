package workspace_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

func TestWithCommitterNamesTheMergeCommit(t *testing.T) {
	e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
	initRepo(t, e.local, map[string]string{"a": "1\n"})
	r, err := workspace.Prepare(ctx(t), e.spec, workspace.WithCommitter("Robo", "robo@example.com"))
	require.NoError(t, err)
	write(t, e.remote, "b", "b\n")
	git(t, e.remote, "add", "b")
	git(t, e.remote, "commit", "-q", "-m", "remote")
	write(t, e.local, "c", "c\n")
	git(t, e.local, "add", "c")
	git(t, e.local, "commit", "-q", "-m", "local")
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.True(t, res.Merged)
	assert.Equal(t, "Robo robo@example.com\n", git(t, e.local, "log", "-1", "--format=%cn %ce"))
}

func TestMissingSandboxTool(t *testing.T) {
	e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
	initRepo(t, e.local, map[string]string{"a": "1\n"})
	fr := &fakeRunner{real: e.spec.Runner, inject: func(cmd sandbox.Command) (bool, error) {
		_, err := cmd.Stdout.Write([]byte("tool tar\nend\n"))
		return true, err
	}}
	e.spec.Runner = fr
	_, err := workspace.Prepare(ctx(t), e.spec)
	var te *workspace.ToolError
	require.ErrorAs(t, err, &te)
	assert.ErrorIs(t, err, workspace.ErrTool)
	assert.Equal(t, "git", te.Tool)
	assert.Equal(t, "sandbox", te.Where)
	_, serr := os.Stat(e.remote)
	assert.ErrorIs(t, serr, os.ErrNotExist, "nothing was changed in the sandbox")
}

func TestBadSpec(t *testing.T) {
	for name, spec := range map[string]workspace.Spec{
		"relative local": {Local: "x", Remote: "/r", Runner: sandbox.Local("/")},
		"root remote":    {Local: "/tmp", Remote: "/", Runner: sandbox.Local("/")},
		"no runner":      {Local: "/tmp", Remote: "/r"},
		"bad pattern":    {Local: "/tmp", Remote: "/r", Runner: sandbox.Local("/"), Exclude: []string{"["}},
	} {
		_, err := workspace.Prepare(ctx(t), spec)
		assert.ErrorIs(t, err, workspace.ErrSpec, name)
	}
	_, err := workspace.Reopen(ctx(t), workspace.Spec{Local: t.TempDir(), Remote: "/r", Runner: sandbox.Local("/")}, "../x")
	assert.ErrorIs(t, err, workspace.ErrNoRound)
}

func TestExcludeNeverSynced(t *testing.T) {
	e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
	write(t, e.local, "a", "1\n")
	write(t, e.local, "cache/x", "local cache\n")
	e.spec.Exclude = []string{"cache"}
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	assert.False(t, exists(e.remote, "cache/x"))
	write(t, e.remote, "cache/y", "remote cache\n")
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.False(t, exists(e.local, "cache/y"))
	assert.Equal(t, "local cache\n", read(t, e.local, "cache/x"))
	assert.Empty(t, res.Deleted)
}

// TestRestoreLock: a dead owner's lock file does not block; a live holder
// makes a restore wait and then fail with ErrLocked.
func TestRestoreLock(t *testing.T) {
	e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
	write(t, e.local, "a", "1\n")
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	lock := filepath.Join(e.local, sandbox.RuntimeDir, "restore.lock")
	require.NoError(t, os.MkdirAll(filepath.Dir(lock), 0o700))
	require.NoError(t, os.WriteFile(lock, []byte("999999999\n"), 0o600))
	_, err = r.Restore(ctx(t))
	require.NoError(t, err, "a stale lock blocks")

	release := holdLock(t, lock)
	defer release()
	start := time.Now()
	_, err = workspace.RestoreWithLockWait(ctx(t), r, 200*time.Millisecond)
	assert.ErrorIs(t, err, workspace.ErrLocked)
	assert.Less(t, time.Since(start), 5*time.Second)
}

func TestTemporaryRefsDeletedOnError(t *testing.T) {
	e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
	initRepo(t, e.local, map[string]string{"a": "1\n"})
	fr := &fakeRunner{real: e.spec.Runner, inject: func(cmd sandbox.Command) (bool, error) {
		if cmd.Stdin == nil {
			return false, nil
		}
		return true, &sandbox.ExitError{Status: 9}
	}}
	e.spec.Runner = fr
	refs := git(t, e.local, "for-each-ref")
	_, err := workspace.Prepare(ctx(t), e.spec)
	var ee *sandbox.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, refs, git(t, e.local, "for-each-ref"))
	entries, _ := os.ReadDir(filepath.Join(e.local, ".git", "airlock", "rounds"))
	assert.Empty(t, entries, "a failed prepare leaves no round state")
}

func TestWithLoggerReportsRefusals(t *testing.T) {
	e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
	write(t, e.local, "a", "1\n")
	var buf bytes.Buffer
	r, err := workspace.Prepare(ctx(t), e.spec, workspace.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	require.NoError(t, err)
	require.NoError(t, os.Symlink("/etc", filepath.Join(e.remote, "etc")))
	_, err = r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Contains(t, buf.String(), "refused sandbox entry")
	assert.Contains(t, buf.String(), "path=etc")
}

// TestTemporaryRefsDeletedOnCancel: a prepare cancelled while its bundle
// travels leaves the user's refs exactly as they were.
func TestTemporaryRefsDeletedOnCancel(t *testing.T) {
	e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
	initRepo(t, e.local, map[string]string{"a": "1\n"})
	c, cancel := context.WithCancel(ctx(t))
	defer cancel()
	e.spec.Runner = &fakeRunner{real: e.spec.Runner, inject: func(cmd sandbox.Command) (bool, error) {
		if cmd.Stdin == nil {
			return false, nil
		}
		cancel() // the caller gives up while the bundle is on its way
		return true, c.Err()
	}}
	refs := git(t, e.local, "for-each-ref")
	_, err := workspace.Prepare(c, e.spec)
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, refs, git(t, e.local, "for-each-ref"), "no temporary ref is left")
}

// TestNonEmptyDirectoryNeverForceDeleted: the sandbox deletes a directory
// while the host adds a file to it during the run: the baseline files go,
// the directory and the new local file stay.
func TestNonEmptyDirectoryNeverForceDeleted(t *testing.T) {
	e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
	write(t, e.local, "d/x", "1\n")
	write(t, e.local, "keep", "k\n")
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	require.NoError(t, os.RemoveAll(filepath.Join(e.remote, "d")))
	write(t, e.local, "d/new", "local\n")
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Contains(t, res.Deleted, "d/x")
	assert.Equal(t, "local\n", read(t, e.local, "d/new"))
	assert.False(t, exists(e.local, "d/x"))
}
