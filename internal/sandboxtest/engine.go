package sandboxtest

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
)

// EngineError is what docker prints on its exec client's stdout, where the
// command's output should be, when it cannot reach the container (and
// exits 126): an exec into a container stopped and started again.
const EngineError = "OCI runtime exec failed: exec failed: unable to start container process: cannot exec in a stopped state: unknown"

// DeadEngine returns an exec engine that fails before it reaches the
// sandbox as docker does: sandbox.Exec of a client script that prints msg
// on stdout and exits 126.
func DeadEngine(t testing.TB, msg string) sandbox.Runner {
	t.Helper()
	client := filepath.Join(t.TempDir(), "docker")
	require.NoError(t, os.WriteFile(client, []byte("#!/bin/sh\necho '"+msg+"'\nexit 126\n"), 0o755))
	return sandbox.Exec(client, "exec", "-i", "agent-7")
}

// DeadSDK is the same engine behind sandbox.FromExec: an SDK's exec call
// that writes msg on stdout and fails.
func DeadSDK(msg string) sandbox.Runner {
	return sandbox.FromExec(func(_ context.Context, _ []string, _ io.Reader, stdout, _ io.Writer) error {
		if _, err := io.WriteString(stdout, msg+"\n"); err != nil {
			return err
		}
		return errors.New("exec failed: exit code 126")
	})
}

// AssertEngineTransport checks that err is what a failed engine
// (EngineError) must give: a retryable sandbox.ErrTransport, none of
// sandbox.ErrProtocol and notIs (a package's own verdict on hostile
// output), saying the engine's words.
func AssertEngineTransport(t testing.TB, err error, notIs ...error) {
	t.Helper()
	require.Error(t, err)
	assert.ErrorIs(t, err, sandbox.ErrTransport)
	for _, s := range append([]error{sandbox.ErrProtocol}, notIs...) {
		assert.NotErrorIs(t, err, s, "the engine's own error judged as the sandbox's output")
	}
	assert.True(t, sandbox.Retryable(err), "a failed exec is retryable: %v", err)
	assert.Contains(t, err.Error(), "cannot exec in a stopped state", "the error hides what the engine said")
}
