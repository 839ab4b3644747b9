package workspace

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLockWorkTreeExcludesAndLeavesNothing: restores racing for the lock
// (each release removes the file, and the directory the lock made) never
// hold it two at a time, and the last release leaves nothing behind.
func TestLockWorkTreeExcludesAndLeavesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "work", ".airlock")
	p := filepath.Join(dir, "restore.lock")
	var holders, most atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				unlock, err := lockWorkTree(context.Background(), p, time.Minute)
				if !assert.NoError(t, err) {
					return
				}
				n := holders.Add(1)
				for {
					m := most.Load()
					if n <= m || most.CompareAndSwap(m, n) {
						break
					}
				}
				time.Sleep(100 * time.Microsecond)
				holders.Add(-1)
				unlock()
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int32(1), most.Load(), "two restores held the lock at once")
	// After contention the directory may stay (empty): a waiter that
	// created the lock file in it just before the maker's unlock removed
	// it did not make the directory itself. Uncontended, nothing stays.
	require.NoError(t, os.RemoveAll(dir))
	unlock, err := lockWorkTree(context.Background(), p, time.Minute)
	require.NoError(t, err)
	unlock()
	_, err = os.Lstat(dir)
	assert.ErrorIs(t, err, os.ErrNotExist, "the lock's directory, which it made, is left")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	unlock, err = lockWorkTree(context.Background(), p, time.Minute)
	require.NoError(t, err)
	unlock()
	_, err = os.Lstat(p)
	assert.ErrorIs(t, err, os.ErrNotExist, "the lock file is left")
	_, err = os.Lstat(dir)
	assert.NoError(t, err, "a directory the lock did not make is removed")
}
