package gitexec

import (
	"context"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseVersion(t *testing.T) {
	for in, want := range map[string][2]int{
		"git version 2.39.5":                {2, 39},
		"git version 2.38.0 (Apple Git-14)": {2, 38},
		"git version 2.45.windows.1":        {2, 45},
	} {
		maj, min, ok := ParseVersion(in)
		require.True(t, ok, in)
		assert.Equal(t, want, [2]int{maj, min}, in)
	}
	for _, in := range []string{"", "git version", "hub version 2.1", "git version x.y"} {
		_, _, ok := ParseVersion(in)
		assert.False(t, ok, in)
	}
}

// TestEnvironmentScrubbed: a GIT_DIR of the host process never reaches git.
func TestEnvironmentScrubbed(t *testing.T) {
	t.Setenv("GIT_DIR", "/nonexistent")
	t.Setenv("GIT_CONFIG_PARAMETERS", "'core.hooksPath'='/evil'")
	g := &Git{Dir: t.TempDir()}
	env := strings.Join(g.environ(nil), "\n")
	assert.NotContains(t, env, "GIT_DIR=")
	assert.NotContains(t, env, "/evil")
	assert.Contains(t, env, "GIT_CONFIG_GLOBAL=/dev/null")
	err := g.Run(context.Background(), Cmd{Args: []string{"rev-parse", "--git-dir"}})
	assert.Equal(t, 128, Status(err), "no repository is found above the ceiling: %v", err)
}

// TestErrorUnwrapsHostFailure: a git command that failed on a full disk
// (or a quota, a read-only file system, an I/O error) is that errno to
// errors.Is; any other failure is none of them.
func TestErrorUnwrapsHostFailure(t *testing.T) {
	for msg, want := range map[string]syscall.Errno{
		"fatal: write error: No space left on device":                         syscall.ENOSPC,
		"error: unable to write file: Disk quota exceeded":                    syscall.EDQUOT,
		"fatal: Unable to create '/r/.git/index.lock': Read-only file system": syscall.EROFS,
		"fatal: read error: Input/output error":                               syscall.EIO,
	} {
		err := error(&Error{Args: []string{"index-pack"}, Status: 128, Stderr: msg})
		assert.ErrorIs(t, err, want, msg)
	}
	err := error(&Error{Args: []string{"index-pack"}, Status: 128, Stderr: "fatal: pack has bad object at offset 12"})
	for _, e := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EROFS, syscall.EIO} {
		assert.NotErrorIs(t, err, e)
	}
}
