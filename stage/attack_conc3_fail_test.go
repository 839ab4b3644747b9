//go:build airlock_attack_fail

package stage_test

// Attacks of attack_conc3_test.go that expose defects (branch h/attack3).
// Run: go test -tags airlock_attack_fail -run 'TestConc3Fail' ./stage/

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/stage"
)

// TestConc3FailForgedFutureNameNotSwept: the sandbox plants a directory
// named like a transfer this Bridge will make much later (its tag, a count
// far ahead) with an owner file naming a dead process. The docs promise that
// the next stage or unstage of the root removes every temporary directory
// whose owner process is gone; through this Bridge it stays (its sweeps
// spare every name of its tag with a count above the last one it gave out,
// and it gives out one a publish), until the Bridge's count passes it.
// A new Bridge (another tag) sweeps it at once. Fails every run.
func TestConc3FailForgedFutureNameNotSwept(t *testing.T) {
	for _, bb := range []bool{false, true} {
		t.Run(c3Kind(bb), func(t *testing.T) {
			dir, root, src, b, tag, n := c3Spied(t, bb)
			p := filepath.Join(root, fmt.Sprintf(".airlock-tmp-x-0badf00d-%s%08d", tag, n+1000))
			c3Plant(t, p, deadPID(t)+"\n")
			c3Version(t, src, 0, 1)
			_, err := stage.Stage(t.Context(), b, root, []stage.Asset{{Name: "x", Source: src}})
			require.NoError(t, err)
			require.NoError(t, stage.Unstage(t.Context(), b, root, "never-staged"))
			_, serr := os.Lstat(p)
			assert.True(t, errors.Is(serr, os.ErrNotExist), "a stage and an unstage through the Bridge left %s (owner dead)", filepath.Base(p))
			c3Version(t, src, 0, 2)
			_, err = stage.Stage(t.Context(), stage.NewBridge(c3Runner(t, dir, bb)), root, []stage.Asset{{Name: "x", Source: src}})
			require.NoError(t, err)
			_, serr = os.Lstat(p)
			assert.True(t, errors.Is(serr, os.ErrNotExist), "a new Bridge left it too")
		})
	}
}

// TestConc3FailSameAssetHotSourceInPlace: as TestConc3SameAssetHotSource,
// but the writer rewrites src/hot in place (one WriteAt of A, then of B,
// the size never changes). A Stage returned nil with a copy whose hot file
// is torn (part A and part B: no version the source ever held whole); its
// manifest describes the torn bytes. The walk's lstat/fstat check cannot
// see a write that lands within the clock tick of the lstat (the times do
// not move). Seen in about 1 of 3 runs of 5 rounds, GNU and busybox alike;
// TestInlAtkSourceChangesDuringStage/in-place failed the same way once.
// (internal/tree's non-guarantee, "a manifest describing the files as
// they were read", covers it in words.)
func TestConc3FailSameAssetHotSourceInPlace(t *testing.T) {
	for _, bb := range []bool{false, true} {
		t.Run(c3Kind(bb), func(t *testing.T) {
			for range 5 {
				c3SameAssetHot(t, bb, "in-place")
			}
		})
	}
}
