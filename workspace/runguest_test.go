package workspace

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
)

// TestRunGuestStdoutFailure: a data command whose Command.Stdout fails on
// the host (here the host's own limit) returns that failure, through every
// Runner of the sandbox package: not sandbox.ErrTransport, not retryable.
func TestRunGuestStdoutFailure(t *testing.T) {
	for name, r := range map[string]sandbox.Runner{"Local": sandbox.Local(t.TempDir()), "Exec": sandbox.Exec()} {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			lw := &limitWriter{w: &out, n: 10}
			err := runGuest(t.Context(), r, "streaming", sandbox.Command{Script: `head -c 100000 /dev/zero`, Stdout: lw}, nil)
			require.Error(t, err)
			assert.True(t, errors.Is(err, errLimit), "%v", err)
			assert.NotErrorIs(t, err, sandbox.ErrTransport)
			assert.False(t, sandbox.Retryable(err), "%v", err)
			assert.Contains(t, err.Error(), "workspace: streaming: ")
		})
	}
}
