package deliverable_test

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable"
	"github.com/airlockdev/airlock/sandbox"
)

// spoolPath is the host file the runners below fail to write.
const spoolPath = "/host/spool/airlock-1"

// errSpoolFull is the host's own failure: a full disk under spoolPath.
var errSpoolFull = &fs.PathError{Op: "write", Path: spoolPath, Err: syscall.ENOSPC}

// spoolBeforeRunner fails on the host before anything runs, as sandbox.Local
// does when its temporary file for a large script cannot be written.
type spoolBeforeRunner struct{}

func (spoolBeforeRunner) Run(_ context.Context, cmd sandbox.Command) error {
	return fmt.Errorf("sandbox: writing a %d-byte script to %s: %w; nothing was run", len(cmd.Script), spoolPath, errSpoolFull)
}

// teeRunner runs the command through a real Runner and copies its stdout to
// a host-side spool that fills up after room bytes: the Runner's own
// output write fails on the host, and it returns that failure.
type teeRunner struct {
	next sandbox.Runner
	room int
}

func (r teeRunner) Run(ctx context.Context, cmd sandbox.Command) error {
	cmd.Stdout = &spoolWriter{w: cmd.Stdout, room: r.room}
	return r.next.Run(ctx, cmd)
}

// spoolWriter passes writes on while room lasts, then fails with
// errSpoolFull.
type spoolWriter struct {
	w    io.Writer
	room int
}

func (s *spoolWriter) Write(p []byte) (int, error) {
	if len(p) > s.room {
		n, err := s.w.Write(p[:s.room])
		s.room -= n
		if err != nil {
			return n, err
		}
		return n, errSpoolFull
	}
	s.room -= len(p)
	return s.w.Write(p)
}

// TestRemoteHostFailureIsNotTransport: a Runner that fails on the host
// itself (a full disk), before the command runs or while its output
// streams, fails Register with that failure and its path, as a HostError:
// not sandbox.ErrTransport, not retryable, not the sandbox's broken protocol
// nor a changed file.
func TestRemoteHostFailureIsNotTransport(t *testing.T) {
	data := []byte(strings.Repeat("a,b\n1,2\n", 4096))
	for name, newRunner := range map[string]func(ws string) sandbox.Runner{
		"before it runs":   func(string) sandbox.Runner { return spoolBeforeRunner{} },
		"while it streams": func(ws string) sandbox.Runner { return teeRunner{next: sandbox.Local(ws), room: 8 << 10} },
		"while it streams, exec": func(ws string) sandbox.Runner {
			return teeRunner{next: sandbox.Exec(), room: 8 << 10}
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			writeFile(t, f.ws, "r.csv", data)
			err := registerWithin(t, f, deliverable.RemoteWorkspace(newRunner(f.ws), f.ws), requestFor("r.csv", "k", data), 25*time.Second)
			require.Error(t, err)
			requireHostError(t, err)
			assert.ErrorIs(t, err, syscall.ENOSPC)
			assert.NotErrorIs(t, err, sandbox.ErrTransport)
			assert.NotErrorIs(t, err, sandbox.ErrProtocol)
			assert.NotErrorIs(t, err, deliverable.ErrFileChanged)
			assert.False(t, sandbox.Retryable(err), "%v", err)
			assert.Contains(t, err.Error(), spoolPath)
		})
	}
}
