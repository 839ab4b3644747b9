package stage_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/busyboxuser"
	"github.com/airlockdev/airlock/sandbox"
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
	for _, tc := range []struct{ name, tamper string }{
		{"a file", "d/f"},
		{"a directory", "d"},
		{"the top file", "top"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := t.TempDir()
			require.NoError(t, os.Chmod(src, 0o755))
			vpWrite(t, src, map[string]string{"d/f": "inner\n", "d/g": "other\n", "top": "top\n"})
			sb := busyboxuser.Dir(t)
			tgt := stage.Over(mk(sb))
			root := filepath.Join(sb, "rt")
			assets := []stage.Asset{{Name: "a", Source: src}}
			_, err := stage.Stage(t.Context(), tgt, root, assets)
			require.NoError(t, err)
			p := filepath.Join(root, "a", filepath.FromSlash(tc.tamper))
			require.NoError(t, os.Chmod(p, 0))

			rt, err := stage.Stage(t.Context(), tgt, root, assets, stage.WithVerify())
			require.NoError(t, err, "the unreadable copy is published again")
			assert.False(t, rt.Assets[0].Reused)
			for rel, want := range map[string]string{"d/f": "inner\n", "d/g": "other\n", "top": "top\n"} {
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
		src := t.TempDir()
		require.NoError(t, os.Chmod(src, 0o755))
		vpWrite(t, src, map[string]string{"secret": "s\n", "open": "o\n"})
		require.NoError(t, os.Chmod(filepath.Join(src, "secret"), 0))
		sb := busyboxuser.Dir(t)
		tgt := stage.Over(mk(sb))
		root := filepath.Join(sb, "rt")
		assets := []stage.Asset{{Name: "a", Source: src}}
		_, err := stage.Stage(t.Context(), tgt, root, assets)
		require.NoError(t, err)
		_, err = stage.Stage(t.Context(), tgt, root, assets, stage.WithVerify())
		require.ErrorIs(t, err, stage.ErrMismatch)
		assert.ErrorContains(t, err, "holds an entry its owner cannot read")
		assert.NotErrorIs(t, err, stage.ErrTransport)
	})
}

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
		t.Helper()
		src := t.TempDir()
		r, err := os.OpenRoot(src)
		require.NoError(t, err)
		defer r.Close()
		var parts []string
		for range 20 {
			parts = append(parts, strings.Repeat("d", 200))
		}
		dir := strings.Join(parts, "/")
		require.NoError(t, r.MkdirAll(dir, 0o755))
		require.NoError(t, r.WriteFile(dir+"/"+strings.Repeat("f", n-len(dir)-1), []byte("x"), 0o644))
		return src
	}
	sb := t.TempDir()
	tgt := stage.Over(sandbox.Local(sb))
	root := filepath.Join(sb, "rt")
	_, err := stage.Stage(t.Context(), tgt, root, []stage.Asset{{Name: "a", Source: deep(t, 4087)}})
	require.ErrorIs(t, err, stage.ErrLimit)
	assert.ErrorContains(t, err, "path length limit of 4086 exceeded")
	ents, err := os.ReadDir(root)
	if !os.IsNotExist(err) {
		require.NoError(t, err)
	}
	assert.Empty(t, ents, "nothing is left in the stage root")

	_, err = stage.Stage(t.Context(), tgt, root, []stage.Asset{{Name: "a", Source: deep(t, 4086)}})
	require.NoError(t, err)
}
