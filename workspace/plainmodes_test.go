package workspace_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/workspace"
)

// TestPlainRestoreWithholdsUmaskBits: a plain round writes the sandbox's
// permission bits less those the host's umask withholds, unless the
// user's entry had them at Prepare. An outside tester's hostile sandbox
// made the user's files and directories 0777 (writable by every local
// user) and new files 0666, with success reported. Bits the user's own
// entries had (a group-writable file) come back as they went, removed
// bits stay removed, and a second Restore of the same sandbox finds
// nothing to bring.
func TestPlainRestoreWithholdsUmaskBits(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	e := newEnv(t, runners[0].new)
	seed(t, e.local, "plain", map[string]string{"a": "a\n", "g": "g\n", "x": "x\n", "sub/f": "f\n", "shared/f": "f\n"})
	chmod := func(dir, rel string, m fs.FileMode) {
		t.Helper()
		require.NoError(t, os.Chmod(filepath.Join(dir, rel), m))
	}
	chmod(e.local, "g", 0o664)
	chmod(e.local, "shared", 0o775)
	round, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)

	chmod(e.remote, "a", 0o777)
	write(t, e.remote, "g", "agent\n")
	chmod(e.remote, "g", 0o664)
	chmod(e.remote, "x", 0o600)
	chmod(e.remote, "sub", 0o777)
	write(t, e.remote, "shared/f", "agent\n")
	write(t, e.remote, "n", "new\n")
	chmod(e.remote, "n", 0o666)
	require.NoError(t, os.Mkdir(filepath.Join(e.remote, "nd"), 0o700))
	chmod(e.remote, "nd", 0o777)

	res, err := round.Restore(ctx(t))
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"a", "g", "x", "shared/f", "n"}, res.Updated) // directories are not listed
	for rel, want := range map[string]fs.FileMode{"a": 0o755, "g": 0o664, "x": 0o600, "sub": 0o755, "shared": 0o775, "n": 0o644, "nd": 0o755} {
		fi, err := os.Lstat(filepath.Join(e.local, rel))
		require.NoError(t, err)
		assert.Equal(t, want, fi.Mode().Perm(), "%s", rel)
	}
	assert.Equal(t, "agent\n", read(t, e.local, "g"))

	res, err = round.Restore(ctx(t))
	require.NoError(t, err)
	assert.Empty(t, res.Updated, "nothing new in the sandbox")
	assert.Empty(t, res.Kept)
}
