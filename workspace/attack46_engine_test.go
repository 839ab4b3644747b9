package workspace_test

import (
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/sandboxtest"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

// sandboxtest.EngineError is what docker prints on the exec client's stdout, with
// exit 126, when it cannot start the exec (a container stopped mid-exec
// and started again).
// TestEngineErrorOnStdoutIsTransport: a round prepared through a working
// engine, then restored (and prepared again) through one that fails before
// it reaches the sandbox and prints its error where the restore stream
// should be: a retryable transport failure naming the engine's words, the
// local tree untouched, and the same Restore succeeds once the engine
// works again. The same words sent by a sandbox whose command ended
// normally are hostile.
func TestEngineErrorOnStdoutIsTransport(t *testing.T) {
	for _, kind := range []string{"plain", "git"} {
		for name, dead := range map[string]sandbox.Runner{"Exec": sandboxtest.DeadEngine(t, sandboxtest.EngineError), "FromExec": sandboxtest.DeadSDK(sandboxtest.EngineError)} {
			t.Run(kind+"/"+name, func(t *testing.T) {
				e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return inDir{sandbox.Exec(), dir} })
				seed(t, e.local, kind, map[string]string{"a": "1\n"})
				state := t.TempDir()
				round, err := workspace.Prepare(ctx(t), e.spec, workspace.WithStateDir(state))
				require.NoError(t, err)
				write(t, e.remote, "b", "2\n")
				spec := e.spec
				spec.Runner = dead
				re, err := workspace.Reopen(ctx(t), spec, round.ID(), workspace.WithStateDir(state))
				require.NoError(t, err)
				_, err = re.Restore(ctx(t))
				t.Log(err)
				sandboxtest.AssertEngineTransport(t, err, workspace.ErrHostile)
				assert.False(t, exists(e.local, "b"), "a restore that failed wrote a file")

				_, err = workspace.Prepare(ctx(t), spec, workspace.WithStateDir(t.TempDir()))
				t.Log(err)
				sandboxtest.AssertEngineTransport(t, err, workspace.ErrHostile)

				res, err := round.Restore(ctx(t))
				require.NoError(t, err, "the same restore through the working engine")
				assert.Equal(t, []string{"b"}, res.Updated)
				assert.Equal(t, "2\n", read(t, e.local, "b"))
			})
		}
		t.Run(kind+"/printed by the sandbox", func(t *testing.T) {
			e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return inDir{sandbox.Exec(), dir} })
			seed(t, e.local, kind, map[string]string{"a": "1\n"})
			state := t.TempDir()
			round, err := workspace.Prepare(ctx(t), e.spec, workspace.WithStateDir(state))
			require.NoError(t, err)
			spec := e.spec
			spec.Runner = sandbox.FromExec(func(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
				_, _ = io.WriteString(stdout, sandboxtest.EngineError+"\n") // ahead of the command's own stream
				c := exec.CommandContext(ctx, argv[0], argv[1:]...)
				c.Dir = filepath.Dir(e.remote)
				c.Stdin, c.Stdout, c.Stderr = stdin, stdout, stderr
				return c.Run()
			})
			re, err := workspace.Reopen(ctx(t), spec, round.ID(), workspace.WithStateDir(state))
			require.NoError(t, err)
			_, err = re.Restore(ctx(t))
			t.Log(err)
			require.Error(t, err)
			assert.ErrorIs(t, err, workspace.ErrHostile)
			assert.NotErrorIs(t, err, sandbox.ErrTransport)
			assert.False(t, sandbox.Retryable(err))
		})
	}
}
