package remote_test

// Attack tests written from go doc only: the delta publish of remote.Host
// (stage.Bridge's protocol over SSH) against a sandbox that tampers with
// its staged copy, and a caller that cancels mid-delta.

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
)

type a22Node struct {
	Mode  fs.FileMode
	Data  string
	Link  string
	Nlink uint64
	Ino   uint64
}

func a22Snap(t testing.TB, dir string) map[string]a22Node {
	t.Helper()
	m := map[string]a22Node{}
	var walk func(rel string)
	walk = func(rel string) {
		ents, err := os.ReadDir(filepath.Join(dir, rel))
		require.NoError(t, err)
		for _, e := range ents {
			p := path.Join(rel, e.Name())
			full := filepath.Join(dir, p)
			fi, err := os.Lstat(full)
			require.NoError(t, err)
			st := fi.Sys().(*syscall.Stat_t)
			n := a22Node{Mode: fi.Mode() & (fs.ModeType | fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky), Nlink: uint64(st.Nlink), Ino: uint64(st.Ino)}
			switch {
			case fi.Mode().IsRegular():
				b, err := os.ReadFile(full)
				require.NoError(t, err)
				n.Data = string(b)
			case fi.Mode()&fs.ModeSymlink != 0:
				n.Link, err = os.Readlink(full)
				require.NoError(t, err)
			case fi.IsDir():
				walk(p)
			}
			m[p] = n
		}
	}
	walk("")
	return m
}

func a22Diff(want, got map[string]a22Node) []string {
	keys := map[string]bool{}
	for k := range want {
		keys[k] = true
	}
	for k := range got {
		keys[k] = true
	}
	var sorted []string
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var d []string
	for _, k := range sorted {
		w, wok := want[k]
		g, gok := got[k]
		switch {
		case !gok:
			d = append(d, fmt.Sprintf("%q missing", k))
		case !wok:
			d = append(d, fmt.Sprintf("%q extra (%v)", k, g.Mode))
		case w.Mode != g.Mode:
			d = append(d, fmt.Sprintf("%q mode %v, want %v", k, g.Mode, w.Mode))
		case w.Data != g.Data:
			d = append(d, fmt.Sprintf("%q bytes %.40q, want %.40q", k, g.Data, w.Data))
		case w.Link != g.Link:
			d = append(d, fmt.Sprintf("%q link %q, want %q", k, g.Link, w.Link))
		}
	}
	return d
}

func a22Write(t testing.TB, p, data string, mode fs.FileMode) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(data), mode))
	require.NoError(t, os.Chmod(p, mode))
}

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
	a22Write(t, filepath.Join(src, "a.txt"), "alpha\n", 0o644)
	a22Write(t, filepath.Join(src, "exec.sh"), "#!/bin/sh\n", 0o755)
	a22Write(t, filepath.Join(src, "ro.txt"), "read only\n", 0o444)
	a22Write(t, filepath.Join(src, "big.bin"), string(make([]byte, 300<<10)), 0o644)
	a22Write(t, filepath.Join(src, "sub", "b.txt"), "bravo\n", 0o600)
	a22Write(t, filepath.Join(src, "sub", "deep", "c.txt"), "charlie\n", 0o644)
	a22Write(t, filepath.Join(src, "trig.txt"), "v0", 0o644)
	return &a22Env{t: t, src: src, root: filepath.Join(srv.Dir(), "rt"), tgt: host}
}

func (e *a22Env) dst() string { return filepath.Join(e.root, "sk") }

func (e *a22Env) bump() {
	e.gen++
	a22Write(e.t, filepath.Join(e.src, "trig.txt"), fmt.Sprintf("v%d", e.gen), 0o644)
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
	require.Empty(e.t, a22Diff(a22Snap(e.t, e.src), a22Snap(e.t, e.dst())), "sandbox copy differs from the host source")
	for p, n := range a22Snap(e.t, e.dst()) {
		if n.Mode.IsRegular() {
			assert.EqualValues(e.t, 1, n.Nlink, "%s has %d links", p, n.Nlink)
		}
	}
	return a
}

func TestA22RemoteDeltaTamper(t *testing.T) {
	e := a22Remote(t)
	e.ok()
	before := a22Snap(t, e.dst())
	e.bump()
	a := e.ok()
	assert.Equal(t, 1, a.Sent)
	after := a22Snap(t, e.dst())
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
	a22Write(t, filepath.Join(d, "extra", "x.txt"), "x", 0o644)
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
	a22Write(t, filepath.Join(e.src, "new.txt"), "new", 0o644)
	prev := a22Snap(t, e.dst())
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
		require.Empty(t, a22Diff(prev, a22Snap(t, e.dst())), "cancelled after %s: the previous copy changed: %v", d, err)
	}
	t.Logf("%d cancelled deltas", cancelled)
	assert.Positive(t, cancelled)
	e.ok()
}
