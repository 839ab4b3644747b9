package remote_test

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/sshdtest"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage/remote"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
)

// failingWriter fails every write with err.
type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }

// TestRunWriterFaultIsTheHosts: a Command.Stdout or Stderr of the caller's
// that fails (a full disk on the host) is the host's failure, not the
// transport's: Run returns it with the errno it wraps, not ErrTransport,
// and Retryable follows the errno (a full disk is not retryable), over
// remotetest and a real sshd; the command does not hold Run.
func TestRunWriterFaultIsTheHosts(t *testing.T) {
	hosts := map[string]func(t *testing.T) *remote.Host{
		"remotetest": func(t *testing.T) *remote.Host { return remotetest.NewServer(t).Dial(t) },
		"sshd": func(t *testing.T) *remote.Host {
			srv := sshdtest.Start(t)
			h, err := remote.Dial(t.Context(), srv.Addr(), srv.Config())
			require.NoError(t, err)
			t.Cleanup(func() { assert.NoError(t, h.Close()) })
			return h
		},
	}
	full := &os.PathError{Op: "write", Path: "/host/out", Err: syscall.ENOSPC}
	for name, dial := range hosts {
		t.Run(name, func(t *testing.T) {
			h := dial(t)
			for _, tc := range []struct {
				name string
				cmd  sandbox.Command
			}{
				{"stdout", sandbox.Command{Script: "head -c 1000000 /dev/zero", Stdout: failingWriter{full}}},
				{"stderr", sandbox.Command{Script: "head -c 1000000 /dev/zero >&2", Stderr: failingWriter{full}}},
			} {
				t.Run(tc.name, func(t *testing.T) {
					start := time.Now()
					err := h.Run(t.Context(), tc.cmd)
					require.Error(t, err)
					assert.ErrorIs(t, err, syscall.ENOSPC)
					assert.False(t, errors.Is(err, sandbox.ErrTransport), "%v", err)
					assert.False(t, sandbox.Retryable(err))
					assert.True(t, strings.Contains(err.Error(), "/host/out"), "%v", err)
					assert.Less(t, time.Since(start), 20*time.Second)
				})
			}
		})
	}
}
