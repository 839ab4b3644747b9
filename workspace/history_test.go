package workspace_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

// hostHas reports whether the host repository's object store holds obj
// (git cat-file -e, no alternates).
func hostHas(t *testing.T, dir, obj string) bool {
	t.Helper()
	cmd := exec.Command("git", "-C", dir, "cat-file", "-e", obj)
	cmd.Env = append(os.Environ(), gitEnv...)
	return cmd.Run() == nil
}

// TestRuntimeDirNeverInHistory: the agent commits the runtime directory
// (git add -A after it un-ignores nothing, git add -f) and paths matching
// Spec.Exclude, several commits deep and through a merge commit. Over every
// runner: Prepare makes the sandbox's git ignore the runtime directory;
// Restore integrates rewritten commits that hold neither (an excluded file
// the local history tracks keeps its local version), lists them in
// Result.Rewritten, and no original commit, nor any object naming the
// runtime directory, enters the host's object store; all other changes
// arrive with their messages, authors and dates.
func TestRuntimeDirNeverInHistory(t *testing.T) {
	eachRunner(t, func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner) {
		e := newEnv(t, newRunner)
		e.spec.Exclude = []string{"secret.env", "cfg/*.env"}
		initRepo(t, e.local, map[string]string{"a": "1\n", "cfg/local.env": "host\n"})
		write(t, e.local, "exclude-me-not", "x\n")
		git(t, e.local, "add", "exclude-me-not")
		git(t, e.local, "commit", "-q", "-m", "second")
		r, err := workspace.Prepare(ctx(t), e.spec)
		require.NoError(t, err)
		exclude := read(t, e.remote, ".git/info/exclude")
		assert.Contains(t, strings.Split(exclude, "\n"), "/"+sandbox.RuntimeDir)

		// What a stage leaves in the sandbox's runtime directory.
		write(t, e.remote, sandbox.RuntimeDir+"/skills/s1/SKILL.md", "skill\n")
		assert.Equal(t, "", git(t, e.remote, "status", "--porcelain"), "the runtime directory is not ignored in the sandbox")

		gitAt := func(date string, args ...string) {
			t.Helper()
			cmd := exec.Command("git", args...)
			cmd.Dir = e.remote
			cmd.Env = append(os.Environ(), gitEnv...)
			cmd.Env = append(cmd.Env, "GIT_AUTHOR_DATE="+date, "GIT_COMMITTER_DATE="+date, "GIT_AUTHOR_NAME=Agent Smith", "GIT_AUTHOR_EMAIL=agent@example.com")
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "git %v: %s", args, out)
		}
		// 1: a plain git add -A (the ignore keeps the runtime directory out).
		write(t, e.remote, "a", "2\n")
		gitAt("1700000001 +0100", "add", "-A")
		gitAt("1700000001 +0100", "commit", "-q", "-m", "one: add -A")
		// 2: git add -f of the runtime directory, beside a real change.
		write(t, e.remote, "b.txt", "b\n")
		write(t, e.remote, ".AIRLOCK/y", "the runtime directory to a case-folding file system\n")
		gitAt("1700000002 +0100", "add", "-f", sandbox.RuntimeDir, ".AIRLOCK", "b.txt")
		gitAt("1700000002 +0100", "commit", "-q", "-m", "two: add -f")
		// 3: excluded paths: a new one, and one the local history tracks.
		write(t, e.remote, "secret.env", "agent secret\n")
		write(t, e.remote, "cfg/local.env", "agent\n")
		write(t, e.remote, "c.txt", "c\n")
		gitAt("1700000003 +0100", "add", "-A")
		gitAt("1700000003 +0100", "commit", "-q", "-m", "three: excluded")
		// 4: a side branch with more of the runtime directory, merged.
		gitAt("1700000004 +0100", "checkout", "-q", "-b", "side", "HEAD~2")
		write(t, e.remote, "d.txt", "d\n")
		write(t, e.remote, sandbox.RuntimeDir+"/side", "side\n")
		gitAt("1700000004 +0100", "add", "-f", "d.txt", sandbox.RuntimeDir+"/side")
		gitAt("1700000004 +0100", "commit", "-q", "-m", "four: side")
		gitAt("1700000005 +0100", "checkout", "-q", "main")
		gitAt("1700000005 +0100", "merge", "-q", "--no-ff", "-m", "five: merge", "side")
		// 6: a clean commit on top.
		write(t, e.remote, "e.txt", "e\n")
		gitAt("1700000006 +0100", "add", "e.txt")
		gitAt("1700000006 +0100", "commit", "-q", "-m", "six: on top")
		write(t, e.remote, "dirty.txt", "dirty\n")
		sandboxLog := git(t, e.remote, "log", "--format=%an <%ae> %ad %cd %s", "--date=raw")
		sandboxCommits := strings.Fields(git(t, e.remote, "rev-list", "main", "--not", strings.TrimSpace(git(t, e.local, "rev-parse", "HEAD"))))
		require.Len(t, sandboxCommits, 6)

		res, err := r.Restore(ctx(t))
		require.NoError(t, err)
		assert.Equal(t, 6, res.Commits)
		// Commit one is clean and stays; every other is rewritten.
		require.Len(t, res.Rewritten, 5, "%+v", res.Rewritten)
		for _, rw := range res.Rewritten {
			assert.Contains(t, sandboxCommits, rw.Old)
			assert.False(t, hostHas(t, e.local, rw.Old), "the original commit %s entered the host's object store", rw.Old)
			assert.True(t, hostHas(t, e.local, rw.New), "the rewritten commit %s is missing", rw.New)
		}
		assert.Equal(t, strings.TrimSpace(git(t, e.local, "rev-parse", "HEAD")), res.Rewritten[len(res.Rewritten)-1].New)
		assert.Equal(t, sandboxLog, git(t, e.local, "log", "--format=%an <%ae> %ad %cd %s", "--date=raw"), "messages, authors or dates changed")

		files := strings.Fields(git(t, e.local, "ls-tree", "-r", "--name-only", "HEAD"))
		assert.Equal(t, []string{"a", "b.txt", "c.txt", "cfg/local.env", "d.txt", "e.txt", "exclude-me-not"}, files)
		assert.Equal(t, "host\n", git(t, e.local, "show", "HEAD:cfg/local.env"), "an excluded path the local history tracks changed")
		for _, l := range strings.Split(git(t, e.local, "rev-list", "--all", "--objects"), "\n") {
			assert.NotContains(t, strings.ToLower(l), sandbox.RuntimeDir, "reachable object %q", l)
			assert.NotContains(t, l, "secret.env", "reachable object %q", l)
		}
		for _, p := range []string{"a", "b.txt", "c.txt", "d.txt", "e.txt", "dirty.txt"} {
			assert.True(t, exists(e.local, p), "%s did not arrive", p)
		}
		assert.Equal(t, "2\n", read(t, e.local, "a"))
		assert.False(t, exists(e.local, sandbox.RuntimeDir), "the runtime directory came back")
		assert.False(t, exists(e.local, "secret.env"), "an excluded file came back")
		assert.Equal(t, "?? dirty.txt\n", git(t, e.local, "status", "--porcelain", "--untracked-files=all"))
		assert.NotContains(t, git(t, e.local, "ls-files"), sandbox.RuntimeDir)
		assert.Empty(t, git(t, e.local, "for-each-ref", "refs/airlock"))
		git(t, e.local, "fsck", "--strict", "--no-progress")
		assertNoQuarantine(t, e.local)

		// Every one of the sandbox's commits: none is in the host as it is
		// but the first, which holds no excluded path.
		for i, c := range sandboxCommits {
			want := i == len(sandboxCommits)-1
			assert.Equal(t, want, hostHas(t, e.local, c), "sandbox commit %d %s", i, c)
		}
		// Restoring again rewrites to the same commits: nothing new.
		again, err := r.Restore(ctx(t))
		require.NoError(t, err)
		assert.Equal(t, 0, again.Commits)
		assert.Equal(t, res.Rewritten, again.Rewritten)
		assert.Equal(t, res.Head, again.Head)
		assert.Empty(t, git(t, e.local, "for-each-ref", "refs/airlock"))
		assertNoQuarantine(t, e.local)

		// The next round starts from the rewritten history.
		r2, err := workspace.Prepare(ctx(t), e.spec)
		require.NoError(t, err)
		assert.Equal(t, git(t, e.local, "rev-parse", "HEAD"), git(t, e.remote, "rev-parse", "HEAD"))
		assert.Equal(t, 1, strings.Count(read(t, e.remote, ".git/info/exclude"), "/"+sandbox.RuntimeDir+"\n"), "the exclude line was added twice")
		write(t, e.remote, "f.txt", "f\n")
		git(t, e.remote, "add", "-A")
		git(t, e.remote, "commit", "-q", "-m", "seven")
		res, err = r2.Restore(ctx(t))
		require.NoError(t, err)
		assert.Equal(t, 1, res.Commits)
		assert.Empty(t, res.Rewritten)
		assert.NotContains(t, git(t, e.local, "ls-tree", "-r", "--name-only", "HEAD"), sandbox.RuntimeDir)
	})
}

func assertNoQuarantine(t *testing.T, local string) {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(local, ".git", "objects"))
	require.NoError(t, err)
	for _, e := range ents {
		assert.False(t, strings.HasPrefix(e.Name(), "airlock-"), "a quarantine was left: %s", e.Name())
	}
}

// TestSandboxExcludeKept: Prepare appends the runtime directory to the
// sandbox's .git/info/exclude once, keeping the lines there, also a last
// line without its newline.
func TestSandboxExcludeKept(t *testing.T) {
	e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
	initRepo(t, e.local, map[string]string{"a": "1\n"})
	require.NoError(t, os.MkdirAll(e.remote, 0o755))
	git(t, e.remote, "init", "-q")
	write(t, e.remote, ".git/info/exclude", "# mine\n*.log\nbuild/")
	for range 2 {
		_, err := workspace.Prepare(ctx(t), e.spec)
		require.NoError(t, err)
	}
	assert.Equal(t, "# mine\n*.log\nbuild/\n# airlock: the runtime directory\n/"+sandbox.RuntimeDir+"\n", read(t, e.remote, ".git/info/exclude"))
	write(t, e.remote, "x.log", "log\n")
	write(t, e.remote, sandbox.RuntimeDir+"/skills/x", "x\n")
	assert.Equal(t, "", git(t, e.remote, "status", "--porcelain"))
	assert.True(t, slices.Contains(strings.Split(read(t, e.remote, ".git/info/exclude"), "\n"), "build/"))
}

// TestRuntimeDirInRootCommit: on an unborn local branch the agent's first
// (root) commit holds the runtime directory: it arrives rewritten without
// it, the original never enters the host's object store.
func TestRuntimeDirInRootCommit(t *testing.T) {
	e := newEnv(t, runners[0].new)
	initRepo(t, e.local, nil)
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	write(t, e.remote, "a.txt", "a\n")
	write(t, e.remote, sandbox.RuntimeDir+"/skills/x", "x\n")
	git(t, e.remote, "add", "-f", ".")
	git(t, e.remote, "commit", "-q", "-m", "root")
	orig := strings.TrimSpace(git(t, e.remote, "rev-parse", "HEAD"))
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	require.Len(t, res.Rewritten, 1)
	assert.Equal(t, orig, res.Rewritten[0].Old)
	assert.Equal(t, res.Rewritten[0].New, res.Head)
	assert.Equal(t, 1, res.Commits)
	assert.False(t, hostHas(t, e.local, orig), "the original root commit entered the host's object store")
	assert.Equal(t, "a.txt\n", git(t, e.local, "ls-tree", "-r", "--name-only", "HEAD"))
	assert.Equal(t, "0\n", git(t, e.local, "rev-list", "--count", "HEAD^@"), "the rewritten root commit has a parent")
	assert.Equal(t, "", git(t, e.local, "status", "--porcelain"))
	git(t, e.local, "fsck", "--strict", "--no-progress")
}

// TestRuntimeDirDiverged: the local branch moved during the run; the
// agent's commit holding the runtime directory is rewritten and merged.
func TestRuntimeDirDiverged(t *testing.T) {
	e := newEnv(t, runners[0].new)
	r := prepareOneFile(t, e, "git")
	write(t, e.local, "h.txt", "host\n")
	git(t, e.local, "add", "h.txt")
	git(t, e.local, "commit", "-q", "-m", "host meanwhile")
	write(t, e.remote, "b.txt", "b\n")
	write(t, e.remote, sandbox.RuntimeDir+"/x", "x\n")
	git(t, e.remote, "add", "-f", "b.txt", sandbox.RuntimeDir)
	git(t, e.remote, "commit", "-q", "-m", "agent")
	orig := strings.TrimSpace(git(t, e.remote, "rev-parse", "HEAD"))
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.True(t, res.Merged)
	require.Len(t, res.Rewritten, 1)
	assert.Equal(t, orig, res.Rewritten[0].Old)
	assert.Equal(t, res.Rewritten[0].New+"\n", git(t, e.local, "rev-parse", "HEAD^2"))
	assert.Equal(t, "a\nb.txt\nh.txt\n", git(t, e.local, "ls-tree", "-r", "--name-only", "HEAD"))
	assert.False(t, hostHas(t, e.local, orig))
	assert.Equal(t, "", git(t, e.local, "status", "--porcelain"))
	assert.Empty(t, git(t, e.local, "for-each-ref", "refs/airlock"))
	git(t, e.local, "fsck", "--strict", "--no-progress")
}
