package sandbox_test

import (
	"context"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/sandboxtest"
	"github.com/airlockdev/airlock/sandbox"
)

// sandboxtest.EngineError is what docker prints on the exec client's stdout, with
// exit 126, when it cannot start the exec: here for a container stopped
// mid-exec and started again (`docker exec -w /gone` prints another).
// TestExecEngineErrorOnStdout: the Runner's own error for an engine that
// failed before it reached the sandbox (no completion record) quotes what
// the engine printed on stdout, where the command's output should be.
func TestExecEngineErrorOnStdout(t *testing.T) {
	for name, r := range map[string]sandbox.Runner{"Exec": sandboxtest.DeadEngine(t, sandboxtest.EngineError), "FromExec": sandboxtest.DeadSDK(sandboxtest.EngineError)} {
		t.Run(name, func(t *testing.T) {
			var out strings.Builder
			err := r.Run(t.Context(), sandbox.Command{Script: "echo hi", Stdout: &out})
			t.Log(err)
			sandboxtest.AssertEngineTransport(t, err)
			assert.Contains(t, err.Error(), "completion record")
			assert.Equal(t, sandboxtest.EngineError+"\n", out.String(), "the output is passed on as it came")
			err = sandbox.Control(t.Context(), r, sandbox.Command{Script: "echo hi"})
			sandboxtest.AssertEngineTransport(t, err)
		})
	}
	t.Run("long output is not quoted", func(t *testing.T) {
		r := sandbox.Exec("sh", "-c", `head -c 4096 /dev/zero | tr '\0' x; exit 126`, "docker")
		err := r.Run(t.Context(), sandbox.Command{Script: "true"})
		require.ErrorIs(t, err, sandbox.ErrTransport)
		assert.NotContains(t, err.Error(), "xxxx", "a command's output is no engine message")
	})
}

// TestStartEngineErrorOnStdout: a Process started through a failed engine
// finds the engine's error where its header should be. That is the
// transport's failure, not a hostile header; but a sandbox that ran the
// wrapper and ended normally, having printed the same words there, broke
// the protocol: only the run's end tells the two apart.
func TestStartEngineErrorOnStdout(t *testing.T) {
	for name, r := range map[string]sandbox.Runner{"Exec": sandboxtest.DeadEngine(t, sandboxtest.EngineError), "FromExec": sandboxtest.DeadSDK(sandboxtest.EngineError)} {
		t.Run(name, func(t *testing.T) {
			p, err := sandbox.Start(t.Context(), r, sandbox.Command{Script: "sleep 60"})
			if p != nil {
				p.Stop(context.Background())
			}
			t.Log(err)
			sandboxtest.AssertEngineTransport(t, err)
		})
	}
	t.Run("printed by the sandbox", func(t *testing.T) {
		r := sandbox.FromExec(func(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
			_, _ = io.WriteString(stdout, sandboxtest.EngineError+"\n") // ahead of the wrapper's header
			c := exec.CommandContext(ctx, argv[0], argv[1:]...)
			c.Stdin, c.Stdout, c.Stderr = stdin, stdout, stderr
			return c.Run()
		})
		p, err := sandbox.Start(t.Context(), r, sandbox.Command{Script: "exit 0"})
		if p != nil {
			p.Stop(context.Background())
		}
		t.Log(err)
		assert.ErrorIs(t, err, sandbox.ErrProtocol)
		assert.NotErrorIs(t, err, sandbox.ErrTransport)
	})
}

// TestExecClientNotStarted: an exec client that is not installed, not
// found, or not executable ran nothing, and trying again cannot help:
// ErrBadCommand (wrapping the cause), naming the client and what to do,
// never ErrTransport nor retryable, also through Control.
func TestExecClientNotStarted(t *testing.T) {
	dir := t.TempDir()
	noExec := filepath.Join(dir, "kubectl")
	require.NoError(t, os.WriteFile(noExec, []byte("#!/bin/sh\nexit 0\n"), 0o644))
	for _, c := range []struct {
		name   string
		client string
		cause  error
	}{
		{"not on PATH", "docker-not-installed-46", exec.ErrNotFound},
		{"missing path", filepath.Join(dir, "nope", "podman"), fs.ErrNotExist},
		{"not executable", noExec, fs.ErrPermission},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := sandbox.Exec(c.client, "exec", "-i", "c")
			for _, run := range []func() error{
				func() error { return r.Run(t.Context(), sandbox.Command{Script: "true"}) },
				func() error { return sandbox.Control(t.Context(), r, sandbox.Command{Script: "true"}) },
			} {
				err := run()
				t.Log(err)
				require.Error(t, err)
				assert.ErrorIs(t, err, sandbox.ErrBadCommand)
				assert.ErrorIs(t, err, c.cause)
				assert.NotErrorIs(t, err, sandbox.ErrTransport)
				assert.False(t, sandbox.Retryable(err), "a client that is not there is not retryable")
				assert.Contains(t, err.Error(), c.client)
				assert.Contains(t, err.Error(), "could not be started")
				assert.Contains(t, err.Error(), "nothing ran")
				assert.Contains(t, err.Error(), "install it")
				assert.NotContains(t, err.Error(), "may or may not have run")
			}
		})
	}
}

// TestExecClientFoundOnEnvironPATH: a bare client name is looked up in the
// PATH of ExecOptions.Environ, which the client then runs with, as the
// error for a missing client says; this process's PATH plays no part (an
// outside tester found a client that only the Environ PATH held refused,
// and one it did not hold run).
func TestExecClientFoundOnEnvironPATH(t *testing.T) {
	dir := t.TempDir()
	client := filepath.Join(dir, "fakeengine-49")
	// The fake engine drops its own arguments up to "--" and runs the rest.
	require.NoError(t, os.WriteFile(client, []byte("#!/bin/sh\nwhile [ \"$1\" != -- ]; do shift; done; shift; exec \"$@\"\n"), 0o755))
	sh, err := exec.LookPath("sh")
	require.NoError(t, err)

	r := sandbox.ExecWith(sandbox.ExecOptions{Environ: []string{"PATH=" + dir + ":" + filepath.Dir(sh)}}, "fakeengine-49", "exec", "--")
	var out strings.Builder
	require.NoError(t, r.Run(t.Context(), sandbox.Command{Script: "echo ran", Stdout: &out}))
	assert.Equal(t, "ran\n", out.String())

	// A client on this process's PATH but not on Environ's is not found.
	r = sandbox.ExecWith(sandbox.ExecOptions{Environ: []string{"PATH=" + dir}}, "sh", "-c", `exec "$@"`, "sh")
	err = r.Run(t.Context(), sandbox.Command{Script: "true"})
	require.ErrorIs(t, err, sandbox.ErrBadCommand)
	assert.ErrorIs(t, err, exec.ErrNotFound)
	assert.Contains(t, err.Error(), `the exec client "sh" could not be started`)
	assert.Contains(t, err.Error(), "looked up in the PATH of ExecOptions.Environ")
	assert.False(t, sandbox.Retryable(err))

	// An Environ without PATH: this process's PATH finds the client.
	out.Reset()
	r = sandbox.ExecWith(sandbox.ExecOptions{Environ: []string{"LANG=C"}}, "sh", "-c", `exec "$@"`, "sh")
	require.NoError(t, r.Run(t.Context(), sandbox.Command{Script: "echo ran", Stdout: &out}))
	assert.Equal(t, "ran\n", out.String())

	// A relative directory of that PATH is passed over.
	rel, err := filepath.Rel(mustGetwd(t), dir)
	require.NoError(t, err)
	r = sandbox.ExecWith(sandbox.ExecOptions{Environ: []string{"PATH=" + rel}}, "fakeengine-49", "exec", "--")
	assert.ErrorIs(t, r.Run(t.Context(), sandbox.Command{Script: "true"}), exec.ErrNotFound)
}

func mustGetwd(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	require.NoError(t, err)
	return wd
}
