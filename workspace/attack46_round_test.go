package workspace_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/treetest"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

// TestPlainRestoreOfAResetSandbox: a new user (twelfth session) recreated
// the container between Prepare and Restore: the plain Restore read the
// empty directory as the agent having deleted every file, deleted them
// all locally and reported success. A plain Prepare now marks the sandbox
// directory with its round (in the runtime directory), and a Restore
// without that mark — an emptied or replaced sandbox, one prepared for
// another round since — fails, saying so, and changes nothing locally.
func TestPlainRestoreOfAResetSandbox(t *testing.T) {
	resets := map[string]func(t *testing.T, e *env){
		"emptied and made again": func(t *testing.T, e *env) {
			require.NoError(t, os.RemoveAll(e.remote))
			require.NoError(t, os.MkdirAll(e.remote, 0o755))
		},
		"the runtime directory removed": func(t *testing.T, e *env) {
			require.NoError(t, os.RemoveAll(filepath.Join(e.remote, sandbox.RuntimeDir)))
		},
		"prepared for another round": func(t *testing.T, e *env) {
			_, err := workspace.Prepare(ctx(t), e.spec, workspace.WithStateDir(t.TempDir()))
			require.NoError(t, err)
			require.NoError(t, os.Remove(filepath.Join(e.remote, "a")))
		},
		"the marker a link to another round's": func(t *testing.T, e *env) {
			m := filepath.Join(e.remote, sandbox.RuntimeDir, ".workspace-round")
			b, err := os.ReadFile(m)
			require.NoError(t, err)
			other := filepath.Join(t.TempDir(), "m")
			require.NoError(t, os.WriteFile(other, b, 0o644))
			require.NoError(t, os.Remove(m))
			require.NoError(t, os.Symlink(other, m))
			require.NoError(t, os.Remove(filepath.Join(e.remote, "a")))
		},
	}
	for name, reset := range resets {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
			write(t, e.local, "a", "1\n")
			write(t, e.local, "sub/b", "2\n")
			r, err := workspace.Prepare(ctx(t), e.spec, workspace.WithStateDir(t.TempDir()))
			require.NoError(t, err)
			reset(t, e)
			before := treetest.Snapshot(t, e.local)

			res, err := r.Restore(ctx(t))
			require.Error(t, err)
			assert.Nil(t, res)
			assert.ErrorContains(t, err, "does not hold round "+r.ID())
			assert.ErrorContains(t, err, "nothing was changed locally: prepare a new round")
			assert.False(t, sandbox.Retryable(err), "%v", err)
			assert.Empty(t, treetest.Diff(before, treetest.Snapshot(t, e.local)), "nothing changed locally")
		})
	}

	t.Run("the agent's own deletions still arrive", func(t *testing.T) {
		e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
		write(t, e.local, "a", "1\n")
		write(t, e.local, "sub/b", "2\n")
		r, err := workspace.Prepare(ctx(t), e.spec, workspace.WithStateDir(t.TempDir()))
		require.NoError(t, err)
		require.NoError(t, os.Remove(filepath.Join(e.remote, "a")))
		require.NoError(t, os.RemoveAll(filepath.Join(e.remote, "sub")))
		res, err := r.Restore(ctx(t))
		require.NoError(t, err)
		assert.Equal(t, []string{"a", "sub", "sub/b"}, res.Deleted)
		assert.Empty(t, res.Runtime, "the marker is not listed")
		assert.Empty(t, res.Refused)
	})
}
