package stage_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
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
			return stage.NewBridge(sandbox.Local(dir)), filepath.Join(dir, "rt")
		},
	}
}

func rootOf(t stage.Target, host string) string {
	if _, ok := t.(*stage.Dir); ok {
		return "/rt"
	}
	return host
}

// stageAB stages two one-file assets, a and b, under root and returns them.
func stageAB(t *testing.T, target stage.Target, root string) []stage.Asset {
	t.Helper()
	a, b := t.TempDir(), t.TempDir()
	build(t, a, "f=a")
	build(t, b, "f=b")
	assets := []stage.Asset{{Name: "a", Source: a}, {Name: "b", Source: b}}
	_, err := stage.Stage(t.Context(), target, root, assets)
	require.NoError(t, err)
	return assets
}

func TestUnstageAndPrune(t *testing.T) {
	for name, newTarget := range unstageTargets(t) {
		t.Run(name, func(t *testing.T) {
			target, host := newTarget(t)
			root := rootOf(target, host)
			assets := stageAB(t, target, root)
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

// TestUnstageRemovesHalfWrittenStamps: the file a publish killed while
// recording its copy's stamps leaves behind goes with the asset, on every
// Target, by Unstage and by WithPrune.
func TestUnstageRemovesHalfWrittenStamps(t *testing.T) {
	for name, newTarget := range unstageTargets(t) {
		t.Run(name, func(t *testing.T) {
			target, host := newTarget(t)
			root := rootOf(target, host)
			stageAB(t, target, root)
			for _, n := range []string{"a", "b"} {
				require.NoError(t, os.WriteFile(filepath.Join(host, ".airlock-stamps-"+n+".new"), []byte("1 2 ./f\n"), 0o644))
			}
			require.NoError(t, stage.Unstage(t.Context(), target, root, "a"))
			_, err := stage.Stage(t.Context(), target, root, nil, stage.WithPrune())
			require.NoError(t, err)
			ents, err := os.ReadDir(host)
			require.NoError(t, err)
			for _, e := range ents {
				assert.False(t, strings.HasPrefix(e.Name(), ".airlock-stamps-"), "%s is left in the stage root", e.Name())
			}
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
		if a, ok := strings.CutPrefix(de.Name(), ".airlock-stamps-"); ok {
			_, err := os.Lstat(filepath.Join(dir, ".airlock-manifest-"+a+".json"))
			require.NoError(t, err, "the stamps %s outlive their asset", de.Name())
			continue
		}
		if !strings.HasPrefix(de.Name(), ".airlock-manifest-") {
			out = append(out, de.Name())
		}
	}
	return out
}

// TestStageAssetError: a failing asset is named in a *stage.AssetError
// whose Err keeps the sentinel.
func TestStageAssetError(t *testing.T) {
	for name, newTarget := range unstageTargets(t) {
		t.Run(name, func(t *testing.T) {
			target, host := newTarget(t)
			root := rootOf(target, host)
			src := t.TempDir()
			build(t, src, "f=a")
			require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(src, "l")))
			_, err := stage.Stage(t.Context(), target, root, []stage.Asset{{Name: "ok", Source: t.TempDir()}, {Name: "bad", Source: src, Links: stage.RejectLinks}})
			var ae *stage.AssetError
			require.ErrorAs(t, err, &ae)
			assert.Equal(t, "bad", ae.Name)
			assert.Equal(t, "read", ae.Op)
			assert.Equal(t, src, ae.Path)
			assert.ErrorIs(t, err, stage.ErrLink)
		})
	}
}

// TestDeltaPublishChecksCarriedBytes: on every in-package target, a
// re-stage sends only the changed file, and a file of the previous copy
// that the sandbox rewrote with the same size and modification time is
// caught by its SHA-256 and sent again, not carried over.
func TestDeltaPublishChecksCarriedBytes(t *testing.T) {
	for name, newTarget := range unstageTargets(t) {
		t.Run(name, func(t *testing.T) {
			target, host := newTarget(t)
			root := rootOf(target, host)
			src := t.TempDir()
			build(t, src, "a=alpha", "d/b=bravo", "d/c=charlie", "e=echo")
			rt, err := stage.Stage(t.Context(), target, root, []stage.Asset{{Name: "x", Source: src}})
			require.NoError(t, err)
			require.Equal(t, 4, rt.Assets[0].Sent)

			build(t, src, "a=ALPHA")
			rt, err = stage.Stage(t.Context(), target, root, []stage.Asset{{Name: "x", Source: src}})
			require.NoError(t, err)
			assert.Equal(t, 1, rt.Assets[0].Sent, "only the changed file travels")

			victim := filepath.Join(host, "x", "d", "c")
			fi, err := os.Stat(victim)
			require.NoError(t, err)
			require.NoError(t, os.Chmod(victim, 0o644))
			require.NoError(t, os.WriteFile(victim, []byte("CHARLIE"), 0o644)) // same size
			require.NoError(t, os.Chtimes(victim, fi.ModTime(), fi.ModTime()))
			require.NoError(t, os.Chmod(victim, fi.Mode().Perm()))
			build(t, src, "e=ECHO")
			rt, err = stage.Stage(t.Context(), target, root, []stage.Asset{{Name: "x", Source: src}}, stage.WithVerify())
			require.NoError(t, err)
			assert.Equal(t, 2, rt.Assets[0].Sent, "the changed file and the tampered one")
			assert.Equal(t, "charlie", readFile(t, victim))
			assert.Equal(t, "ECHO", readFile(t, filepath.Join(host, "x", "e")))
		})
	}
}

// TestStageNoAssets: a run whose skills were all dropped stages no asset;
// with an Index, progress or WithVerify (which need a metadata pass of
// each Source: there is none) it returns an empty Runtime, and with
// WithPrune it removes what earlier runs staged.
func TestStageNoAssets(t *testing.T) {
	for name, newTarget := range unstageTargets(t) {
		t.Run(name, func(t *testing.T) {
			target, host := newTarget(t)
			root := rootOf(target, host)
			stageAB(t, target, root)
			ix, err := stage.OpenIndex(t.TempDir())
			require.NoError(t, err)
			progress := stage.WithProgress(func(sandbox.Progress) {})
			for _, opts := range [][]stage.Option{{stage.WithIndex(ix)}, {progress}, {stage.WithVerify(), stage.WithIndex(ix), progress}} {
				rt, err := stage.Stage(t.Context(), target, root, nil, opts...)
				require.NoError(t, err)
				assert.Empty(t, rt.Assets)
			}
			assert.Equal(t, []string{"a", "b"}, listNoTemp(t, host), "nothing is removed without WithPrune")
			rt, err := stage.Stage(t.Context(), target, root, nil, stage.WithIndex(ix), progress, stage.WithPrune())
			require.NoError(t, err)
			assert.Empty(t, rt.Assets)
			assert.Empty(t, listNoTemp(t, host))
		})
	}
}

// TestDirUnstageRaced: a Dir's Unstage that finds the asset's directory
// gone between its lstat and its rename (another process's unstage took
// it) has what it asked for: no error, nothing left.
func TestDirUnstageRaced(t *testing.T) {
	dir := t.TempDir()
	d, err := stage.NewDir(dir)
	require.NoError(t, err)
	host := filepath.Join(dir, "rt")
	stageAB(t, d, "/rt")
	stage.SetMoved(d, func(name string) {
		if name == ".airlock-manifest-a.json" {
			require.NoError(t, os.RemoveAll(filepath.Join(host, "a"))) // the other unstage
		}
	})
	require.NoError(t, stage.Unstage(t.Context(), d, "/rt", "a"))
	assert.Equal(t, []string{"b"}, listNoTemp(t, host))
}
