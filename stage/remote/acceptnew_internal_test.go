package remote

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAppendLineFullDiskLeavesNoHalfLine: accept-new's append to a
// known_hosts file on a full disk fails with ENOSPC and leaves the file
// exactly as it was, never with half a line that would break every later
// read of it.
func TestAppendLineFullDiskLeavesNoHalfLine(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: mounting a small tmpfs to fill it up")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("mounting a tmpfs at %s failed (%v: %s): the full-disk test needs it", dir, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	known := filepath.Join(dir, "known_hosts")
	orig := []byte("host1 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n")
	require.NoError(t, os.WriteFile(known, orig, 0o600))
	fill, err := os.Create(filepath.Join(dir, "fill"))
	require.NoError(t, err)
	for {
		if _, err := fill.Write(make([]byte, 4096)); err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC)
			break
		}
	}
	require.NoError(t, fill.Close())

	f, err := os.OpenFile(known, os.O_RDWR|os.O_APPEND, 0o600)
	require.NoError(t, err)
	defer f.Close()
	// Longer than what is left of known_hosts' page: part of it fits.
	line := "host2 ssh-ed25519 " + strings.Repeat("A", 6000) + "\n"
	err = appendLine(f, line)
	require.Error(t, err)
	assert.True(t, errors.Is(err, syscall.ENOSPC), "%v", err)
	got, err := os.ReadFile(known)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(orig, got), "known_hosts holds %d bytes, want the %d it had", len(got), len(orig))
}
