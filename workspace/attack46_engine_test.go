package workspace_test

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

// engineError46 is what docker prints on the exec client's stdout, with
// exit 126, when it cannot start the exec (a container stopped mid-exec
// and started again).
const engineError46 = "OCI runtime exec failed: exec failed: unable to start container process: cannot exec in a stopped state: unknown"

// deadEngines46 returns exec clients that fail before they reach the
// sandbox as docker does, printing engineError46 on stdout: a script run
// as sandbox.Exec's argv[0] that exits 126, and an SDK's exec call behind
// FromExec that fails.
func deadEngines46(t *testing.T) map[string]sandbox.Runner {
	t.Helper()
	client := filepath.Join(t.TempDir(), "docker")
	require.NoError(t, os.WriteFile(client, []byte("#!/bin/sh\necho '"+engineError46+"'\nexit 126\n"), 0o755))
	return map[string]sandbox.Runner{
		"Exec": sandbox.Exec(client, "exec", "-i", "agent-7"),
		"FromExec": sandbox.FromExec(func(_ context.Context, _ []string, _ io.Reader, stdout, _ io.Writer) error {
			_, _ = io.WriteString(stdout, engineError46+"\n")
			return errors.New("exec failed: exit code 126")
		}),
	}
}

// assertEngineTransport46 checks err is what a failed engine must give:
// a retryable ErrTransport only (never ErrHostile), saying the engine's
// words.
func assertEngineTransport46(t *testing.T, err error) {
	t.Helper()
	require.Error(t, err)
	assert.ErrorIs(t, err, sandbox.ErrTransport)
	assert.NotErrorIs(t, err, workspace.ErrHostile, "the engine's own error judged as hostile sandbox output")
	assert.NotErrorIs(t, err, sandbox.ErrProtocol)
	assert.True(t, sandbox.Retryable(err), "a failed exec is retryable: %v", err)
	assert.Contains(t, err.Error(), "cannot exec in a stopped state", "the error hides what the engine said")
}

// TestEngineErrorOnStdoutIsTransport: a round prepared through a working
// engine, then restored (and prepared again) through one that fails before
// it reaches the sandbox and prints its error where the restore stream
// should be: a retryable transport failure naming the engine's words, the
// local tree untouched, and the same Restore succeeds once the engine
// works again. The same words sent by a sandbox whose command ended
// normally are hostile.
func TestEngineErrorOnStdoutIsTransport(t *testing.T) {
	for _, kind := range []string{"plain", "git"} {
		for name, dead := range deadEngines46(t) {
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
				assertEngineTransport46(t, err)
				assert.False(t, exists(e.local, "b"), "a restore that failed wrote a file")

				_, err = workspace.Prepare(ctx(t), spec, workspace.WithStateDir(t.TempDir()))
				t.Log(err)
				assertEngineTransport46(t, err)

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
				_, _ = io.WriteString(stdout, engineError46+"\n") // ahead of the command's own stream
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
