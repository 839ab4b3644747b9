//go:build linux

package stage_test

// Adversarial tests of the Index's stamps (identity, size, modification and
// change time, with each file's SHA-256): every attack changes a Source in a
// way meant to keep a file's stamp, or to make the index remember a stamp
// with the wrong hash, and then checks that a Stage that returns nil leaves a
// sandbox copy equal to the Source, byte for byte and mode for mode. The
// attacks that break the guarantee live in attack_stamps_fail_test.go.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/airlockdev/airlock/internal/treetest"
	"github.com/airlockdev/airlock/stage"
)

// atkDefaultWindow is a little more than the racy window Stage uses when
// no WithRacyWindow is given (2 s, see the Index doc): files older than it
// when a stage begins have stamps that the next stage trusts.
const atkDefaultWindow = 2100 * time.Millisecond

// atkExpected returns what a copy of src must hold: src's snapshot without
// links and special files, which every policy but FollowLinksWithin leaves
// out.
func atkExpected(t testing.TB, src string) map[string]treetest.Node {
	t.Helper()
	m := treetest.Snapshot(t, src)
	for k, n := range m {
		if n.Mode.Type()&^fs.ModeDir != 0 {
			delete(m, k)
		}
	}
	return m
}

// atkSameCopy fails t unless dst holds exactly what a stage of src must put
// there (see atkExpected).
func atkSameCopy(t testing.TB, src, dst string) {
	t.Helper()
	require.Empty(t, treetest.Diff(atkExpected(t, src), treetest.Snapshot(t, dst)), "sandbox copy %s differs from host source %s", dst, src)
}

// atkRewrite writes data over p in place (same inode) and gives p back the
// modification and access times it had before.
func atkRewrite(t testing.TB, p, data string) {
	t.Helper()
	fi, err := os.Stat(p)
	require.NoError(t, err)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	require.NoError(t, err)
	_, err = f.WriteString(data)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, os.Chtimes(p, fi.ModTime(), fi.ModTime()))
}

// atkAge sets p's modification and access times an hour back (before the
// files age: it moves the change time).
func atkAge(t testing.TB, p string) {
	t.Helper()
	old := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(p, old, old))
}

// atkCase is one way of changing a Source after a stage recorded its stamps.
type atkCase struct {
	name    string
	prepare func(t *testing.T, src, outside string) // before the files age; may be nil
	mutate  func(t *testing.T, src, outside string) // right after the first stage
	same    bool                                    // the change leaves the content and modes as they were
}

// atkSpec is every attacked Source's tree: a, b, c and d/x, f/x have the
// same size; e is never touched, so that a stage has a file to trust.
var atkSpec = []string{"a=alpha-1", "b=bravo-2", "c=charl-3", "d/x=delta-4", "f/x=foxtr-5", "e=unchanged"}

var atkCases = []atkCase{
	{name: "same size, times restored", mutate: func(t *testing.T, src, _ string) {
		atkRewrite(t, filepath.Join(src, "a"), "ALPHA-1")
	}},
	{name: "same size, written at once", mutate: func(t *testing.T, src, _ string) {
		require.NoError(t, os.WriteFile(filepath.Join(src, "a"), []byte("alphA-1"), 0o644))
	}},
	{name: "older file moved over it", prepare: func(t *testing.T, src, _ string) {
		atkAge(t, filepath.Join(src, "b"))
	}, mutate: func(t *testing.T, src, _ string) {
		require.NoError(t, os.Rename(filepath.Join(src, "b"), filepath.Join(src, "a")))
	}},
	{name: "hard-linked pair, one name rewritten", prepare: func(t *testing.T, src, _ string) {
		require.NoError(t, os.Remove(filepath.Join(src, "b")))
		require.NoError(t, os.Link(filepath.Join(src, "a"), filepath.Join(src, "b")))
	}, mutate: func(t *testing.T, src, _ string) {
		atkRewrite(t, filepath.Join(src, "b"), "ALPHA-1")
	}},
	{name: "two files swapped by renames", mutate: func(t *testing.T, src, _ string) {
		a, b, tmp := filepath.Join(src, "a"), filepath.Join(src, "b"), filepath.Join(src, "tmp")
		require.NoError(t, os.Rename(a, tmp))
		require.NoError(t, os.Rename(b, a))
		require.NoError(t, os.Rename(tmp, b))
	}},
	{name: "two files exchanged by renameat2", mutate: func(t *testing.T, src, _ string) {
		require.NoError(t, unix.Renameat2(unix.AT_FDCWD, filepath.Join(src, "a"), unix.AT_FDCWD, filepath.Join(src, "b"), unix.RENAME_EXCHANGE))
	}},
	{name: "two directories exchanged", mutate: func(t *testing.T, src, _ string) {
		require.NoError(t, unix.Renameat2(unix.AT_FDCWD, filepath.Join(src, "d"), unix.AT_FDCWD, filepath.Join(src, "f"), unix.RENAME_EXCHANGE))
	}},
	{name: "hard link of another file over it", mutate: func(t *testing.T, src, _ string) {
		require.NoError(t, os.Remove(filepath.Join(src, "a")))
		require.NoError(t, os.Link(filepath.Join(src, "b"), filepath.Join(src, "a")))
	}},
	{name: "written through a hard link outside the source", prepare: func(t *testing.T, src, outside string) {
		require.NoError(t, os.Link(filepath.Join(src, "a"), filepath.Join(outside, "a")))
	}, mutate: func(t *testing.T, _, outside string) {
		atkRewrite(t, filepath.Join(outside, "a"), "ALPHA-1")
	}},
	{name: "file from outside moved over it", prepare: func(t *testing.T, _, outside string) {
		p := filepath.Join(outside, "o")
		require.NoError(t, os.WriteFile(p, []byte("OUTSI-6"), 0o644))
		atkAge(t, p)
	}, mutate: func(t *testing.T, src, outside string) {
		require.NoError(t, os.Rename(filepath.Join(outside, "o"), filepath.Join(src, "a")))
	}},
	{name: "truncated and rewritten, times restored", mutate: func(t *testing.T, src, _ string) {
		p := filepath.Join(src, "a")
		fi, err := os.Stat(p)
		require.NoError(t, err)
		require.NoError(t, os.Truncate(p, 0))
		require.NoError(t, os.Truncate(p, fi.Size())) // zeros, same size
		require.NoError(t, os.Chtimes(p, fi.ModTime(), fi.ModTime()))
	}},
	{name: "deleted and recreated, times restored", mutate: func(t *testing.T, src, _ string) {
		p := filepath.Join(src, "a")
		fi, err := os.Stat(p)
		require.NoError(t, err)
		require.NoError(t, os.Remove(p))
		require.NoError(t, os.WriteFile(p, []byte("ALPHA-7"), 0o644))
		require.NoError(t, os.Chtimes(p, fi.ModTime(), fi.ModTime()))
	}},
	{name: "hole punched, size kept", mutate: func(t *testing.T, src, _ string) {
		f, err := os.OpenFile(filepath.Join(src, "a"), os.O_RDWR, 0)
		require.NoError(t, err)
		defer func() { require.NoError(t, f.Close()) }()
		require.NoError(t, unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, 4))
	}},
	{name: "copy_file_range from another file", mutate: func(t *testing.T, src, _ string) {
		in, err := os.Open(filepath.Join(src, "b"))
		require.NoError(t, err)
		defer func() { require.NoError(t, in.Close()) }()
		out, err := os.OpenFile(filepath.Join(src, "a"), os.O_WRONLY, 0)
		require.NoError(t, err)
		defer func() { require.NoError(t, out.Close()) }()
		var off, outOff int64
		n, err := unix.CopyFileRange(int(in.Fd()), &off, int(out.Fd()), &outOff, 7, 0)
		require.NoError(t, err)
		require.Equal(t, 7, n)
	}},
	{name: "mode only", mutate: func(t *testing.T, src, _ string) {
		require.NoError(t, os.Chmod(filepath.Join(src, "a"), 0o755))
	}},
	{name: "mode changed and changed back", mutate: func(t *testing.T, src, _ string) {
		p := filepath.Join(src, "a")
		require.NoError(t, os.Chmod(p, 0o600))
		require.NoError(t, os.Chmod(p, 0o644))
	}, same: true},
	{name: "file replaced by a directory", mutate: func(t *testing.T, src, _ string) {
		p := filepath.Join(src, "a")
		require.NoError(t, os.Remove(p))
		build(t, src, "a/alpha-1=inner")
	}},
	{name: "file replaced by a link to a host secret", prepare: func(t *testing.T, _, outside string) {
		require.NoError(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("SECRET-"), 0o600))
	}, mutate: func(t *testing.T, src, outside string) {
		p := filepath.Join(src, "a")
		require.NoError(t, os.Remove(p))
		require.NoError(t, os.Symlink(filepath.Join(outside, "secret"), p))
	}},
	{name: "directory replaced by a link to a host directory", prepare: func(t *testing.T, _, outside string) {
		build(t, outside, "sd/x=SECRET-")
	}, mutate: func(t *testing.T, src, outside string) {
		require.NoError(t, os.RemoveAll(filepath.Join(src, "d")))
		require.NoError(t, os.Symlink(filepath.Join(outside, "sd"), filepath.Join(src, "d")))
	}},
	{name: "file replaced by a fifo", mutate: func(t *testing.T, src, _ string) {
		p := filepath.Join(src, "a")
		require.NoError(t, os.Remove(p))
		require.NoError(t, unix.Mkfifo(p, 0o644))
	}},
}

// atkEnv is one attacked Source staged into one sandbox through one index.
type atkEnv struct {
	c       atkCase
	sb      sbox
	src     string
	outside string
	newIx   func() *stage.Index // the index of the next stage (a new one for a "new process")
}

func (e *atkEnv) stage(t *testing.T, opts ...stage.Option) (stage.StagedAsset, int, error) {
	t.Helper()
	log := new(logRecorder)
	opts = append([]stage.Option{stage.WithIndex(e.newIx()), stage.WithLogger(slog.New(log))}, opts...)
	rt, err := stage.Stage(context.Background(), e.sb, e.sb.root, []stage.Asset{{Name: "s", Source: e.src}}, opts...)
	if err != nil {
		return stage.StagedAsset{}, compared(t, log), err
	}
	return rt.Assets[0], compared(t, log), nil
}

// atkKind is a target kind (a name in sandboxes) and an index kind: in
// memory, or persistent and reopened for each stage (a "new process").
type atkKind struct {
	target     string
	persistent bool
}

// atkBattery runs every atkCase against each kind: build, age the files by
// wait, stage, change, stage again, compare. opts go to every Stage. It
// returns the files the second stages trusted, in all.
func atkBattery(t *testing.T, wait time.Duration, kinds []atkKind, opts ...stage.Option) int {
	var envs []*atkEnv
	for _, kind := range kinds {
		for _, k := range sandboxes {
			if k.name != kind.target {
				continue
			}
			persistent := kind.persistent
			for _, c := range atkCases {
				e := &atkEnv{c: c, sb: k.new(t), src: t.TempDir(), outside: t.TempDir()}
				if persistent {
					dir := filepath.Join(t.TempDir(), "state")
					e.newIx = func() *stage.Index { return openIndex(t, dir) }
				} else {
					ix := stage.NewIndex()
					e.newIx = func() *stage.Index { return ix }
				}
				build(t, e.src, atkSpec...)
				if c.prepare != nil {
					c.prepare(t, e.src, e.outside)
				}
				envs = append(envs, e)
				e.c.name = k.name + "/" + map[bool]string{false: "memory", true: "disk"}[persistent] + "/" + c.name
			}
		}
	}
	time.Sleep(wait)
	for _, e := range envs {
		_, _, err := e.stage(t, opts...)
		require.NoError(t, err, e.c.name)
		e.c.mutate(t, e.src, e.outside)
	}
	trusted := 0
	for _, e := range envs {
		t.Run(e.c.name, func(t *testing.T) {
			sa, n, err := e.stage(t, opts...)
			require.NoError(t, err)
			trusted += max(n, 0)
			assert.Equal(t, e.c.same, sa.Reused, "reused only when the content and modes are as they were")
			atkSameCopy(t, e.src, filepath.Join(e.sb.hostRoot, "s"))
			treetest.NoLinkNoSecret(t, filepath.Join(e.sb.hostRoot, "s"), "SECRET-")
		})
	}
	return trusted
}

// TestAtkStampsBattery: with the default racy window (the files aged past
// it before the first stage), every change that keeps size and
// modification time, moves another inode into place, swaps files or
// directories, or changes a type or a mode arrives.
func TestAtkStampsBattery(t *testing.T) {
	trusted := atkBattery(t, atkDefaultWindow, []atkKind{{"Dir", false}, {"Dir", true}, {"Bridge", true}})
	assert.Positive(t, trusted, "the second stages trusted stamps: the attacks reached the stamps check")
}

// TestAtkStampsBatteryNoWindow: the same with the test hook's window of 0
// (a file is trusted as soon as it changed before the stage began), the
// change made within microseconds of the first stage. Between the two
// batteries every target meets both index kinds (the file's runtime budget
// does not pay for all four in each).
func TestAtkStampsBatteryNoWindow(t *testing.T) {
	trusted := atkBattery(t, 10*time.Millisecond, []atkKind{{"Dir", true}, {"Bridge", false}}, stage.WithRacyWindow(0))
	assert.Positive(t, trusted)
}

// TestAtkStampsChangeDuringStage: a file changed while the stage that
// records its stamps runs (from its progress callback, at its first call
// or once every file is done, keeping size and modification time) is read
// again by the next stage, which sends it. The stage that meets the change
// returns nil or ErrChanged.
func TestAtkStampsChangeDuringStage(t *testing.T) {
	triggers := map[string]func(stage.Progress) bool{
		"first":    func(stage.Progress) bool { return true },
		"all done": func(p stage.Progress) bool { return p.TotalFiles > 0 && p.Files == p.TotalFiles },
	}
	for _, racy := range []time.Duration{0, 50 * time.Millisecond} {
		for name, when := range triggers {
			forEachSandbox(t, func(t *testing.T, sb sbox) {
				src := stampsTree(t, 20)
				ix := stage.NewIndex()
				time.Sleep(racy + 10*time.Millisecond)
				p := filepath.Join(src, "d1", "f4")
				var changed atomic.Bool
				as := []stage.Asset{{Name: "s", Source: src}}
				_, err := stage.Stage(context.Background(), sb, sb.root, as, stage.WithIndex(ix), stage.WithRacyWindow(racy),
					stage.WithProgress(func(pr stage.Progress) {
						if when(pr) && !changed.Swap(true) {
							atkRewrite(t, p, "CONTENT 4")
						}
					}))
				require.True(t, changed.Load(), "the change was made (%s)", name)
				if err != nil {
					require.ErrorIs(t, err, stage.ErrChanged)
				}
				t.Logf("racy %v, change at %s: the stage returned %v", racy, name, err)
				time.Sleep(racy + 10*time.Millisecond)
				build(t, src, "d0/f0=changed") // the next stage compares through the stamps
				time.Sleep(racy + 10*time.Millisecond)
				_, err = stage.Stage(context.Background(), sb, sb.root, as, stage.WithIndex(ix), stage.WithRacyWindow(racy))
				require.NoError(t, err)
				require.Equal(t, "CONTENT 4", readFile(t, p))
				sameTree(t, src, filepath.Join(sb.hostRoot, "s"))
			})
		}
	}
}

// TestAtkStampsConcurrent: stages of one Source into one Dir from several
// goroutines, through one in-memory Index or through one persistent
// directory that every stage opens anew (processes sharing it), while the
// Source's files are rewritten (same size, times restored): a stage fails
// only with ErrChanged, and once the writer stops the next stage is exact.
// (The same through a Bridge fails: attack_stamps_fail_test.go.)
func TestAtkStampsConcurrent(t *testing.T) {
	for _, kind := range []string{"memory", "disk"} {
		t.Run(kind, func(t *testing.T) {
			atkConcurrent(t, kind, []sbox{sandboxes[0].new(t)})
		})
	}
}

// atkConcurrent stages one changing Source into sbs from six goroutines
// (goroutine g into sbs[g%len(sbs)]) through an index of kind "memory",
// "disk" (opened anew by every stage) or "none", and checks that once the
// Source is quiet the next stage of each target is exact.
// TestAtkConcurrentBridge: six goroutines stage one Source, three into one
// Dir and three into one Bridge (sandbox.Local), through one Index (in
// memory, on disk, none), while the Source's files are rewritten, same
// size, times restored; once the writer stops, the next Stage of each must
// leave an exact copy, and every failure on the way is ErrChanged. It found
// two defects: a carry that vouched for files by the stamps of a copy
// another stage had published after the host's probe (a copy its own
// manifest misdescribed, reported staged; the carry now vouches only while
// the sandbox's manifest is the plan's), and a probe failing on a manifest
// a concurrent publish moved aside (a Bridge's probe now waits for its
// publishes of the same assets).
func TestAtkConcurrentBridge(t *testing.T) {
	for _, kind := range []string{"memory", "disk", "none"} {
		t.Run(kind, func(t *testing.T) {
			for range 2 {
				atkConcurrent(t, kind, []sbox{sandboxes[0].new(t), sandboxes[1].new(t)})
			}
		})
	}
}

func atkConcurrent(t *testing.T, kind string, sbs []sbox) {
	const racy = 20 * time.Millisecond
	src := stampsTree(t, 24)
	mem, dir := stage.NewIndex(), filepath.Join(t.TempDir(), "state")
	index := func() (*stage.Index, error) {
		switch kind {
		case "disk":
			return stage.OpenIndex(dir)
		case "memory":
			return mem, nil
		}
		return nil, nil
	}
	withIndex := func(ix *stage.Index) []stage.Option {
		if ix == nil {
			return []stage.Option{stage.WithRacyWindow(racy)}
		}
		return []stage.Option{stage.WithIndex(ix), stage.WithRacyWindow(racy)}
	}
	as := []stage.Asset{{Name: "s", Source: src}}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var ok, failed atomic.Int64
	var errMu sync.Mutex
	var errs []error // failures other than ErrChanged
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				ix, err := index()
				if err == nil {
					sb := sbs[g%len(sbs)]
					_, err = stage.Stage(context.Background(), sb, sb.root, as, withIndex(ix)...)
				}
				if err != nil {
					if !errors.Is(err, stage.ErrChanged) {
						errMu.Lock()
						errs = append(errs, err)
						errMu.Unlock()
					}
					failed.Add(1)
				} else {
					ok.Add(1)
				}
			}
		}()
	}
	for i := range 200 {
		n := i % 24
		p := filepath.Join(src, "d"+strconv.Itoa(n%3), "f"+strconv.Itoa(n))
		fi, err := os.Stat(p)
		require.NoError(t, err)
		data := []byte(readFile(t, p))
		data[0] ^= 0x20 // "content" <-> "Content": same size
		require.NoError(t, os.WriteFile(p, data, 0o644))
		require.NoError(t, os.Chtimes(p, fi.ModTime(), fi.ModTime()))
		time.Sleep(time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("concurrent stages: %d returned nil, %d failed with ErrChanged", ok.Load(), failed.Load())
	assert.Empty(t, errs, "a stage that meets a changing source fails with ErrChanged and nothing else")
	require.Positive(t, ok.Load())
	time.Sleep(2 * racy)
	for i, sb := range sbs {
		ix, err := index()
		require.NoError(t, err)
		log := new(logRecorder)
		rt, err := stage.Stage(context.Background(), sb, sb.root, as, append(withIndex(ix), stage.WithLogger(slog.New(log)))...)
		require.NoError(t, err)
		dst := filepath.Join(sb.hostRoot, "s")
		if d := treetest.Diff(treetest.Snapshot(t, src), treetest.Snapshot(t, dst)); len(d) > 0 {
			// What the failure needs to be told apart: the record, the
			// stamps, or a copy that its own manifest misdescribes.
			t.Logf("target %d after the writer stopped: %v; Reused %v, Sent %d, trusted %d", i, d, rt.Assets[0].Reused, rt.Assets[0].Sent, compared(t, log))
			rt, err := stage.Stage(context.Background(), sb, sb.root, as)
			require.NoError(t, err)
			t.Logf("then without an Index: Reused %v, Sent %d, differences left %v", rt.Assets[0].Reused, rt.Assets[0].Sent, treetest.Diff(treetest.Snapshot(t, src), treetest.Snapshot(t, dst)))
			rt, err = stage.Stage(context.Background(), sb, sb.root, as, stage.WithVerify())
			require.NoError(t, err)
			t.Logf("then WithVerify: Reused %v, Sent %d, differences left %v", rt.Assets[0].Reused, rt.Assets[0].Sent, treetest.Diff(treetest.Snapshot(t, src), treetest.Snapshot(t, dst)))
			t.Fatalf("target %d: a Stage (index: %s) returned nil and left a copy that differs from the quiet source", i, kind)
		}
	}
}

// TestAtkStampsOneSourceTwoNames: one Source staged under two names (two
// assets of one Stage, then each alone, in turn) through one Index: each
// copy compares the Source with its own manifest, and a change staged
// under one name still reaches the other.
func TestAtkStampsOneSourceTwoNames(t *testing.T) {
	forEachSandbox(t, func(t *testing.T, sb sbox) {
		src := stampsTree(t, 9)
		ix := stage.NewIndex()
		run := func(names ...string) {
			t.Helper()
			var as []stage.Asset
			for _, n := range names {
				as = append(as, stage.Asset{Name: n, Source: src})
			}
			time.Sleep(5 * time.Millisecond)
			_, err := stage.Stage(context.Background(), sb, sb.root, as, stage.WithIndex(ix), stage.WithRacyWindow(0))
			require.NoError(t, err)
			for _, n := range names {
				sameTree(t, src, filepath.Join(sb.hostRoot, n))
			}
		}
		run("x", "y")
		atkRewrite(t, filepath.Join(src, "d1", "f4"), "CONTENT 4")
		run("x")
		atkRewrite(t, filepath.Join(src, "d2", "f5"), "CONTENT 5")
		run("x")
		run("y") // two changes behind: its manifest still has both old hashes
		atkRewrite(t, filepath.Join(src, "d1", "f4"), "content 4")
		run("x", "y")
	})
}

// TestAtkStampsSourcesSwapped: two Sources staged through one persistent
// Index trade places on the host (their directories renamed into each
// other's paths); a new process stages both paths exactly.
func TestAtkStampsSourcesSwapped(t *testing.T) {
	forEachSandbox(t, func(t *testing.T, sb sbox) {
		base := t.TempDir()
		dir := filepath.Join(t.TempDir(), "state")
		a, b := filepath.Join(base, "a"), filepath.Join(base, "b")
		build(t, a, "x=one-1", "y=two-2")
		build(t, b, "x=ONE-1", "y=TWO-2")
		as := []stage.Asset{{Name: "a", Source: a}, {Name: "b", Source: b}}
		_, err := stage.Stage(context.Background(), sb, sb.root, as, stage.WithIndex(openIndex(t, dir)), stage.WithRacyWindow(0))
		require.NoError(t, err)
		require.NoError(t, unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE))
		_, err = stage.Stage(context.Background(), sb, sb.root, as, stage.WithIndex(openIndex(t, dir)), stage.WithRacyWindow(0))
		require.NoError(t, err)
		sameTree(t, a, filepath.Join(sb.hostRoot, "a"))
		sameTree(t, b, filepath.Join(sb.hostRoot, "b"))
	})
}

// TestAtkStampsFollowedLinkLeavesSource: under FollowLinksWithin, a link
// whose target stays inside the Source is staged; once the directory it
// goes through is moved out of the Source and replaced by a link to its
// new place (the target file keeps its inode and its stamp), the next
// stage fails with ErrLink and leaves the previous copy.
func TestAtkStampsFollowedLinkLeavesSource(t *testing.T) {
	forEachSandbox(t, func(t *testing.T, sb sbox) {
		src, outside := t.TempDir(), t.TempDir()
		build(t, src, "sub/g=inside-g", "l -> sub/g", "h=other")
		ix := stage.NewIndex()
		as := []stage.Asset{{Name: "s", Source: src, Links: stage.FollowLinksWithin}}
		_, err := stage.Stage(context.Background(), sb, sb.root, as, stage.WithIndex(ix), stage.WithRacyWindow(0))
		require.NoError(t, err)
		require.Equal(t, "inside-g", readFile(t, filepath.Join(sb.hostRoot, "s", "l")))
		require.NoError(t, os.Rename(filepath.Join(src, "sub"), filepath.Join(outside, "sub")))
		require.NoError(t, os.Symlink(filepath.Join(outside, "sub"), filepath.Join(src, "sub")))
		_, err = stage.Stage(context.Background(), sb, sb.root, as, stage.WithIndex(ix), stage.WithRacyWindow(0))
		require.ErrorIs(t, err, stage.ErrLink)

		// Under SkipLinks the same Source stages without the links.
		as[0].Links = stage.SkipLinks
		rt, err := stage.Stage(context.Background(), sb, sb.root, as, stage.WithIndex(ix), stage.WithRacyWindow(0))
		require.NoError(t, err)
		assert.ElementsMatch(t, []string{"l", "sub"}, rt.Assets[0].Skipped)
		atkSameCopy(t, src, filepath.Join(sb.hostRoot, "s"))
	})
}

// atkStampsFileEnv stages src once through a persistent index in dir and
// returns the asset and the path of its stamps file.
func atkStampsFileEnv(t *testing.T, sb sbox, dir string) ([]stage.Asset, string) {
	src := stampsTree(t, 12)
	as := []stage.Asset{{Name: "s", Source: src}}
	_, err := stage.Stage(context.Background(), sb, sb.root, as, stage.WithIndex(openIndex(t, dir)), stage.WithRacyWindow(0))
	require.NoError(t, err)
	p := stage.IndexStampsPath(openIndex(t, dir), as[0])
	require.FileExists(t, p)
	return as, p
}

// TestAtkStampsFileHostileMore: a stamps file replaced by an empty file, a
// fifo, a character device that never ends (/dev/zero's), or a large
// sparse file is discarded (or ignored) without hanging, and the stage is
// exact.
func TestAtkStampsFileHostileMore(t *testing.T) {
	for _, c := range []struct {
		name  string
		plant func(t *testing.T, p string)
	}{
		{"empty", func(t *testing.T, p string) { require.NoError(t, os.WriteFile(p, nil, 0o600)) }},
		{"fifo", func(t *testing.T, p string) {
			require.NoError(t, os.Remove(p))
			require.NoError(t, unix.Mkfifo(p, 0o600))
		}},
		{"endless device", func(t *testing.T, p string) {
			require.NoError(t, os.Remove(p))
			require.NoError(t, unix.Mknod(p, unix.S_IFCHR|0o600, int(unix.Mkdev(1, 5))))
		}},
		{"sparse 256 MiB", func(t *testing.T, p string) { require.NoError(t, os.Truncate(p, 256<<20)) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			sb := sandboxes[0].new(t)
			dir := filepath.Join(t.TempDir(), "state")
			as, p := atkStampsFileEnv(t, sb, dir)
			c.plant(t, p)
			time.Sleep(10 * time.Millisecond)
			build(t, as[0].Source, "d0/f0=changed")
			time.Sleep(10 * time.Millisecond)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			begin := time.Now()
			_, err := stage.Stage(ctx, sb, sb.root, as, stage.WithIndex(openIndex(t, dir)), stage.WithRacyWindow(0))
			require.NoError(t, err)
			assert.Less(t, time.Since(begin), 5*time.Second)
			sameTree(t, as[0].Source, filepath.Join(sb.hostRoot, "s"))
		})
	}
}

// TestAtkStampsFileReplayed: a stamps file that an earlier stage of the
// same Source wrote, put back after later stages, vouches for nothing the
// Source now holds: every later change arrives.
func TestAtkStampsFileReplayed(t *testing.T) {
	forEachSandbox(t, func(t *testing.T, sb sbox) {
		dir := filepath.Join(t.TempDir(), "state")
		as, p := atkStampsFileEnv(t, sb, dir)
		src := as[0].Source
		old, err := os.ReadFile(p)
		require.NoError(t, err)
		time.Sleep(10 * time.Millisecond)
		f4 := filepath.Join(src, "d1", "f4")
		atkRewrite(t, f4, "CONTENT 4")
		time.Sleep(10 * time.Millisecond)
		_, err = stage.Stage(context.Background(), sb, sb.root, as, stage.WithIndex(openIndex(t, dir)), stage.WithRacyWindow(0))
		require.NoError(t, err)
		sameTree(t, src, filepath.Join(sb.hostRoot, "s"))
		require.NoError(t, os.WriteFile(p, old, 0o600)) // replayed
		atkRewrite(t, f4, "content 4")                  // back to the bytes the old file vouches for, new stamp
		atkRewrite(t, filepath.Join(src, "d2", "f5"), "CONTENT 5")
		time.Sleep(10 * time.Millisecond)
		_, err = stage.Stage(context.Background(), sb, sb.root, as, stage.WithIndex(openIndex(t, dir)), stage.WithRacyWindow(0))
		require.NoError(t, err)
		sameTree(t, src, filepath.Join(sb.hostRoot, "s"))
	})
}

// atkMount mounts a tmpfs of size bytes at dir for the test's duration.
func atkMount(t *testing.T, dir string, size int) {
	t.Helper()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+strconv.Itoa(size), "tmpfs", dir).CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Cleanup(func() {
		out, err := exec.Command("umount", dir).CombinedOutput()
		assert.NoError(t, err, "%s", out)
	})
}

// atkFill writes to a file under dir until the file system is full.
func atkFill(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	require.NoError(t, err)
	defer func() { require.NoError(t, f.Close()) }()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC)
			return
		}
	}
}

// TestAtkStampsIndexDirUnwritable: the index directory turns read-only, or
// full, after a first stage; later stages (the same process and new ones)
// are exact while it stays so, and after it is writable again.
func TestAtkStampsIndexDirUnwritable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root") // as TestA22TamperMmap
	}
	for _, how := range []string{"read-only", "full"} {
		forEachSandbox(t, func(t *testing.T, sb sbox) {
			mnt := t.TempDir()
			atkMount(t, mnt, 256<<10)
			dir := filepath.Join(mnt, "state")
			src := stampsTree(t, 12)
			as := []stage.Asset{{Name: "s", Source: src}}
			ilog := new(logRecorder)
			ix := openIndex(t, dir, stage.WithIndexLogger(slog.New(ilog)))
			run := func(ix *stage.Index) {
				t.Helper()
				_, err := stage.Stage(context.Background(), sb, sb.root, as, stage.WithIndex(ix), stage.WithRacyWindow(0))
				require.NoError(t, err)
				sameTree(t, src, filepath.Join(sb.hostRoot, "s"))
			}
			run(ix)
			if how == "read-only" {
				out, err := exec.Command("mount", "-o", "remount,ro", mnt).CombinedOutput()
				require.NoError(t, err, "%s", out)
			} else {
				atkFill(t, mnt)
			}
			for i, rel := range []string{"d1/f4", "d2/f5", "d1/f4"} {
				time.Sleep(10 * time.Millisecond)
				atkRewrite(t, filepath.Join(src, filepath.FromSlash(rel)), "CONTENT "+strconv.Itoa(i))
				time.Sleep(10 * time.Millisecond)
				run(ix)
				run(openIndex(t, dir))
			}
			assert.NotEmpty(t, ilog.messages(), "a failed write is logged")
			if how == "read-only" {
				out, err := exec.Command("mount", "-o", "remount,rw", mnt).CombinedOutput()
				require.NoError(t, err, "%s", out)
			} else {
				require.NoError(t, os.Remove(filepath.Join(mnt, "filler")))
			}
			time.Sleep(10 * time.Millisecond)
			atkRewrite(t, filepath.Join(src, "d0", "f3"), "CONTENT 3")
			time.Sleep(10 * time.Millisecond)
			run(openIndex(t, dir))
			run(openIndex(t, dir))
			ents, err := os.ReadDir(dir)
			require.NoError(t, err)
			names := []string{}
			for _, e := range ents {
				names = append(names, e.Name())
			}
			assert.Len(t, names, 2, "one record and one stamps file, no temporary left: %v", names)
		})
	}
}

// TestAtkStampsMountSwapped: a Source directory is a mount point; a tmpfs
// whose file has the same inode number, size and times as the first one's
// (both file systems filled in one clock tick; only the device differs)
// is moved in its place after a stage. The next stage, through the record
// (nothing else changed) or the stamps (another file changed), sends the
// new bytes. (The file systems' roots are 0755: a copy keeps permission
// bits only, not tmpfs's default sticky bit.)
func TestAtkStampsMountSwapped(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	type env struct {
		name           string
		sb             sbox
		src, m, spare  string
		other, sameIno bool
	}
	var envs []*env
	for _, other := range []bool{false, true} {
		for _, k := range sandboxes {
			e := &env{name: k.name + map[bool]string{false: "/record", true: "/stamps"}[other], sb: k.new(t), src: t.TempDir(), spare: t.TempDir(), other: other}
			build(t, e.src, "m/", "plain=unchanged")
			e.m = filepath.Join(e.src, "m")
			for _, d := range []string{e.m, e.spare} {
				out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m,mode=0755", "tmpfs", d).CombinedOutput()
				require.NoError(t, err, "%s", out)
			}
			t.Cleanup(func() {
				for _, d := range []string{e.m, e.spare} {
					_ = exec.Command("umount", d).Run() // whichever is still mounted there
				}
			})
			require.NoError(t, os.WriteFile(filepath.Join(e.m, "x"), []byte("first-fs"), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(e.spare, "x"), []byte("SECOND-F"), 0o644))
			e.sameIno = atkStampOf(t, filepath.Join(e.m, "x")) == atkStampOf(t, filepath.Join(e.spare, "x"))
			envs = append(envs, e)
		}
	}
	time.Sleep(atkDefaultWindow)
	for _, e := range envs {
		t.Run(e.name, func(t *testing.T) {
			ix := stage.NewIndex()
			as := []stage.Asset{{Name: "s", Source: e.src}}
			_, err := stage.Stage(context.Background(), e.sb, e.sb.root, as, stage.WithIndex(ix))
			require.NoError(t, err)
			out, err := exec.Command("umount", e.m).CombinedOutput()
			require.NoError(t, err, "%s", out)
			out, err = exec.Command("mount", "--move", e.spare, e.m).CombinedOutput()
			require.NoError(t, err, "%s", out)
			if e.other {
				require.NoError(t, os.WriteFile(filepath.Join(e.src, "plain"), []byte("changed"), 0o644))
			}
			rt, err := stage.Stage(context.Background(), e.sb, e.sb.root, as, stage.WithIndex(ix))
			require.NoError(t, err)
			t.Logf("the two files' inode, size and times equal: %v; Reused %v, Sent %d", e.sameIno, rt.Assets[0].Reused, rt.Assets[0].Sent)
			sameTree(t, e.src, filepath.Join(e.sb.hostRoot, "s"))
		})
	}
}

// atkStampOf is p's inode number, size, modification and change time.
func atkStampOf(t *testing.T, p string) [4]int64 {
	t.Helper()
	var st syscall.Stat_t
	require.NoError(t, syscall.Stat(p, &st))
	return [4]int64{int64(st.Ino), st.Size, st.Mtim.Nano(), st.Ctim.Nano()}
}

// TestAtkStampsFollowedLinkTargetChanged: under FollowLinksWithin, a file
// reached through a link (to the file, or to its directory) is rewritten
// in place with its size and times kept, or the link is pointed at another
// file of the same size and age: the next stage sends the new bytes at
// every path that reaches them; with the default window and with 0.
func TestAtkStampsFollowedLinkTargetChanged(t *testing.T) {
	cases := []struct {
		name   string
		change func(t *testing.T, src string)
	}{
		{"target rewritten", func(t *testing.T, src string) {
			atkRewrite(t, filepath.Join(src, "sub", "g"), "INSIDE-G")
		}},
		{"link retargeted", func(t *testing.T, src string) {
			tmp := filepath.Join(src, "l.new")
			require.NoError(t, os.Symlink("sub/h", tmp))
			require.NoError(t, os.Rename(tmp, filepath.Join(src, "l")))
		}},
		{"directory link retargeted", func(t *testing.T, src string) {
			tmp := filepath.Join(src, "dl.new")
			require.NoError(t, os.Symlink("sub2", tmp))
			require.NoError(t, os.Rename(tmp, filepath.Join(src, "dl")))
		}},
	}
	type env struct {
		name   string
		sb     sbox
		src    string
		opts   []stage.Option
		change func(t *testing.T, src string)
	}
	var envs []*env
	for _, def := range []bool{false, true} {
		for _, c := range cases {
			for _, k := range sandboxes {
				e := &env{name: fmt.Sprintf("%s/%s/default window %v", k.name, c.name, def), sb: k.new(t), src: t.TempDir(), change: c.change}
				build(t, e.src, "sub/g=inside-g", "sub/h=inside-h", "sub2/g=other-g", "sub2/h=other-h", "l -> sub/g", "dl -> sub", "e=unchanged")
				e.opts = []stage.Option{stage.WithIndex(stage.NewIndex())}
				if !def {
					e.opts = append(e.opts, stage.WithRacyWindow(0))
				}
				envs = append(envs, e)
			}
		}
	}
	time.Sleep(atkDefaultWindow)
	for _, e := range envs {
		t.Run(e.name, func(t *testing.T) {
			as := []stage.Asset{{Name: "s", Source: e.src, Links: stage.FollowLinksWithin}}
			_, err := stage.Stage(context.Background(), e.sb, e.sb.root, as, e.opts...)
			require.NoError(t, err)
			e.change(t, e.src)
			_, err = stage.Stage(context.Background(), e.sb, e.sb.root, as, e.opts...)
			require.NoError(t, err)
			dst := filepath.Join(e.sb.hostRoot, "s")
			for _, rel := range []string{"l", "dl/g", "dl/h", "sub/g"} {
				want, err := os.ReadFile(filepath.Join(e.src, filepath.FromSlash(rel))) // through the links
				require.NoError(t, err)
				assert.Equal(t, string(want), readFile(t, filepath.Join(dst, filepath.FromSlash(rel))), rel)
			}
		})
	}
}
