package stage_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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
	src, dir, root := costTree(t)
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

// costTree builds a Source of 21 files ("changed" and 20 more in three
// directories) and returns it, a sandbox directory and the stage root in
// it.
func costTree(t *testing.T) (src, dir, root string) {
	src, dir = t.TempDir(), t.TempDir()
	spec := []string{"changed=0"}
	for i := range 20 {
		spec = append(spec, fmt.Sprintf("d%d/f%d=%s", i%3, i, strings.Repeat("x", 100*i)))
	}
	build(t, src, spec...)
	return src, dir, filepath.Join(dir, "rt")
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

// TestDeltaComparesWhereCarryMayPay: with an Index, whose fingerprint
// finds an unchanged Source, the comparison with the copy in place is the
// Bridge's to run, and it runs it only where carrying might cost less than
// sending. A Bridge that has learnt that carrying costs more sends the
// changed Source whole without comparing (a touched Source too: it is sent
// again); one that has learnt the opposite compares, carries what did not
// change, and publishes nothing for a Source that was only touched. A
// Source whose fingerprint the Index cannot trust (dated in the future) is
// compared first, as without an Index, and found unchanged. Dir always
// compares. A stored manifest that is not one is estimated, then
// found unusable by the comparison: everything is sent.
func TestDeltaComparesWhereCarryMayPay(t *testing.T) {
	src, dir, root := costTree(t)
	var runs atomic.Int64
	b := stage.NewBridge(countingRunner{sandbox.Local(dir), &runs})
	var logs bytes.Buffer
	// No racy window: the fingerprint of a Source edited a moment ago is
	// trusted (one dated in the future never is).
	opts := []stage.Option{stage.WithIndex(stage.NewIndex()), stage.WithRacyWindow(0), stage.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))}
	assets := []stage.Asset{{Name: "a", Source: src}}
	_, err := stage.Stage(t.Context(), b, root, assets, opts...)
	require.NoError(t, err)

	round := 0
	change := func(t *testing.T) {
		round++
		require.NoError(t, os.WriteFile(filepath.Join(src, "changed"), fmt.Appendf(nil, "%d", round), 0o644))
	}
	dated := func(t *testing.T, ahead bool) {
		round++
		when := time.Now().Add(-time.Duration(round) * time.Minute)
		if ahead {
			when = time.Now().Add(time.Duration(round) * time.Minute)
		}
		require.NoError(t, filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			require.NoError(t, err)
			return os.Chtimes(p, when, when)
		}))
	}
	touch := func(t *testing.T) { dated(t, false) }
	future := func(t *testing.T) { dated(t, true) }
	for _, c := range []struct {
		name             string
		perByte, perFile float64
		edit             func(*testing.T)
		compared, reused bool
		sent             int
		commands         int64
	}{
		{"carrying costs more, one file changed", 1e-9, 1e-3, change, false, false, 21, 2},
		{"carrying costs more, touched", 1e-9, 1e-3, touch, false, false, 21, 2},
		{"carrying costs more, dated in the future", 1e-9, 1e-3, future, true, true, 0, 1},
		{"carrying costs more, still dated in the future", 1e-9, 1e-3, func(*testing.T) {}, true, true, 0, 1},
		{"sending costs more, one file changed", 1e-6, 1e-9, change, true, false, 1, 2},
		{"sending costs more, touched", 1e-6, 1e-9, touch, true, true, 0, 1},
		{"costs unknown, touched", 0, 0, touch, true, true, 0, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.edit(t)
			stage.SetLinkCosts(b, c.perByte, c.perFile)
			logs.Reset()
			runs.Store(0)
			rt, err := stage.Stage(t.Context(), b, root, assets, opts...)
			require.NoError(t, err)
			sa := rt.Assets[0]
			assert.Equal(t, 21, sa.Files)
			assert.Equal(t, c.reused, sa.Reused)
			if !c.reused {
				assert.Equal(t, c.sent, sa.Sent)
			}
			assert.Equal(t, c.compared, strings.Contains(logs.String(), "stage: compared the source"), "%s", logs.String())
			assert.Equal(t, c.commands, runs.Load(), "the probe, then the send command that publishes")
			iaSame(t, iaSnap(t, src), iaSnap(t, filepath.Join(root, "a")))
		})
	}

	t.Run("a stored manifest that is not one", func(t *testing.T) {
		change(t)
		stage.SetLinkCosts(b, 1e-6, 1e-9)
		junk := strings.Repeat(`,"type":"file","mode":420,"size":99999999`, 50)
		require.NoError(t, os.WriteFile(filepath.Join(root, ".airlock-manifest-a.json"), []byte(junk), 0o644))
		rt, err := stage.Stage(t.Context(), b, root, assets, opts...)
		require.NoError(t, err)
		assert.False(t, rt.Assets[0].Reused)
		assert.Equal(t, 21, rt.Assets[0].Sent)
		iaSame(t, iaSnap(t, src), iaSnap(t, filepath.Join(root, "a")))
	})

	t.Run("Dir compares and keeps a touched copy", func(t *testing.T) {
		ddir := t.TempDir()
		d, err := stage.NewDir(ddir)
		require.NoError(t, err)
		droot := filepath.Join(ddir, "rt")
		_, err = stage.Stage(t.Context(), d, "/rt", assets, opts...)
		require.NoError(t, err)
		before, err := os.Stat(filepath.Join(droot, "a"))
		require.NoError(t, err)
		touch(t)
		rt, err := stage.Stage(t.Context(), d, "/rt", assets, opts...)
		require.NoError(t, err)
		assert.True(t, rt.Assets[0].Reused)
		after, err := os.Stat(filepath.Join(droot, "a"))
		require.NoError(t, err)
		assert.True(t, os.SameFile(before, after), "the copy in place was kept")
		change(t)
		rt, err = stage.Stage(t.Context(), d, "/rt", assets, opts...)
		require.NoError(t, err)
		assert.False(t, rt.Assets[0].Reused)
		iaSame(t, iaSnap(t, src), iaSnap(t, filepath.Join(droot, "a")))
	})
}
