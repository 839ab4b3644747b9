//go:build linux

package stage_test

// The attack of attack26_test.go that broke the guarantee before
// checkCarried compared modes (it failed then; it guards now).

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
)

// TestAtk26CarriedChmodBeforeStream chmods a file the delta carries (its
// content untouched) after the compare listed it as unchanged: at the
// Bridge's carry or stream phase, or at the first progress call. A Stage
// that returns nil must leave the copy with the mode its manifest records
// (the new one, unless the host's walk read the file before the chmod);
// it used to leave the old mode under a manifest with the new one, which
// the next quiet Stage reused (only WithVerify repaired it); now it fails
// with ErrChanged. No Index is needed: every delta publish through a
// Bridge carries files this way.
func TestAtk26CarriedChmodBeforeStream(t *testing.T) {
	for _, at := range []string{stage.PhaseName(1), stage.PhaseName(2), "progress", "no index"} {
		t.Run(at, func(t *testing.T) {
			e := newAtk26Env(t)
			if at == "no index" { // the carry needs no Index: the stream at the stream phase
				e.ix, at = nil, stage.PhaseName(2)
			}
			_, err := e.stage()
			require.NoError(t, err)
			e.write("f00") // the delta
			fp := filepath.Join(e.src, "f05")
			chmod := func() { require.NoError(t, os.Chmod(fp, 0o755)) }
			var opts []stage.Option
			if at == "progress" {
				n := 0
				opts = append(opts, stage.WithProgress(func(sandbox.Progress) {
					if n++; n == 1 {
						chmod()
					}
				}))
			} else {
				stage.SetPhaseHook(e.b, func(_, to string, _ error) {
					if to == at {
						chmod()
					}
				})
			}
			rt, err := e.stage(opts...)
			stage.SetPhaseHook(e.b, func(string, string, error) {})
			if err != nil {
				require.ErrorIs(t, err, stage.ErrChanged)
				return
			}
			require.Less(t, rt.Assets[0].Sent, rt.Assets[0].Files, "the stage carried nothing: the attack missed the delta")
			fi, err := os.Stat(filepath.Join(e.root, "a", "f05"))
			require.NoError(t, err)
			if at != stage.PhaseName(2) {
				require.Equal(t, fs.FileMode(0o755), fi.Mode().Perm(), "the copy's f05 keeps its old mode while the manifest (and the Digest %s) records 0755", rt.Assets[0].Digest)
			}
			// At the stream phase, the host's walk (which runs beside the
			// carry) may have read f05 before the chmod: the copy then has
			// the mode it read, and so has its manifest.
			require.Equal(t, atk26Digest(t, filepath.Join(e.root, "a")), rt.Assets[0].Digest, "the reported Digest is not the copy's")
		})
	}
}
