package stage_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/busyboxuser"
	"github.com/airlockdev/airlock/stage"
)

// TestVerifyRepairsAnUnreadableCopy: in a sandbox whose user is not root,
// a staged file or directory the agent made unreadable (chmod 000) is a
// copy WithVerify cannot read back: it differs, and it is published again
// (an outside attack found every such verify failing instead, with tar's
// "Permission denied", and never repairing). A Source whose own file is
// mode 000 stages, and WithVerify then fails with ErrMismatch saying why:
// such a copy cannot be read back by its user.
func TestVerifyRepairsAnUnreadableCopy(t *testing.T) {
	mk := atk28UserRunner(t)
	// staged stages files (made first by prepare, in the Source) into a
	// non-root sandbox and returns the Target, the root and the assets.
	staged := func(t *testing.T, files map[string]string, prepare func(src string)) (stage.Target, string, []stage.Asset) {
		t.Helper()
		src := t.TempDir()
		require.NoError(t, os.Chmod(src, 0o755))
		vpWrite(t, src, files)
		prepare(src)
		sb := busyboxuser.Dir(t)
		tgt, root := stage.Over(mk(sb)), filepath.Join(sb, "rt")
		assets := []stage.Asset{{Name: "a", Source: src}}
		_, err := stage.Stage(t.Context(), tgt, root, assets)
		require.NoError(t, err)
		return tgt, root, assets
	}
	files := map[string]string{"d/f": "inner\n", "d/g": "other\n", "top": "top\n"}
	for _, tc := range []struct{ name, tamper string }{
		{"a file", "d/f"},
		{"a directory", "d"},
		{"the top file", "top"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tgt, root, assets := staged(t, files, func(string) {})
			p := filepath.Join(root, "a", filepath.FromSlash(tc.tamper))
			require.NoError(t, os.Chmod(p, 0))

			rt, err := stage.Stage(t.Context(), tgt, root, assets, stage.WithVerify())
			require.NoError(t, err, "the unreadable copy is published again")
			assert.False(t, rt.Assets[0].Reused)
			for rel, want := range files {
				got, err := os.ReadFile(filepath.Join(root, "a", filepath.FromSlash(rel)))
				require.NoError(t, err)
				assert.Equal(t, want, string(got), rel)
			}
			fi, err := os.Stat(p)
			require.NoError(t, err)
			assert.NotZero(t, fi.Mode().Perm(), "the mode the agent set stayed")

			rt, err = stage.Stage(t.Context(), tgt, root, assets, stage.WithVerify())
			require.NoError(t, err)
			assert.True(t, rt.Assets[0].Reused, "the repaired copy verifies")
		})
	}
	t.Run("a Source file of mode 000", func(t *testing.T) {
		tgt, root, assets := staged(t, map[string]string{"secret": "s\n", "open": "o\n"}, func(src string) {
			require.NoError(t, os.Chmod(filepath.Join(src, "secret"), 0))
		})
		_, err := stage.Stage(t.Context(), tgt, root, assets, stage.WithVerify())
		require.ErrorIs(t, err, stage.ErrMismatch)
		assert.ErrorContains(t, err, "holds an entry its owner cannot read")
		assert.NotErrorIs(t, err, stage.ErrTransport)
	})
}
