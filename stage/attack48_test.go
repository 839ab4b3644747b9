package stage_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/treetest"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
)

// TestDeltaGrownOldCopyNotRead: a sandbox that grows an unchanged file of
// its old copy to a sparse terabyte before a delta re-stage (its stamps
// gone or kept) costs the stage nothing: the carry sees the size differ
// from the manifest's and sends the file rather than copy and hash it (an
// outside attack: 16 GiB took 12.7 s, 64 GiB 51 s, a terabyte would take
// a quarter of an hour). The stage must finish well within the deadline,
// and the copy must be the Source's.
func TestDeltaGrownOldCopyNotRead(t *testing.T) {
	for _, kind := range []string{"dir", "bridge", "remote"} {
		for _, stamps := range []bool{true, false} {
			if kind == "dir" && !stamps {
				continue // Dir keeps no stamps file
			}
			t.Run(fmt.Sprintf("%s/stamps=%v", kind, stamps), func(t *testing.T) {
				sb := t.TempDir()
				root := filepath.Join(sb, "rt")
				var tg stage.Target
				switch kind {
				case "dir":
					d, err := stage.NewDir(sb)
					require.NoError(t, err)
					tg, root = d, "/rt"
				case "bridge":
					tg = stage.NewBridge(sandbox.Local(sb))
				case "remote":
					tg = remotetest.NewServer(t, remotetest.WithDir(sb)).Dial(t)
				}
				src := t.TempDir()
				for i := range 4 {
					require.NoError(t, os.WriteFile(filepath.Join(src, fmt.Sprintf("f%d", i)), fmt.Appendf(nil, "content %d", i), 0o644))
				}
				as := []stage.Asset{{Name: "sk", Source: src}}
				_, err := stage.Stage(t.Context(), tg, root, as)
				require.NoError(t, err)

				grown := filepath.Join(sb, "rt", "sk", "f1")
				if err := os.Truncate(grown, 1<<40); err != nil {
					t.Skipf("this file system holds no sparse terabyte (%v): the attack needs one", err)
				}
				if !stamps {
					require.NoError(t, os.Remove(filepath.Join(sb, "rt", ".airlock-stamps-sk")))
				}
				require.NoError(t, os.WriteFile(filepath.Join(src, "f3"), []byte("changed 3"), 0o644))
				ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second) // reading the terabyte takes many minutes
				defer cancel()
				rt, err := stage.Stage(ctx, tg, root, as)
				require.NoError(t, err)
				assert.Equal(t, 2, rt.Assets[0].Sent, "the changed file and the grown one are sent")
				for i := range 4 {
					want, err := os.ReadFile(filepath.Join(src, fmt.Sprintf("f%d", i)))
					require.NoError(t, err)
					got, err := os.ReadFile(filepath.Join(sb, "rt", "sk", fmt.Sprintf("f%d", i)))
					require.NoError(t, err)
					assert.Equal(t, string(want), string(got), "f%d", i)
				}
			})
		}
	}
}

// TestDirFullDisk: a Dir whose file system fills up mid-copy fails the
// publish, naming the sandbox's path and the next step, with the errno
// kept (an outside attack: it read as a failure to read the host's
// Source); the previous copy stays whole, and once there is room the
// same stage succeeds.
func TestDirFullDisk(t *testing.T) {
	sb := treetest.Tmpfs(t, "1m")
	d, err := stage.NewDir(sb)
	require.NoError(t, err)
	src := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(src, "a"), []byte("first\n"), 0o644))
	as := []stage.Asset{{Name: "sk", Source: src}}
	_, err = stage.Stage(t.Context(), d, "/rt", as)
	require.NoError(t, err)

	big := make([]byte, 600<<10)
	for i := range big {
		big[i] = byte(i * 7)
	}
	require.NoError(t, os.WriteFile(filepath.Join(src, "a"), big, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(src, "b"), big[1:], 0o644))
	_, err = stage.Stage(t.Context(), d, "/rt", as)
	var ae *stage.AssetError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, "publish", ae.Op)
	assert.Equal(t, "/rt/sk", ae.Path)
	require.ErrorIs(t, err, syscall.ENOSPC)
	var pe *fs.PathError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "write", pe.Op)
	assert.True(t, strings.HasPrefix(pe.Path, filepath.Join(sb, "rt")+"/"), "the copy's path in the sandbox: %s", pe.Path)
	assert.Contains(t, err.Error(), "the sandbox's file system is full: free space there and stage again")
	got, err := os.ReadFile(filepath.Join(sb, "rt", "sk", "a"))
	require.NoError(t, err)
	assert.Equal(t, "first\n", string(got), "the previous copy stays")

	require.NoError(t, os.Remove(filepath.Join(src, "b")))
	_, err = stage.Stage(t.Context(), d, "/rt", as)
	require.NoError(t, err)
	got, err = os.ReadFile(filepath.Join(sb, "rt", "sk", "a"))
	require.NoError(t, err)
	assert.Equal(t, big, got)
}

// TestDirLinkAboveRoot: a sandbox that replaces a directory above the stage
// root with a link leading out of Dir's directory gets nothing written
// there, and the error names the link and the next step (an outside
// attack: it said only "path escapes from parent").
func TestDirLinkAboveRoot(t *testing.T) {
	sb := t.TempDir()
	d, err := stage.NewDir(sb)
	require.NoError(t, err)
	src := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(src, "a"), []byte("a\n"), 0o644))
	as := []stage.Asset{{Name: "sk", Source: src}}
	_, err = stage.Stage(t.Context(), d, "/work/.airlock", as)
	require.NoError(t, err)

	outside := t.TempDir()
	require.NoError(t, os.Rename(filepath.Join(sb, "work"), filepath.Join(sb, "work.old")))
	require.NoError(t, os.Symlink(outside, filepath.Join(sb, "work")))
	_, err = stage.Stage(t.Context(), d, "/work/.airlock", as)
	require.Error(t, err)
	assert.Contains(t, err.Error(), fmt.Sprintf("/work in the sandbox is a symbolic link to %q; Dir follows no link out of the sandbox directory: make it a directory and stage again", outside))
	ents, err := os.ReadDir(outside)
	require.NoError(t, err)
	assert.Empty(t, ents, "nothing written through the link")
}
