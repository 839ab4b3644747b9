package workspace_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/workspace"
)

// TestExcludeNamesALink: a Spec.Exclude pattern that names a symbolic link
// in the local work tree (a linked secrets directory, untracked or
// committed) leaves it out, and the round goes there and back. Before,
// every Prepare failed with git's "pathspec … is beyond a symbolic link"
// (an outside tester's finding), an error that matched no sentinel and
// said nothing of what to do.
func TestExcludeNamesALink(t *testing.T) {
	for _, c := range []struct {
		name, pattern string
		committed     bool
	}{
		{"untracked", "secrets", false},
		{"committed", "secrets", true},
		{"wildcard", "secret*", false},
		{"below", "conf/secrets", false},
		{"through", "secrets/*.key", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, runners[0].new)
			outside := t.TempDir()
			write(t, outside, "key", "the user's secret\n")
			initRepo(t, e.local, map[string]string{"a": "1\n"})
			link := filepath.Join(e.local, filepath.FromSlash(c.pattern))
			if c.pattern == "secret*" || c.pattern == "secrets/*.key" {
				link = filepath.Join(e.local, "secrets")
			}
			require.NoError(t, os.MkdirAll(filepath.Dir(link), 0o755))
			require.NoError(t, os.Symlink(outside, link))
			if c.committed {
				git(t, e.local, "add", "-A")
				git(t, e.local, "commit", "-qm", "link")
			}
			e.spec.Exclude = []string{c.pattern}

			round, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			rel, err := filepath.Rel(e.local, link)
			require.NoError(t, err)
			if c.committed || c.pattern == "secrets/*.key" {
				// Committed history travels whole, and a pattern below the
				// link leaves the link itself in: it arrives as a link.
				fi, err := os.Lstat(filepath.Join(e.remote, rel))
				require.NoError(t, err)
				assert.Equal(t, os.ModeSymlink, fi.Mode().Type())
			} else {
				assert.False(t, exists(e.remote, rel), "an excluded link does not travel")
			}

			write(t, e.remote, "a", "agent\n")
			res, err := round.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, []string{"a"}, res.Updated)
			assert.Equal(t, "agent\n", read(t, e.local, "a"))
			target, err := os.Readlink(link)
			require.NoError(t, err)
			assert.Equal(t, outside, target, "the user's link stays")
			assert.Equal(t, "the user's secret\n", read(t, outside, "key"))
		})
	}
}

// TestExcludeBelowASandboxLink: the agent replaces the directory a
// wildcard Spec.Exclude pattern lies in by a link; the Restore still
// brings the agent's work back.
func TestExcludeBelowASandboxLink(t *testing.T) {
	e := newEnv(t, runners[0].new)
	initRepo(t, e.local, map[string]string{"a": "1\n", "conf/app.yml": "x: 1\n"})
	e.spec.Exclude = []string{"conf/*.key"}
	round, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	require.NoError(t, os.Rename(filepath.Join(e.remote, "conf"), filepath.Join(e.remote, "conf.real")))
	require.NoError(t, os.Symlink("conf.real", filepath.Join(e.remote, "conf")))
	write(t, e.remote, "a", "agent\n")
	res, err := round.Restore(ctx(t))
	require.NoError(t, err)
	assert.Contains(t, res.Updated, "a")
	assert.Equal(t, "agent\n", read(t, e.local, "a"))
}
