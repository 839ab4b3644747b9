package stage_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/treegen"
	"github.com/airlockdev/airlock/stage"
)

// BenchmarkRestageChangedDir: a re-stage of the 20x100 tree to a Dir after
// one file grew by a byte (no index, so the source is compared with the
// stored manifest). The comparing walk hashes only the files the stored
// manifest could still describe; the publish carries those and takes
// their hashes from that walk.
func BenchmarkRestageChangedDir(b *testing.B) {
	base := b.TempDir()
	src := filepath.Join(base, "src")
	require.NoError(b, os.Mkdir(src, 0o755))
	_, err := treegen.Write(src, treegen.Standard)
	require.NoError(b, err)
	var victim string
	require.NoError(b, filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err == nil && victim == "" && fi.Mode().IsRegular() {
			victim = p
		}
		return err
	}))
	d, err := stage.NewDir(filepath.Join(base, "sb"))
	if err != nil {
		require.NoError(b, os.Mkdir(filepath.Join(base, "sb"), 0o755))
		d, err = stage.NewDir(filepath.Join(base, "sb"))
	}
	require.NoError(b, err)
	assets := []stage.Asset{{Name: "tree", Source: src}}
	_, err = stage.Stage(b.Context(), d, "/rt", assets)
	require.NoError(b, err)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		f, err := os.OpenFile(victim, os.O_APPEND|os.O_WRONLY, 0)
		require.NoError(b, err)
		_, err = fmt.Fprint(f, i%10)
		require.NoError(b, err)
		require.NoError(b, f.Close())
		b.StartTimer()
		rt, err := stage.Stage(b.Context(), d, "/rt", assets)
		require.NoError(b, err)
		if rt.Assets[0].Reused || rt.Assets[0].Sent != 1 {
			b.Fatalf("want one file sent, got %+v", rt.Assets[0])
		}
	}
}
