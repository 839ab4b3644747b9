//go:build linux

package gitexec

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fullTmpfs mounts a 1 MiB tmpfs and fills it; it skips t when not root.
func fullTmpfs(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs to fill needs root (CI runs as root); skipped: not root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m,mode=0755", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("mount -t tmpfs failed here (%v: %s); skipped", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

func fill(t *testing.T, dir string) {
	t.Helper()
	var st syscall.Statfs_t
	require.NoError(t, syscall.Statfs(dir, &st))
	f, err := os.Create(filepath.Join(dir, "filler"))
	require.NoError(t, err)
	require.NoError(t, syscall.Fallocate(int(f.Fd()), 0, 0, int64(st.Bavail)*st.Bsize))
	require.NoError(t, f.Close())
}

// TestFullDiskCause: git that fails to write on a full file system is
// ENOSPC to errors.Is, and names the path, also where git itself names no
// cause (a ref's lock file: "couldn't write '<path>.lock'").
func TestFullDiskCause(t *testing.T) {
	mnt := fullTmpfs(t)
	g := &Git{Dir: filepath.Join(mnt, "r")}
	ctx := context.Background()
	require.NoError(t, (&Git{Dir: mnt}).Run(ctx, Cmd{Args: []string{"init", "-q", g.Dir}}))
	tree, err := g.Line(ctx, "write-tree")
	require.NoError(t, err)
	var out strings.Builder
	require.NoError(t, g.Run(ctx, Cmd{Args: []string{"commit-tree", "-m", "c", tree}, Stdout: &out,
		Env: []string{"GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@a", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@a"}}))
	commit := strings.TrimSpace(out.String())
	fill(t, mnt)
	err = g.Run(ctx, Cmd{Args: []string{"update-ref", "refs/heads/x", commit}})
	require.Error(t, err)
	assert.ErrorIs(t, err, syscall.ENOSPC)
	assert.ErrorIs(t, err, ErrWrite)
	var ge *Error
	require.ErrorAs(t, err, &ge)
	assert.Equal(t, syscall.ENOSPC, ge.Cause, "git names no cause here (%q): the file system shows it", ge.Stderr)
	assert.Equal(t, filepath.Join(g.Dir, ".git", "refs", "heads"), ge.CauseDir)
	assert.Contains(t, err.Error(), "(the file system of "+ge.CauseDir+": no space left on device)")

	// Space again: the same command succeeds, and a failure that is no
	// write is nothing of the kind.
	require.NoError(t, os.Remove(filepath.Join(mnt, "filler")))
	require.NoError(t, g.Run(ctx, Cmd{Args: []string{"update-ref", "refs/heads/x", commit}}))
	fill(t, mnt)
	err = g.Run(ctx, Cmd{Args: []string{"rev-parse", "--verify", "refs/heads/nope"}})
	require.Error(t, err)
	assert.NotErrorIs(t, err, syscall.ENOSPC, "a failed read on a full disk is not the full disk's")
	assert.NotErrorIs(t, err, ErrWrite)
}
