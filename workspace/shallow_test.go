package workspace_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/workspace"
)

// TestPrepareRefusesShallowClone: a round carries the whole history, and
// a shallow clone's stops short. Prepare fails with ErrRepo saying how to
// go on, before the sandbox is touched; before, the sandbox reported the
// bundle incomplete and said to prepare again, which cannot help (an
// outside tester's finding).
func TestPrepareRefusesShallowClone(t *testing.T) {
	e := newEnv(t, runners[0].new)
	up := filepath.Join(filepath.Dir(e.local), "upstream")
	require.NoError(t, os.MkdirAll(up, 0o755))
	require.NoError(t, os.Remove(e.local)) // git clone makes it
	initRepo(t, up, map[string]string{"a": "1\n"})
	write(t, up, "a", "2\n")
	git(t, up, "commit", "-qam", "two")
	out, err := exec.Command("git", "clone", "-q", "--depth", "1", "file://"+up, e.local).CombinedOutput()
	require.NoError(t, err, "%s", out)
	write(t, e.remote, "keep", "the sandbox's\n")

	_, err = workspace.Prepare(ctx(t), e.spec)
	require.ErrorIs(t, err, workspace.ErrRepo)
	assert.Contains(t, err.Error(), e.local+" is a shallow clone")
	assert.Contains(t, err.Error(), "git fetch --unshallow")
	assert.Equal(t, "the sandbox's\n", read(t, e.remote, "keep"), "the sandbox is not touched")

	git(t, e.local, "fetch", "-q", "--unshallow")
	_, err = workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	assert.Equal(t, "2\n", read(t, e.remote, "a"))
}
