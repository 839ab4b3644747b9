package skills

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/airlockdev/airlock/internal/treetest"
)

// TestMaterializeFullStateDisk: a copy that fills the state directory's
// file system says where and what to do, leaves no temporary directory,
// and the call after space is freed succeeds. Root only: it mounts a
// small tmpfs.
func TestMaterializeFullStateDisk(t *testing.T) {
	mnt := treetest.Tmpfs(t, "1m")
	filler := filepath.Join(mnt, "filler")
	require.NoError(t, os.WriteFile(filler, make([]byte, 900<<10), 0o600))
	dir := skillDir(t, t.TempDir(), "a", "big:"+strings.Repeat("b", 300<<10))
	state := filepath.Join(mnt, "state")
	_, err := Materialize(context.Background(), state, []Source{{Key: "k", Name: "a", Dir: dir}})
	require.Error(t, err)
	assert.True(t, errors.Is(err, unix.ENOSPC), "%v", err)
	assert.Contains(t, err.Error(), "into "+state)
	assert.Contains(t, err.Error(), "free space (or inodes) on the state directory's file system and retry")
	entries, err := os.ReadDir(state)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing is left behind")

	require.NoError(t, os.Remove(filler))
	b, err := Materialize(context.Background(), state, []Source{{Key: "k", Name: "a", Dir: dir}})
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(b.Dir, "a", "big"))
	require.NoError(t, err)
	assert.Equal(t, 300<<10, len(got))
}
