package statedir

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// realTempDir is a temporary directory by its real path.
func realTempDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	return d
}

// assertPrivateDir checks that p is a real directory of mode 0700.
func assertPrivateDir(t *testing.T, p string) {
	t.Helper()
	fi, err := os.Lstat(p)
	require.NoError(t, err)
	require.True(t, fi.IsDir(), "%s is a %s, not a directory", p, fi.Mode().Type())
	assert.Equal(t, fs.FileMode(0o700), fi.Mode().Perm(), "%s: mode %v", p, fi.Mode().Perm())
}

// TestStateDirLinkPlantedWhileCreating plays the race Make cannot see from
// outside: between finding what is missing and creating it, a link
// appears on the path. One pointing out of the existing directory is never
// followed; one pointing inside it makes the result resolve elsewhere than
// what was made, and the state directory is refused.
func TestStateDirLinkPlantedWhileCreating(t *testing.T) {
	t.Run("pointing out", func(t *testing.T) {
		base, outside := realTempDir(t), realTempDir(t)
		require.NoError(t, os.Symlink(outside, filepath.Join(base, "a")))
		err := createBeneath(filepath.Join(base, "a", "state"), base, []string{"a", "state"})
		require.Error(t, err)
		assert.Contains(t, err.Error(), base)
		assert.NoDirExists(t, filepath.Join(outside, "state"), "a planted link was followed out of the existing directory")
	})
	t.Run("pointing inside", func(t *testing.T) {
		base := realTempDir(t)
		require.NoError(t, os.Mkdir(filepath.Join(base, "x"), 0o700))
		require.NoError(t, os.Symlink("x", filepath.Join(base, "a")))
		abs := filepath.Join(base, "a", "state")
		err := createBeneath(abs, base, []string{"a", "state"})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "a link was planted")
		assert.Contains(t, err.Error(), filepath.Join(base, "x", "state"))
	})
	t.Run("nothing planted", func(t *testing.T) {
		base := realTempDir(t)
		require.NoError(t, createBeneath(filepath.Join(base, "a", "state"), base, []string{"a", "state"}))
		assertPrivateDir(t, filepath.Join(base, "a", "state"))
	})
}
