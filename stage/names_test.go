package stage_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
)

// rawNameTargets builds each target over a fresh host directory and
// returns it, the stage root to stage to, and the host directory that
// holds that root's content.
var rawNameTargets = []struct {
	name  string
	build func(t *testing.T) (stage.Target, string, string)
}{
	{"Dir", func(t *testing.T) (stage.Target, string, string) {
		host := t.TempDir()
		d, err := stage.NewDir(host)
		require.NoError(t, err)
		return d, "/rt", filepath.Join(host, "rt")
	}},
	{"Bridge", func(t *testing.T) (stage.Target, string, string) {
		host := t.TempDir()
		root := filepath.Join(host, "rt")
		return stage.NewBridge(sandbox.Local(host)), filepath.ToSlash(root), root
	}},
}

// rawNamesIn lists the names in dir, sorted.
func rawNamesIn(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// rawNameSource makes a source holding a file whose name is not valid
// UTF-8, and returns its directory.
func rawNameSource(t *testing.T, name string) string {
	t.Helper()
	src := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(src, name), []byte("same bytes"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(src, "keep"), []byte("keep"), 0o644))
	return src
}

func TestStageRenameOfNameNotUTF8(t *testing.T) {
	for _, tc := range rawNameTargets {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			target, root, host := tc.build(t)
			src := rawNameSource(t, "f\xff")
			assets := []stage.Asset{{Name: "a", Source: src}}

			rt, err := stage.Stage(ctx, target, root, assets)
			require.NoError(t, err)
			require.Len(t, rt.Assets, 1)
			assert.False(t, rt.Assets[0].Reused)
			assert.Equal(t, []string{"f\xff", "keep"}, rawNamesIn(t, filepath.Join(host, "a")))

			rt, err = stage.Stage(ctx, target, root, assets)
			require.NoError(t, err)
			assert.True(t, rt.Assets[0].Reused, "unchanged content is reused")

			require.NoError(t, os.Rename(filepath.Join(src, "f\xff"), filepath.Join(src, "f\xfe")))
			rt, err = stage.Stage(ctx, target, root, assets)
			require.NoError(t, err)
			assert.False(t, rt.Assets[0].Reused, "a rename that only changes a byte that is not UTF-8 is a change")
			assert.Equal(t, []string{"f\xfe", "keep"}, rawNamesIn(t, filepath.Join(host, "a")))
			data, err := os.ReadFile(filepath.Join(host, "a", "f\xfe"))
			require.NoError(t, err)
			assert.Equal(t, "same bytes", string(data))
		})
	}
}

func TestStageVerifyNameNotUTF8(t *testing.T) {
	for _, tc := range rawNameTargets {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			target, root, host := tc.build(t)
			assets := []stage.Asset{{Name: "a", Source: rawNameSource(t, "f\xff")}}

			rt, err := stage.Stage(ctx, target, root, assets, stage.WithVerify())
			require.NoError(t, err, "a fresh publish verifies against the manifest the library wrote")
			assert.False(t, rt.Assets[0].Reused)
			assert.Equal(t, []string{"f\xff", "keep"}, rawNamesIn(t, filepath.Join(host, "a")))

			rt, err = stage.Stage(ctx, target, root, assets, stage.WithVerify())
			require.NoError(t, err)
			assert.True(t, rt.Assets[0].Reused, "the verified copy is reused")
		})
	}
}
