package workspace_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

// TestUserDeletedDirStaysDeleted: the user deletes (or renames away) a
// directory of the baseline while the agent works; the sandbox still has
// it. The user's deletion wins, as it does for a file: the Restore makes
// none of its directories again, at any depth, unless the agent added a
// file there (which arrives, in a directory made for it), and an agent's
// change to a file in it is Kept, not written. A second Restore changes
// nothing. Both kinds of round (an outside attack found the plain round
// making the deleted directories again, empty).
func TestUserDeletedDirStaysDeleted(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		for _, tc := range []struct {
			name    string
			agent   func(t *testing.T, remote string)
			updated []string
			kept    []string
			want    []string // what d holds after the Restore
		}{
			{"agent elsewhere", func(t *testing.T, remote string) { write(t, remote, "g", "agent\n") }, []string{"g"}, nil, nil},
			{"agent changed a file in it", func(t *testing.T, remote string) { write(t, remote, "d/e/x", "agent\n") }, nil, []string{"d/e/x"}, nil},
			{"agent added a file in it", func(t *testing.T, remote string) { write(t, remote, "d/e/new", "agent\n") }, []string{"d/e/new"}, nil, []string{"d/e/new"}},
		} {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
				files := map[string]string{"g": "1\n", "d/y": "1\n", "d/e/x": "1\n", "d/e/f/z": "1\n"}
				seed(t, e.local, kind, files)
				r, err := workspace.Prepare(ctx(t), e.spec)
				require.NoError(t, err)
				require.NoError(t, os.RemoveAll(filepath.Join(e.local, "d")))
				tc.agent(t, e.remote)

				res, err := r.Restore(ctx(t))
				require.NoError(t, err)
				assert.Equal(t, tc.updated, res.Updated)
				assert.Equal(t, tc.kept, res.Kept)
				assert.Empty(t, res.Refused)
				assert.Equal(t, tc.want, filesUnder(t, e.local, "d"))
				if tc.want == nil {
					assert.NoDirExists(t, filepath.Join(e.local, "d"), "the directory the user deleted was made again")
				}

				res, err = r.Restore(ctx(t))
				require.NoError(t, err, "a second Restore")
				assert.Empty(t, res.Updated, "a second Restore")
				assert.Equal(t, tc.want, filesUnder(t, e.local, "d"), "a second Restore")
			})
		}
	}
}

// filesUnder lists the paths (slash-separated, relative to dir) of every
// entry below dir/sub that is not a directory; nil when there is none.
func filesUnder(t *testing.T, dir, sub string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(filepath.Join(dir, sub), func(p string, d os.DirEntry, err error) error {
		if os.IsNotExist(err) {
			return filepath.SkipAll
		}
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		out = append(out, filepath.ToSlash(rel))
		return err
	})
	require.NoError(t, err)
	return out
}
