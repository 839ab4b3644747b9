package workspace_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
)

// TestStagedSkillsNeverComeBack stages skills under the sandbox work
// tree's runtime directory with stage.Stage and restores: none of it
// appears locally.
func TestStagedSkillsNeverComeBack(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			eachRunner(t, func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner) {
				e := newEnv(t, newRunner)
				r := prepareOneFile(t, e, kind)
				skill := t.TempDir()
				write(t, skill, "SKILL.md", "---\nname: s\ndescription: d\n---\n")
				rt, err := stage.Stage(ctx(t), stage.NewBridge(e.spec.Runner), filepath.Join(e.remote, sandbox.RuntimeDir, "skills"),
					[]stage.Asset{{Name: "s", Source: skill}})
				require.NoError(t, err)
				p, ok := rt.Path("s")
				require.True(t, ok)
				assert.FileExists(t, filepath.Join(p, "SKILL.md"))
				write(t, e.remote, "a", "2\n")
				res, err := r.Restore(ctx(t))
				require.NoError(t, err)
				assert.Equal(t, []string{"a"}, res.Updated)
				assert.Equal(t, []string{sandbox.RuntimeDir + "/skills"}, res.Runtime, "the runtime directory is listed by its top entries, never written")
				assert.Empty(t, res.Refused, "staged assets are no refusal: a host alerting on Refused stays quiet")
				assert.Empty(t, res.Reasons)
				_, err = os.Lstat(filepath.Join(e.local, sandbox.RuntimeDir, "skills"))
				assert.ErrorIs(t, err, os.ErrNotExist)
				if kind == "git" {
					assert.NoDirExists(t, filepath.Join(e.local, sandbox.RuntimeDir))
				}
			})
		})
	}
}
