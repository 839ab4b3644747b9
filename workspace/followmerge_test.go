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

// TestRestoreWorkTreeFollowsMerge: the user committed a change of f during
// the round and the agent committed another change of f; the Restore
// merges the two commits, and where neither side left an uncommitted edit
// of f the work tree takes the merge's f, as git merge writes it. Before,
// f was Kept with the user's committed version, which against the merge
// commit undid the agent's change: `git status` showed it modified, and
// the user's next `git commit -a` reverted the agent's work (an outside
// tester's finding). An uncommitted edit on either side still keeps the
// local file.
func TestRestoreWorkTreeFollowsMerge(t *testing.T) {
	lines := "1\n2\n3\n4\n5\n"
	for _, c := range []struct {
		name        string
		userDirty   bool // an uncommitted local edit of f on top of the user's commit
		agentDirty  bool // an uncommitted sandbox edit of f on top of the agent's commit
		wantF       string
		wantKept    []string
		wantChanged bool // git status shows f modified after the Restore
	}{
		{"both committed", false, false, "A\n2\n3\n4\nU\n", nil, false},
		{"user dirty", true, false, "1\n2\n3\n4\nU\nmore\n", []string{"f"}, true},
		{"agent dirty", false, true, "1\n2\n3\n4\nU\n", []string{"f"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, runners[0].new)
			initRepo(t, e.local, map[string]string{"f": lines, "g": "g\n"})
			round, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)

			write(t, e.local, "f", strings.Replace(lines, "5", "U", 1))
			git(t, e.local, "commit", "-qam", "user")
			if c.userDirty {
				write(t, e.local, "f", strings.Replace(lines, "5", "U", 1)+"more\n")
			}
			write(t, e.remote, "f", strings.Replace(lines, "1", "A", 1))
			write(t, e.remote, "g", "agent\n")
			git(t, e.remote, "commit", "-qam", "agent")
			if c.agentDirty {
				write(t, e.remote, "f", strings.Replace(lines, "1", "A", 1)+"dirty\n")
			}

			res, err := round.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, c.wantKept, res.Kept)
			assert.Equal(t, c.wantF, read(t, e.local, "f"))
			assert.Equal(t, "agent\n", read(t, e.local, "g"))
			assert.Equal(t, "A\n2\n3\n4\nU\n", git(t, e.local, "show", "HEAD:f"), "the merge holds both changes")
			status := git(t, e.local, "status", "--porcelain", "--", "f")
			assert.Equal(t, c.wantChanged, status != "", "git status: %q", status)

			// The next Restore of an unchanged sandbox changes nothing
			// (and, where the merge's file was taken, keeps nothing).
			res, err = round.Restore(ctx(t))
			require.NoError(t, err)
			assert.Empty(t, res.Updated)
			if c.wantKept == nil {
				assert.Empty(t, res.Kept)
			}
			assert.Equal(t, c.wantF, read(t, e.local, "f"))
		})
	}
}

// TestRestoreFollowsMergeKeepsUncommittedChmod: the user's only
// uncommitted change of a file both sides committed is its executable bit;
// that is a local edit, and the file is Kept with it.
func TestRestoreFollowsMergeKeepsUncommittedChmod(t *testing.T) {
	lines := "1\n2\n3\n4\n5\n"
	e := newEnv(t, runners[0].new)
	initRepo(t, e.local, map[string]string{"f": lines})
	round, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	write(t, e.local, "f", strings.Replace(lines, "5", "U", 1))
	git(t, e.local, "commit", "-qam", "user")
	require.NoError(t, os.Chmod(filepath.Join(e.local, "f"), 0o755))
	write(t, e.remote, "f", strings.Replace(lines, "1", "A", 1))
	git(t, e.remote, "commit", "-qam", "agent")

	res, err := round.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, []string{"f"}, res.Kept)
	fi, err := os.Stat(filepath.Join(e.local, "f"))
	require.NoError(t, err)
	assert.NotZero(t, fi.Mode().Perm()&0o100, "the user's chmod stays")
	assert.Equal(t, strings.Replace(lines, "5", "U", 1), read(t, e.local, "f"))
}

// TestRestoreFollowsFastForward: after a first Restore, the user follows
// a ConflictError's advice (moves the local commits aside and resets the
// branch to the round's start), and the agent commits again; the next
// Restore fast-forwards, and the work tree takes the sandbox HEAD's file
// where the local one is the local HEAD's, as git merge --ff writes it.
// Before, the reset file was Kept as a local edit that undid both of the
// agent's commits (an outside tester's finding).
func TestRestoreFollowsFastForward(t *testing.T) {
	e := newEnv(t, runners[0].new)
	initRepo(t, e.local, map[string]string{"f": "0\n"})
	start := strings.TrimSpace(git(t, e.local, "rev-parse", "HEAD"))
	round, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	write(t, e.remote, "f", "a1\n")
	git(t, e.remote, "commit", "-qam", "a1")
	_, err = round.Restore(ctx(t))
	require.NoError(t, err)

	git(t, e.local, "branch", "mine")
	git(t, e.local, "reset", "-q", "--keep", start)
	write(t, e.remote, "f", "a1\nagent\n")
	git(t, e.remote, "commit", "-qam", "agent")
	res, err := round.Restore(ctx(t))
	require.NoError(t, err)
	assert.Empty(t, res.Kept)
	assert.Equal(t, "a1\nagent\n", read(t, e.local, "f"))
	assert.Empty(t, git(t, e.local, "status", "--porcelain", "--untracked-files=no"))

	res, err = round.Restore(ctx(t))
	require.NoError(t, err)
	assert.Empty(t, res.Kept)
	assert.Empty(t, res.Updated)
}
