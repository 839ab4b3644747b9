package stage_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/stage"
)

// unstageTargets returns each in-package target over a fresh sandbox
// directory, with the host path of the sandbox's root "/rt".
func unstageTargets(t *testing.T) map[string]func(t *testing.T) (stage.Target, string) {
	return map[string]func(t *testing.T) (stage.Target, string){
		"Dir": func(t *testing.T) (stage.Target, string) {
			dir := t.TempDir()
			d, err := stage.NewDir(dir)
			require.NoError(t, err)
			return d, filepath.Join(dir, "rt")
		},
		"Bridge": func(t *testing.T) (stage.Target, string) {
			dir := t.TempDir()
			return stage.NewBridge(stage.LocalRunner(dir)), filepath.Join(dir, "rt")
		},
	}
}

func rootOf(t stage.Target, host string) string {
	if _, ok := t.(*stage.Dir); ok {
		return "/rt"
	}
	return host
}

func TestUnstageAndPrune(t *testing.T) {
	for name, newTarget := range unstageTargets(t) {
		t.Run(name, func(t *testing.T) {
			target, host := newTarget(t)
			root := rootOf(target, host)
			a, b := t.TempDir(), t.TempDir()
			build(t, a, "f=a")
			build(t, b, "f=b")
			assets := []stage.Asset{{Name: "a", Source: a}, {Name: "b", Source: b}}
			_, err := stage.Stage(t.Context(), target, root, assets)
			require.NoError(t, err)
			names, err := target.(stage.Pruner).Assets(t.Context(), root)
			require.NoError(t, err)
			assert.Equal(t, []string{"a", "b"}, names)

			require.NoError(t, stage.Unstage(t.Context(), target, root, "a", "never-staged"))
			assert.NoFileExists(t, filepath.Join(host, "a", "f"))
			assert.NoFileExists(t, filepath.Join(host, ".airlock-manifest-a.json"))
			assert.Equal(t, "b", readFile(t, filepath.Join(host, "b", "f")))
			got, err := target.Probe(t.Context(), root, []string{"a", "b"})
			require.NoError(t, err)
			assert.Nil(t, got[0])
			assert.NotNil(t, got[1])

			// WithPrune: a stage that selects only a removes b.
			_, err = stage.Stage(t.Context(), target, root, assets[:1], stage.WithPrune())
			require.NoError(t, err)
			assert.Equal(t, []string{"a"}, listNoTemp(t, host))
			// A run whose selection is empty leaves no asset from an earlier run.
			_, err = stage.Stage(t.Context(), target, root, nil, stage.WithPrune())
			require.NoError(t, err)
			assert.Empty(t, listNoTemp(t, host))

			err = stage.Unstage(t.Context(), target, root, "../x")
			assert.ErrorIs(t, err, stage.ErrBadAsset)
		})
	}
}

// TestUnstageNeedsPruner: a Target without Pruner is refused clearly.
func TestUnstageNeedsPruner(t *testing.T) {
	var target struct{ stage.Target }
	err := stage.Unstage(t.Context(), target, "/rt", "a")
	assert.ErrorIs(t, err, stage.ErrNoPrune)
}

// listNoTemp lists dir, failing on leftover temporary directories.
func listNoTemp(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, de := range des {
		require.False(t, strings.HasPrefix(de.Name(), ".airlock-tmp-"), "leftover %s", de.Name())
		if !strings.HasPrefix(de.Name(), ".airlock-manifest-") {
			out = append(out, de.Name())
		}
	}
	return out
}
