package session

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// assertPrivateDir checks that p is a real directory whose mode grants
// nothing to group and others (0700 before the umask).
func assertPrivateDir(t *testing.T, p string) {
	t.Helper()
	fi, err := os.Lstat(p)
	require.NoError(t, err)
	require.True(t, fi.IsDir(), "%s is a %s, not a directory", p, fi.Mode().Type())
	assert.Equal(t, fs.FileMode(0o700), fi.Mode().Perm(), "%s: mode %v", p, fi.Mode().Perm())
}

// TestBindCreatesStateDir: a missing state directory is created with its
// missing parents, mode 0700, beneath the real path of what exists; an
// existing one is used as it is.
func TestBindCreatesStateDir(t *testing.T) {
	t.Run("with parents", func(t *testing.T) {
		cfg := testConfig(t)
		base := realTempDir(t)
		cfg.StateDir = filepath.Join(base, "a", "b", "state")
		b := mustBind(t, cfg)
		assert.Equal(t, filepath.Join(cfg.StateDir, "sessions"), filepath.Dir(b.SessionDir))
		for _, p := range []string{"a", "a/b", "a/b/state"} {
			assertPrivateDir(t, filepath.Join(base, p))
		}
		assert.NoDirExists(t, b.SessionDir, "Bind creates the state directory only")
		again := mustBind(t, cfg) // now it exists
		assert.Equal(t, b, again)
	})
	t.Run("relative", func(t *testing.T) {
		cfg := testConfig(t)
		base := realTempDir(t)
		t.Chdir(base)
		cfg.StateDir = filepath.Join("x", "state")
		b := mustBind(t, cfg)
		assert.Equal(t, filepath.Join(base, "x", "state", "sessions"), filepath.Dir(b.SessionDir))
		assertPrivateDir(t, filepath.Join(base, "x", "state"))
	})
	t.Run("under a linked parent", func(t *testing.T) {
		cfg := testConfig(t)
		base, real := realTempDir(t), realTempDir(t)
		link := filepath.Join(base, "link")
		require.NoError(t, os.Symlink(real, link))
		cfg.StateDir = filepath.Join(link, "state")
		b := mustBind(t, cfg)
		assert.Equal(t, filepath.Join(real, "state", "sessions"), filepath.Dir(b.SessionDir), "the real path is recorded")
		assertPrivateDir(t, filepath.Join(real, "state"))
	})
	t.Run("existing kept as it is", func(t *testing.T) {
		cfg := testConfig(t)
		require.NoError(t, os.Chmod(cfg.StateDir, 0o755))
		mustBind(t, cfg)
		fi, err := os.Stat(cfg.StateDir)
		require.NoError(t, err)
		assert.Equal(t, fs.FileMode(0o755), fi.Mode().Perm())
	})
}

// TestBindStateDirNeverCreatedThroughALink: a dangling link at or above
// the state directory, a file on its path or a ".." in a missing path
// fails Bind with ErrInvalidStateDir and creates nothing anywhere.
func TestBindStateDirNeverCreatedThroughALink(t *testing.T) {
	base := realTempDir(t)
	target := filepath.Join(base, "elsewhere")
	dangling := filepath.Join(base, "dangling")
	require.NoError(t, os.Symlink(target, dangling))
	file := filepath.Join(base, "file")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o600))
	for _, c := range []struct {
		name, path string
		alsoIs     error
		contains   string
	}{
		{"dangling link at it", dangling, fs.ErrNotExist, "dangling"},
		{"dangling link above it", filepath.Join(dangling, "state"), fs.ErrNotExist, "dangling"},
		{"dangling link two above it", filepath.Join(dangling, "a", "state"), fs.ErrNotExist, "dangling"},
		{"a file above it", filepath.Join(file, "state"), syscall.ENOTDIR, "not a directory"},
		{"dot-dot in a missing path", base + "/new/../state", fs.ErrNotExist, `without ".."`},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.StateDir = c.path
			b, err := Bind(cfg)
			require.Error(t, err)
			assert.Equal(t, Binding{}, b)
			assert.ErrorIs(t, err, ErrInvalidStateDir)
			assert.ErrorIs(t, err, c.alsoIs)
			var pe *fs.PathError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, c.path, pe.Path)
			assert.Contains(t, err.Error(), c.contains)
			assert.NoDirExists(t, target, "the link's target was created")
			for _, p := range []string{"new", "state", "a"} {
				assert.NoDirExists(t, filepath.Join(base, p))
			}
		})
	}
}
