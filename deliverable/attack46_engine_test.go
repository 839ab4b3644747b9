package deliverable_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable"
	"github.com/airlockdev/airlock/internal/sandboxtest"
	"github.com/airlockdev/airlock/sandbox"
)

// sandboxtest.EngineError is what docker prints on the exec client's stdout, with
// exit 126, when it cannot start the exec (a container stopped mid-exec
// and started again).
// TestRemoteWorkspaceEngineErrorIsTransport: Open through an exec engine
// that fails before it reaches the sandbox, printing its error where the
// file's content should be (docker, on stdout) or where its first report
// should be (on stderr), fails at once with a retryable transport failure
// naming the engine's words, not ErrProtocol after the wait for a report.
// The same words from a sandbox whose command ended normally are its
// broken protocol.
func TestRemoteWorkspaceEngineErrorIsTransport(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "r.md"), []byte("report body\n"), 0o644))
	f, err := deliverable.RemoteWorkspace(sandbox.Exec(), dir).Open(t.Context(), "r.md")
	require.NoError(t, err, "through a working engine")
	b, err := io.ReadAll(f)
	require.NoError(t, err)
	require.Equal(t, "report body\n", string(b))
	require.NoError(t, f.Close())

	bin := t.TempDir()
	client := func(name, body string) string {
		p := filepath.Join(bin, name)
		require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755))
		return p
	}
	for name, r := range map[string]sandbox.Runner{
		"stdout": sandbox.Exec(client("docker", "echo '"+sandboxtest.EngineError+"'; exit 126"), "exec", "-i", "agent-7"),
		"stderr": sandbox.Exec(client("kubectl", "echo 'error: "+sandboxtest.EngineError+"' >&2; exit 1"), "exec", "-i", "pod/agent-7", "--"),
		"FromExec": sandbox.FromExec(func(_ context.Context, _ []string, _ io.Reader, stdout, _ io.Writer) error {
			_, _ = io.WriteString(stdout, sandboxtest.EngineError+"\n")
			return errors.New("exec failed: exit code 126")
		}),
	} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			f, err := deliverable.RemoteWorkspace(r, dir).Open(t.Context(), "r.md")
			if err == nil {
				b, rerr := io.ReadAll(f)
				_ = f.Close()
				t.Fatalf("opened through a dead engine; read %q, %v", b, rerr)
			}
			t.Logf("after %v: %v", time.Since(start).Round(time.Millisecond), err)
			assert.ErrorIs(t, err, sandbox.ErrTransport)
			assert.NotErrorIs(t, err, sandbox.ErrProtocol, "the engine's own error judged as the sandbox's reply")
			assert.True(t, sandbox.Retryable(err))
			assert.Contains(t, err.Error(), "cannot exec in a stopped state", "the error hides what the engine said")
			assert.Less(t, time.Since(start), 3*time.Second, "the engine's end needs no wait for a report")
		})
	}
	t.Run("report garbled by a failed run", func(t *testing.T) {
		// A first report that does not parse, from a run that then failed
		// on the transport by itself: the run's failure, not a verdict.
		r := runFunc46(func(_ context.Context, cmd sandbox.Command) error {
			_, _ = io.WriteString(cmd.Stderr, "airlock-file-v1 file "+sandboxtest.EngineError+"\n")
			return fmt.Errorf("%w: ssh: connection reset by peer", sandbox.ErrTransport)
		})
		_, err := deliverable.RemoteWorkspace(r, dir).Open(t.Context(), "r.md")
		t.Log(err)
		assert.ErrorIs(t, err, sandbox.ErrTransport)
		assert.NotErrorIs(t, err, sandbox.ErrProtocol)
		assert.True(t, sandbox.Retryable(err))
	})
	t.Run("printed by the sandbox", func(t *testing.T) {
		r := sandbox.FromExec(func(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
			_, _ = io.WriteString(stdout, sandboxtest.EngineError+"\n") // ahead of the command's own output
			c := exec.CommandContext(ctx, argv[0], argv[1:]...)
			c.Stdin, c.Stdout, c.Stderr = stdin, stdout, stderr
			return c.Run()
		})
		f, err := deliverable.RemoteWorkspace(r, dir).Open(t.Context(), "r.md")
		if err == nil {
			_, err = io.ReadAll(f)
			_ = f.Close()
		}
		t.Log(err)
		require.Error(t, err)
		assert.NotErrorIs(t, err, sandbox.ErrTransport)
		assert.False(t, sandbox.Retryable(err), "a sandbox that sent more than it announced")
	})
}

// runFunc46 is a Runner made of a function.
type runFunc46 func(ctx context.Context, cmd sandbox.Command) error

func (f runFunc46) Run(ctx context.Context, cmd sandbox.Command) error { return f(ctx, cmd) }
