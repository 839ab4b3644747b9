package stage_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/treegen"
	"github.com/airlockdev/airlock/sandbox"

	"github.com/airlockdev/airlock/stage"
)

// benchTree is the generated 20x100 tree, shared by every benchmark of one
// process (TestMain removes it).
var benchTree struct {
	once    sync.Once
	dir     string
	src     string
	files   int
	bytes   int64
	created time.Time
}

func TestMain(m *testing.M) {
	code := m.Run()
	if benchTree.dir != "" {
		_ = os.RemoveAll(benchTree.dir)
	}
	os.Exit(code)
}

func benchSource(b *testing.B) (string, int64) {
	b.Helper()
	benchTree.once.Do(func() {
		dir, err := os.MkdirTemp("", "airlock-bench")
		require.NoError(b, err)
		benchTree.dir = dir
		benchTree.src = filepath.Join(dir, "src")
		require.NoError(b, os.Mkdir(benchTree.src, 0o755))
		gen, err := treegen.Write(benchTree.src, treegen.Standard)
		require.NoError(b, err)
		benchTree.files, benchTree.bytes = gen.Files, gen.Bytes
		benchTree.created = time.Now()
	})
	require.NotEmpty(b, benchTree.src, "generating the benchmark tree failed earlier")
	return benchTree.src, benchTree.bytes
}

// aged waits until the tree is older than the index's racy window, as a
// real skill bundle is, so that WithIndex can trust its metadata.
func aged(b *testing.B) {
	if wait := time.Until(benchTree.created.Add(2100 * time.Millisecond)); wait > 0 {
		time.Sleep(wait)
	}
}

// fresh returns a new destination path per iteration, and removes the
// previous ones outside the timer.
func fresh(b *testing.B, base string) func() string {
	i := 0
	return func() string {
		b.StopTimer()
		require.NoError(b, os.RemoveAll(base))
		require.NoError(b, os.MkdirAll(base, 0o755))
		b.StartTimer()
		i++
		return filepath.Join(base, fmt.Sprint(i))
	}
}

func BenchmarkCpA(b *testing.B) {
	src, size := benchSource(b)
	next := fresh(b, b.TempDir())
	b.SetBytes(size)
	for b.Loop() {
		out, err := exec.Command("cp", "-a", src, next()).CombinedOutput()
		require.NoError(b, err, "%s", out)
	}
}

func BenchmarkTarPipe(b *testing.B) {
	src, size := benchSource(b)
	next := fresh(b, b.TempDir())
	b.SetBytes(size)
	for b.Loop() {
		script := `tar -C "$1" -cf - . | { mkdir "$2" && tar -C "$2" -xf -; }`
		out, err := exec.Command("sh", "-c", script, "sh", src, next()).CombinedOutput()
		require.NoError(b, err, "%s", out)
	}
}

func BenchmarkStageDir(b *testing.B) {
	src, size := benchSource(b)
	sandboxDir := b.TempDir()
	d, err := stage.NewDir(sandboxDir)
	require.NoError(b, err)
	next := fresh(b, filepath.Join(sandboxDir, "rt"))
	b.SetBytes(size)
	for b.Loop() {
		root := "/rt/" + filepath.Base(next())
		_, err := stage.Stage(context.Background(), d, root, []stage.Asset{{Name: "tree", Source: src}})
		require.NoError(b, err)
	}
}

func BenchmarkStageBridge(b *testing.B) {
	src, size := benchSource(b)
	sandboxDir := b.TempDir()
	br := stage.NewBridge(sandbox.Local(sandboxDir))
	next := fresh(b, filepath.Join(sandboxDir, "rt"))
	b.SetBytes(size)
	for b.Loop() {
		_, err := stage.Stage(context.Background(), br, next(), []stage.Asset{{Name: "tree", Source: src}})
		require.NoError(b, err)
	}
}

// benchRestage stages once, then measures staging the unchanged tree again.
func benchRestage(b *testing.B, t stage.Target, root string, opts ...stage.Option) {
	src, _ := benchSource(b)
	aged(b)
	assets := []stage.Asset{{Name: "tree", Source: src}}
	_, err := stage.Stage(context.Background(), t, root, assets, opts...)
	require.NoError(b, err)
	for b.Loop() {
		rt, err := stage.Stage(context.Background(), t, root, assets, opts...)
		require.NoError(b, err)
		require.True(b, rt.Assets[0].Reused)
	}
}

func BenchmarkRestageDir(b *testing.B) {
	d, err := stage.NewDir(b.TempDir())
	require.NoError(b, err)
	benchRestage(b, d, "/rt", stage.WithIndex(stage.NewIndex()))
}

func BenchmarkRestageDirNoIndex(b *testing.B) {
	d, err := stage.NewDir(b.TempDir())
	require.NoError(b, err)
	benchRestage(b, d, "/rt")
}

func BenchmarkRestageBridge(b *testing.B) {
	sandboxDir := b.TempDir()
	benchRestage(b, stage.NewBridge(sandbox.Local(sandboxDir)), filepath.Join(sandboxDir, "rt"), stage.WithIndex(stage.NewIndex()))
}
