package gitexec

import (
	"context"
	"strings"
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
