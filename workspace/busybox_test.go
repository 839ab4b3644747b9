package workspace_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/busyboxuser"
	"github.com/airlockdev/airlock/workspace"
)

// TestPlainPrepareDirModesBusyboxUser prepares a plain work tree into a
// sandbox of busybox's tools only, run as a non-root user (whose tar
// leaves the mode of a directory that already exists alone, so a later
// header cannot give a read-only directory its mode): every directory
// must arrive with its own mode, nested and read-only ones included, no
// helper file may stay behind, and the round trip must bring the agent's
// edit back.
func TestPlainPrepareDirModesBusyboxUser(t *testing.T) {
	bb := busyboxuser.New(t)
	base := busyboxuser.Dir(t)
	e := &env{local: filepath.Join(t.TempDir(), "local"), remote: filepath.Join(base, "work")}
	e.spec = workspace.Spec{Local: e.local, Remote: e.remote, Runner: bb.Runner(base)}
	write(t, e.local, "ro/f", "read-only\n")
	write(t, e.local, "a/b/c/f", "deep\n")
	write(t, e.local, "w/f", "1\n")
	modes := map[string]fs.FileMode{"ro": 0o555, "a": 0o750, "a/b": 0o711, "a/b/c": 0o700, "w": 0o755}
	for _, d := range []string{"a/b/c", "a/b", "a", "ro", "w"} {
		require.NoError(t, os.Chmod(filepath.Join(e.local, d), modes[d]))
	}
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(e.local, "ro"), 0o755) })

	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	for d, want := range modes {
		fi, err := os.Stat(filepath.Join(e.remote, d))
		require.NoError(t, err)
		assert.Equal(t, want.String(), fi.Mode().Perm().String(), "the sandbox's %s", d)
	}
	ents, err := os.ReadDir(e.remote)
	require.NoError(t, err)
	var names []string
	for _, en := range ents {
		names = append(names, en.Name())
	}
	assert.ElementsMatch(t, []string{".airlock", "a", "ro", "w"}, names, "the sandbox's work tree holds only the tree (the modes script is gone) and the runtime directory")
	marker, err := os.ReadDir(filepath.Join(e.remote, ".airlock"))
	require.NoError(t, err)
	var own []string
	for _, m := range marker {
		own = append(own, m.Name())
	}
	assert.Equal(t, []string{".workspace-prepare", ".workspace-round"}, own, "the runtime directory holds the prepare lock (busybox has no flock: its pid file is gone) and the round's marker alone")

	write(t, e.remote, "w/f", "2\n") // the agent (root here: the test's own hand)
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, []string{"w/f"}, res.Updated)
	assert.Equal(t, "2\n", read(t, e.local, "w/f"))
	fi, err := os.Stat(filepath.Join(e.local, "ro"))
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o555).String(), fi.Mode().Perm().String(), "the local read-only directory")
}
