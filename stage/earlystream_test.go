package stage_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/shell"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
)

// The host writes a delta's stream while the sandbox carries (the walk
// takes every planned file as carried), and reads again, after the walk,
// the planned files the sandbox did not carry. These tests cover that
// second read.

// TestEarlyStreamResendsWhatTheSandboxDidNotCarry: files of the previous
// copy that were tampered with (other bytes of the same size, other size,
// removed, made a directory or a link) are not carried; the host sends
// them after its walk, and the new copy equals the Source.
func TestEarlyStreamResendsWhatTheSandboxDidNotCarry(t *testing.T) {
	for name, runner := range deltaRunners {
		t.Run(name, func(t *testing.T) {
			r, root := runner(t)
			src := t.TempDir()
			var spec []string
			for i := range 120 {
				spec = append(spec, fmt.Sprintf("d%d/f%03d=file %d\n", i%6, i, i))
			}
			build(t, src, append(spec, "z=0")...)
			b := stage.NewBridge(r)
			restageOne(t, b, root, src, "z", "0")

			cp := func(rel string) string { return filepath.Join(root, "a", filepath.FromSlash(rel)) }
			require.NoError(t, os.WriteFile(cp("d1/f001"), []byte("FILE 1\n"), 0o644)) // same size
			require.NoError(t, os.WriteFile(cp("d2/f002"), []byte("much longer than it was\n"), 0o644))
			require.NoError(t, os.Remove(cp("d3/f003")))
			require.NoError(t, os.Remove(cp("d4/f004")))
			require.NoError(t, os.Mkdir(cp("d4/f004"), 0o755))
			require.NoError(t, os.Remove(cp("d5/f005")))
			require.NoError(t, os.Symlink("f011", cp("d5/f005")))

			a := restageOne(t, b, root, src, "z", "1")
			assert.Equal(t, 6, a.Sent, "z and the five files the sandbox could not carry")
			requireSameTree(t, src, filepath.Join(root, "a"))
		})
	}
}

// TestEarlyStreamHostChangedBeforeResend: a planned file the sandbox did
// not carry (its copy was tampered with) changes on the host after the
// walk took it as carried and before the host reads it again: the stage
// fails with ErrChanged, nothing is published, and the next stage sends
// the new bytes.
func TestEarlyStreamHostChangedBeforeResend(t *testing.T) {
	changes := map[string]func(t *testing.T, src string){
		"same size, other bytes": func(t *testing.T, src string) {
			require.NoError(t, os.WriteFile(filepath.Join(src, "d", "x"), []byte("XXXX\n"), 0o644))
		},
		"grown": func(t *testing.T, src string) {
			require.NoError(t, os.WriteFile(filepath.Join(src, "d", "x"), []byte("xxxx and more\n"), 0o644))
		},
		"mode": func(t *testing.T, src string) {
			require.NoError(t, os.Chmod(filepath.Join(src, "d", "x"), 0o600))
		},
		"directory made a link": func(t *testing.T, src string) {
			d := filepath.Join(src, "d")
			require.NoError(t, os.Rename(d, filepath.Join(src, "e")))
			require.NoError(t, os.Symlink("e", d))
		},
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			dir, src := t.TempDir(), t.TempDir()
			root := filepath.Join(dir, "rt")
			build(t, src, "d/x=xxxx\n", "d/y=yyyy\n", "z=0")
			local := sandbox.Local(dir)
			restageOne(t, stage.NewBridge(local), root, src, "z", "0")
			copyX := filepath.Join(root, "a", "d", "x")
			require.NoError(t, os.WriteFile(copyX, []byte("tampered\n"), 0o644))

			// The host changes x once the sandbox reports its carry done,
			// and a moment after: the walk of three files is long over.
			var changed atomic.Bool
			r := &scriptedRunner{next: local, match: isTransfer, do: func(ctx context.Context, cmd sandbox.Command) error {
				cmd.Stdout = &lineHook{w: cmd.Stdout, line: shell.CarriedLine, at: func() {
					time.Sleep(200 * time.Millisecond)
					change(t, src)
					changed.Store(true)
				}}
				return local.Run(ctx, cmd)
			}}
			require.NoError(t, os.WriteFile(filepath.Join(src, "z"), []byte("1"), 0o644))
			_, err := stage.Stage(t.Context(), stage.NewBridge(r), root, []stage.Asset{{Name: "a", Source: src}})
			require.True(t, changed.Load(), "the send command reported its carry")
			require.ErrorIs(t, err, stage.ErrChanged)
			assert.True(t, sandbox.Retryable(err), "%v", err)
			assert.Contains(t, err.Error(), filepath.Join(src, "d", "x"))
			assert.Equal(t, "tampered\n", readFile(t, copyX), "nothing is published")
			assert.Equal(t, "0", readFile(t, filepath.Join(root, "a", "z")), "nothing is published")
			assertNoTemp(t, root)

			_, err = stage.Stage(t.Context(), stage.NewBridge(local), root, []stage.Asset{{Name: "a", Source: src}})
			require.NoError(t, err)
			requireSameTree(t, src, filepath.Join(root, "a"))
		})
	}
}

// TestDeltaResendBelowFollowedLink: a Source whose links are followed
// within it has planned files that only a link reaches; one whose copy
// was tampered with is still sent (it is streamed by the walk itself,
// which follows the link, not read again by path).
func TestDeltaResendBelowFollowedLink(t *testing.T) {
	dir, src := t.TempDir(), t.TempDir()
	root := filepath.Join(dir, "rt")
	build(t, src, "real/f=real f\n", "real/g=real g\n", "via -> real", "z=0")
	b := stage.NewBridge(sandbox.Local(dir))
	stageIt := func() stage.StagedAsset {
		rt, err := stage.Stage(t.Context(), b, root, []stage.Asset{{Name: "a", Source: src, Links: stage.FollowLinksWithin}})
		require.NoError(t, err)
		return rt.Assets[0]
	}
	stageIt()
	require.NoError(t, os.WriteFile(filepath.Join(root, "a", "via", "f"), []byte("tampered\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(src, "z"), []byte("1"), 0o644))
	a := stageIt()
	assert.Equal(t, 2, a.Sent, "z and the tampered via/f")
	assert.Equal(t, "real f\n", readFile(t, filepath.Join(root, "a", "via", "f")))
	assert.Equal(t, "1", readFile(t, filepath.Join(root, "a", "z")))
}

// lineHook runs at, once, before it passes on the write that holds line.
type lineHook struct {
	w    io.Writer
	line string
	at   func()
	seen atomic.Bool
}

func (h *lineHook) Write(p []byte) (int, error) {
	if strings.Contains(string(p), h.line+"\n") && !h.seen.Swap(true) {
		h.at()
	}
	return h.w.Write(p)
}

// requireSameTree requires the files and directories under got to be
// those under want, less want's links (a Source's links are left out),
// with the same bytes and permission bits, and nothing else.
func requireSameTree(t *testing.T, want, got string) {
	t.Helper()
	list := func(root string, skipLinks bool) map[string]string {
		m := map[string]string{}
		require.NoError(t, filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
			require.NoError(t, err)
			rel, err := filepath.Rel(root, p)
			require.NoError(t, err)
			switch {
			case rel == ".", skipLinks && fi.Mode()&os.ModeSymlink != 0:
			case fi.Mode().IsRegular():
				m[rel] = fmt.Sprintf("%v %s", fi.Mode().Perm(), readFile(t, p))
			default:
				m[rel] = fi.Mode().Type().String()
			}
			return nil
		}))
		return m
	}
	require.Equal(t, list(want, true), list(got, false))
}
