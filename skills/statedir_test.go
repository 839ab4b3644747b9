package skills

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMaterializeStateDirRule: the state directory rule shared with
// session.Bind and deliverable.FileStore. A missing directory is created
// with its parents, mode 0700; an existing one keeps its mode; a dangling
// link at or above it fails the call and creates nothing where it points.
func TestMaterializeStateDirRule(t *testing.T) {
	src := t.TempDir()
	sources := []Source{{Key: "k/pdf", Name: "pdf", Dir: skillDir(t, src, "pdf")}}
	base := t.TempDir()

	state := filepath.Join(base, "a", "b", "skills")
	_, err := Materialize(context.Background(), state, sources)
	require.NoError(t, err)
	for _, p := range []string{"a", "a/b", "a/b/skills"} {
		fi, err := os.Lstat(filepath.Join(base, p))
		require.NoError(t, err)
		assert.True(t, fi.IsDir())
		assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "%s", p)
	}

	existing := filepath.Join(base, "existing")
	require.NoError(t, os.Mkdir(existing, 0o755))
	_, err = Materialize(context.Background(), existing, sources)
	require.NoError(t, err)
	fi, err := os.Stat(existing)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm(), "an existing state directory is used as it is")

	dangling := filepath.Join(base, "dangling")
	require.NoError(t, os.Symlink(filepath.Join(base, "nowhere"), dangling))
	for _, p := range []string{dangling, filepath.Join(dangling, "skills")} {
		_, err := Materialize(context.Background(), p, sources)
		require.Error(t, err, "%s", p)
		assert.Contains(t, err.Error(), "creating skills state directory")
		assert.NoDirExists(t, filepath.Join(base, "nowhere"), "a dangling link's target is never created")
	}
}
