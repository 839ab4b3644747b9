package workspace_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

// A round is restored more than once: after each Restore, what arrived is
// the baseline of the next, so the agent's later work arrives too, a
// later revert in the sandbox arrives as a revert, and only the user's
// own edits are kept.

// TestRestoreAgainCommits: the agent commits, the host restores, the
// agent commits again: the second Restore brings the second commit's
// file, not a "kept" first version that git status then shows as a
// revert of the agent's commit.
func TestRestoreAgainCommits(t *testing.T) {
	eachRunner(t, func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner) {
		e := newEnv(t, newRunner)
		r := prepareOneFile(t, e, "git")
		for _, v := range []string{"x\n", "y\n", "z\n"} {
			write(t, e.remote, "a", v)
			git(t, e.remote, "commit", "-q", "-am", "agent "+v[:1])
			res, err := r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, v, read(t, e.local, "a"))
			assert.Equal(t, []string{"a"}, res.Updated)
			assert.Empty(t, res.Kept)
			assert.Empty(t, git(t, e.local, "status", "--porcelain"), "the work tree is the agent's last commit")
			assert.Equal(t, git(t, e.remote, "log", "--format=%s"), git(t, e.local, "log", "--format=%s"))
		}
	})
}

// TestRestoreAgainUncommitted covers edits, new files and deletions left
// uncommitted, over both kinds of work tree.
func TestRestoreAgainUncommitted(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, localRunner)
			r := prepareOneFile(t, e, kind)
			steps := []struct {
				do             func()
				a, n           string // "" when absent
				updated, delet []string
			}{
				{func() { write(t, e.remote, "a", "x\n"); write(t, e.remote, "n", "new\n") }, "x\n", "new\n", []string{"a", "n"}, nil},
				{func() { write(t, e.remote, "a", "y\n"); write(t, e.remote, "n", "newer\n") }, "y\n", "newer\n", []string{"a", "n"}, nil},
				{func() { require.NoError(t, os.Remove(filepath.Join(e.remote, "n"))) }, "y\n", "", nil, []string{"n"}},
				{func() { write(t, e.remote, "a", "1\n") }, "1\n", "", []string{"a"}, nil}, // back to the prepare-time file
				{func() { write(t, e.remote, "n", "again\n") }, "1\n", "again\n", []string{"n"}, nil},
			}
			for i, s := range steps {
				s.do()
				res, err := r.Restore(ctx(t))
				require.NoError(t, err, "step %d", i)
				for rel, want := range map[string]string{"a": s.a, "n": s.n} {
					if want == "" {
						assert.False(t, exists(e.local, rel), "step %d: %s", i, rel)
					} else {
						assert.Equal(t, want, read(t, e.local, rel), "step %d: %s", i, rel)
					}
				}
				assert.Equal(t, s.updated, res.Updated, "step %d", i)
				assert.Equal(t, s.delet, res.Deleted, "step %d", i)
				assert.Empty(t, res.Kept, "step %d", i)
				again, err := r.Restore(ctx(t))
				require.NoError(t, err, "step %d, again", i)
				assert.Empty(t, again.Updated, "step %d: restoring again changes nothing", i)
				assert.Empty(t, again.Deleted, "step %d: restoring again changes nothing", i)
			}
		})
	}
}

// TestRestoreAgainRevertToPrepare: the agent changes a file, the host
// restores it, and the agent then puts the whole sandbox back as Prepare
// left it (git checkout): the next Restore brings the revert.
func TestRestoreAgainRevertToPrepare(t *testing.T) {
	e := newEnv(t, localRunner)
	r := prepareOneFile(t, e, "git")
	write(t, e.remote, "a", "x\n")
	_, err := r.Restore(ctx(t))
	require.NoError(t, err)
	require.Equal(t, "x\n", read(t, e.local, "a"))
	git(t, e.remote, "checkout", "--", "a")
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, "1\n", read(t, e.local, "a"))
	assert.Equal(t, []string{"a"}, res.Updated)
	assert.Empty(t, git(t, e.local, "status", "--porcelain"))
}

// TestRestoreAgainKeepsUserEdits: a local edit made before or between
// restores keeps winning, and is listed in Kept each time the sandbox
// changes the file.
func TestRestoreAgainKeepsUserEdits(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, localRunner)
			r := prepareOneFile(t, e, kind)
			write(t, e.local, "b", "mine\n") // untracked, before the first restore
			write(t, e.remote, "a", "x\n")
			write(t, e.remote, "b", "agent\n")
			res, err := r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, []string{"b"}, res.Kept)
			assert.Equal(t, "x\n", read(t, e.local, "a"))
			write(t, e.local, "a", "user\n") // between the restores
			write(t, e.remote, "a", "y\n")
			write(t, e.remote, "b", "agent2\n")
			res, err = r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, []string{"a", "b"}, res.Kept)
			assert.Empty(t, res.Updated)
			assert.Equal(t, "user\n", read(t, e.local, "a"))
			assert.Equal(t, "mine\n", read(t, e.local, "b"))
			// The user undoes the edit (back to what the first Restore
			// brought, the baseline there): the agent's next change
			// arrives. (Taking the agent's "y" by hand would still be
			// an edit against that baseline, and kept.)
			write(t, e.local, "a", "x\n")
			write(t, e.remote, "a", "w\n")
			res, err = r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, []string{"b"}, res.Kept)
			assert.Equal(t, []string{"a"}, res.Updated)
			assert.Equal(t, "w\n", read(t, e.local, "a"))
		})
	}
}

// TestRestoreAgainStaged: what the agent stages after a restore arrives
// staged; an entry it unstages again leaves the local index as the
// prepare-time index had it.
func TestRestoreAgainStaged(t *testing.T) {
	e := newEnv(t, localRunner)
	r := prepareOneFile(t, e, "git")
	stagedBlob := func(dir, p string) string {
		out := strings.Fields(git(t, dir, "ls-files", "-s", "--", p))
		if len(out) < 2 {
			return ""
		}
		return out[1]
	}
	write(t, e.remote, "b", "1\n")
	git(t, e.remote, "add", "b")
	_, err := r.Restore(ctx(t))
	require.NoError(t, err)
	require.Equal(t, stagedBlob(e.remote, "b"), stagedBlob(e.local, "b"))
	write(t, e.remote, "b", "2\n")
	write(t, e.remote, "a", "2\n")
	git(t, e.remote, "add", "a", "b")
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Empty(t, res.Kept)
	for _, p := range []string{"a", "b"} {
		assert.Equal(t, stagedBlob(e.remote, p), stagedBlob(e.local, p), p)
	}
	// The agent unstages both: b leaves the index, a is HEAD's again.
	git(t, e.remote, "reset", "-q", "--", "a", "b")
	res, err = r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Empty(t, res.Kept)
	assert.Empty(t, stagedBlob(e.local, "b"))
	assert.Equal(t, stagedBlob(e.remote, "a"), stagedBlob(e.local, "a"))
	assert.Equal(t, git(t, e.remote, "status", "--porcelain"), git(t, e.local, "status", "--porcelain"))
}

// TestRestoreAgainAfterReopen: the moved baseline is part of the round's
// saved state.
func TestRestoreAgainAfterReopen(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, localRunner)
			state := t.TempDir()
			if kind == "git" {
				initRepo(t, e.local, map[string]string{"a": "1\n"})
			} else {
				write(t, e.local, "a", "1\n")
			}
			r, err := workspace.Prepare(ctx(t), e.spec, workspace.WithStateDir(state))
			require.NoError(t, err)
			write(t, e.remote, "a", "x\n")
			_, err = r.Restore(ctx(t))
			require.NoError(t, err)
			r2, err := workspace.Reopen(ctx(t), e.spec, r.ID(), workspace.WithStateDir(state))
			require.NoError(t, err)
			write(t, e.remote, "a", "y\n")
			res, err := r2.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, "y\n", read(t, e.local, "a"))
			assert.Empty(t, res.Kept)
		})
	}
}

// TestRestoreAgainBaselineNotSaved: a Restore whose work arrived but whose
// new baseline cannot be saved fails so; restoring again, once the cause
// is gone, saves it, and the agent's next change arrives (also after
// Reopen).
func TestRestoreAgainBaselineNotSaved(t *testing.T) {
	e := newEnv(t, localRunner)
	state := t.TempDir()
	write(t, e.local, "a", "1\n")
	r, err := workspace.Prepare(ctx(t), e.spec, workspace.WithStateDir(state))
	require.NoError(t, err)
	// A directory where the manifest's rename must land: no rename
	// replaces it, not even root's.
	manifest := filepath.Join(state, r.ID()+".manifest.json")
	saved, err := os.ReadFile(manifest)
	require.NoError(t, err)
	require.NoError(t, os.Remove(manifest))
	write(t, manifest, "x", "")
	write(t, e.remote, "a", "x\n")
	_, err = r.Restore(ctx(t))
	require.ErrorContains(t, err, "the round's new baseline could not be saved")
	require.ErrorContains(t, err, manifest)
	assert.Equal(t, "x\n", read(t, e.local, "a"), "the work arrived")
	require.NoError(t, os.RemoveAll(manifest))
	require.NoError(t, os.WriteFile(manifest, saved, 0o600))
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Empty(t, res.Updated)
	assert.Empty(t, res.Kept)
	r2, err := workspace.Reopen(ctx(t), e.spec, r.ID(), workspace.WithStateDir(state))
	require.NoError(t, err)
	write(t, e.remote, "a", "y\n")
	res, err = r2.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, res.Updated)
	assert.Equal(t, "y\n", read(t, e.local, "a"))
}

// TestRestoreAgainRefusedStaysRefused: an entry the host refused does not
// become the baseline: a hostile sandbox's link out of the work tree is
// refused, and listed, on every Restore, over both kinds.
func TestRestoreAgainRefusedStaysRefused(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, localRunner)
			r := prepareOneFile(t, e, kind)
			require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(e.remote, "out")))
			write(t, e.remote, "a", "x\n")
			for i, v := range []string{"x\n", "y\n"} {
				write(t, e.remote, "a", v)
				res, err := r.Restore(ctx(t))
				require.NoError(t, err, "restore %d", i)
				assert.Contains(t, res.Refused, "out", "restore %d", i)
				assert.False(t, exists(e.local, "out"), "restore %d", i)
				assert.Equal(t, v, read(t, e.local, "a"), "restore %d", i)
			}
		})
	}
}

// TestRestoreAgainPlainLinkChangesType: a link that arrived in a plain
// round is part of its baseline: the sandbox then turning it into a
// directory, into a file, and deleting it all arrive, and a user's
// retarget of it is kept.
func TestRestoreAgainPlainLinkChangesType(t *testing.T) {
	e := newEnv(t, localRunner)
	r := prepareOneFile(t, e, "plain")
	require.NoError(t, os.Symlink("a", filepath.Join(e.remote, "l")))
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	require.Equal(t, []string{"l"}, res.Updated)
	require.NoError(t, os.Remove(filepath.Join(e.remote, "l")))
	write(t, e.remote, "l/x", "in\n")
	res, err = r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Empty(t, res.Refused, "reasons: %v", res.Reasons)
	assert.Equal(t, "in\n", read(t, e.local, "l/x"))
	require.NoError(t, os.RemoveAll(filepath.Join(e.remote, "l")))
	write(t, e.remote, "l", "file\n")
	res, err = r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Empty(t, res.Refused, "reasons: %v", res.Reasons)
	assert.Equal(t, "file\n", read(t, e.local, "l"))
	// Back to a link; the user retargets it: the agent's next change is
	// kept out, and the link stays the user's.
	require.NoError(t, os.Remove(filepath.Join(e.remote, "l")))
	require.NoError(t, os.Symlink("a", filepath.Join(e.remote, "l")))
	_, err = r.Restore(ctx(t))
	require.NoError(t, err)
	require.NoError(t, os.Remove(filepath.Join(e.local, "l")))
	require.NoError(t, os.Symlink("mine", filepath.Join(e.local, "l")))
	require.NoError(t, os.Remove(filepath.Join(e.remote, "l")))
	res, err = r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, []string{"l"}, res.Kept)
	got, err := os.Readlink(filepath.Join(e.local, "l"))
	require.NoError(t, err)
	assert.Equal(t, "mine", got)
}
