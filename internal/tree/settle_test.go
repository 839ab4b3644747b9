package tree

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// openSettle opens path as a walk opens a source file, with the stat its
// read would be checked against.
func openSettle(t *testing.T, path string) (*srcFile, stat) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	fi, err := f.Stat()
	require.NoError(t, err)
	return &srcFile{fd: -1, f: f}, statInfo(fi)
}

// checkSettled reads a file changed moments ago once more: a read that
// does not match the file's bytes (a write under way when it began tore
// it, and the times cannot show it) fails with ErrChanged; one that does
// passes after the window; a file changed before the window is not read
// again; a file that shrank since is ErrChanged too.
func TestCheckSettled(t *testing.T) {
	dir := t.TempDir()
	data := strings.Repeat("B", 300<<10)
	torn := strings.Repeat("A", 100<<10) + strings.Repeat("B", 200<<10)
	good, bad := sha256.Sum256([]byte(data)), sha256.Sum256([]byte(torn))
	// fresh writes data to a new file and opens it, its times just moved.
	fresh := func(t *testing.T, name string) (string, *srcFile, stat) {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(data), 0o644))
		f, st := openSettle(t, p)
		return p, f, st
	}

	t.Run("torn", func(t *testing.T) {
		_, f, st := fresh(t, "torn")
		err := checkSettled(f, st, "torn", &bad, sha256.New(), nil)
		require.ErrorIs(t, err, ErrChanged)
		assert.EqualError(t, err, "changed while being read: torn: it was being written while read; retry when the tree is quiet")
	})
	t.Run("whole", func(t *testing.T) {
		_, f, st := fresh(t, "whole")
		began := time.Now()
		require.NoError(t, checkSettled(f, st, "whole", &good, sha256.New(), make([]byte, 4096)))
		assert.Less(t, time.Since(began), time.Second, "it waits out the window, no longer")
	})
	t.Run("old", func(t *testing.T) {
		p := filepath.Join(dir, "old")
		require.NoError(t, os.WriteFile(p, []byte(data), 0o644))
		time.Sleep(settleWindow + 10*time.Millisecond)
		f, st := openSettle(t, p)
		// Not read again: a change older than the window is trusted to
		// have landed (the documented limit), so even a wrong sum passes.
		require.NoError(t, checkSettled(f, st, "old", &bad, sha256.New(), nil))
	})
	t.Run("shrank", func(t *testing.T) {
		p, f, st := fresh(t, "shrank")
		require.NoError(t, os.Truncate(p, 10))
		err := checkSettled(f, st, "shrank", &good, sha256.New(), nil)
		require.ErrorIs(t, err, ErrChanged)
		assert.EqualError(t, err, "changed while being read: shrank: file shrank while read")
	})
	t.Run("rewritten the same size", func(t *testing.T) {
		p, f, st := fresh(t, "same")
		time.Sleep(10 * time.Millisecond) // past the times' granularity, within the window
		w, err := os.OpenFile(p, os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = w.Write([]byte(data)) // same bytes, new times
		require.NoError(t, err)
		require.NoError(t, w.Close())
		err = checkSettled(f, st, "same", &good, sha256.New(), nil)
		require.ErrorIs(t, err, ErrChanged, "the bytes match, the times do not")
	})
}
