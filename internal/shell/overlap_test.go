package shell_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/shell"
	"github.com/airlockdev/airlock/sandbox"
)

// TestWorkspaceProbeIDs runs the workspace probe on a work tree that does
// not exist yet, below a link: one id per path level, up to /, the first
// unknown, the others what stat(2) says of each level through its links.
func TestWorkspaceProbeIDs(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "real")
	require.NoError(t, os.Mkdir(real, 0o755))
	require.NoError(t, os.Symlink(real, filepath.Join(base, "via")))
	remote := filepath.Join(base, "via", "work")
	var want []shell.FileID
	want = append(want, shell.FileID{})
	for p := filepath.Dir(remote); ; p = filepath.Dir(p) {
		var st syscall.Stat_t
		require.NoError(t, syscall.Stat(p, &st))
		want = append(want, shell.FileID{Dev: uint64(st.Dev), Ino: st.Ino, OK: true})
		if p == "/" {
			break
		}
	}
	for _, sh := range shells(t) {
		t.Run(strings.Join(sh, " "), func(t *testing.T) {
			out, stderr, status := shRun(t, sh, shell.WorkspaceProbeScript(remote), nil)
			require.Zero(t, status, stderr)
			p, err := shell.ParseWorkspaceProbe([]byte(out))
			require.NoError(t, err, out)
			assert.Equal(t, want, p.IDs)
			assert.Equal(t, filepath.Join(real, "work"), p.Real, "the physical path: the link resolved")
			var st syscall.Stat_t
			require.NoError(t, syscall.Lstat(real, &st))
			assert.Equal(t, shell.FileID{Dev: uint64(st.Dev), Ino: st.Ino, OK: true}, p.IDs[1], "the link's level is its target's directory")
		})
	}
}

// TestParseWorkspaceProbeIDs: "id DEV INO" in decimal, "id - INO" (the
// inode alone, from ls), "id - -" (not there) or "id ? ?" (there, but not
// identified); "unchecked awk" once; anything else is a protocol error.
func TestParseWorkspaceProbeIDs(t *testing.T) {
	p, err := shell.ParseWorkspaceProbe([]byte("id 2049 12\nid - -\nid 0 2\nid - 7\nid ? ?\nend\n"))
	require.NoError(t, err)
	assert.Equal(t, []shell.FileID{{Dev: 2049, Ino: 12, OK: true}, {}, {Dev: 0, Ino: 2, OK: true}, {Ino: 7, OK: true, NoDev: true}, {Unknown: true}}, p.IDs)
	assert.False(t, p.MountsUnchecked)
	p, err = shell.ParseWorkspaceProbe([]byte("unchecked awk\nend\n"))
	require.NoError(t, err)
	assert.True(t, p.MountsUnchecked)
	for _, bad := range []string{"unchecked stat", "unchecked awk\nunchecked awk", "unchecked", "id ? 2", "id 2 ?", "id - 02", "id - -1"} {
		_, err := shell.ParseWorkspaceProbe([]byte(bad + "\nend\n"))
		assert.ErrorIs(t, err, sandbox.ErrProtocol, "%q", bad)
	}
	assert.True(t, shell.FileID{Ino: 7, OK: true, NoDev: true}.Same(shell.FileID{Dev: 9, Ino: 7, OK: true}), "an inode alone matches any device")
	assert.False(t, shell.FileID{Dev: 8, Ino: 7, OK: true}.Same(shell.FileID{Dev: 9, Ino: 7, OK: true}))
	assert.False(t, shell.FileID{Unknown: true}.Same(shell.FileID{Unknown: true}), "unknown matches nothing")
	for _, bad := range []string{"id 1", "id 1 2 3", "id -1 2", "id +1 2", "id 1 0x2", "id  1 2", "id 1 18446744073709551616", "id", "id 01 2", "id 1 00"} {
		_, err := shell.ParseWorkspaceProbe([]byte(bad + "\nend\n"))
		require.Error(t, err, "%q", bad)
		assert.True(t, errors.Is(err, sandbox.ErrProtocol), "%q: %v", bad, err)
	}
	p, err = shell.ParseWorkspaceProbe([]byte("real /a/b c\nend\n"))
	require.NoError(t, err)
	assert.Equal(t, "/a/b c", p.Real)
	for _, bad := range []string{"real a/b", "real /a/../b", "real /a/", "real ", "real /a\x00b", "real /a\nreal /b"} {
		_, err := shell.ParseWorkspaceProbe([]byte(bad + "\nend\n"))
		assert.ErrorIs(t, err, sandbox.ErrProtocol, "%q", bad)
	}
	_, err = shell.ParseWorkspaceProbe([]byte(strings.Repeat("id - -\n", shell.MaxProbeIDs+1) + "end\n"))
	assert.ErrorIs(t, err, sandbox.ErrProtocol)
	_, err = shell.ParseWorkspaceProbe([]byte(strings.Repeat("id - -\n", shell.MaxProbeIDs) + "end\n"))
	assert.NoError(t, err)
}

// TestWorkspaceMarkerScriptRuns: "same" only where the file is.
func TestWorkspaceMarkerScriptRuns(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "it's here")
	require.NoError(t, os.WriteFile(f, nil, 0o600))
	for _, sh := range shells(t) {
		for p, want := range map[string]string{f: "same\nend\n", f + "x": "end\n"} {
			out, stderr, status := shRun(t, sh, shell.WorkspaceMarkerScript(p), nil)
			require.Zero(t, status, stderr)
			assert.Equal(t, want, out, fmt.Sprintf("%v %s", sh, p))
		}
	}
}

// TestPublishGuardRuns: a publish whose copy's place is a directory its
// guard names (the host's Source, or one above it) exits SourceExit and
// moves nothing; a guard naming other directories publishes.
func TestPublishGuardRuns(t *testing.T) {
	for _, sh := range shells(t) {
		t.Run(strings.Join(sh, " "), func(t *testing.T) {
			root := t.TempDir()
			dst := publishTree(t, sh, root)
			var st syscall.Stat_t
			require.NoError(t, syscall.Stat(dst, &st))
			own := shell.FileID{Dev: uint64(st.Dev), Ino: st.Ino, OK: true}
			mf := filepath.Join(root, shell.ManifestName("a"))
			for i, guard := range [][]shell.FileID{{{Dev: 1, Ino: 2, OK: true}, own}, {{Dev: own.Dev, Ino: own.Ino + 1, OK: true}, {}}} {
				tmp := filepath.Join(root, fmt.Sprintf("%sa-00%d2", shell.TempPrefix, i))
				stream, _ := stageTree(t)
				_, stderr, status := shRun(t, sh, shell.SendScript(shell.Send{Root: root, Tmp: tmp, Dst: dst, Hash: true}), stream)
				require.Equal(t, 0, status, "send: %s", stderr)
				_, stderr, status = shRun(t, sh, shell.PublishScript(tmp, dst, mf, "a", false, false, guard), nil)
				var now syscall.Stat_t
				require.NoError(t, syscall.Stat(dst, &now))
				if i == 0 {
					assert.Equal(t, shell.SourceExit, status, stderr)
					assert.Contains(t, stderr, "stage into another root or under another name")
					assert.Equal(t, st.Ino, now.Ino, "the copy in place did not move")
					assert.DirExists(t, tmp, "left for the cleanup")
				} else {
					assert.Zero(t, status, stderr)
					assert.NotEqual(t, st.Ino, now.Ino, "published")
				}
			}
		})
	}
}

// TestPublishGuardRootInsideSource: a publish whose stage root is the
// Source, or a directory inside it (physically), exits SourceExit and
// moves nothing: the copy would hold itself.
func TestPublishGuardRootInsideSource(t *testing.T) {
	for _, sh := range shells(t) {
		t.Run(strings.Join(sh, " "), func(t *testing.T) {
			base := t.TempDir()
			root := filepath.Join(base, "src", "in")
			require.NoError(t, os.MkdirAll(root, 0o755))
			require.NoError(t, os.Symlink(filepath.Join(base, "src"), filepath.Join(base, "via"))) // above the root: a link at the root itself is replaced
			var st syscall.Stat_t
			require.NoError(t, syscall.Stat(filepath.Join(base, "src"), &st))
			guard := []shell.FileID{{Dev: uint64(st.Dev), Ino: st.Ino, OK: true}}
			for _, r := range []string{root, filepath.Join(base, "via", "in")} {
				dst, mf := filepath.Join(r, "a"), filepath.Join(r, shell.ManifestName("a"))
				tmp := filepath.Join(r, shell.TempPrefix+"a-0031")
				stream, _ := stageTree(t)
				_, stderr, status := shRun(t, sh, shell.SendScript(shell.Send{Root: r, Tmp: tmp, Dst: dst, Hash: true}), stream)
				require.Equal(t, 0, status, "send: %s", stderr)
				_, stderr, status = shRun(t, sh, shell.PublishScript(tmp, dst, mf, "a", false, false, guard), nil)
				assert.Equal(t, shell.SourceExit, status, stderr)
				assert.Contains(t, stderr, "is inside the host's source directory")
				assert.NoDirExists(t, dst, "nothing published")
				require.NoError(t, os.RemoveAll(tmp))
			}
		})
	}
}

// TestRemoveGuardRuns: a removal whose guard names the directory of one
// of its assets (a staged copy that is a kept asset's Source, or above
// one) exits SourceExit having moved nothing, not the other assets
// either; a guard naming other directories removes them all.
func TestRemoveGuardRuns(t *testing.T) {
	for _, sh := range shells(t) {
		t.Run(strings.Join(sh, " "), func(t *testing.T) {
			root := t.TempDir()
			publishTree(t, sh, root)
			var st syscall.Stat_t
			require.NoError(t, syscall.Stat(filepath.Join(root, "a"), &st))
			own := shell.FileID{Dev: uint64(st.Dev), Ino: st.Ino, OK: true}
			require.NoError(t, os.MkdirAll(filepath.Join(root, "-b"), 0o755))
			names := []string{"-b", "a"}

			_, stderr, status := shRun(t, sh, shell.RemoveScript(root, shell.TempPrefix+"unstage-00", shell.Skip{}, names, []shell.FileID{{Dev: 1, Ino: 2, OK: true}, own}), nil)
			assert.Equal(t, shell.SourceExit, status, stderr)
			assert.Contains(t, stderr, root+"/a is the host's source directory of an asset being kept")
			assert.DirExists(t, filepath.Join(root, "a"))
			assert.FileExists(t, filepath.Join(root, shell.ManifestName("a")))
			assert.DirExists(t, filepath.Join(root, "-b"), "nothing removed")
			assert.NoDirExists(t, filepath.Join(root, shell.TempPrefix+"unstage-00"), "nothing made")

			_, stderr, status = shRun(t, sh, shell.RemoveScript(root, shell.TempPrefix+"unstage-01", shell.Skip{}, names, []shell.FileID{{Dev: own.Dev, Ino: own.Ino + 1, OK: true}, {}}), nil)
			assert.Zero(t, status, stderr)
			assert.NoDirExists(t, filepath.Join(root, "a"))
			assert.NoDirExists(t, filepath.Join(root, "-b"))
		})
	}
}
