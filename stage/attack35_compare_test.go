//go:build linux

package stage_test

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/treetest"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
)

// a35Consistent: the sandbox copy is exactly what its stored manifest
// describes, and digest is that manifest's SHA-256.
func a35Consistent(t *testing.T, e *a29Env, digest, what string) {
	t.Helper()
	b, err := os.ReadFile(e.manifest())
	require.NoError(t, err, what)
	require.Equal(t, fmt.Sprintf("sha256:%x", sha256.Sum256(b)), digest, "%s: Digest is not the stored manifest's", what)
	require.Equal(t, a29SnapshotLines(treetest.Snapshot(t, e.dst())), a29ManifestLines(t, b, what), "%s: the sandbox copy is not what its manifest says", what)
}

// TestA35ChangeAtEachProgress: with an Index whose fingerprint of the
// Source is trusted (racy window 0) and moved (a delta), the Source is
// changed at the k-th progress callback in many ways (size change, same
// size, removal, chmod, a file replaced by a directory or a link, a
// directory replaced by a file, an added file). A Stage that returns nil
// must leave a copy equal to its manifest and Digest; an error must be
// ErrChanged; the quiet Stage after gives an exact copy.
func TestA35ChangeAtEachProgress(t *testing.T) {
	muts := []struct {
		name string
		do   func(t *testing.T, src string)
	}{
		{"grow", func(t *testing.T, src string) {
			treetest.Write(t, filepath.Join(src, "d3", "f3"), "grown content that is much longer than before", 0o644)
		}},
		{"shrink", func(t *testing.T, src string) { treetest.Write(t, filepath.Join(src, "d3", "f3"), "s", 0o644) }},
		{"remove", func(t *testing.T, src string) { require.NoError(t, os.Remove(filepath.Join(src, "d3", "f3"))) }},
		{"chmod", func(t *testing.T, src string) { require.NoError(t, os.Chmod(filepath.Join(src, "d3", "f3"), 0o755)) }},
		{"chmod dir", func(t *testing.T, src string) { require.NoError(t, os.Chmod(filepath.Join(src, "d3"), 0o700)) }},
		{"file to dir", func(t *testing.T, src string) {
			p := filepath.Join(src, "d3", "f3")
			require.NoError(t, os.Remove(p))
			treetest.Write(t, filepath.Join(p, "inner"), "inner", 0o644)
		}},
		{"dir to file", func(t *testing.T, src string) {
			require.NoError(t, os.RemoveAll(filepath.Join(src, "d3")))
			treetest.Write(t, filepath.Join(src, "d3"), "now a file", 0o644)
		}},
		{"rename over", func(t *testing.T, src string) {
			require.NoError(t, os.Rename(filepath.Join(src, "d4", "f4"), filepath.Join(src, "d3", "f3")))
		}},
	}
	for _, reg := range []a29Regime{a29Regimes[0], a29Regimes[3]} {
		for _, m := range muts {
			t.Run(reg.name+"/"+m.name, func(t *testing.T) {
				var k, calls int
				fired := false
				var src string
				prog := stage.WithProgress(func(p sandbox.Progress) {
					calls++
					if calls-1 == k && !fired {
						fired = true
						m.do(t, src)
					}
				})
				changed, oks := 0, 0
				for k = 0; k < 40; k++ {
					e := newA29(t, reg, a29Big(t, 6), stage.WithRacyWindow(0))
					src = e.src
					fired = true
					e.ok("first")
					a29Tick()
					treetest.Write(t, filepath.Join(e.src, "d1", "f1"), fmt.Sprintf("content %04d padding padding PADDING", k), 0o644)
					a29Tick()
					calls, fired = 0, false
					a, err := e.stageCtx(t.Context(), prog)
					fired = true
					if err != nil {
						require.ErrorIs(t, err, stage.ErrChanged, "k=%d", k)
						changed++
					} else {
						oks++
						a35Consistent(t, e, a.Digest, fmt.Sprintf("k=%d (fired=%v)", k, calls > k))
					}
					if calls <= k {
						break
					}
					a29Tick()
					e.ok(fmt.Sprintf("k=%d: quiet", k))
				}
				t.Logf("%d ErrChanged, %d nil, %d callbacks", changed, oks, calls)
			})
		}
	}
}
