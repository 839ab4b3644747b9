package stage_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
)

// TestDeltaFallsBackToFullStage: a Bridge that has learnt that carrying a
// file costs more than sending it (a fast link, a tree of small files)
// sends the whole tree instead of carrying, and the copy is exact; one
// that has learnt the opposite, or knows only one of the two costs,
// carries.
func TestDeltaFallsBackToFullStage(t *testing.T) {
	src, dir := t.TempDir(), t.TempDir()
	spec := []string{"changed=0"}
	for i := range 20 {
		spec = append(spec, fmt.Sprintf("d%d/f%d=%s", i%3, i, strings.Repeat("x", 100*i)))
	}
	build(t, src, spec...)
	root := filepath.Join(dir, "rt")
	b := stage.NewBridge(sandbox.Local(dir))
	assets := []stage.Asset{{Name: "a", Source: src}}
	_, err := stage.Stage(t.Context(), b, root, assets)
	require.NoError(t, err)
	for i, c := range []struct {
		name             string
		perByte, perFile float64
		sent             int
	}{
		{"carrying costs more", 1e-9, 1e-3, 21},
		{"sending costs more", 1e-6, 1e-9, 1},
		{"the link's cost unknown", 0, 1e-3, 1},
		{"the carry's cost unknown", 1e-9, 0, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.NoError(t, os.WriteFile(filepath.Join(src, "changed"), fmt.Appendf(nil, "%d", i+1), 0o644))
			stage.SetLinkCosts(b, c.perByte, c.perFile)
			rt, err := stage.Stage(t.Context(), b, root, assets)
			require.NoError(t, err)
			assert.Equal(t, 21, rt.Assets[0].Files)
			assert.Equal(t, c.sent, rt.Assets[0].Sent)
			iaSame(t, iaSnap(t, src), iaSnap(t, filepath.Join(root, "a")))
		})
	}
}

// TestLinkCostsLearnt: a publish without a carry that streams at least
// 8 MiB teaches a Bridge the cost of a byte sent, and then one that
// carries at least 1,000 files the cost of a file carried; smaller ones
// teach nothing.
func TestLinkCostsLearnt(t *testing.T) {
	src, dir := t.TempDir(), t.TempDir()
	build(t, src, "small=1")
	root := filepath.Join(dir, "rt")
	b := stage.NewBridge(sandbox.Local(dir))
	assets := []stage.Asset{{Name: "a", Source: src}}
	_, err := stage.Stage(t.Context(), b, root, assets)
	require.NoError(t, err)
	perByte, perFile := stage.LinkCosts(b)
	assert.Zero(t, perByte, "a small stream is not timed")
	assert.Zero(t, perFile)

	require.NoError(t, os.WriteFile(filepath.Join(src, "big"), make([]byte, 9<<20), 0o644))
	for i := range 1000 {
		require.NoError(t, os.WriteFile(filepath.Join(src, fmt.Sprintf("f%04d", i)), []byte{byte(i)}, 0o644))
	}
	require.NoError(t, os.Remove(filepath.Join(root, ".airlock-manifest-a.json"))) // no previous copy: nothing carried
	_, err = stage.Stage(t.Context(), b, root, assets)
	require.NoError(t, err)
	perByte, perFile = stage.LinkCosts(b)
	assert.Positive(t, perByte, "a stream of 9 MiB is timed")
	assert.Zero(t, perFile, "nothing carried yet")

	require.NoError(t, os.WriteFile(filepath.Join(src, "small"), []byte("2"), 0o644))
	stage.SetLinkCosts(b, perByte, 0) // carry whatever the link costs
	rt, err := stage.Stage(t.Context(), b, root, assets)
	require.NoError(t, err)
	require.Equal(t, 1, rt.Assets[0].Sent)
	_, perFile = stage.LinkCosts(b)
	assert.Positive(t, perFile, "a carry of 1,001 files is timed")
	iaSame(t, iaSnap(t, src), iaSnap(t, filepath.Join(root, "a")))
}
