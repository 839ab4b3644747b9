package deliverable_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable"
	"github.com/airlockdev/airlock/internal/treetest"
	"github.com/airlockdev/airlock/sandbox"
)

// Finding 7 on a real full file system: the error names the store and
// what to do, and once space is freed the same call succeeds.
func TestAttack47FullDiskOnTmpfs(t *testing.T) {
	mnt := treetest.Tmpfs(t, "1m")
	dir := filepath.Join(mnt, "st")
	st, err := deliverable.OpenFileStore(dir)
	require.NoError(t, err)

	filler := filepath.Join(mnt, "filler")
	f, err := os.Create(filler)
	require.NoError(t, err)
	chunk := make([]byte, 64<<10)
	for {
		if _, err = f.Write(chunk); err != nil {
			break
		}
	}
	require.ErrorIs(t, err, syscall.ENOSPC)
	require.NoError(t, f.Close())

	ws := t.TempDir()
	data := []byte(strings.Repeat("row,1\n", 4096))
	writeFile(t, ws, "r.csv", data)
	reg := &deliverable.Registrar{Store: st}
	req := requestFor("r.csv", "k", data)
	_, err = reg.Register(t.Context(), local(t, ws), "t", "r", req)
	he := requireHostError(t, err)
	assert.Equal(t, "store", he.Op)
	assert.ErrorIs(t, err, syscall.ENOSPC)
	msg := err.Error()
	assert.True(t, strings.HasPrefix(msg, "deliverable: store: write temporary blob "+filepath.Join(dir, "tmp", "blob-")), msg)
	assert.Contains(t, msg, "no space left on device; the file system of the store "+dir+" is full: free space (or inodes) on it, then retry")
	assert.Equal(t, 1, strings.Count(msg, "deliverable: "), msg)
	assert.False(t, sandbox.Retryable(err))
	var pe *os.PathError
	assert.True(t, errors.As(err, &pe), "the failing path is kept: %v", err)
	assert.Empty(t, a47Names(t, filepath.Join(dir, "tmp")), "nothing left behind")

	require.NoError(t, os.Remove(filler))
	rc, err := reg.Register(t.Context(), local(t, ws), "t", "r", req)
	require.NoError(t, err, "the same call succeeds once there is room")
	assert.Equal(t, deliverable.Applied, rc.Disposition)
}

// A link or a directory planted at a lock file's name is never followed
// and fails each call saying what to do; once removed, the store works.
func TestAttack47PlantedLockFile(t *testing.T) {
	for _, plant := range []string{"link", "dir"} {
		t.Run(plant, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "st")
			st, err := deliverable.OpenFileStore(dir)
			require.NoError(t, err)
			lock := filepath.Join(dir, "locks", "store")
			target := filepath.Join(t.TempDir(), "target")
			if plant == "link" {
				require.NoError(t, os.Symlink(target, lock))
			} else {
				require.NoError(t, os.Mkdir(lock, 0o700))
			}
			ws := t.TempDir()
			data := []byte("a,b\n")
			writeFile(t, ws, "r.csv", data)
			reg := &deliverable.Registrar{Store: st}
			_, err = reg.Register(t.Context(), local(t, ws), "t", "r", requestFor("r.csv", "k", data))
			require.Error(t, err)
			assert.Contains(t, err.Error(), "remove "+lock+" and retry")
			_, serr := os.Lstat(target)
			assert.True(t, errors.Is(serr, os.ErrNotExist), "the link was followed")
			require.NoError(t, os.RemoveAll(lock))
			_, err = reg.Register(t.Context(), local(t, ws), "t", "r", requestFor("r.csv", "k", data))
			require.NoError(t, err)
		})
	}
}
