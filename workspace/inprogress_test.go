package workspace_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/workspace"
)

// TestRestoreRefusedMidOperation: a Restore while the user's rebase,
// bisect, cherry-pick or merge is stopped half-way changes nothing and
// says how to go on; once the user has ended it, the agent's commit
// arrives on the branch. Before, a Restore during a rebase stopped on a
// conflict merged the agent's commit into the rebase's detached HEAD, and
// the user's `git rebase --abort` left it behind with no word, and a
// Restore into a stopped merge staged the agent's new file, which the
// user's `git merge --abort` then deleted (outside testers' findings).
func TestRestoreRefusedMidOperation(t *testing.T) {
	for _, c := range []struct {
		name, what string
		start      func(t *testing.T, dir string)
		end        []string
	}{
		{"rebase", "a rebase is in progress", func(t *testing.T, dir string) {
			startConflict(t, dir, "rebase", "up")
		}, []string{"rebase", "--abort"}},
		{"bisect", "a bisect is in progress", func(t *testing.T, dir string) {
			git(t, dir, "bisect", "start")
			git(t, dir, "bisect", "bad")
			git(t, dir, "bisect", "good", "HEAD~1")
		}, []string{"bisect", "reset"}},
		{"cherry-pick", "a cherry-pick is in progress", func(t *testing.T, dir string) {
			startConflict(t, dir, "cherry-pick", "up")
		}, []string{"cherry-pick", "--abort"}},
		{"merge", "a merge is in progress", func(t *testing.T, dir string) {
			startConflict(t, dir, "merge", "up")
		}, []string{"merge", "--abort"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, runners[0].new)
			initRepo(t, e.local, map[string]string{"f": "base\n", "g": "g\n"})
			git(t, e.local, "checkout", "-q", "-b", "up")
			write(t, e.local, "f", "theirs\n")
			git(t, e.local, "commit", "-qam", "up")
			git(t, e.local, "checkout", "-q", "-")
			write(t, e.local, "f", "ours\n")
			git(t, e.local, "commit", "-qam", "ours")

			round, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			write(t, e.remote, "g", "agent\n")
			git(t, e.remote, "commit", "-qam", "agent")
			agent := strings.TrimSpace(git(t, e.remote, "rev-parse", "HEAD"))

			c.start(t, e.local)
			head := git(t, e.local, "rev-parse", "HEAD")
			_, err = round.Restore(ctx(t))
			require.ErrorIs(t, err, workspace.ErrRepo)
			assert.Contains(t, err.Error(), c.what+" in "+e.local)
			assert.Contains(t, err.Error(), "then run Restore again; nothing was changed")
			assert.Equal(t, head, git(t, e.local, "rev-parse", "HEAD"), "nothing changed")
			assert.Equal(t, "g\n", read(t, e.local, "g"))

			git(t, e.local, c.end...)
			res, err := round.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, "main\n", git(t, e.local, "branch", "--show-current"))
			assert.Equal(t, "agent\n", read(t, e.local, "g"))
			assert.NotEmpty(t, res.Head)
			require.NoError(t, exec.Command("git", "-C", e.local, "merge-base", "--is-ancestor", agent, "HEAD").Run(), "the agent's commit is on the branch")
		})
	}
}

// startConflict runs git cmd arg in dir, which stops on a conflict in f.
func startConflict(t *testing.T, dir, cmd, arg string) {
	t.Helper()
	out, err := exec.Command("git", "-C", dir, cmd, arg).CombinedOutput()
	require.Error(t, err, "%s %s should stop on a conflict: %s", cmd, arg, out)
	_, err = exec.Command("git", "-C", dir, "rev-parse", "-q", "--verify", "HEAD").Output()
	require.NoError(t, err)
	assert.FileExists(t, filepath.Join(dir, "f"))
}
