package workspace_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

// TestNoRemoteGit is the contract: no remote anywhere, the commit and its
// bytes still come back.
func TestNoRemoteGit(t *testing.T) {
	eachRunner(t, func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner) {
		e := newEnv(t, newRunner)
		initRepo(t, e.local, map[string]string{"a.txt": "one\n"})
		assert.Empty(t, git(t, e.local, "remote"))
		r, err := workspace.Prepare(ctx(t), e.spec)
		require.NoError(t, err)
		assert.Empty(t, git(t, e.remote, "remote"))
		write(t, e.remote, "b.txt", "from the sandbox\n")
		git(t, e.remote, "add", "b.txt")
		git(t, e.remote, "commit", "-q", "-m", "sandbox work")
		res, err := r.Restore(ctx(t))
		require.NoError(t, err)
		assert.True(t, res.GitBacked)
		assert.Equal(t, 1, res.Commits)
		assert.Equal(t, "sandbox work\n", git(t, e.local, "log", "-1", "--format=%s"))
		assert.Equal(t, "from the sandbox\n", read(t, e.local, "b.txt"))
		assert.Equal(t, strings.TrimSpace(git(t, e.local, "rev-parse", "HEAD")), res.Head)
		assert.Empty(t, git(t, e.local, "remote"))
		assert.Empty(t, git(t, e.remote, "remote"))
		assert.Empty(t, git(t, e.local, "status", "--porcelain"))
	})
}
