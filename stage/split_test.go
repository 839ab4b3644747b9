//go:build linux

package stage_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/shell"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
)

// TestSplitLargeTree: a tree of shell.SplitFiles files or more, with an
// Index, is published with its stamps listed and its old copy deleted in
// two processes (the send command says Zs=1), and stays exact: a staged
// file the sandbox rewrote in place (same size, time set back) is sent
// again, a link the sandbox planted at the copy's top to a directory
// outside is deleted without anything outside lost, and the stamps list
// every file. A small tree is published without the split.
func TestSplitLargeTree(t *testing.T) {
	base := t.TempDir()
	src, root, victim := filepath.Join(base, "src"), filepath.Join(base, "sb", "rt"), filepath.Join(base, "victim")
	require.NoError(t, os.MkdirAll(victim, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(victim, "keep"), []byte("keep"), 0o644))
	n := shell.SplitFiles + 100
	for i := range n {
		p := filepath.Join(src, "d"+strconv.Itoa(i%7), strconv.Itoa(i/7%5), "f"+strconv.Itoa(i))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte("file "+strconv.Itoa(i)), 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(src, "top"), []byte("top"), 0o600))
	n++
	require.NoError(t, os.MkdirAll(filepath.Join(base, "sb"), 0o755))

	var mu sync.Mutex
	var scripts []string
	r := recordingRunner{Runner: sandbox.Local(filepath.Join(base, "sb")), record: func(s string) {
		mu.Lock()
		defer mu.Unlock()
		scripts = append(scripts, s)
	}}
	split := func() bool {
		mu.Lock()
		defer mu.Unlock()
		defer func() { scripts = nil }()
		for _, s := range scripts {
			if strings.Contains(s, "\nZs=1\n") {
				return true
			}
		}
		return false
	}
	ix := stage.NewIndex()
	b := stage.NewBridge(r)
	run := func() stage.StagedAsset {
		t.Helper()
		rt, err := stage.Stage(context.Background(), b, root, []stage.Asset{{Name: "a", Source: src}}, stage.WithIndex(ix), stage.WithRacyWindow(0))
		require.NoError(t, err)
		atkSameCopy(t, src, filepath.Join(root, "a"))
		stamps, err := os.ReadFile(filepath.Join(root, shell.StampsName("a")))
		require.NoError(t, err)
		assert.Equal(t, n, strings.Count(string(stamps), "\n"), "a stamp a file")
		return rt.Assets[0]
	}
	run()
	assert.True(t, split(), "the first copy is published in two processes")

	dst := filepath.Join(root, "a")
	atkRewrite(t, filepath.Join(dst, "d3", "0", "f3"), "FILE 3")
	require.NoError(t, os.Symlink(victim, filepath.Join(dst, "planted")))
	require.NoError(t, os.WriteFile(filepath.Join(src, "d1", "0", "f1"), []byte("changed"), 0o644))
	sa := run()
	assert.True(t, split(), "the delta too")
	assert.False(t, sa.Reused)
	b2, err := os.ReadFile(filepath.Join(victim, "keep"))
	require.NoError(t, err)
	assert.Equal(t, "keep", string(b2), "nothing outside the root is deleted")

	small := filepath.Join(base, "small")
	require.NoError(t, os.MkdirAll(filepath.Join(small, "x"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(small, "x", "f"), []byte("f"), 0o644))
	_, err = stage.Stage(context.Background(), b, root, []stage.Asset{{Name: "s", Source: small}}, stage.WithIndex(ix))
	require.NoError(t, err)
	assert.False(t, split(), "a small tree is published in one process")
}
