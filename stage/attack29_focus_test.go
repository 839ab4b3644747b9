//go:build linux

package stage_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/stage"
)

// TestAtk29IndexRecordsSentWhole: a Bridge that has learnt sending pays
// sends a changed Source whole without comparing; the Index must still have
// seen it staged, so that the next Stage of the untouched Source is reused
// without a publish.
func TestAtk29IndexRecordsSentWhole(t *testing.T) {
	for _, reg := range a29Regimes[1:2] {
		t.Run(reg.name, func(t *testing.T) {
			e := newA29(t, reg, a29Tree(t), stage.WithRacyWindow(0))
			e.ok("first")
			for i := range 2 {
				a29Tick()
				require.NoError(t, os.WriteFile(filepath.Join(e.src, "d0", "f0"), fmt.Appendf(nil, "round %d", i), 0o644))
				a := e.ok("changed")
				assert.False(t, a.Reused)
				for j := range 2 {
					a = e.ok("untouched")
					assert.True(t, a.Reused, "round %d, restage %d: an untouched Source was published again (Sent=%d)", i, j, a.Sent)
				}
			}
		})
	}
}

// TestAtk29FutureDatedSourceRepublished: a Source whose files carry
// modification times in the future (a tarball from a host whose clock runs
// ahead, touch -d tomorrow) is never recorded by the Index's fingerprint.
// Before the lazy comparison, Stage then compared it with the stored
// manifest and reused the copy (one round trip). A Bridge that has learnt
// that sending pays now sends such a Source whole at every Stage, although
// nothing changed, not even its times, since the last one.
func TestAtk29FutureDatedSourceRepublished(t *testing.T) {
	for _, reg := range a29Regimes[:4] {
		t.Run(reg.name, func(t *testing.T) {
			e := newA29(t, reg, a29Tree(t), stage.WithRacyWindow(0))
			e.ok("first")
			when := time.Now().Add(time.Hour)
			require.NoError(t, filepath.WalkDir(e.src, func(p string, _ os.DirEntry, err error) error {
				require.NoError(t, err)
				return os.Chtimes(p, when, when)
			}))
			e.ok("touched into the future")
			for j := range 2 {
				a := e.ok("untouched")
				assert.True(t, a.Reused, "restage %d of an untouched Source dated in the future: published again, Sent=%d of %d", j, a.Sent, a.Files)
			}
		})
	}
}

// TestAtk29FreshSourceRepublished: a Source written just before it is
// staged (a skills directory just generated) is younger than the Index's
// racy window, so its fingerprint is not trusted. Before the lazy
// comparison, the next Stage compared it with the stored manifest and reused
// the copy; a Bridge that has learnt that sending pays now sends it whole at
// each Stage until the window has passed, although nothing changed.
func TestAtk29FreshSourceRepublished(t *testing.T) {
	e := newA29(t, a29Regimes[1], a29Tree(t))
	e.ok("first")
	a := e.ok("untouched, at once")
	assert.True(t, a.Reused, "an untouched Source staged again at once was published again, Sent=%d of %d", a.Sent, a.Files)
	start := time.Now()
	for time.Since(start) < 10*time.Second {
		if a := e.ok("untouched, later"); a.Reused {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("published whole until %v after the Source was written", time.Since(start))
}

// TestAtk29ManyAssetsMixed: one Stage of four assets through a Bridge that
// compares, with an Index and WithPrune: one untouched, one touched, one
// changed, one new; a fifth staged before is pruned. Each is reported for
// what it is and every copy is exact.
func TestAtk29ManyAssetsMixed(t *testing.T) {
	for _, reg := range []a29Regime{a29Regimes[0], a29Regimes[1]} {
		t.Run(reg.name, func(t *testing.T) {
			e := newA29(t, reg, a29Tree(t), stage.WithRacyWindow(0))
			srcs := map[string]string{}
			for _, n := range []string{"untouched", "touched", "changed", "new", "gone"} {
				srcs[n] = a29Tree(t)
			}
			b := e.tgt.(*stage.Bridge)
			assets := func(names ...string) []stage.Asset {
				var as []stage.Asset
				for _, n := range names {
					as = append(as, stage.Asset{Name: n, Source: srcs[n]})
				}
				return as
			}
			stage.SetLinkCosts(b, reg.perByte, reg.perFile)
			_, err := stage.Stage(t.Context(), b, e.root, assets("untouched", "touched", "changed", "gone"), e.opts...)
			require.NoError(t, err)
			a29Tick()
			a29TouchAll(t, srcs["touched"])
			a29SameSizeSameTime(t, filepath.Join(srcs["changed"], "d0", "f0"))
			stage.SetLinkCosts(b, reg.perByte, reg.perFile)
			rt, err := stage.Stage(t.Context(), b, e.root, assets("untouched", "touched", "changed", "new"), append(e.opts, stage.WithPrune())...)
			require.NoError(t, err)
			require.Len(t, rt.Assets, 4)
			got := map[string]bool{}
			for _, a := range rt.Assets {
				got[a.Name] = a.Reused
				sameTree(t, srcs[a.Name], filepath.Join(e.hostRoot, a.Name))
			}
			assert.Equal(t, map[string]bool{"untouched": true, "touched": reg.name == "BridgeCarryPays", "changed": false, "new": false}, got)
			_, err = os.Stat(filepath.Join(e.hostRoot, "gone"))
			require.ErrorIs(t, err, os.ErrNotExist)
		})
	}
}
