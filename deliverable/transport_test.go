package deliverable_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage/remote"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
)

// registerWithin registers through ws and fails the test when Register has
// not returned within limit (loose: the expected end is near a 1 s
// control deadline).
func registerWithin(t *testing.T, f *fixture, ws deliverable.Workspace, req deliverable.Request, limit time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := f.reg.Register(t.Context(), ws, "t", "r", req)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		t.Fatalf("Register did not return within %s", limit)
		return nil
	}
}

// requireTransport asserts a host-side transport failure: ErrTransport,
// never the sandbox's broken protocol, a changed file or the agent's
// mistake.
func requireTransport(t *testing.T, err error) {
	t.Helper()
	require.ErrorIs(t, err, sandbox.ErrTransport)
	assert.NotErrorIs(t, err, deliverable.ErrProtocol)
	assert.NotErrorIs(t, err, sandbox.ErrProtocol)
	assert.NotErrorIs(t, err, deliverable.ErrFileChanged)
	requireHostError(t, err)
}

// sleepRunner runs every command as "sleep 60" through a real Runner (which
// honours its context) and has a 1 s control deadline of its own.
type sleepRunner struct{ next sandbox.Runner }

func (sleepRunner) ControlTimeout() time.Duration { return time.Second }

func (s sleepRunner) Run(ctx context.Context, cmd sandbox.Command) error {
	cmd.Script = "sleep 60"
	return s.next.Run(ctx, cmd)
}

// TestRemoteReadHonoursRunnersControlTimeout: the first report of a remote
// read is a control step under the Runner's own control deadline
// (remote.Config.ControlTimeout), not always sandbox.MaxControlTimeout, and
// its expiry is a transport failure.
func TestRemoteReadHonoursRunnersControlTimeout(t *testing.T) {
	data := []byte("a,b\n1,2\n")
	t.Run("ControlTimeouter", func(t *testing.T) {
		f := newFixture(t)
		writeFile(t, f.ws, "r.csv", data)
		start := time.Now()
		err := registerWithin(t, f, deliverable.RemoteWorkspace(sleepRunner{sandbox.Local(f.ws)}, f.ws), requestFor("r.csv", "k", data), 25*time.Second)
		requireTransport(t, err)
		assert.Less(t, time.Since(start), 15*time.Second)
	})
	t.Run("remote.Config.ControlTimeout", func(t *testing.T) {
		srv := remotetest.NewServer(t, remotetest.WithHang("airlock-file-v1"))
		cfg := srv.Config()
		cfg.ControlTimeout = time.Second
		h, err := remote.Dial(t.Context(), srv.Addr(), cfg)
		require.NoError(t, err)
		t.Cleanup(func() { _ = h.Close() })
		f := newFixture(t)
		ws := filepath.Join(srv.Dir(), "ws")
		writeFile(t, ws, "r.csv", data)
		start := time.Now()
		err = registerWithin(t, f, deliverable.RemoteWorkspace(h, ws), requestFor("r.csv", "k", data), 25*time.Second)
		requireTransport(t, err)
		assert.Less(t, time.Since(start), 15*time.Second)
	})
}

// neverReturns runs each command for real and then never returns from Run
// (until the test ends), whatever its context: an exec client that does
// not exit once the remote process has. Its control deadline is 1 s.
type neverReturns struct {
	next    sandbox.Runner
	release chan struct{}
}

func newNeverReturns(t *testing.T, next sandbox.Runner) neverReturns {
	n := neverReturns{next: next, release: make(chan struct{})}
	t.Cleanup(func() { close(n.release) })
	return n
}

func (neverReturns) ControlTimeout() time.Duration { return time.Second }

func (n neverReturns) Run(ctx context.Context, cmd sandbox.Command) error {
	err := n.next.Run(ctx, cmd)
	<-n.release
	return err
}

// neverReturnsReader is neverReturns over a remote.Host, keeping its
// sandbox.FileReader (SFTP) path.
type neverReturnsReader struct {
	neverReturns
	h *remote.Host
}

func (n neverReturnsReader) ReadFile(ctx context.Context, p string, max int64) ([]byte, error) {
	return n.h.ReadFile(ctx, p, max)
}

// TestRemoteRegisterRunnerNeverReturns: once the host has read the whole
// file (or, for a size to recheck, sent its last decision), the wait for
// the command's end is a control step: a Runner that never returns fails
// Register with ErrTransport within the control deadline, and nothing is
// stored.
func TestRemoteRegisterRunnerNeverReturns(t *testing.T) {
	data := []byte("a,b\n1,2\n")
	srv := remotetest.NewServer(t)
	h, err := remote.Dial(t.Context(), srv.Addr(), srv.Config())
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	for _, tc := range []struct {
		name string
		ws   func(t *testing.T, dir string) deliverable.Workspace
		size int64 // the request's byte size
	}{
		{"cat", func(t *testing.T, dir string) deliverable.Workspace {
			return deliverable.RemoteWorkspace(newNeverReturns(t, sandbox.Local(dir)), dir)
		}, int64(len(data))},
		{"FileReader", func(t *testing.T, dir string) deliverable.Workspace {
			return deliverable.RemoteWorkspace(neverReturnsReader{newNeverReturns(t, h), h}, dir)
		}, int64(len(data))},
		{"FileReader, size recheck", func(t *testing.T, dir string) deliverable.Workspace {
			return deliverable.RemoteWorkspace(neverReturnsReader{newNeverReturns(t, h), h}, dir)
		}, int64(len(data)) + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			dir := filepath.Join(srv.Dir(), strings.ReplaceAll(tc.name, " ", "-"))
			writeFile(t, dir, "r.csv", data)
			req := requestFor("r.csv", "k", data)
			req.ByteSize = tc.size
			start := time.Now()
			err := registerWithin(t, f, tc.ws(t, dir), req, 25*time.Second)
			requireTransport(t, err)
			assert.Less(t, time.Since(start), 15*time.Second)
			assert.Empty(t, filesUnder(t, f.fs, f.dir, "blobs"))
		})
	}
}

// cutRunner runs the command with its stdout cut after n bytes (n < 0:
// not cut), then fails as a dropped connection does: a plain error, which
// the Runner contract makes a transport failure.
type cutRunner struct {
	next sandbox.Runner
	n    int
}

type cutWriter struct {
	w    io.Writer
	left int
}

func (c *cutWriter) Write(p []byte) (int, error) {
	k := min(len(p), c.left)
	if k > 0 {
		if _, err := c.w.Write(p[:k]); err != nil {
			return 0, err
		}
		c.left -= k
	}
	return len(p), nil
}

func (c cutRunner) Run(ctx context.Context, cmd sandbox.Command) error {
	if c.n >= 0 {
		cmd.Stdout = &cutWriter{w: cmd.Stdout, left: c.n}
	}
	_ = c.next.Run(ctx, cmd)
	return errors.New("read tcp 10.0.0.1:22: connection reset by peer")
}

// TestRemoteRegisterCutIsTransport drops the connection before, inside and
// after the content of a remote read: always a transport failure, never
// the sandbox's broken protocol or a changed file.
func TestRemoteRegisterCutIsTransport(t *testing.T) {
	data := []byte(strings.Repeat("a,b\n1,2\n", 100))
	for _, n := range []int{0, 1, len(data) / 2, len(data) - 1, len(data), -1} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			f := newFixture(t)
			writeFile(t, f.ws, "r.csv", data)
			_, err := f.reg.Register(t.Context(), deliverable.RemoteWorkspace(cutRunner{sandbox.Local(f.ws), n}, f.ws), "t", "r", requestFor("r.csv", "k", data))
			requireTransport(t, err)
			assert.Empty(t, filesUnder(t, f.fs, f.dir, "blobs"))
		})
	}
}
