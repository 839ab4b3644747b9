package stage_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/treetest"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
)

// vpWrite writes files (slash paths) under dir, mode 0644.
func vpWrite(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for rel, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
}

// TestPathTheSandboxCannotNameRefused: a path inside an asset that fits the
// host's 4,096 bytes but not the sandbox's tar once the stream names it
// under its temporary tree is refused with ErrLimit before anything is
// written; one at the limit stages. (An outside attack found 4,088 to
// 4,096 bytes failing in the sandbox's tar instead.)
func TestPathTheSandboxCannotNameRefused(t *testing.T) {
	deep := func(t *testing.T, n int) string {
		src := t.TempDir()
		treetest.WriteDeep(t, src, n, "x")
		return src
	}
	sb := t.TempDir()
	tgt := stage.Over(sandbox.Local(sb))
	root := filepath.Join(sb, "rt")
	_, err := stage.Stage(t.Context(), tgt, root, []stage.Asset{{Name: "a", Source: deep(t, 4087)}})
	require.ErrorIs(t, err, stage.ErrLimit)
	assert.ErrorContains(t, err, "path length limit of 4086 exceeded")
	assert.ErrorContains(t, err, "shrink the tree or leave that part out (Asset.Exclude); Stage's limits are fixed")
	assert.NotContains(t, err.Error(), "raise Limits", "Stage has no Limits to raise")
	ents, err := os.ReadDir(root)
	if !os.IsNotExist(err) {
		require.NoError(t, err)
	}
	assert.Empty(t, ents, "nothing is left in the stage root")

	_, err = stage.Stage(t.Context(), tgt, root, []stage.Asset{{Name: "a", Source: deep(t, 4086)}})
	require.NoError(t, err)
}
