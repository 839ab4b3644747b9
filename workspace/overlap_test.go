package workspace_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/treetest"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

// A sandbox that shares the host's file system (every runner of this
// suite does: the directory runner, and SSH servers on this machine) may
// be given a Remote that is the Local work tree, a directory above it or
// one inside it. Prepare clears Remote: it must refuse such a Spec before
// it writes anything, and lose nothing.

// overlapLocal makes base/proj a work tree of kind ("plain" or "git":
// committed) holding precious.txt, src/main.go and src/deep/x, and the
// file extra (for git, not committed), and returns it.
func overlapLocal(t *testing.T, base, kind, extra string) string {
	t.Helper()
	local := filepath.Join(base, "proj")
	require.NoError(t, os.MkdirAll(local, 0o755))
	files := map[string]string{"precious.txt": "keep me\n", "src/main.go": "package main\n", "src/deep/x": "x\n"}
	seed(t, local, kind, files)
	write(t, local, extra, "not committed\n")
	return local
}

func TestPrepareRefusesRemoteOverlappingLocal(t *testing.T) {
	overlaps := map[string]func(t *testing.T, base, local string) (remote string, runDir string){
		"the same directory": func(t *testing.T, base, local string) (string, string) { return local, local },
		"the directory above": func(t *testing.T, base, local string) (string, string) {
			return filepath.Dir(local), filepath.Dir(local)
		},
		"a directory inside": func(t *testing.T, base, local string) (string, string) {
			return filepath.Join(local, "src"), local
		},
		"a link to it": func(t *testing.T, base, local string) (string, string) {
			l := filepath.Join(base, "via")
			require.NoError(t, os.Symlink(local, l))
			return l, base
		},
		"below a link to the directory above": func(t *testing.T, base, local string) (string, string) {
			l := filepath.Join(base, "up")
			require.NoError(t, os.Symlink(filepath.Dir(local), l))
			return filepath.Join(l, filepath.Base(local)), base
		},
		"a link to a directory inside": func(t *testing.T, base, local string) (string, string) {
			l := filepath.Join(base, "box")
			require.NoError(t, os.Symlink(filepath.Join(local, "src"), l))
			return l, base
		},
		"a new directory below a link to a directory inside": func(t *testing.T, base, local string) (string, string) {
			l := filepath.Join(base, "box")
			require.NoError(t, os.Symlink(filepath.Join(local, "src", "deep"), l))
			return filepath.Join(l, "new", "er"), base
		},
	}
	eachRunner(t, func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner) {
		for _, kind := range []string{"plain", "git"} {
			for name, overlap := range overlaps {
				t.Run(kind+"/"+name, func(t *testing.T) {
					base := t.TempDir()
					local := overlapLocal(t, base, kind, "dirty.txt")
					require.NoError(t, os.WriteFile(filepath.Join(base, "sibling.txt"), []byte("beside\n"), 0o644))
					remote, runDir := overlap(t, base, local)
					before, beside := treetest.Snapshot(t, local), treetest.Snapshot(t, base)

					_, err := workspace.Prepare(ctx(t), workspace.Spec{Local: local, Remote: remote, Runner: newRunner(t, runDir)})
					require.ErrorIs(t, err, workspace.ErrSpec)
					assert.False(t, sandbox.Retryable(err), "retrying cannot help: %v", err)
					assert.ErrorContains(t, err, remote)
					assert.ErrorContains(t, err, "pass a Remote that is neither Local, nor above it, nor inside it")
					assert.Empty(t, treetest.Diff(before, treetest.Snapshot(t, local)), "the work tree is as it was, with no marker left")
					assert.Empty(t, treetest.Diff(beside, treetest.Snapshot(t, base)))
				})
			}
		}
	})
}

// TestPrepareRefusesARealAncestorOfALinkedLocal: Local is reached through
// a link in its path; Remote is a directory physically above it (two
// levels above the link's target): clearing it would delete Local.
func TestPrepareRefusesARealAncestorOfALinkedLocal(t *testing.T) {
	eachRunner(t, func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner) {
		for _, kind := range []string{"plain", "git"} {
			t.Run(kind, func(t *testing.T) {
				base := t.TempDir()
				real := filepath.Join(base, "data", "projects", "app")
				require.NoError(t, os.MkdirAll(real, 0o755))
				if kind == "git" {
					initRepo(t, real, map[string]string{"main.go": "package main\n"})
				} else {
					write(t, real, "main.go", "package main\n")
				}
				require.NoError(t, os.Symlink(filepath.Join(base, "data", "projects"), filepath.Join(base, "work")))
				before := treetest.Snapshot(t, base)
				_, err := workspace.Prepare(ctx(t), workspace.Spec{Local: filepath.Join(base, "work", "app"), Remote: filepath.Join(base, "data"), Runner: newRunner(t, base)})
				require.ErrorIs(t, err, workspace.ErrSpec)
				assert.Empty(t, treetest.Diff(before, treetest.Snapshot(t, base)))
			})
		}
	})
}

// TestPrepareTakesARemoteLinkedOutOfLocal: a Remote whose path runs
// through Local but whose link leads out of it is another directory:
// Prepare goes on, and Local is unchanged.
func TestPrepareTakesARemoteLinkedOutOfLocal(t *testing.T) {
	eachRunner(t, func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner) {
		base := t.TempDir()
		local, out := filepath.Join(base, "local"), filepath.Join(base, "out")
		require.NoError(t, os.MkdirAll(out, 0o755))
		write(t, local, "a.txt", "a\n")
		require.NoError(t, os.Symlink(out, filepath.Join(local, "outlink")))
		_, err := workspace.Prepare(ctx(t), workspace.Spec{Local: local, Remote: filepath.Join(local, "outlink"), Runner: newRunner(t, base)})
		require.NoError(t, err)
		assert.Equal(t, "a\n", read(t, out, "a.txt"))
		assert.Equal(t, "a\n", read(t, local, "a.txt"))
	})
}

// probeForger makes the workspace probe report, for the work tree's
// directory, the device and inode of another directory: what a sandbox on
// another machine cloned from the host's image may report by chance.
type probeForger struct {
	sandbox.Runner
	id string // "DEV INO"
}

func (f probeForger) ControlTimeout() time.Duration { return sandbox.ControlDeadline(f.Runner) }

func (f probeForger) Run(ctx context.Context, cmd sandbox.Command) error {
	if !strings.Contains(cmd.Script, "gitversion") {
		return f.Runner.Run(ctx, cmd)
	}
	var out bytes.Buffer
	w := cmd.Stdout
	cmd.Stdout = &out
	err := f.Runner.Run(ctx, cmd)
	first := true
	var sb strings.Builder
	for _, l := range strings.SplitAfter(out.String(), "\n") {
		if first && strings.HasPrefix(l, "id ") {
			l, first = "id "+f.id+"\n", false
		}
		sb.WriteString(l)
	}
	if _, werr := io.WriteString(w, sb.String()); werr != nil && err == nil {
		err = werr
	}
	return err
}

// TestPrepareOverlapSuspicionCleared: a Remote whose device and inode
// equal Local's while it is another directory is a suspicion the marker
// clears: Prepare goes on, the round trip works, and no marker is left in
// the work tree.
func TestPrepareOverlapSuspicionCleared(t *testing.T) {
	eachRunner(t, func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner) {
		e := newEnv(t, newRunner)
		write(t, e.local, "a.txt", "a\n")
		var st syscall.Stat_t
		require.NoError(t, syscall.Stat(e.local, &st))
		e.spec.Runner = probeForger{Runner: e.spec.Runner, id: fmt.Sprintf("%d %d", st.Dev, st.Ino)}

		r, err := workspace.Prepare(ctx(t), e.spec)
		require.NoError(t, err)
		assert.False(t, exists(e.local, sandbox.RuntimeDir))
		markers, err := filepath.Glob(filepath.Join(e.local, ".airlock-overlap-*"))
		require.NoError(t, err)
		assert.Empty(t, markers, "the marker is gone")
		assert.Equal(t, "a\n", read(t, e.remote, "a.txt"))
		write(t, e.remote, "b.txt", "b\n")
		_, err = r.Restore(ctx(t))
		require.NoError(t, err)
		assert.Equal(t, "b\n", read(t, e.local, "b.txt"))
	})
}

// TestPrepareRefusesABindMountOfLocal: a container's bind mount may show
// a directory of Local at another path, where no link or path leads from
// Remote to Local: Remote that is such a mount of a directory inside Local
// (or of Local), or a directory below one, is refused before anything is
// written, and Local is as it was.
func TestPrepareRefusesABindMountOfLocal(t *testing.T) {
	mounts := map[string]struct {
		of     string // below Local, mounted at base/m
		remote string // below base
	}{
		"a mount of Local":                        {".", "m"},
		"a mount of a directory inside":           {"src", "m"},
		"a directory below a mount of one inside": {"src", "m/deep"},
		"a new directory below such a mount":      {"src", "m/new/er"},
		"a mount of a directory two levels down":  {"src/deep", "m"},
	}
	eachRunner(t, func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner) {
		for _, kind := range []string{"plain", "git"} {
			for name, mc := range mounts {
				t.Run(kind+"/"+name, func(t *testing.T) {
					base := t.TempDir()
					local := overlapLocal(t, base, kind, "src/deep/untracked.txt")
					require.NoError(t, os.Mkdir(filepath.Join(base, "m"), 0o755))
					treetest.BindMount(t, filepath.Join(local, mc.of), filepath.Join(base, "m"))
					before := treetest.Snapshot(t, local)
					remote := filepath.Join(base, filepath.FromSlash(mc.remote))

					_, err := workspace.Prepare(ctx(t), workspace.Spec{Local: local, Remote: remote, Runner: newRunner(t, base)})
					require.ErrorIs(t, err, workspace.ErrSpec)
					assert.False(t, sandbox.Retryable(err), "%v", err)
					assert.ErrorContains(t, err, "pass a Remote that is neither Local, nor above it, nor inside it")
					assert.Empty(t, treetest.Diff(before, treetest.Snapshot(t, local)), "the work tree is as it was, with no marker left")
				})
			}
		}
	})
}

// TestPrepareRefusesAMountInsideRemote: Prepare clears Remote, and rm -rf
// (or git clean) enters a file system mounted inside it: with a mount of
// Local there, or of any other directory of the user's, Prepare refuses
// with ErrSpec before it writes anything, and the mounted files are as
// they were. A Remote that is itself a mount point (a container's volume)
// is prepared.
func TestPrepareRefusesAMountInsideRemote(t *testing.T) {
	eachRunner(t, func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner) {
		for _, kind := range []string{"plain", "git"} {
			for _, what := range []string{"Local", "another directory", "another directory, at a name with a newline", "Remote itself", "a volume in the runtime directory"} {
				t.Run(kind+"/"+what, func(t *testing.T) {
					base := t.TempDir()
					local := overlapLocal(t, base, kind, "src/untracked.txt")
					write(t, base, "other/data.txt", "the user's\n")
					write(t, base, "box/old.txt", "a previous round\n")
					remote := filepath.Join(base, "box")
					mounted, at := local, filepath.Join(remote, "p")
					switch what {
					case "another directory":
						mounted = filepath.Join(base, "other")
					case "another directory, at a name with a newline":
						mounted, at = filepath.Join(base, "other"), filepath.Join(remote, "my\nvolume")
					case "Remote itself":
						mounted, at = filepath.Join(base, "vol"), remote
						require.NoError(t, os.Mkdir(mounted, 0o755))
					case "a volume in the runtime directory":
						mounted, at = filepath.Join(base, "other"), filepath.Join(remote, sandbox.RuntimeDir, "skills")
					}
					require.NoError(t, os.MkdirAll(at, 0o755))
					treetest.BindMount(t, mounted, at)
					before, beside := treetest.Snapshot(t, local), treetest.Snapshot(t, filepath.Join(base, "other"))

					_, err := workspace.Prepare(ctx(t), workspace.Spec{Local: local, Remote: remote, Runner: newRunner(t, base)})
					switch what {
					case "Remote itself":
						require.NoError(t, err)
						assert.FileExists(t, filepath.Join(mounted, "precious.txt"), "prepared into the volume")
						return
					case "a volume in the runtime directory": // Prepare leaves the runtime directory alone
						require.NoError(t, err)
						assert.FileExists(t, filepath.Join(remote, "precious.txt"))
						assert.Empty(t, treetest.Diff(beside, treetest.Snapshot(t, filepath.Join(base, "other"))))
						return
					}
					require.ErrorIs(t, err, workspace.ErrSpec)
					assert.False(t, sandbox.Retryable(err), "%v", err)
					assert.ErrorContains(t, err, "a file system is mounted at "+strconv.Quote(at)+", inside Spec.Remote "+remote)
					assert.Empty(t, treetest.Diff(before, treetest.Snapshot(t, local)))
					assert.Empty(t, treetest.Diff(beside, treetest.Snapshot(t, filepath.Join(base, "other"))))
				})
			}
		}
	})
}

// TestPrepareRefusesALocalMountedFromRemote: Local is a bind mount of a
// directory inside Remote (a host that works on what a sandbox's volume
// holds): clearing Remote would delete Local's files. Refused with
// ErrSpec before anything is written.
func TestPrepareRefusesALocalMountedFromRemote(t *testing.T) {
	eachRunner(t, func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner) {
		base := t.TempDir()
		remote := filepath.Join(base, "box")
		write(t, remote, "sub/precious.txt", "keep me\n")
		write(t, remote, "sub/src/main.go", "package main\n")
		local := filepath.Join(base, "proj")
		require.NoError(t, os.Mkdir(local, 0o755))
		treetest.BindMount(t, filepath.Join(remote, "sub"), local)
		before := treetest.Snapshot(t, local)

		_, err := workspace.Prepare(ctx(t), workspace.Spec{Local: local, Remote: remote, Runner: newRunner(t, base)})
		require.ErrorIs(t, err, workspace.ErrSpec)
		assert.False(t, sandbox.Retryable(err), "%v", err)
		assert.ErrorContains(t, err, "a file system is mounted at "+strconv.Quote(local)+", inside Spec.Remote "+remote+" or on a part of it seen elsewhere")
		assert.Empty(t, treetest.Diff(before, treetest.Snapshot(t, local)))
	})
}
