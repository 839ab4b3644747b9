package remote_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/shell"
	"github.com/airlockdev/airlock/internal/treetest"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
)

// atk27KillBefore kills the command's shell before the line that precedes
// the first line starting with next (in the commands that have one).
type atk27KillBefore struct {
	r      sandbox.Runner
	next   string
	killed *int
}

func (k atk27KillBefore) Run(ctx context.Context, cmd sandbox.Command) error {
	lines := strings.Split(cmd.Script, "\n")
	for i, l := range lines {
		if i > 0 && strings.HasPrefix(l, k.next) {
			lines[i-1] = "kill -9 $$\n" + lines[i-1]
			cmd.Script = strings.Join(lines, "\n")
			*k.killed++
			break
		}
	}
	return k.r.Run(ctx, cmd)
}

// TestAtk27OddNames: asset names and a stage root that a shell would
// misread (quotes, spaces, $(…), a leading dash, a glob, non-ASCII): an
// Unstage killed between moving the manifest and moving the copy leaves the
// copy listed; a prune removes it; the other asset stays exact; nothing
// runs that the names spell.
func TestAtk27OddNames(t *testing.T) {
	for _, n := range []string{"it's", "a b", "$(touch PWNED)", "`touch PWNED`", "*", "é\u00a0x", "x;touch PWNED"} {
		t.Run(n, func(t *testing.T) {
			srv := remotetest.NewServer(t)
			h := dial(t, srv)
			root := filepath.Join(srv.Dir(), "it's $HOME `x` dir")
			sx, sy := t.TempDir(), t.TempDir()
			writeFiles(t, sx, "a", "one", "d/b", "two")
			writeFiles(t, sy, "c", "three")
			assets := []stage.Asset{{Name: n, Source: sx}, {Name: "keep", Source: sy}}
			_, err := stage.Stage(t.Context(), h, root, assets)
			require.NoError(t, err)
			killed := 0
			err = stage.Unstage(t.Context(), stage.NewBridge(atk27KillBefore{r: h, next: `[ -z "$u0" ]`, killed: &killed}), root, n)
			require.Error(t, err)
			require.Equal(t, 1, killed)
			assert.NoFileExists(t, filepath.Join(root, shell.ManifestName(n)))
			assert.DirExists(t, filepath.Join(root, n))
			names, err := h.Assets(t.Context(), root)
			require.NoError(t, err)
			assert.Equal(t, sortedCopy([]string{n, "keep"}), names)
			rt, err := stage.Stage(t.Context(), h, root, assets[1:], stage.WithPrune())
			require.NoError(t, err)
			assert.True(t, rt.Assets[0].Reused)
			assert.NoDirExists(t, filepath.Join(root, n))
			assert.Empty(t, treetest.Diff(treetest.Snapshot(t, sy), treetest.Snapshot(t, filepath.Join(root, "keep"))))
			assert.Empty(t, atk27Litter(root, "keep"))
			_, err = os.Stat(filepath.Join(srv.Dir(), "PWNED"))
			assert.ErrorIs(t, err, os.ErrNotExist)
			_, err = os.Stat(filepath.Join(root, "PWNED"))
			assert.ErrorIs(t, err, os.ErrNotExist)
		})
	}
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// TestAtk27DashNames: an asset whose name starts with a dash is removed
// over a shell as over Dir. (It failed before 5dcd38c: the removal passed
// the name to mv as an argument of its own, which mv read as options:
// "-rf" failed every prune with a "stage again" that never helped, "--help"
// made Unstage and the prune return nil and leave an unlisted copy, and
// "--target-directory=.." moved the removal's temporary directory out of
// the stage root.)
func TestAtk27DashNames(t *testing.T) {
	for _, n := range []string{"-rf", "-n", "--help", "--target-directory=.."} {
		t.Run(n, func(t *testing.T) {
			srv := remotetest.NewServer(t)
			h := dial(t, srv)
			parent := filepath.Join(srv.Dir(), "work")
			root := filepath.Join(parent, "rt")
			sx, sy := t.TempDir(), t.TempDir()
			writeFiles(t, sx, "a", "one")
			writeFiles(t, sy, "c", "three")
			_, err := stage.Stage(t.Context(), h, root, []stage.Asset{{Name: n, Source: sx}, {Name: "keep", Source: sy}})
			require.NoError(t, err, "the name is accepted")

			_, err = stage.Stage(t.Context(), h, root, []stage.Asset{{Name: "keep", Source: sy}}, stage.WithPrune())
			assert.NoError(t, err, "a prune that deselects %q", n)
			assert.NoDirExists(t, filepath.Join(root, n))
			err = stage.Unstage(t.Context(), h, root, n)
			assert.NoError(t, err, "Unstage(%q)", n)
			assert.NoDirExists(t, filepath.Join(root, n))
			if _, serr := os.Stat(filepath.Join(root, n)); serr == nil && err == nil {
				names, lerr := h.Assets(t.Context(), root)
				require.NoError(t, lerr)
				assert.Contains(t, names, n, "Unstage returned nil and left the copy: at least the listing must still name it")
			}
			assert.NoFileExists(t, filepath.Join(root, shell.ManifestName(n)))
			ents, err := os.ReadDir(parent)
			require.NoError(t, err)
			var beside []string
			for _, e := range ents {
				beside = append(beside, e.Name())
			}
			assert.Equal(t, []string{"rt"}, beside, "nothing lands beside the root")

			d, err := stage.NewDir(srv.Dir())
			require.NoError(t, err)
			_, err = stage.Stage(t.Context(), d, "/dir", []stage.Asset{{Name: n, Source: sx}})
			require.NoError(t, err)
			require.NoError(t, stage.Unstage(t.Context(), d, "/dir", n), "Dir removes %q", n)
			assert.NoDirExists(t, filepath.Join(srv.Dir(), "dir", n))
		})
	}
}
