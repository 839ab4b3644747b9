//go:build linux

package remote_test

// Attack tests written from go doc only: the delta publish of remote.Host
// (stage.Bridge's protocol over SSH) against a sandbox that tampers with
// its staged copy, and a caller that cancels mid-delta.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/treetest"
	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
)

type a22Env struct {
	t         *testing.T
	src, root string
	tgt       stage.Target
	gen       int
}

func a22Remote(t *testing.T) *a22Env {
	srv := remotetest.NewServer(t)
	host := srv.Dial(t)
	src := t.TempDir()
	treetest.Write(t, filepath.Join(src, "a.txt"), "alpha\n", 0o644)
	treetest.Write(t, filepath.Join(src, "exec.sh"), "#!/bin/sh\n", 0o755)
	treetest.Write(t, filepath.Join(src, "ro.txt"), "read only\n", 0o444)
	treetest.Write(t, filepath.Join(src, "big.bin"), string(make([]byte, 300<<10)), 0o644)
	treetest.Write(t, filepath.Join(src, "sub", "b.txt"), "bravo\n", 0o600)
	treetest.Write(t, filepath.Join(src, "sub", "deep", "c.txt"), "charlie\n", 0o644)
	treetest.Write(t, filepath.Join(src, "trig.txt"), "v0", 0o644)
	return &a22Env{t: t, src: src, root: filepath.Join(srv.Dir(), "rt"), tgt: host}
}

func (e *a22Env) dst() string { return filepath.Join(e.root, "sk") }

func (e *a22Env) bump() {
	e.gen++
	treetest.Write(e.t, filepath.Join(e.src, "trig.txt"), fmt.Sprintf("v%d", e.gen), 0o644)
}

func (e *a22Env) stage(ctx context.Context) (stage.StagedAsset, error) {
	rt, err := stage.Stage(ctx, e.tgt, e.root, []stage.Asset{{Name: "sk", Source: e.src}})
	if err != nil {
		return stage.StagedAsset{}, err
	}
	return rt.Assets[0], nil
}

func (e *a22Env) ok() stage.StagedAsset {
	e.t.Helper()
	a, err := e.stage(e.t.Context())
	require.NoError(e.t, err)
	require.Empty(e.t, treetest.Diff(treetest.Snapshot(e.t, e.src), treetest.Snapshot(e.t, e.dst())), "sandbox copy differs from the host source")
	for p, n := range treetest.Snapshot(e.t, e.dst()) {
		if n.Mode.IsRegular() {
			assert.EqualValues(e.t, 1, n.Nlink, "%s has %d links", p, n.Nlink)
		}
	}
	return a
}

func TestA22RemoteDeltaTamper(t *testing.T) {
	e := a22Remote(t)
	e.ok()
	before := treetest.Snapshot(t, e.dst())
	e.bump()
	a := e.ok()
	assert.Equal(t, 1, a.Sent)
	after := treetest.Snapshot(t, e.dst())
	assert.Equal(t, before["big.bin"].Ino, after["big.bin"].Ino, "big.bin hard-linked from the previous copy")

	time.Sleep(20 * time.Millisecond)
	d := e.dst()
	f, err := os.OpenFile(filepath.Join(d, "a.txt"), os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("ALPHA"), 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, os.Truncate(filepath.Join(d, "big.bin"), 10))
	require.NoError(t, os.Chmod(filepath.Join(d, "exec.sh"), 0o600))
	require.NoError(t, os.Remove(filepath.Join(d, "sub", "b.txt")))
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(d, "sub", "b.txt")))
	treetest.Write(t, filepath.Join(d, "extra", "x.txt"), "x", 0o644)
	require.NoError(t, os.Symlink("/", filepath.Join(d, "sub", "deep", "rootlink")))
	e.bump()
	e.ok()
}

// The asset directory moved out of the root (a rename keeps its files'
// stamps) and replaced by a link to it.
func TestA22RemoteAssetDirMovedOutAndLinked(t *testing.T) {
	e := a22Remote(t)
	e.ok()
	moved := filepath.Join(t.TempDir(), "sk")
	require.NoError(t, os.Rename(e.dst(), moved))
	require.NoError(t, os.Symlink(moved, e.dst()))
	fi, err := os.Lstat(filepath.Join(moved, "a.txt"))
	require.NoError(t, err)
	e.bump()
	e.ok()
	after, err := os.Lstat(filepath.Join(moved, "a.txt"))
	require.NoError(t, err)
	assert.Equal(t, fi.Sys().(*syscall.Stat_t).Ctim, after.Sys().(*syscall.Stat_t).Ctim, "a file outside the root was linked by the stage")
	assert.EqualValues(t, 1, after.Sys().(*syscall.Stat_t).Nlink, "link count of a file outside the root")
}

// Cancel a delta after a range of delays: a cancelled stage leaves the
// previous copy exactly (modes included); the next stage is exact.
func TestA22RemoteCancelMidDelta(t *testing.T) {
	e := a22Remote(t)
	e.ok()
	e.bump()
	require.NoError(t, os.Chmod(filepath.Join(e.src, "a.txt"), 0o600))
	require.NoError(t, os.Chmod(filepath.Join(e.src, "sub"), 0o700))
	treetest.Write(t, filepath.Join(e.src, "new.txt"), "new", 0o644)
	prev := treetest.Snapshot(t, e.dst())
	cancelled := 0
	for _, d := range []time.Duration{0, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond} {
		ctx, cancel := context.WithTimeout(t.Context(), d)
		_, err := e.stage(ctx)
		cancel()
		if err == nil {
			t.Logf("finished within %s", d)
			break
		}
		cancelled++
		require.Empty(t, treetest.Diff(prev, treetest.Snapshot(t, e.dst())), "cancelled after %s: the previous copy changed: %v", d, err)
	}
	t.Logf("%d cancelled deltas", cancelled)
	assert.Positive(t, cancelled)
	e.ok()
}
