package workspace_test

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

// userState is everything Prepare promises not to touch.
func userState(t *testing.T, dir string) []string {
	t.Helper()
	idx, err := os.ReadFile(filepath.Join(dir, ".git", "index"))
	if err != nil {
		idx = nil
	}
	return []string{
		string(idx),
		git(t, dir, "diff", "--cached"),
		git(t, dir, "status", "--porcelain", "--untracked-files=all"),
		git(t, dir, "for-each-ref"),
		git(t, dir, "symbolic-ref", "-q", "--short", "HEAD") + "",
	}
}

func TestRoundTrip(t *testing.T) {
	eachRunner(t, func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner) {
		e := newEnv(t, newRunner)
		initRepo(t, e.local, map[string]string{"tracked.txt": "v1\n", "staged.txt": "s1\n", "gone.txt": "g\n", ".gitignore": "ignored.txt\n"})
		write(t, e.local, "tracked.txt", "v2 local dirty\n")
		write(t, e.local, "staged.txt", "s2 staged\n")
		git(t, e.local, "add", "staged.txt")
		write(t, e.local, "untracked.txt", "new\n")
		write(t, e.local, "ignored.txt", "secret\n")
		require.NoError(t, os.Remove(filepath.Join(e.local, "gone.txt")))
		before := userState(t, e.local)

		r, err := workspace.Prepare(ctx(t), e.spec)
		require.NoError(t, err)
		assert.Equal(t, before, userState(t, e.local), "Prepare touched the user's index, work tree or refs")
		assert.Equal(t, git(t, e.local, "status", "--porcelain"), git(t, e.remote, "status", "--porcelain"))
		assert.Contains(t, git(t, e.remote, "status", "--porcelain"), " M tracked.txt")
		assert.Contains(t, git(t, e.remote, "status", "--porcelain"), "?? untracked.txt")
		assert.Equal(t, "v2 local dirty\n", read(t, e.remote, "tracked.txt"))
		assert.False(t, exists(e.remote, "ignored.txt"), "an ignored file travelled")
		assert.Equal(t, "main\n", git(t, e.remote, "symbolic-ref", "--short", "HEAD"))

		// The agent: a commit, a dirty edit, a sandbox-only file.
		git(t, e.remote, "add", "tracked.txt", "untracked.txt")
		git(t, e.remote, "commit", "-q", "-m", "agent commit")
		write(t, e.remote, "tracked.txt", "v3 dirty in sandbox\n")
		write(t, e.remote, "nested/only.txt", "sandbox only\n")
		oldHead := git(t, e.local, "rev-parse", "HEAD")

		res, err := r.Restore(ctx(t))
		require.NoError(t, err)
		assert.Equal(t, 1, res.Commits)
		assert.False(t, res.Merged)
		assert.NotEqual(t, oldHead, git(t, e.local, "rev-parse", "HEAD"))
		assert.Equal(t, "agent commit\n", git(t, e.local, "log", "-1", "--format=%s"))
		assert.Equal(t, "v3 dirty in sandbox\n", read(t, e.local, "tracked.txt"))
		assert.Equal(t, "sandbox only\n", read(t, e.local, "nested/only.txt"))
		assert.Equal(t, "secret\n", read(t, e.local, "ignored.txt"))
		assert.Contains(t, res.Updated, "tracked.txt")
		assert.Contains(t, res.Updated, "nested/only.txt")
		st := git(t, e.local, "status", "--porcelain")
		assert.Contains(t, st, " M tracked.txt")
		assert.Contains(t, st, "?? nested/")
		assert.NotContains(t, st, "staged.txt", "the agent committed the staged change")
		assert.Contains(t, st, " D gone.txt", "the unstaged deletion is still unstaged")
		assert.NotContains(t, st, "untracked.txt", "the committed file is clean")

		// Restoring again changes nothing.
		res2, err := r.Restore(ctx(t))
		require.NoError(t, err)
		assert.Zero(t, res2.Commits)
		assert.Empty(t, res2.Updated)
	})
}

func TestSecondPrepareSendsOnlyMissingCommits(t *testing.T) {
	eachRunner(t, func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner) {
		e := newEnv(t, newRunner)
		big := make([]byte, 200000)
		_, err := rand.Read(big)
		require.NoError(t, err)
		initRepo(t, e.local, map[string]string{"a": string(big)})
		var first, second int64
		r, err := workspace.Prepare(ctx(t), e.spec, workspace.WithProgress(func(p sandbox.Progress) { first = p.Bytes }))
		require.NoError(t, err)
		_, err = r.Restore(ctx(t))
		require.NoError(t, err)
		write(t, e.local, "b", "small\n")
		git(t, e.local, "add", "b")
		git(t, e.local, "commit", "-q", "-m", "two")
		_, err = workspace.Prepare(ctx(t), e.spec, workspace.WithProgress(func(p sandbox.Progress) { second = p.Bytes }))
		require.NoError(t, err)
		assert.Greater(t, first, int64(0))
		assert.Less(t, second*3, first, "the second bundle (%d bytes) should omit what the sandbox had (first %d)", second, first)
		assert.Equal(t, "small\n", read(t, e.remote, "b"))
		assert.Equal(t, git(t, e.local, "rev-parse", "HEAD"), git(t, e.remote, "rev-parse", "HEAD"))
	})
}

func TestDetachedHeadAndEmptyRepo(t *testing.T) {
	eachRunner(t, func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner) {
		t.Run("detached", func(t *testing.T) {
			e := newEnv(t, newRunner)
			initRepo(t, e.local, map[string]string{"a": "1\n"})
			git(t, e.local, "checkout", "-q", "--detach")
			r, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			assert.Equal(t, git(t, e.local, "rev-parse", "HEAD"), git(t, e.remote, "rev-parse", "HEAD"))
			assert.Equal(t, "HEAD\n", git(t, e.remote, "rev-parse", "--abbrev-ref", "HEAD"))
			write(t, e.remote, "a", "2\n")
			git(t, e.remote, "commit", "-q", "-am", "detached work")
			res, err := r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, 1, res.Commits)
			assert.Equal(t, "2\n", read(t, e.local, "a"))
			assert.Equal(t, "detached work\n", git(t, e.local, "log", "-1", "--format=%s"))
			assert.Empty(t, git(t, e.local, "status", "--porcelain"))
		})
		t.Run("empty", func(t *testing.T) {
			e := newEnv(t, newRunner)
			initRepo(t, e.local, nil)
			write(t, e.local, "draft.txt", "draft\n")
			r, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			assert.Equal(t, "?? draft.txt\n", git(t, e.remote, "status", "--porcelain"))
			git(t, e.remote, "add", "-A")
			git(t, e.remote, "commit", "-q", "-m", "first ever")
			res, err := r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, 1, res.Commits)
			assert.Equal(t, "first ever\n", git(t, e.local, "log", "-1", "--format=%s"))
			assert.Equal(t, "main\n", git(t, e.local, "symbolic-ref", "--short", "HEAD"))
			assert.Empty(t, git(t, e.local, "status", "--porcelain"))
		})
	})
}

func TestConcurrentRounds(t *testing.T) {
	eachRunner(t, func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner) {
		e := newEnv(t, newRunner)
		initRepo(t, e.local, map[string]string{"shared.txt": "base\n", "doomed.txt": "base\n"})
		specB := e.spec
		specB.Remote = e.remote + "-b"
		var ra, rb *workspace.Round
		var wg sync.WaitGroup
		var errA, errB error
		wg.Add(2)
		go func() { defer wg.Done(); ra, errA = workspace.Prepare(ctx(t), e.spec) }()
		go func() { defer wg.Done(); rb, errB = workspace.Prepare(ctx(t), specB) }()
		wg.Wait()
		require.NoError(t, errA)
		require.NoError(t, errB)
		assert.NotEqual(t, ra.ID(), rb.ID())
		assert.Empty(t, git(t, e.local, "for-each-ref", "refs/airlock"), "temporary refs left behind")

		write(t, e.remote, "runs/a/out.txt", "a\n")
		git(t, e.remote, "add", "-A")
		git(t, e.remote, "commit", "-q", "-m", "round a")
		write(t, specB.Remote, "runs/b/out.txt", "b\n")
		require.NoError(t, os.Remove(filepath.Join(specB.Remote, "doomed.txt")))
		git(t, specB.Remote, "add", "-A")
		git(t, specB.Remote, "commit", "-q", "-m", "round b")
		write(t, e.local, "doomed.txt", "edited locally during the run\n")

		var resA, resB *workspace.Result
		wg.Add(2)
		go func() { defer wg.Done(); resA, errA = ra.Restore(ctx(t)) }()
		go func() { defer wg.Done(); resB, errB = rb.Restore(ctx(t)) }()
		wg.Wait()
		require.NoError(t, errA)
		require.NoError(t, errB)
		assert.True(t, resA.Merged != resB.Merged, "exactly one restore merges")
		log := git(t, e.local, "log", "--format=%s")
		assert.Contains(t, log, "round a")
		assert.Contains(t, log, "round b")
		assert.Len(t, strings.Fields(git(t, e.local, "log", "-1", "--format=%p")), 2, "HEAD is a merge commit")
		assert.Equal(t, "airlock\n", git(t, e.local, "log", "-1", "--format=%cn"))
		assert.Equal(t, "a\n", read(t, e.local, "runs/a/out.txt"))
		assert.Equal(t, "b\n", read(t, e.local, "runs/b/out.txt"))
		assert.Equal(t, "edited locally during the run\n", read(t, e.local, "doomed.txt"), "a local edit survives a remote delete")
		assert.Contains(t, resB.Kept, "doomed.txt")
	})
}

func TestIndexUntouched(t *testing.T) {
	eachRunner(t, func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner) {
		e := newEnv(t, newRunner)
		initRepo(t, e.local, map[string]string{"a": "1\n", "b": "1\n"})
		write(t, e.local, "a", "2\n")
		git(t, e.local, "add", "a")
		idx, err := os.ReadFile(filepath.Join(e.local, ".git", "index"))
		require.NoError(t, err)
		cached := git(t, e.local, "diff", "--cached")
		_, err = workspace.Prepare(ctx(t), e.spec)
		require.NoError(t, err)
		idx2, err := os.ReadFile(filepath.Join(e.local, ".git", "index"))
		require.NoError(t, err)
		assert.True(t, bytes.Equal(idx, idx2), "the index file changed")
		assert.Equal(t, cached, git(t, e.local, "diff", "--cached"))
		assert.Equal(t, cached, git(t, e.remote, "diff", "--cached"))
	})
}

func TestPlainDirectory(t *testing.T) {
	eachRunner(t, func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner) {
		e := newEnv(t, newRunner)
		write(t, e.local, "keep.txt", "k\n")
		write(t, e.local, "edit.txt", "e1\n")
		write(t, e.local, "del.txt", "d\n")
		write(t, e.local, "dir/deep.txt", "deep\n")
		write(t, e.local, "localedit.txt", "l1\n")
		require.NoError(t, os.MkdirAll(filepath.Join(e.remote, sandbox.RuntimeDir), 0o755))
		write(t, e.remote, sandbox.RuntimeDir+"/skill.md", "staged\n")
		write(t, e.remote, "stale.txt", "from an older run\n")
		state := t.TempDir()
		r, err := workspace.Prepare(ctx(t), e.spec, workspace.WithStateDir(state))
		require.NoError(t, err)
		assert.False(t, exists(e.remote, "stale.txt"), "the remote directory was not cleared")
		assert.Equal(t, "staged\n", read(t, e.remote, sandbox.RuntimeDir+"/skill.md"), "the runtime directory was not kept")
		assert.Equal(t, "deep\n", read(t, e.remote, "dir/deep.txt"))

		write(t, e.remote, "edit.txt", "e2\n")
		require.NoError(t, os.Remove(filepath.Join(e.remote, "del.txt")))
		write(t, e.remote, "new/file.sh", "#!/bin/sh\n")
		require.NoError(t, os.Chmod(filepath.Join(e.remote, "new/file.sh"), 0o755))
		require.NoError(t, os.Remove(filepath.Join(e.remote, "localedit.txt")))
		write(t, e.local, "localedit.txt", "l2 local\n")

		r2, err := workspace.Reopen(ctx(t), e.spec, r.ID(), workspace.WithStateDir(state))
		require.NoError(t, err)
		res, err := r2.Restore(ctx(t))
		require.NoError(t, err)
		assert.False(t, res.GitBacked)
		assert.Equal(t, []string{"edit.txt", "new/file.sh"}, res.Updated)
		assert.Equal(t, []string{"del.txt"}, res.Deleted)
		assert.Equal(t, []string{"localedit.txt"}, res.Kept)
		assert.Equal(t, []string{sandbox.RuntimeDir + "/skill.md"}, res.Runtime, "a runtime directory entry is listed, never written")
		assert.Empty(t, res.Refused, "a runtime directory entry is not a refusal")
		assert.Equal(t, "e2\n", read(t, e.local, "edit.txt"))
		assert.False(t, exists(e.local, "del.txt"))
		assert.Equal(t, "l2 local\n", read(t, e.local, "localedit.txt"))
		fi, err := os.Stat(filepath.Join(e.local, "new/file.sh"))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm())
		assert.False(t, exists(e.local, sandbox.RuntimeDir+"/skill.md"))

		_, err = workspace.Reopen(ctx(t), e.spec, r.ID())
		assert.ErrorIs(t, err, workspace.ErrSpec, "a plain round needs its state dir")
	})
}

// TestSequentialRestoresStaleBaselines: two rounds prepared from the same
// state each add a nested file; restored one after the other, the second
// (whose baseline predates the first's restore) keeps the first's file.
func TestSequentialRestoresStaleBaselines(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			eachRunner(t, func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner) {
				e := newEnv(t, newRunner)
				files := map[string]string{"dir/keep.txt": "k\n", "top.txt": "t\n"}
				seed(t, e.local, kind, files)
				specB := e.spec
				specB.Remote = e.remote + "-b"
				ra, err := workspace.Prepare(ctx(t), e.spec)
				require.NoError(t, err)
				rb, err := workspace.Prepare(ctx(t), specB)
				require.NoError(t, err)
				write(t, e.remote, "dir/a/run1.txt", "run 1\n")
				write(t, specB.Remote, "dir/b/run2.txt", "run 2\n")
				if kind == "git" {
					git(t, e.remote, "add", "-A")
					git(t, e.remote, "commit", "-q", "-m", "run 1")
				}

				resA, err := ra.Restore(ctx(t))
				require.NoError(t, err)
				assert.Equal(t, []string{"dir/a/run1.txt"}, resA.Updated)
				resB, err := rb.Restore(ctx(t))
				require.NoError(t, err)
				assert.Equal(t, []string{"dir/b/run2.txt"}, resB.Updated)
				assert.Empty(t, resB.Deleted, "the stale baseline deleted something")
				assert.Empty(t, resB.Kept)
				assert.Equal(t, "run 1\n", read(t, e.local, "dir/a/run1.txt"))
				assert.Equal(t, "run 2\n", read(t, e.local, "dir/b/run2.txt"))
				assert.Equal(t, "k\n", read(t, e.local, "dir/keep.txt"))
				if kind == "git" {
					assert.Equal(t, 1, resA.Commits)
					assert.Zero(t, resB.Commits)
					assert.Equal(t, "run 1\n", git(t, e.local, "log", "-1", "--format=%s"))
					assert.Equal(t, "?? dir/b/\n", git(t, e.local, "status", "--porcelain"))
				}
			})
		})
	}
}
