package stage_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/treetest"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
)

// A sandbox that shares the host's file system (a directory, a container
// with a bind mount) may be given a stage root where the copy's place,
// root/name, is the Source itself or a directory above it. Publishing
// would replace it and delete it: the links and excluded files the copy
// leaves out, or everything else in a directory above. Stage refuses with
// ErrBadRoot and loses nothing.

func TestStageRefusesToReplaceTheSource(t *testing.T) {
	targets := map[string]func(t *testing.T, base string) (stage.Target, string){
		// The Bridge over a directory runner: sandbox paths are the host's.
		"bridge": func(t *testing.T, base string) (stage.Target, string) {
			return stage.NewBridge(sandbox.Local(base)), base
		},
		// Dir: sandbox paths are below its directory.
		"dir": func(t *testing.T, base string) (stage.Target, string) {
			d, err := stage.NewDir(base)
			require.NoError(t, err)
			return d, "/"
		},
	}
	places := map[string]struct {
		source string // below base
		root   string // below base, the stage root
		name   string
		inside bool // the root is inside the Source
	}{
		"a root inside the Source":                    {"r/skill", "r/skill/stage", "a", true},
		"a root inside the Source, through a link":    {"real/skill", "lnk/skill/stage", "a", true},
		"the Source itself":                           {"r/skill", "r", "skill", false},
		"the directory above":                         {"r/proj/skills/one", "r", "proj", false},
		"the Source, the root reached through a link": {"real/r/skill", "lnk/r", "skill", false},
		"two levels above, through a link":            {"real/r/a/b/skill", "lnk/r", "a", false},
	}
	for tname, target := range targets {
		for pname, pl := range places {
			t.Run(tname+"/"+pname, func(t *testing.T) {
				base := t.TempDir()
				require.NoError(t, os.MkdirAll(filepath.Join(base, "real"), 0o755))
				require.NoError(t, os.Symlink("real", filepath.Join(base, "lnk")))
				src := filepath.Join(base, filepath.FromSlash(pl.source))
				build(t, src, "SKILL.md=the skill\n", ".env=excluded secret\n", "scripts/run.sh=echo\n", "link -> SKILL.md")
				require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(src), "beside.txt"), []byte("a user file\n"), 0o644))
				before := treetest.Snapshot(t, base)

				tg, prefix := target(t, base)
				root := filepath.ToSlash(filepath.Join(prefix, pl.root))
				if tname == "bridge" {
					root = filepath.ToSlash(filepath.Join(base, pl.root))
				}
				_, err := stage.Stage(context.Background(), tg, root, []stage.Asset{{Name: pl.name, Source: src, Exclude: []string{".env"}}})
				if pl.inside && tname == "bridge" {
					// The walk of the Source may meet the transfer's
					// temporary directory first (ErrChanged): either way
					// nothing is published.
					require.Error(t, err)
					assert.NoDirExists(t, filepath.Join(base, filepath.FromSlash(pl.root), pl.name))
					return
				}
				require.ErrorIs(t, err, stage.ErrBadRoot)
				assert.False(t, sandbox.Retryable(err), "%v", err)
				assert.ErrorContains(t, err, "stage into another root or under another name")
				after := treetest.Snapshot(t, base)
				assert.Empty(t, treetest.Lost(before, after))
				if !pl.inside {
					assert.Equal(t, len(before), len(after), "nothing made")
				}
			})
		}
	}
}
