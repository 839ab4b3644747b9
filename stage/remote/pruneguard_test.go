package remote_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/sshdtest"
	"github.com/airlockdev/airlock/internal/treetest"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/stage/remote"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
)

// TestPruneSparesAKeptAssetsSource: in a sandbox that shares the host's
// file system (a directory, an SSH server on this machine), a user may
// make a staged copy, or a directory inside one, the Source of another
// asset. A Stage WithPrune that does not name the copy's asset must not
// delete it: it stages the asset and fails with ErrBadRoot, having removed
// nothing (not the other unrequested asset either). A Source elsewhere
// prunes as before.
func TestPruneSparesAKeptAssetsSource(t *testing.T) {
	targets := map[string]func(t *testing.T, base string) (stage.Target, string){
		"dir": func(t *testing.T, base string) (stage.Target, string) {
			d, err := stage.NewDir(base)
			require.NoError(t, err)
			return d, "/r"
		},
		"bridge": func(t *testing.T, base string) (stage.Target, string) {
			return stage.NewBridge(sandbox.Local(base)), base + "/r"
		},
		"remotetest": func(t *testing.T, base string) (stage.Target, string) {
			return remotetest.NewServer(t).Dial(t), base + "/r"
		},
		"sshd": func(t *testing.T, base string) (stage.Target, string) {
			srv := sshdtest.Start(t)
			h, err := remote.Dial(t.Context(), srv.Addr(), srv.Config())
			require.NoError(t, err)
			t.Cleanup(func() { assert.NoError(t, h.Close()) })
			return h, base + "/r"
		},
	}
	sources := map[string]struct {
		source  string // below base; r holds the staged assets a and c
		refused bool
	}{
		"a staged copy":                    {"r/a", true},
		"a directory inside a staged copy": {"r/a/scripts", true},
		"a staged copy through a link":     {"lnk/a", true},
		"a directory elsewhere":            {"user", false},
	}
	for tname, target := range targets {
		t.Run(tname, func(t *testing.T) {
			for sname, sc := range sources {
				t.Run(sname, func(t *testing.T) {
					base := t.TempDir()
					writeFiles(t, filepath.Join(base, "user"), "SKILL.md", "the skill\n", "scripts/run.sh", "echo run\n")
					require.NoError(t, os.Symlink("r", filepath.Join(base, "lnk")))
					tg, root := target(t, base)
					src := filepath.Join(base, "user")
					_, err := stage.Stage(t.Context(), tg, root, []stage.Asset{{Name: "a", Source: src}, {Name: "c", Source: src}})
					require.NoError(t, err)
					before := treetest.Snapshot(t, filepath.Join(base, "r"))

					rt, err := stage.Stage(t.Context(), tg, root, []stage.Asset{{Name: "b", Source: filepath.Join(base, filepath.FromSlash(sc.source))}}, stage.WithPrune())
					after := treetest.Snapshot(t, filepath.Join(base, "r"))
					assert.Contains(t, after, "b", "the asset is staged either way")
					if !sc.refused {
						require.NoError(t, err)
						require.Len(t, rt.Assets, 1)
						assert.NotContains(t, after, "a")
						assert.NotContains(t, after, "c")
						return
					}
					require.ErrorIs(t, err, stage.ErrBadRoot)
					assert.False(t, sandbox.Retryable(err), "%v", err)
					var ae *stage.AssetError
					require.ErrorAs(t, err, &ae)
					assert.Equal(t, "prune", ae.Op)
					assert.ErrorContains(t, err, "nothing was removed: give that asset a Source outside the stage root, or stage without WithPrune")
					assert.Empty(t, treetest.Lost(before, after), "nothing removed")
				})
			}
		})
	}
}
