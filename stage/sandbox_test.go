package stage_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/stage/stagetest"
)

// TestOverConformance: what Over makes of sandbox.Local passes the Target
// suite (the hostile cases included) and the Runner suite.
func TestOverConformance(t *testing.T) {
	t.Run("Target", func(t *testing.T) {
		stagetest.TestTarget(t, func(t *testing.T) (stage.Target, string) {
			dir := t.TempDir()
			return stage.Over(sandbox.Local(dir)), filepath.ToSlash(filepath.Join(dir, "home", "agent", "rt"))
		}, stagetest.WithSandboxShell(func(*testing.T, stage.Target) (sandbox.Runner, string) {
			return sandbox.Local("/"), "" // this machine: its paths are the host's
		}))
	})
	t.Run("Runner", func(t *testing.T) {
		stagetest.TestRunner(t, func(t *testing.T) sandbox.Runner { return stage.Over(sandbox.Local(t.TempDir())) })
	})
}

// readerRunner is a Runner that is also a FileReader and a
// ControlTimeouter, counting its reads.
type readerRunner struct {
	sandbox.Runner
	timeout time.Duration
	reads   int
}

func (r *readerRunner) ReadFile(_ context.Context, p string, max int64) ([]byte, error) {
	r.reads++
	return []byte("read " + p), nil
}

func (r *readerRunner) ControlTimeout() time.Duration { return r.timeout }

// TestOverCapabilities: the Sandbox is a FileReader exactly when its Runner
// is one, reports the Bridge's control deadline, and prunes.
func TestOverCapabilities(t *testing.T) {
	plain := stage.Over(sandbox.Local(t.TempDir()))
	_, ok := plain.(sandbox.FileReader)
	assert.False(t, ok, "a Sandbox over a Runner that cannot read files must not claim to")
	assert.Equal(t, sandbox.MaxControlTimeout, sandbox.ControlDeadline(plain))
	assert.Equal(t, 3*time.Second, sandbox.ControlDeadline(stage.Over(sandbox.Local(t.TempDir()), stage.WithControlTimeout(3*time.Second))),
		"WithControlTimeout is the Sandbox's control deadline for every package")

	rr := &readerRunner{Runner: sandbox.Local(t.TempDir()), timeout: 5 * time.Second}
	sb := stage.Over(rr, stage.WithControlTimeout(10*time.Second))
	fr, ok := sb.(sandbox.FileReader)
	require.True(t, ok, "a Sandbox over a FileReader is one")
	b, err := fr.ReadFile(t.Context(), "/x", 10)
	require.NoError(t, err)
	assert.Equal(t, "read /x", string(b))
	assert.Equal(t, 1, rr.reads, "ReadFile is the Runner's")
	assert.Equal(t, 5*time.Second, sandbox.ControlDeadline(sb), "the Runner's shorter deadline wins over a longer option")
	_, ok = sb.(stage.Pruner)
	assert.True(t, ok, "a Sandbox prunes through its Bridge")
}

// TestOverStagesAndRuns: one value stages with WithPrune, runs a command
// that sees the staged file, and Unstage removes it.
func TestOverStagesAndRuns(t *testing.T) {
	dir := t.TempDir()
	sb := stage.Over(sandbox.Local(dir))
	src := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(src, "SKILL.md"), []byte("skill\n"), 0o644))
	root := filepath.ToSlash(filepath.Join(dir, "work", sandbox.RuntimeDir))
	rt, err := stage.Stage(t.Context(), sb, root, []stage.Asset{{Name: "skills", Source: src}}, stage.WithPrune())
	require.NoError(t, err)
	p, ok := rt.Path("skills")
	require.True(t, ok)

	var out strings.Builder
	require.NoError(t, sb.Run(t.Context(), sandbox.Command{Script: `cat -- "$F"`, Env: map[string]string{"F": p + "/SKILL.md"}, Stdout: &out}))
	assert.Equal(t, "skill\n", out.String())

	require.NoError(t, stage.Unstage(t.Context(), sb, root, "skills"))
	assert.NoDirExists(t, filepath.FromSlash(p))
}

// TestOverNilRunner: a Sandbox over a nil Runner fails every call with the
// reason, matching sandbox.ErrBadCommand: no panic, no transport failure.
func TestOverNilRunner(t *testing.T) {
	sb := stage.Over(nil)
	src := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(src, "f"), []byte("x"), 0o644))
	_, err := stage.Stage(t.Context(), sb, "/nonexistent/rt", []stage.Asset{{Name: "a", Source: src}})
	require.ErrorIs(t, err, sandbox.ErrBadCommand)
	assert.NotErrorIs(t, err, sandbox.ErrTransport)
	assert.False(t, sandbox.Retryable(err))
	assert.Contains(t, err.Error(), "the Bridge was made with a nil sandbox.Runner")
	err = sb.Run(t.Context(), sandbox.Command{Script: "true"})
	require.ErrorIs(t, err, sandbox.ErrBadCommand)
}
