package sandbox_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
)

// TestControlRefusedCommandIsNoTransportFailure: a Command a Runner refuses
// before running anything (a bad env, Exec's TTY flag) comes back from
// Control as that refusal: ErrBadCommand with the Runner's message, never
// ErrTransport, not Retryable — sending it again would fail the same way.
func TestControlRefusedCommandIsNoTransportFailure(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		r    sandbox.Runner
		cmd  sandbox.Command
		want string
	}{
		{"Local, a name that is no shell name", sandbox.Local(dir), sandbox.Command{Script: "true", Env: map[string]string{"A-B": "x"}},
			`a control command: sandbox: environment variable name "A-B" is not a shell name ([A-Za-z_][A-Za-z0-9_]*); rename it; nothing was run`},
		{"Exec, a NUL in a value", sandbox.Exec("sh", "-c", `exec sh -c "$1"`, "sh"), sandbox.Command{Script: "true", Env: map[string]string{"A": "x\x00y"}},
			`a control command: sandbox: environment variable A: its value holds a NUL byte, which no process environment can carry; nothing was run`},
		{"Exec, a TTY flag", sandbox.Exec("docker", "exec", "-it", "agent-7"), sandbox.Command{Script: "true"},
			`a control command: sandbox: Exec: the argument "-it" asks docker for a TTY, which mixes stdout and stderr and mangles binary streams; drop it (use -i alone); nothing was run`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := sandbox.Control(t.Context(), tc.r, tc.cmd)
			require.ErrorIs(t, err, sandbox.ErrBadCommand)
			assert.False(t, errors.Is(err, sandbox.ErrTransport), "refused before anything ran: no transport failure")
			assert.False(t, sandbox.Retryable(err))
			assert.Equal(t, tc.want, err.Error())
		})
	}
}
