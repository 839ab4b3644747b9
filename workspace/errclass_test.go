package workspace_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

// spoolFailRunner is a Runner that, for the commands match selects, fails
// on the host before anything runs, as sandbox.Local does when its
// temporary file for a large script cannot be written (a full disk); the
// other commands run through real.
type spoolFailRunner struct {
	real  sandbox.Runner
	mu    sync.Mutex
	match func(sandbox.Command) bool // nil: none
}

func (r *spoolFailRunner) set(match func(sandbox.Command) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.match = match
}

// errSpool is the error spoolFailRunner returns: the shape of Local's.
var errSpool = &fs.PathError{Op: "write", Path: "/host/tmp/airlock-script-1.sh", Err: syscall.ENOSPC}

func (r *spoolFailRunner) Run(ctx context.Context, cmd sandbox.Command) error {
	r.mu.Lock()
	match := r.match
	r.mu.Unlock()
	if match != nil && match(cmd) {
		return fmt.Errorf("sandbox: writing a %d-byte script to %s: %w; nothing was run", len(cmd.Script), errSpool.Path, errSpool)
	}
	return r.real.Run(ctx, cmd)
}

// TestHostFailureIsNotTransport: a Runner's failure on the host itself (a
// full disk under its temporary file) in the probe, the ship or the
// restore is that failure, with its path: not sandbox.ErrTransport, not
// retryable, not hostile.
func TestHostFailureIsNotTransport(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
			sr := &spoolFailRunner{real: e.spec.Runner}
			e.spec.Runner = sr
			check := func(what string, err error) {
				t.Helper()
				require.Error(t, err, what)
				assert.ErrorIs(t, err, syscall.ENOSPC, what)
				assert.NotErrorIs(t, err, sandbox.ErrTransport, what)
				assert.NotErrorIs(t, err, workspace.ErrHostile, what)
				assert.False(t, sandbox.Retryable(err), "%s: %v", what, err)
				assert.Contains(t, err.Error(), errSpool.Path, what)
			}
			if kind == "git" {
				initRepo(t, e.local, map[string]string{"a": "1\n"})
			} else {
				write(t, e.local, "a", "1\n")
			}
			for name, m := range map[string]func(sandbox.Command) bool{"probe": isProbe, "ship": isShip} {
				sr.set(m)
				_, err := workspace.Prepare(ctx(t), e.spec)
				check("prepare: "+name, err)
				require.NoError(t, os.RemoveAll(e.remote)) // start the next from a fresh sandbox
			}
			sr.set(nil)
			r, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			write(t, e.remote, "b", "from the sandbox\n")
			sr.set(isRestore)
			_, err = r.Restore(ctx(t))
			check("restore", err)
			sr.set(nil)
			_, err = r.Restore(ctx(t))
			require.NoError(t, err, "the round restores once the host can write")
			assert.Equal(t, "from the sandbox\n", read(t, e.local, "b"))
		})
	}
}

// TestRefusedCommandIsNotTransport: a Runner that refuses every command
// before running it (a TTY flag in an Exec line) fails Prepare with that
// refusal, sandbox.ErrBadCommand, not a retryable transport failure.
func TestRefusedCommandIsNotTransport(t *testing.T) {
	e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Exec("docker", "exec", "-it", "agent-7") })
	write(t, e.local, "a", "1\n")
	_, err := workspace.Prepare(ctx(t), e.spec)
	require.ErrorIs(t, err, sandbox.ErrBadCommand)
	assert.NotErrorIs(t, err, sandbox.ErrTransport)
	assert.False(t, sandbox.Retryable(err))
	assert.Contains(t, err.Error(), `the argument "-it" asks docker for a TTY`)
}
