//go:build linux

package stage_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/shell"
	"github.com/airlockdev/airlock/internal/treetest"
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

// splitSource returns a sandbox directory, a Source of shell.SplitFiles
// files in ten directories and a file trig (for the caller to change),
// and the stage root in the sandbox.
func splitSource(t *testing.T) (sb, src, root string) {
	sb, src = t.TempDir(), t.TempDir()
	for i := range shell.SplitFiles {
		build(t, src, fmt.Sprintf("d%02d/f%04d=content %d", i%10, i, i))
	}
	build(t, src, "trig=0")
	return sb, src, filepath.Join(sb, "rt")
}

// splitPubHook runs before, once, when the host writes the publish line on
// a command's stdin: what a sandbox does just before a publish.
type splitPubHook struct {
	r      sandbox.Runner
	before func()
}

type splitPubReader struct {
	r    io.Reader
	f    func()
	done bool
}

func (p *splitPubReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if !p.done && p.f != nil && bytes.Contains(b[:n], []byte(shell.PublishLine)) {
		p.done = true
		p.f()
	}
	return n, err
}

func (h *splitPubHook) Run(ctx context.Context, cmd sandbox.Command) error {
	if cmd.Stdin != nil {
		cmd.Stdin = &splitPubReader{r: cmd.Stdin, f: h.before}
	}
	return h.r.Run(ctx, cmd)
}

// TestSplitTempSwappedForLink: a sandbox that, just before a large tree's
// publish, moves the temporary directory's content into a directory of
// its own outside the root (a home holding docs and src) and leaves a
// link to it in its place loses none of that directory's files: the
// deletion in two processes follows no link.
func TestSplitTempSwappedForLink(t *testing.T) {
	sb, src, root := splitSource(t)
	h := &splitPubHook{r: sandbox.Local(sb)}
	b := stage.NewBridge(h)
	ix := stage.NewIndex()
	as := []stage.Asset{{Name: "s", Source: src}}
	_, err := stage.Stage(t.Context(), b, root, as, stage.WithIndex(ix))
	require.NoError(t, err)
	victim := filepath.Join(sb, "home", "user")
	build(t, victim, "docs/a=1", "docs/b=2", "docs/c=3", "src/main.go=package main", "src/util.go=package main")
	want := treetest.Snapshot(t, victim)
	time.Sleep(20 * time.Millisecond)
	build(t, src, "trig=1")
	h.before = func() {
		ents, err := os.ReadDir(root)
		require.NoError(t, err)
		for _, e := range ents {
			if !e.IsDir() || !strings.HasPrefix(e.Name(), shell.TempPrefix) {
				continue
			}
			tmp := filepath.Join(root, e.Name())
			kids, err := os.ReadDir(tmp)
			require.NoError(t, err)
			for _, k := range kids {
				require.NoError(t, os.Rename(filepath.Join(tmp, k.Name()), filepath.Join(victim, k.Name())))
			}
			require.NoError(t, os.Remove(tmp))
			require.NoError(t, os.Symlink(victim, tmp))
		}
	}
	_, err = stage.Stage(t.Context(), b, root, as, stage.WithIndex(ix))
	t.Logf("the stage with the temporary directory swapped: %v", err)
	got := treetest.Snapshot(t, victim)
	for p, n := range want {
		g, ok := got[p]
		assert.True(t, ok && g.Data == n.Data, "%s outside the root was deleted or changed", p)
	}
}

// TestPublishNotWritableByOthers: what a publish leaves under the stage
// root (the copy's top, its manifest and stamps) no other user may write,
// and the directory the stamps are written in is never open to them: as
// root, an unprivileged sandbox user who plants links named as the stamps
// in every such directory it finds, over eight publishes, overwrites no
// file of root's (an outside attack overwrote a root-only file at the
// first publish when the publish ran under the extraction's umask 0).
func TestPublishNotWritableByOthers(t *testing.T) {
	sb, src, root := splitSource(t)
	require.NoError(t, os.Chmod(sb, 0o755))
	b, ix := stage.NewBridge(sandbox.Local(sb)), stage.NewIndex()
	as := []stage.Asset{{Name: "s", Source: src}}
	_, err := stage.Stage(t.Context(), b, root, as, stage.WithIndex(ix))
	require.NoError(t, err)
	for _, n := range []string{"s", shell.ManifestName("s"), shell.StampsName("s")} {
		fi, err := os.Lstat(filepath.Join(root, n))
		require.NoError(t, err)
		assert.Zero(t, fi.Mode().Perm()&0o022, "%s is %v: writable by others", n, fi.Mode())
	}
	if os.Geteuid() != 0 {
		t.Log("not root: the unprivileged attacker is not run (CI runs as root)")
		return
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Fatalf("setpriv (util-linux) is needed as root: %v", err)
	}
	for _, d := range []string{filepath.Dir(sb), filepath.Dir(filepath.Dir(sb))} {
		fi, err := os.Stat(d)
		require.NoError(t, err)
		if fi.Mode().Perm()&0o005 != 0o005 {
			require.NoError(t, os.Chmod(d, fi.Mode().Perm()|0o005))
		}
	}
	require.NoError(t, os.Mkdir(filepath.Join(sb, "rootonly"), 0o755))
	secret := filepath.Join(sb, "rootonly", "shadow")
	require.NoError(t, os.WriteFile(secret, []byte("root:hash\n"), 0o600))
	stop := filepath.Join(sb, "STOP")
	atk := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c",
		`while [ ! -e '`+stop+`' ]; do for d in '`+root+`'/.airlock-gone-*-stamps; do [ -d "$d" ] && { ln -s '`+secret+`' "$d/z"; ln -s '`+secret+`' "$d/s"; } 2>/dev/null; done; done; exit 0`)
	require.NoError(t, atk.Start())
	defer func() {
		require.NoError(t, os.WriteFile(stop, nil, 0o644))
		require.NoError(t, atk.Wait())
	}()
	for i := range 8 {
		time.Sleep(10 * time.Millisecond)
		build(t, src, fmt.Sprintf("trig=%d", i+1))
		_, err := stage.Stage(t.Context(), b, root, as, stage.WithIndex(ix))
		require.NoError(t, err)
		got, err := os.ReadFile(secret)
		require.NoError(t, err)
		require.Equal(t, "root:hash\n", string(got), "publish %d overwrote a root-only file", i)
	}
}
