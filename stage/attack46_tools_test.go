package stage_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/sandboxtest"
	"github.com/airlockdev/airlock/internal/treetest"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
)

// An outside attack (twelfth session) staged into sandboxes that share the
// host's file system but lack stat or awk: the publish's guard against
// replacing the Source had no identity to compare, the mount check no awk
// to read mountinfo, and the host's files were deleted. Without stat the
// guard compares inodes (ls -i); without awk the mount check runs in sh; a
// sandbox that can do neither is ErrTool, and nothing is moved.

// TestStageGuardsWithoutStatOrAwk: a publish whose place is the Source or
// a directory above it, in a sandbox without stat or without awk, is
// ErrBadRoot; nothing is lost.
func TestStageGuardsWithoutStatOrAwk(t *testing.T) {
	for _, missing := range []string{"stat", "awk"} {
		for _, pl := range []struct{ name, source, root, asset string }{
			{"the Source itself", "r/skill", "r", "skill"},
			{"the directory above", "r/proj/skills/one", "r", "proj"},
		} {
			t.Run(missing+"/"+pl.name, func(t *testing.T) {
				base := t.TempDir()
				src := filepath.Join(base, filepath.FromSlash(pl.source))
				build(t, src, "SKILL.md=the skill\n", ".env=excluded secret\n", "link -> SKILL.md")
				require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(src), "beside.txt"), []byte("a user file\n"), 0o644))
				before := treetest.Snapshot(t, base)
				tg := stage.NewBridge(sandboxtest.Without(t, sandbox.Local(base), missing))
				_, err := stage.Stage(context.Background(), tg, filepath.Join(base, pl.root), []stage.Asset{{Name: pl.asset, Source: src, Exclude: []string{".env"}}})
				require.ErrorIs(t, err, stage.ErrBadRoot)
				assert.ErrorContains(t, err, "stage into another root or under another name")
				after := treetest.Snapshot(t, base)
				assert.Empty(t, treetest.Lost(before, after))
				assert.Equal(t, len(before), len(after), "nothing made")
			})
		}
	}
}

// TestStageWithoutStatAndLs: a sandbox that can identify no directory
// cannot check that the copy's place and the stage root are not the host's
// Source (or inside it): the publish is refused with ErrTool and nothing
// is published.
func TestStageWithoutStatAndLs(t *testing.T) {
	base := t.TempDir()
	src := filepath.Join(t.TempDir(), "skill")
	build(t, src, "SKILL.md=v1\n")
	tg := stage.NewBridge(sandboxtest.Without(t, sandbox.Local(base), "stat", "ls"))
	root := filepath.Join(base, "root")
	_, err := stage.Stage(context.Background(), tg, root, []stage.Asset{{Name: "skill", Source: src}})
	require.ErrorIs(t, err, stage.ErrTool)
	assert.False(t, sandbox.Retryable(err))
	assert.ErrorContains(t, err, "the sandbox has neither stat nor ls to identify directories")
	assert.ErrorContains(t, err, "install stat (coreutils or BusyBox) in the sandbox")
	assert.NoDirExists(t, filepath.Join(root, "skill"), "nothing published")
}

// TestStageMountInsideCopyWithoutAwk: a host directory bind-mounted
// inside a staged copy, in a sandbox without awk: the publish that would
// replace the copy, a prune and Unstage refuse with ErrBadRoot (the sh
// check) and the mounted files are kept; under a root whose path holds a
// space the sh check cannot compare, they refuse with ErrTool. Root only
// (a bind mount).
func TestStageMountInsideCopyWithoutAwk(t *testing.T) {
	for _, rootName := range []string{"root", "my root"} {
		t.Run(rootName, func(t *testing.T) {
			base := t.TempDir()
			src := filepath.Join(t.TempDir(), "skill")
			build(t, src, "SKILL.md=v1\n")
			tg := stage.NewBridge(sandboxtest.Without(t, sandbox.Local(base), "awk"))
			root := filepath.Join(base, rootName)
			_, err := stage.Stage(context.Background(), tg, root, []stage.Asset{{Name: "skill", Source: src}})
			require.NoError(t, err)
			precious := filepath.Join(base, "precious")
			build(t, precious, "data.txt=the user's\n")
			at := filepath.Join(root, "skill", "vol")
			require.NoError(t, os.Mkdir(at, 0o755))
			treetest.BindMount(t, precious, at)
			before := treetest.Snapshot(t, precious)

			want := stage.ErrBadRoot
			if rootName != "root" {
				want = stage.ErrTool
			}
			build(t, src, "SKILL.md=v2\n")
			_, err = stage.Stage(context.Background(), tg, root, []stage.Asset{{Name: "skill", Source: src}})
			require.ErrorIs(t, err, want, "publish")
			err = stage.Unstage(context.Background(), tg, root, "skill")
			require.ErrorIs(t, err, want, "Unstage")
			_, err = stage.Stage(context.Background(), tg, root, []stage.Asset{{Name: "other", Source: src}}, stage.WithPrune())
			require.ErrorIs(t, err, want, "prune")
			if errors.Is(err, stage.ErrTool) {
				assert.ErrorContains(t, err, "no awk that reads it")
			}
			assert.Empty(t, treetest.Diff(before, treetest.Snapshot(t, precious)), "the mounted files are kept")
		})
	}
}
