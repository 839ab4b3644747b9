package workspace_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

// moveHead commits an empty commit on top of the local main branch with
// plumbing only (index and work tree untouched) and returns it: another
// writer moving the ref while a restore installs its result.
func moveHead(t *testing.T, dir, subject string) string {
	t.Helper()
	c := strings.TrimSpace(git(t, dir, "commit-tree", "HEAD^{tree}", "-p", "HEAD", "-m", subject))
	git(t, dir, "update-ref", "refs/heads/main", c)
	return c
}

// sandboxCommit commits file=content in the sandbox and returns the commit.
func sandboxCommit(t *testing.T, dir, file, content, subject string) string {
	t.Helper()
	write(t, dir, file, content)
	git(t, dir, "add", file)
	git(t, dir, "commit", "-q", "-m", subject)
	return strings.TrimSpace(git(t, dir, "rev-parse", "HEAD"))
}

// TestRestoreRetriesWhenHeadMoves: the local branch moves once between the
// merge computation and the compare-and-swap; the restore computes again
// and installs a merge of both.
func TestRestoreRetriesWhenHeadMoves(t *testing.T) {
	e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
	initRepo(t, e.local, map[string]string{"a": "1\n"})
	var attempts []int
	var moved string
	r, err := workspace.Prepare(ctx(t), e.spec, workspace.WithBeforeCAS(func(attempt int) {
		attempts = append(attempts, attempt)
		if attempt == 0 {
			moved = moveHead(t, e.local, "moved during the restore")
		}
	}))
	require.NoError(t, err)
	remote := sandboxCommit(t, e.remote, "b", "b\n", "sandbox work")

	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1}, attempts, "one lost compare-and-swap, one retry")
	assert.True(t, res.Merged, "the moved HEAD and the sandbox's commit diverged")
	assert.Equal(t, 1, res.Commits)
	head := strings.TrimSpace(git(t, e.local, "rev-parse", "HEAD"))
	assert.Equal(t, head, res.Head)
	assert.Equal(t, moved+" "+remote+"\n", git(t, e.local, "log", "-1", "--format=%P"), "the merge has both commits as parents")
	assert.Equal(t, "b\n", read(t, e.local, "b"))
	assert.Empty(t, git(t, e.local, "status", "--porcelain"))
}

// TestRestoreRaceExhausted: the local branch moves before every attempt;
// after the bound the restore fails with ErrRace, HEAD is the other
// writer's, and a later restore succeeds.
func TestRestoreRaceExhausted(t *testing.T) {
	e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
	initRepo(t, e.local, map[string]string{"a": "1\n"})
	keepMoving := true
	attempts := 0
	var moved string
	r, err := workspace.Prepare(ctx(t), e.spec, workspace.WithBeforeCAS(func(int) {
		if keepMoving {
			attempts++
			moved = moveHead(t, e.local, "busy writer")
		}
	}))
	require.NoError(t, err)
	remote := sandboxCommit(t, e.remote, "b", "b\n", "sandbox work")

	_, err = r.Restore(ctx(t))
	require.ErrorIs(t, err, workspace.ErrRace)
	assert.Equal(t, "local ref changed during restore: HEAD of "+e.local+" moved during each of 5 attempts; restore again when it is quiet", err.Error())
	assert.Equal(t, workspace.CASRetries, attempts)
	assert.Equal(t, moved+"\n", git(t, e.local, "rev-parse", "HEAD"), "HEAD is the other writer's, not ours")
	assert.Empty(t, git(t, e.local, "for-each-ref", "refs/airlock"), "no private ref is left")

	keepMoving = false
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.True(t, res.Merged)
	assert.Equal(t, moved+" "+remote+"\n", git(t, e.local, "log", "-1", "--format=%P"))
}

// TestRestoreConflict: diverged histories that conflict fail with a
// *ConflictError naming the path, before anything local is changed.
func TestRestoreConflict(t *testing.T) {
	eachRunner(t, func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner) {
		e := newEnv(t, newRunner)
		initRepo(t, e.local, map[string]string{"a.txt": "base\n", "keep.txt": "k\n"})
		r, err := workspace.Prepare(ctx(t), e.spec)
		require.NoError(t, err)
		sandboxCommit(t, e.remote, "a.txt", "remote\n", "sandbox edit")
		sandboxCommit(t, e.remote, "b.txt", "b\n", "sandbox file")
		write(t, e.remote, "dirty.txt", "dirty in the sandbox\n")
		require.NoError(t, os.Remove(filepath.Join(e.remote, "keep.txt")))
		write(t, e.local, "a.txt", "local\n")
		git(t, e.local, "commit", "-q", "-am", "local edit")

		refs := git(t, e.local, "for-each-ref")
		before := hashOutside(t, e.local, filepath.Join(e.local, ".git"))
		idx, err := os.ReadFile(filepath.Join(e.local, ".git", "index"))
		require.NoError(t, err)

		_, err = r.Restore(ctx(t))
		require.ErrorIs(t, err, workspace.ErrConflict)
		var ce *workspace.ConflictError
		require.True(t, errors.As(err, &ce))
		assert.Equal(t, []string{"a.txt"}, ce.Paths)
		base := strings.TrimSpace(git(t, e.local, "rev-parse", "HEAD~1"))
		assert.Equal(t, base, ce.Base)
		assert.Equal(t, "workspace: merging the sandbox's commits conflicts in a.txt; nothing was changed locally, and the sandbox still holds its commits: "+
			"move the local commits made since "+base+" aside (git branch mine && git reset --keep "+base+"), restore again, then merge them (git merge mine) and resolve the conflicts there", err.Error())
		assert.Equal(t, refs, git(t, e.local, "for-each-ref"), "refs changed")
		assert.Equal(t, before, hashOutside(t, e.local, filepath.Join(e.local, ".git")), "the work tree changed")
		idx2, err := os.ReadFile(filepath.Join(e.local, ".git", "index"))
		require.NoError(t, err)
		assert.Equal(t, idx, idx2, "the index changed")
		assert.False(t, exists(e.local, "b.txt"))
		assert.False(t, exists(e.local, "dirty.txt"))
		assert.Equal(t, "k\n", read(t, e.local, "keep.txt"))

		// The advice, followed to the letter, brings the agent's work
		// and leaves the conflict to git merge.
		git(t, e.local, "branch", "mine")
		git(t, e.local, "reset", "-q", "--keep", base)
		_, err = r.Restore(ctx(t))
		require.NoError(t, err)
		assert.Equal(t, "remote\n", read(t, e.local, "a.txt"))
		assert.Equal(t, "b\n", read(t, e.local, "b.txt"))
		assert.Equal(t, "dirty in the sandbox\n", read(t, e.local, "dirty.txt"))
		git(t, e.local, "add", "-A")
		git(t, e.local, "commit", "-qm", "the agent's dirty state")
		merge := exec.Command("git", "-C", e.local, "merge", "mine")
		merge.Env = append(os.Environ(), gitEnv...)
		out, err := merge.CombinedOutput()
		require.Error(t, err)
		assert.Contains(t, string(out), "CONFLICT (content): Merge conflict in a.txt")
	})
}

// TestRestoreUnrelatedHistories: a round prepared on an unborn branch,
// where the user and the agent each made a first commit, merges the two
// root commits over the empty tree (a file both added differently
// conflicts, and nothing changes); a round prepared on a commit whose
// branch the user then replaced by an unrelated history fails with
// ErrConflict saying so, changes nothing, and restores once the branch is
// back. (An outside attack found the first failing on every Restore with
// git's "refusing to merge unrelated histories", matching no sentinel.)
func TestRestoreUnrelatedHistories(t *testing.T) {
	// bothFirst prepares a round on an unborn branch (an untracked file in
	// the work tree), then the agent commits agentFile and the user
	// commits userFile = "user\n", each a first commit.
	bothFirst := func(t *testing.T, agentFile, userFile string) (*env, *workspace.Round) {
		t.Helper()
		e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
		git(t, e.local, "init", "-q", "-b", "main")
		write(t, e.local, "dirty.txt", "untracked at Prepare\n")
		r, err := workspace.Prepare(ctx(t), e.spec)
		require.NoError(t, err)
		sandboxCommit(t, e.remote, agentFile, "agent\n", "agent first")
		write(t, e.local, userFile, "user\n")
		git(t, e.local, "add", userFile)
		git(t, e.local, "commit", "-q", "-m", "user first")
		return e, r
	}
	t.Run("unborn, both commit", func(t *testing.T) {
		e, r := bothFirst(t, "agent.txt", "user.txt")
		res, err := r.Restore(ctx(t))
		require.NoError(t, err)
		assert.Contains(t, res.Updated, "agent.txt")
		assert.Equal(t, "agent\n", read(t, e.local, "agent.txt"))
		assert.Equal(t, "user\n", read(t, e.local, "user.txt"))
		assert.Equal(t, "untracked at Prepare\n", read(t, e.local, "dirty.txt"))
		parents := strings.Fields(git(t, e.local, "log", "-1", "--format=%P"))
		assert.Len(t, parents, 2, "a merge of the two first commits")
		assert.Equal(t, "agent.txt\nuser.txt\n", git(t, e.local, "ls-tree", "--name-only", "HEAD"))
	})
	t.Run("unborn, both add a file differently", func(t *testing.T) {
		e, r := bothFirst(t, "a.txt", "a.txt")
		head := git(t, e.local, "rev-parse", "HEAD")
		_, err := r.Restore(ctx(t))
		var ce *workspace.ConflictError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, []string{"a.txt"}, ce.Paths)
		assert.Equal(t, head, git(t, e.local, "rev-parse", "HEAD"))
		assert.Equal(t, "user\n", read(t, e.local, "a.txt"))
	})
	t.Run("branch replaced by an unrelated history", func(t *testing.T) {
		e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
		initRepo(t, e.local, map[string]string{"a.txt": "base\n"})
		prepared := strings.TrimSpace(git(t, e.local, "rev-parse", "HEAD"))
		r, err := workspace.Prepare(ctx(t), e.spec)
		require.NoError(t, err)
		sandboxCommit(t, e.remote, "b.txt", "agent\n", "agent")
		git(t, e.local, "checkout", "-q", "--orphan", "other")
		git(t, e.local, "commit", "-q", "-m", "a new history")
		head := strings.TrimSpace(git(t, e.local, "rev-parse", "HEAD"))
		refs := git(t, e.local, "for-each-ref")

		_, err = r.Restore(ctx(t))
		require.ErrorIs(t, err, workspace.ErrConflict)
		assert.NotErrorIs(t, err, workspace.ErrHostile)
		assert.Contains(t, err.Error(), "share no history with the local HEAD "+head)
		assert.Contains(t, err.Error(), "check out a branch that holds "+prepared)
		assert.Equal(t, refs, git(t, e.local, "for-each-ref"), "refs changed")
		assert.False(t, exists(e.local, "b.txt"))

		git(t, e.local, "checkout", "-q", "main")
		_, err = r.Restore(ctx(t))
		require.NoError(t, err)
		assert.Equal(t, "agent\n", read(t, e.local, "b.txt"))
		assert.Equal(t, "agent\n", git(t, e.local, "log", "-1", "--format=%s"))
	})
}
