package workspace_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/sandboxtest"
	"github.com/airlockdev/airlock/internal/treetest"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

// An outside attack (twelfth session) ran Prepare in sandboxes without
// stat or awk that share the host's file system: the overlap check had no
// identities to compare, the mount check no awk to read mountinfo, and
// Prepare cleared the user's files. Without stat the probe now identifies
// directories by inode (ls -i) and the marker confirms; without awk the
// mount check runs in sh; a sandbox with neither stat nor ls, or a Remote
// path the sh check cannot compare, is a *ToolError: nothing is cleared.

// TestPrepareOverlapWithoutStatOrAwk: Remote is Local, the directory
// above it or one inside it, in a sandbox without stat, or without awk:
// ErrSpec, nothing changed.
func TestPrepareOverlapWithoutStatOrAwk(t *testing.T) {
	overlaps := map[string]func(local string) (remote, runDir string){
		"the same directory":  func(local string) (string, string) { return local, local },
		"the directory above": func(local string) (string, string) { return filepath.Dir(local), filepath.Dir(local) },
		"a directory inside":  func(local string) (string, string) { return filepath.Join(local, "src"), local },
	}
	for _, missing := range [][]string{{"stat"}, {"awk"}} {
		for _, kind := range []string{"plain", "git"} {
			for name, overlap := range overlaps {
				t.Run(missing[0]+"/"+kind+"/"+name, func(t *testing.T) {
					base := t.TempDir()
					local := overlapLocal(t, base, kind, "dirty.txt")
					require.NoError(t, os.WriteFile(filepath.Join(base, "sibling.txt"), []byte("beside\n"), 0o644))
					remote, runDir := overlap(local)
					before, beside := treetest.Snapshot(t, local), treetest.Snapshot(t, base)
					r := sandboxtest.Without(t, sandbox.Local(runDir), missing...)
					_, err := workspace.Prepare(ctx(t), workspace.Spec{Local: local, Remote: remote, Runner: r})
					require.ErrorIs(t, err, workspace.ErrSpec)
					assert.ErrorContains(t, err, "pass a Remote that is neither Local, nor above it, nor inside it")
					assert.Empty(t, treetest.Diff(before, treetest.Snapshot(t, local)))
					assert.Empty(t, treetest.Diff(beside, treetest.Snapshot(t, base)))
				})
			}
		}
	}
}

// TestPrepareWithoutStatAndLs: a sandbox that can identify no directory
// cannot be checked: a *ToolError naming stat, whether or not Remote
// overlaps Local, and nothing cleared.
func TestPrepareWithoutStatAndLs(t *testing.T) {
	for _, overlapping := range []bool{true, false} {
		t.Run(strconv.FormatBool(overlapping), func(t *testing.T) {
			base := t.TempDir()
			local := overlapLocal(t, base, "plain", "dirty.txt")
			remote := filepath.Join(base, "box")
			write(t, remote, "old.txt", "a previous round\n")
			if overlapping {
				remote = local
			}
			before, box := treetest.Snapshot(t, local), treetest.Snapshot(t, filepath.Join(base, "box"))
			r := sandboxtest.Without(t, sandbox.Local(base), "stat", "ls")
			_, err := workspace.Prepare(ctx(t), workspace.Spec{Local: local, Remote: remote, Runner: r})
			require.ErrorIs(t, err, workspace.ErrTool)
			var te *workspace.ToolError
			require.True(t, errors.As(err, &te), "%v", err)
			assert.Equal(t, workspace.ToolError{Tool: "stat", Where: "sandbox"}, *te)
			assert.ErrorContains(t, err, "neither stat nor ls to identify the directories of Spec.Remote's path")
			assert.False(t, sandbox.Retryable(err))
			assert.Empty(t, treetest.Diff(before, treetest.Snapshot(t, local)))
			assert.Empty(t, treetest.Diff(box, treetest.Snapshot(t, filepath.Join(base, "box"))))
		})
	}
}

// TestPrepareMountInsideRemoteWithoutAwk: a host directory bind-mounted
// inside Remote, in a sandbox without awk: ErrSpec (the sh check), its
// files kept; a Remote whose path holds a space there cannot be checked
// without awk: a *ToolError naming awk. Root only (a bind mount).
func TestPrepareMountInsideRemoteWithoutAwk(t *testing.T) {
	for _, remoteName := range []string{"box", "my box"} {
		t.Run(remoteName, func(t *testing.T) {
			base := t.TempDir()
			local := overlapLocal(t, base, "plain", "src/untracked.txt")
			write(t, base, "other/data.txt", "the user's\n")
			remote := filepath.Join(base, remoteName)
			at := filepath.Join(remote, "p")
			require.NoError(t, os.MkdirAll(at, 0o755))
			treetest.BindMount(t, filepath.Join(base, "other"), at)
			beside := treetest.Snapshot(t, filepath.Join(base, "other"))

			r := sandboxtest.Without(t, sandbox.Local(base), "awk")
			_, err := workspace.Prepare(ctx(t), workspace.Spec{Local: local, Remote: remote, Runner: r})
			if remoteName == "box" {
				require.ErrorIs(t, err, workspace.ErrSpec)
				assert.ErrorContains(t, err, "a file system is mounted at "+strconv.Quote(at))
			} else {
				require.ErrorIs(t, err, workspace.ErrTool)
				assert.ErrorContains(t, err, "no awk that reads it")
			}
			assert.Empty(t, treetest.Diff(beside, treetest.Snapshot(t, filepath.Join(base, "other"))))
		})
	}
}

// TestPrepareWithoutStatOrAwk: with nothing shared, a sandbox without stat
// (ls -i) or without awk (the sh check) still prepares.
func TestPrepareWithoutStatOrAwk(t *testing.T) {
	for _, missing := range []string{"stat", "awk"} {
		t.Run(missing, func(t *testing.T) {
			base := t.TempDir()
			local := overlapLocal(t, base, "plain", "dirty.txt")
			remote := filepath.Join(base, "box")
			r := sandboxtest.Without(t, sandbox.Local(base), missing)
			_, err := workspace.Prepare(ctx(t), workspace.Spec{Local: local, Remote: remote, Runner: r})
			require.NoError(t, err)
			b, err := os.ReadFile(filepath.Join(remote, "precious.txt"))
			require.NoError(t, err)
			assert.Equal(t, "keep me\n", string(b))
		})
	}
}
