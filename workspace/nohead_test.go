package workspace_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/workspace"
)

// TestRestoreSaysTheSandboxHeadIsGone: the agent breaks the sandbox's HEAD
// (a symbolic ref out of refs/heads) after committing; the Restore brings
// the work tree back as edits and says, in Refused, that the sandbox's
// commits did not come back. Before, it reported plain success with no
// commit and no word (an outside tester's finding).
func TestRestoreSaysTheSandboxHeadIsGone(t *testing.T) {
	e := newEnv(t, runners[0].new)
	initRepo(t, e.local, map[string]string{"a": "1\n"})
	round, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	write(t, e.remote, "a", "agent\n")
	git(t, e.remote, "commit", "-qam", "agent")
	require.NoError(t, os.WriteFile(filepath.Join(e.remote, ".git", "HEAD"), []byte("ref: refs/heads/../../../etc\n"), 0o644))

	res, err := round.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, "agent\n", read(t, e.local, "a"), "the work tree arrives")
	assert.Contains(t, res.Refused, "ref HEAD")
	assert.Contains(t, res.Reasons["ref HEAD"], "the sandbox's HEAD names no commit")
	assert.Contains(t, res.Reasons["ref HEAD"], "its commits, if any, did not come back")
}
