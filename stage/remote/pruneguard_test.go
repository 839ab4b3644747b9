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

// sharedTargets are the Targets whose sandbox shares this host's file
// system, each made over a base directory with the stage root r in it
// (as the Target names it).
func sharedTargets() map[string]func(t *testing.T, base string) (stage.Target, string) {
	return map[string]func(t *testing.T, base string) (stage.Target, string){
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
}

// TestPruneSparesAKeptAssetsSource: in a sandbox that shares the host's
// file system (a directory, an SSH server on this machine), a user may
// make a staged copy, or a directory inside one, the Source of another
// asset. A Stage WithPrune that does not name the copy's asset must not
// delete it: it stages the asset and fails with ErrBadRoot, having removed
// nothing (not the other unrequested asset either). A Source elsewhere
// prunes as before.
func TestPruneSparesAKeptAssetsSource(t *testing.T) {
	sources := map[string]struct {
		source  string // below base; r holds the staged assets a and c
		refused bool
	}{
		"a staged copy":                    {"r/a", true},
		"a directory inside a staged copy": {"r/a/scripts", true},
		"a staged copy through a link":     {"lnk/a", true},
		"a directory elsewhere":            {"user", false},
	}
	for tname, target := range sharedTargets() {
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

// TestNoDeleteThroughAMount: a directory of the user's (not a Source)
// mounted inside a staged copy, or on it, as a container's volume or a
// user's bind mount may be, is never entered by the deletion of that
// copy: a restage (which retires the old copy), a prune and an Unstage
// each fail with ErrBadRoot, not retryable (no retry can move a mount
// point), having moved nothing, and the mounted files are as they were; so
// does a first stage onto a mount point.
func TestNoDeleteThroughAMount(t *testing.T) {
	steps := map[string]func(t *testing.T, tg stage.Target, root, src string) error{
		"restage": func(t *testing.T, tg stage.Target, root, src string) error {
			writeFiles(t, src, "SKILL.md", "changed\n")
			_, err := stage.Stage(t.Context(), tg, root, []stage.Asset{{Name: "a", Source: src}})
			return err
		},
		"prune": func(t *testing.T, tg stage.Target, root, src string) error {
			_, err := stage.Stage(t.Context(), tg, root, []stage.Asset{{Name: "b", Source: src}}, stage.WithPrune())
			return err
		},
		"unstage": func(t *testing.T, tg stage.Target, root, src string) error {
			return stage.Unstage(t.Context(), tg, root, "a")
		},
	}
	steps["first stage"] = func(t *testing.T, tg stage.Target, root, src string) error {
		_, err := stage.Stage(t.Context(), tg, root, []stage.Asset{{Name: "n", Source: src}})
		return err
	}
	for tname, target := range sharedTargets() {
		t.Run(tname, func(t *testing.T) {
			for sname, step := range steps {
				for _, at := range []string{"a/scripts/mounted", "a", "n"} { // inside the copy, on it, at a name not staged yet
					if (at == "n") != (sname == "first stage") {
						continue
					}
					t.Run(sname+"/"+at, func(t *testing.T) {
						base := t.TempDir()
						src := filepath.Join(base, "user")
						writeFiles(t, src, "SKILL.md", "the skill\n", "scripts/run.sh", "echo run\n")
						writeFiles(t, filepath.Join(base, "precious"), "keep.txt", "user data\n", "deep/more.txt", "more\n")
						tg, root := target(t, base)
						_, err := stage.Stage(t.Context(), tg, root, []stage.Asset{{Name: "a", Source: src}})
						require.NoError(t, err)
						require.NoError(t, os.MkdirAll(filepath.Join(base, "r", at), 0o755))
						treetest.BindMount(t, filepath.Join(base, "precious"), filepath.Join(base, "r", at))
						before := treetest.Snapshot(t, filepath.Join(base, "precious"))

						err = step(t, tg, root, src)
						require.ErrorIs(t, err, stage.ErrBadRoot)
						assert.False(t, sandbox.Retryable(err), "%v", err)
						assert.ErrorContains(t, err, "a file system is mounted")
						assert.ErrorContains(t, err, "nothing was moved: unmount it, or stage under another name")
						assert.Empty(t, treetest.Diff(before, treetest.Snapshot(t, filepath.Join(base, "precious"))), "the mounted files are as they were")
						if at != "a" {
							assert.FileExists(t, filepath.Join(base, "r", "a", "scripts", "run.sh"), "the copy is in place")
						}
					})
				}
			}
		})
	}
}

// TestNoDeleteOfAPartMountedElsewhere: a directory of a staged copy that
// a bind mount shows at another path (a user who mounted it there and made
// it a Source, edited through the mount) is not deleted with the copy: a
// restage from that Source, a prune that keeps an asset of it and an
// Unstage each fail with ErrBadRoot, not retryable, and the files seen
// through the mount are as they were.
func TestNoDeleteOfAPartMountedElsewhere(t *testing.T) {
	steps := map[string]func(t *testing.T, tg stage.Target, root, mnt string) error{
		"restage from it": func(t *testing.T, tg stage.Target, root, mnt string) error {
			_, err := stage.Stage(t.Context(), tg, root, []stage.Asset{{Name: "a", Source: mnt, Exclude: []string{".env"}}})
			return err
		},
		"prune": func(t *testing.T, tg stage.Target, root, mnt string) error {
			_, err := stage.Stage(t.Context(), tg, root, []stage.Asset{{Name: "b", Source: mnt}}, stage.WithPrune())
			return err
		},
		"unstage": func(t *testing.T, tg stage.Target, root, mnt string) error {
			return stage.Unstage(t.Context(), tg, root, "a")
		},
	}
	for tname, target := range sharedTargets() {
		t.Run(tname, func(t *testing.T) {
			for sname, step := range steps {
				t.Run(sname, func(t *testing.T) {
					base := t.TempDir()
					src := filepath.Join(base, "user")
					writeFiles(t, src, "SKILL.md", "the skill\n", "scripts/run.sh", "echo run\n")
					tg, root := target(t, base)
					_, err := stage.Stage(t.Context(), tg, root, []stage.Asset{{Name: "a", Source: src}})
					require.NoError(t, err)
					mnt := filepath.Join(base, "mnt")
					require.NoError(t, os.Mkdir(mnt, 0o755))
					treetest.BindMount(t, filepath.Join(base, "r", "a", "scripts"), mnt)
					writeFiles(t, mnt, ".env", "the user's secret\n", "run.sh", "edited through the mount\n")
					before := treetest.Snapshot(t, mnt)

					err = step(t, tg, root, mnt)
					require.ErrorIs(t, err, stage.ErrBadRoot)
					assert.False(t, sandbox.Retryable(err), "%v", err)
					assert.ErrorContains(t, err, "nothing was moved: unmount it")
					assert.Empty(t, treetest.Diff(before, treetest.Snapshot(t, mnt)), "the files seen through the mount are as they were")
				})
			}
		})
	}
}
