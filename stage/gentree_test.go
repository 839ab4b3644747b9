package stage_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Benchmark tree shape: genDirs directories of genFiles files each, sizes
// spread uniformly over 0.5–16 KiB, except the first file of every fifth
// directory, which is 2 MiB.
const (
	genDirs  = 20
	genFiles = 100
	genLarge = 2 << 20
)

// genTree writes the benchmark tree under dir (which must exist) from a
// fixed seed and returns its file count and byte total.
func genTree(tb testing.TB, dir string) (files int, bytes int64) {
	tb.Helper()
	rng := rand.New(rand.NewPCG(20, 100))
	pool := make([]byte, genLarge)
	for i := range pool {
		pool[i] = byte(rng.Uint32())
	}
	for d := range genDirs {
		sub := filepath.Join(dir, fmt.Sprintf("dir%02d", d))
		require.NoError(tb, os.Mkdir(sub, 0o755))
		for f := range genFiles {
			n := 512 + rng.IntN(16<<10-512+1)
			if f == 0 && d%5 == 0 {
				n = genLarge
			}
			off := rng.IntN(len(pool) - n + 1)
			mode := os.FileMode(0o644)
			if f%10 == 0 {
				mode = 0o755
			}
			p := filepath.Join(sub, fmt.Sprintf("file%03d.txt", f))
			require.NoError(tb, os.WriteFile(p, pool[off:off+n], mode))
			files++
			bytes += int64(n)
		}
	}
	return files, bytes
}
