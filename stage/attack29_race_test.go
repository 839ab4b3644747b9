//go:build linux

package stage_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/treetest"
	"github.com/airlockdev/airlock/stage"
)

// a29Big builds a Source of n files.
func a29Big(t *testing.T, n int) string {
	src := t.TempDir()
	var spec []string
	for i := range n {
		spec = append(spec, fmt.Sprintf("d%d/f%d=content %04d %s", i%7, i, i, "padding padding padding"))
	}
	build(t, src, spec...)
	return src
}

// TestAtk29CancelAnywhere: a Stage with an Index whose Source changed (or
// was only touched) is cancelled after a growing delay; a failed Stage
// leaves the previous copy exactly as it was, and the next Stage with a
// fresh context gives an exact copy.
func TestAtk29CancelAnywhere(t *testing.T) {
	for _, reg := range []a29Regime{a29Regimes[0], a29Regimes[3]} {
		t.Run(reg.name, func(t *testing.T) {
			e := newA29(t, reg, a29Big(t, 150))
			e.ok("first")
			start := time.Now()
			a29TouchAll(t, e.src)
			e.ok("timed")
			full := time.Since(start)
			fails := 0
			const n = 10
			for i := range n {
				before := treetest.Snapshot(t, e.dst())
				a29Tick()
				if i%2 == 0 {
					a29TouchAll(t, e.src)
				} else {
					treetest.Write(t, filepath.Join(e.src, "d1", "f1"), fmt.Sprintf("round %d", i), 0o644)
				}
				ctx, cancel := context.WithTimeout(t.Context(), full*time.Duration(i)/n)
				_, err := e.stageCtx(ctx)
				cancel()
				if err != nil {
					fails++
					require.ErrorIs(t, err, context.DeadlineExceeded, "round %d", i)
					require.Empty(t, treetest.Diff(before, treetest.Snapshot(t, e.dst())), "round %d: a failed Stage changed the previous copy", i)
				} else {
					e.exact(fmt.Sprintf("round %d: a Stage that beat its deadline", i))
				}
				e.ok(fmt.Sprintf("round %d: the Stage after", i))
				e.ok(fmt.Sprintf("round %d: untouched", i), stage.WithVerify())
			}
			t.Logf("%d of %d stages cancelled", fails, n)
		})
	}
}

// a29Mutate rewrites files of src until stop closes: same-size rewrites
// with the old modification time put back, size changes, files added and
// removed.
func a29Mutate(t *testing.T, src string, stop <-chan struct{}) (wait func()) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(1, 2))
		for k := 0; ; k++ {
			select {
			case <-stop:
				return
			default:
			}
			i := rng.IntN(40)
			p := filepath.Join(src, fmt.Sprintf("d%d", i%7), fmt.Sprintf("f%d", i))
			// The only writer: every step succeeds (a file is missing
			// only when this goroutine removed it).
			var err error
			switch rng.IntN(4) {
			case 0, 1:
				st, serr := os.Stat(p)
				switch {
				case errors.Is(serr, fs.ErrNotExist):
					err = os.WriteFile(p, []byte("re-created"), 0o644)
				case serr != nil:
					err = serr
				default:
					if err = os.WriteFile(p, fmt.Appendf(nil, "content %04d %s", k%10000, "PADDING padding padding")[:st.Size()], 0o644); err == nil {
						err = os.Chtimes(p, st.ModTime(), st.ModTime())
					}
				}
			case 2:
				err = os.WriteFile(p, fmt.Appendf(nil, "size %d", k), 0o644)
			case 3:
				if err = os.Remove(p); errors.Is(err, fs.ErrNotExist) {
					err = nil
				}
			}
			if err != nil {
				t.Errorf("mutating the Source: %v", err)
				return
			}
			time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
		}
	}()
	return wg.Wait
}

// TestAtk29ConcurrentWithChangingSource: stages of one asset, through one
// Bridge from two goroutines or through two Bridges, with one Index, while
// the Source changes; once it is quiet, a Stage with the same Index gives an
// exact copy, and so does the next (an Index hit).
func TestAtk29ConcurrentWithChangingSource(t *testing.T) {
	for _, twoTargets := range []bool{false, true} {
		for _, reg := range []a29Regime{a29Regimes[0], a29Regimes[3]} {
			if twoTargets && reg.name != "BridgeCarryPays" {
				continue // runtime
			}
			t.Run(fmt.Sprintf("%s/twoTargets=%v", reg.name, twoTargets), func(t *testing.T) {
				e := newA29(t, reg, a29Big(t, 40))
				e.ok("first")
				tgts := []stage.Target{e.tgt, e.tgt}
				if twoTargets {
					tgts[1] = e.newTarget()
				}
				var okN, errN atomic.Int64
				for round := range 2 {
					stop := make(chan struct{})
					wait := a29Mutate(t, e.src, stop)
					var wg sync.WaitGroup
					for g := range 2 {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for range 3 {
								if b, ok := tgts[g].(*stage.Bridge); ok {
									stage.SetLinkCosts(b, reg.perByte, reg.perFile)
								}
								_, err := stage.Stage(t.Context(), tgts[g], e.root, []stage.Asset{{Name: "a", Source: e.src}}, stage.WithIndex(e.ix))
								if err != nil {
									errN.Add(1)
								} else {
									okN.Add(1)
								}
							}
						}()
					}
					wg.Wait()
					close(stop)
					wait()
					e.ok(fmt.Sprintf("round %d: the quiet stage", round))
					a := e.ok(fmt.Sprintf("round %d: verified", round), stage.WithVerify())
					if reg.name != "BridgeSendPays" { // it sends a Source younger than the racy window whole (TestAtk29FreshSourceRepublished)
						assert.True(t, a.Reused, "round %d: the verified copy was not the Source's", round)
					}
				}
				t.Logf("stages during changes: %d ok, %d failed", okN.Load(), errN.Load())
			})
		}
	}
}

// TestAtk29ChangeAtEachPhase: with an Index and a Bridge that compares
// (carrying pays), the Source changes at one transition of the publish
// (after the comparison read it, a clock tick later): a file's bytes with
// its size and modification time kept, a file removed, a file added. The
// Stage succeeds with an exact copy of either state or fails with
// ErrChanged; the quiet Stages after it give exact copies.
func TestAtk29ChangeAtEachPhase(t *testing.T) {
	muts := []struct {
		name string
		do   func(t *testing.T, src string)
	}{
		{"same size and mtime, carried file", func(t *testing.T, src string) { a29SameSizeSameTime(t, filepath.Join(src, "d3", "f3")) }},
		{"added", func(t *testing.T, src string) { treetest.Write(t, filepath.Join(src, "d5", "added"), "added", 0o644) }},
	}
	for _, m := range muts {
		t.Run(m.name, func(t *testing.T) {
			e := newA29(t, a29Regimes[0], a29Big(t, 12), stage.WithRacyWindow(0))
			e.ok("first")
			b := e.tgt.(*stage.Bridge)
			for k := 0; ; k++ {
				src := e.src
				var n atomic.Int64
				fired := false
				var seen []string
				stage.SetPhaseHook(b, func(from, to string, err error) {
					seen = append(seen, from+">"+to)
					if int(n.Add(1))-1 == k && !fired {
						fired = true
						time.Sleep(15 * time.Millisecond)
						m.do(t, src)
					}
				})
				a29Tick()
				treetest.Write(t, filepath.Join(e.src, "d1", "f1"), fmt.Sprintf("content %04d padding padding PADDING", k), 0o644) // same size: a delta
				a29Tick()
				before := treetest.Snapshot(t, e.dst())
				_, err := e.stageCtx(t.Context())
				stage.SetPhaseHook(b, func(string, string, error) {})
				if !fired {
					require.NoError(t, err)
					e.exact("no transition left")
					t.Logf("transitions: %v", seen)
					break
				}
				if err != nil {
					require.ErrorIs(t, err, stage.ErrChanged, "transition %d (%v)", k, seen)
					require.Empty(t, treetest.Diff(before, treetest.Snapshot(t, e.dst())), "transition %d: a failed Stage changed the previous copy", k)
				}
				a29Tick()
				e.ok(fmt.Sprintf("transition %d (%v): quiet", k, seen))
				// put the Source back the way the next round expects
				build(t, e.src, "d3/f3=content 0003 padding padding padding", "d4/f4=content 0004 padding padding padding")
				if err := os.Remove(filepath.Join(e.src, "d5", "added")); !errors.Is(err, fs.ErrNotExist) {
					require.NoError(t, err)
				}
				e.ok(fmt.Sprintf("transition %d: restored", k))
			}
		})
	}
}
