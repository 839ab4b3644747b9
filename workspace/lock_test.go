package workspace_test

import (
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// holdLock takes the flock at p on a separate open file description.
func holdLock(t *testing.T, p string) func() {
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	require.NoError(t, err)
	require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX))
	return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }
}
