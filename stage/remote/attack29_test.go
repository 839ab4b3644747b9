//go:build linux

package remote_test

// Attack test written from go doc only: with an Index, a remote.Host (a
// Bridge over SSH) compares a Source whose metadata changed lazily, as it
// publishes, where its learnt costs say carrying may pay.

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/treetest"
	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
)

// TestAtk29HostLazyCompare: touched, same-size-same-mtime change, tampered
// manifest (garbage, huge sizes), tampered copy with WithVerify: every Stage
// through a Host with an Index gives an exact copy; Reused only for a copy
// that equals the Source.
func TestAtk29HostLazyCompare(t *testing.T) {
	srv := remotetest.NewServer(t)
	h := dial(t, srv)
	src := t.TempDir()
	for i := range 40 {
		treetest.Write(t, filepath.Join(src, fmt.Sprintf("d%d", i%4), fmt.Sprintf("f%d", i)), fmt.Sprintf("content %02d", i), 0o644)
	}
	root := filepath.Join(srv.Dir(), "rt")
	dst := filepath.Join(root, "a")
	man := filepath.Join(root, ".airlock-manifest-a.json")
	ix := stage.NewIndex()
	run := func(what string, opts ...stage.Option) stage.StagedAsset {
		t.Helper()
		rt, err := stage.Stage(t.Context(), h, root, []stage.Asset{{Name: "a", Source: src}}, append([]stage.Option{stage.WithIndex(ix)}, opts...)...)
		require.NoError(t, err, "%s", what)
		require.Empty(t, treetest.Diff(treetest.Snapshot(t, src), treetest.Snapshot(t, dst)), "%s: the copy differs from the Source", what)
		return rt.Assets[0]
	}
	tick := func() { time.Sleep(15 * time.Millisecond) }
	round := 0
	touch := func() {
		round++
		when := time.Now().Add(-time.Duration(round) * time.Minute)
		require.NoError(t, filepath.WalkDir(src, func(p string, _ os.DirEntry, err error) error {
			require.NoError(t, err)
			return os.Chtimes(p, when, when)
		}))
	}
	sameSize := func(p string) {
		st, err := os.Stat(p)
		require.NoError(t, err)
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		b[0] ^= 0x20
		require.NoError(t, os.WriteFile(p, b, 0o644))
		require.NoError(t, os.Chtimes(p, st.ModTime(), st.ModTime()))
	}
	run("first")
	for i := range 3 {
		tick()
		touch()
		a := run(fmt.Sprintf("touched %d", i))
		t.Logf("touched %d: Reused=%v Sent=%d", i, a.Reused, a.Sent)
		tick()
		sameSize(filepath.Join(src, "d1", "f1"))
		a = run(fmt.Sprintf("same size, same mtime %d", i))
		assert.False(t, a.Reused)
		tick()
		require.NoError(t, os.WriteFile(man, []byte(`{"entries":[{"path":"d0","type":"dir","mode":493,"size":0,"sha256":""},{"path":"d0/f0","type":"file","mode":420,"size":99999999999,"sha256":"`+fmt.Sprintf("%064d", 0)+`"}]}`), 0o644))
		touch()
		a = run(fmt.Sprintf("crafted manifest, touched %d", i))
		assert.False(t, a.Reused, "a crafted manifest cannot equal the Source")
		tick()
		p := filepath.Join(dst, "d2", "f2")
		require.NoError(t, os.Chmod(p, 0o644))
		sameSize(p)
		touch()
		a = run(fmt.Sprintf("tampered copy, touched, verified %d", i), stage.WithVerify())
		assert.False(t, a.Reused, "the tampered copy was kept")
		a = run(fmt.Sprintf("untouched %d", i))
		t.Logf("untouched %d: Reused=%v Sent=%d", i, a.Reused, a.Sent)
	}
}
