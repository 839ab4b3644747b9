package workspace_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/workspace"
)

// TestA35RestorePackedRefsLockListed: a git killed while deleting the
// round's temporary ref refs/airlock/out/<id>/snap left packed-refs
// listing it (with an older snapshot) and packed-refs.lock. Restore
// again, twice: each must bring the sandbox's current state (never the
// stale packed value), and the doc's rule "the loose ref file is removed
// when git cannot, unless packed-refs holds the ref" must not make the
// stale packed value win later.
func TestA35RestorePackedRefsLockListed(t *testing.T) {
	e := newEnv(t, localRunner)
	initRepo(t, e.local, map[string]string{"a": "1\n"})
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	write(t, e.remote, "f1", "first\n")
	_, err = r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, "first\n", read(t, e.local, "f1"))
	// A stale snapshot commit in the sandbox: the HEAD commit.
	stale := strings.TrimSpace(git(t, e.remote, "rev-parse", "HEAD"))
	ref := "refs/airlock/out/" + r.ID() + "/snap"
	pr := filepath.Join(e.remote, ".git", "packed-refs")
	old, err := os.ReadFile(pr)
	if !os.IsNotExist(err) {
		require.NoError(t, err)
	}
	if len(old) == 0 {
		old = []byte("# pack-refs with: peeled fully-peeled sorted \n")
	}
	require.NoError(t, os.WriteFile(pr, append(old, []byte(stale+" "+ref+"\n")...), 0o644))
	write(t, e.remote, ".git/packed-refs.lock", "")
	write(t, e.remote, "f2", "second\n")
	_, err = r.Restore(ctx(t))
	require.NoError(t, err, "restore 2")
	assert.Equal(t, "second\n", read(t, e.local, "f2"))
	write(t, e.remote, "f3", "third\n")
	_, err = r.Restore(ctx(t))
	require.NoError(t, err, "restore 3")
	assert.Equal(t, "third\n", read(t, e.local, "f3"))
	// The lock gone: a restore must work and leave no ref.
	require.NoError(t, os.Remove(filepath.Join(e.remote, ".git", "packed-refs.lock")))
	write(t, e.remote, "f4", "fourth\n")
	_, err = r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, "fourth\n", read(t, e.local, "f4"))
	assert.Empty(t, strings.TrimSpace(git(t, e.remote, "for-each-ref", "refs/airlock/out")))
}

// TestA35RestorePackedRefsLockLoose: packed-refs.lock left by a killed git
// (packed-refs not listing the ref): Restore succeeds and leaves no
// refs/airlock/out ref, over several restores.
func TestA35RestorePackedRefsLockLoose(t *testing.T) {
	e := newEnv(t, localRunner)
	initRepo(t, e.local, map[string]string{"a": "1\n"})
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	// A packed-refs with other refs, and a stale lock.
	git(t, e.remote, "pack-refs", "--all")
	write(t, e.remote, ".git/packed-refs.lock", "garbage")
	for i, v := range []string{"x\n", "y\n", "z\n"} {
		write(t, e.remote, "n"+v[:1], v)
		git(t, e.remote, "add", "-A")
		git(t, e.remote, "commit", "-q", "-m", "agent "+v[:1])
		res, err := r.Restore(ctx(t))
		require.NoError(t, err, "restore %d", i)
		assert.Equal(t, v, read(t, e.local, "n"+v[:1]))
		assert.Equal(t, 1, res.Commits)
		assert.Empty(t, strings.TrimSpace(git(t, e.remote, "for-each-ref", "refs/airlock/out")), "restore %d left its ref", i)
	}
}

// TestA35RestoreHostileWorktree: the sandbox's .git/config points git at
// another work tree (core.worktree); Restore must still bring the
// sandbox directory's work, not that other tree's.
func TestA35RestoreHostileWorktree(t *testing.T) {
	e := newEnv(t, localRunner)
	initRepo(t, e.local, map[string]string{"a": "1\n"})
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	elsewhere := t.TempDir()
	write(t, elsewhere, "decoy", "not the agent's\n")
	git(t, e.remote, "config", "core.worktree", elsewhere)
	write(t, e.remote, "agent.txt", "the agent's\n")
	_, err = r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, "the agent's\n", read(t, e.local, "agent.txt"))
	assert.False(t, exists(e.local, "decoy"), "a file of the other work tree arrived")
	assert.Equal(t, "1\n", read(t, e.local, "a"))
}
