package deliverable_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable"
	"github.com/airlockdev/airlock/sandbox"
)

// hostileRunner plays a sandbox that answers the file command however it
// likes: header on stderr, then body on stdout, then trailer on stderr, then
// exit. It records how many body bytes the host accepted and whether the
// host cancelled the command.
type hostileRunner struct {
	header  string
	body    func(w io.Writer) error // nil: writes nothing
	trailer string
	exit    error
	ignore  chan struct{} // when set, Run ignores its context and blocks until it is closed

	accepted  atomic.Int64
	cancelled atomic.Bool
	scripts   atomic.Int32
}

var _ sandbox.Runner = (*hostileRunner)(nil)

type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}

func (h *hostileRunner) Run(ctx context.Context, cmd sandbox.Command) error {
	h.scripts.Add(1)
	defer func() {
		select {
		case <-ctx.Done():
			h.cancelled.Store(true)
		default:
		}
	}()
	if _, err := io.WriteString(cmd.Stderr, h.header); err != nil {
		return err
	}
	if h.body != nil {
		if err := h.body(countingWriter{cmd.Stdout, &h.accepted}); err != nil {
			select {
			case <-ctx.Done():
				return fmt.Errorf("stopped: %w", ctx.Err())
			case <-time.After(5 * time.Second):
				return err // the host closed the output but never cancelled
			}
		}
	}
	if _, err := io.WriteString(cmd.Stderr, h.trailer); err != nil {
		return err
	}
	if h.ignore != nil {
		<-h.ignore
	}
	return h.exit
}

// fixed writes data.
func fixed(data string) func(io.Writer) error {
	return func(w io.Writer) error { _, err := io.WriteString(w, data); return err }
}

// endless writes until the host stops reading.
func endless(w io.Writer) error {
	chunk := []byte(strings.Repeat("x", 4096))
	for {
		if _, err := w.Write(chunk); err != nil {
			return err
		}
	}
}

func TestRemoteWorkspaceHostileSandbox(t *testing.T) {
	const content = "hello world" // what the agent declares
	stat := func(links, size int) string { return fmt.Sprintf("%d %d 1234 1700000000.5 1700000000.5", links, size) }
	head := func(s string) string { return "airlock-file-v1 file " + s + "\n" }
	tail := func(s string) string { return "airlock-file-end-v1 " + s + "\n" }
	good := stat(1, len(content))

	const (
		request  = "request" // a *RequestError
		hostSide = "host"    // a *HostError, never a *RequestError
	)
	cases := []struct {
		name     string
		runner   *hostileRunner
		want     error
		class    string
		maxBytes int64 // most body bytes the host may accept
	}{
		{"honest (fails even without a check)", &hostileRunner{header: head(good), body: fixed(content), trailer: tail(good)}, nil, "", int64(len(content))},
		{"right size, other bytes: hashed on the host", &hostileRunner{header: head(good), body: fixed("HELLO WORLD"), trailer: tail(good)}, deliverable.ErrHashMismatch, request, int64(len(content))},
		{"announces the size, sends less", &hostileRunner{header: head(good), body: fixed("hello"), trailer: tail(good)}, deliverable.ErrFileChanged, request, int64(len(content))},
		{"sends more than it announced", &hostileRunner{header: head(good), body: fixed(content + strings.Repeat("!", 1<<20)), trailer: tail(good)}, deliverable.ErrFileChanged, request, 64 << 10},
		{"sends without end", &hostileRunner{header: head(good), body: endless}, deliverable.ErrFileChanged, request, 64 << 10},
		{"announces another size", &hostileRunner{header: head(stat(1, 20)), body: fixed(strings.Repeat("y", 20)), trailer: tail(stat(1, 20))}, deliverable.ErrSizeMismatch, request, 0},
		{"announces a huge size", &hostileRunner{header: head(stat(1, 1<<40)), body: endless}, deliverable.ErrSizeMismatch, request, 0},
		{"announces a negative size", &hostileRunner{header: head("1 -11 1 2 3"), body: fixed(content)}, deliverable.ErrProtocol, hostSide, 0},
		{"announces an overflowing size", &hostileRunner{header: head("1 99999999999999999999 1 2 3"), body: fixed(content)}, deliverable.ErrProtocol, hostSide, 0},
		{"announces two links", &hostileRunner{header: head(stat(2, len(content))), body: fixed(content), trailer: tail(stat(2, len(content)))}, deliverable.ErrHardlinkDenied, request, 0},
		{"garbage header", &hostileRunner{header: "hello\n", body: fixed(content)}, deliverable.ErrProtocol, hostSide, 0},
		{"header with extra fields", &hostileRunner{header: head(good + " 9"), body: fixed(content)}, deliverable.ErrProtocol, hostSide, 0},
		{"header with shell junk", &hostileRunner{header: head("1 11 $(id) 2 3"), body: fixed(content)}, deliverable.ErrProtocol, hostSide, 0},
		{"header without a newline", &hostileRunner{header: "airlock-file-v1 file " + good, body: fixed(content)}, deliverable.ErrProtocol, hostSide, 0},
		{"stderr flood", &hostileRunner{header: strings.Repeat("z", 1<<20), body: fixed(content)}, deliverable.ErrProtocol, hostSide, 0},
		{"no trailer", &hostileRunner{header: head(good), body: fixed(content)}, deliverable.ErrProtocol, hostSide, int64(len(content))},
		{"garbage trailer", &hostileRunner{header: head(good), body: fixed(content), trailer: "bye\n"}, deliverable.ErrProtocol, hostSide, int64(len(content))},
		{"two trailers", &hostileRunner{header: head(good), body: fixed(content), trailer: tail(good) + tail(good)}, deliverable.ErrProtocol, hostSide, int64(len(content))},
		{"trailer reports a change", &hostileRunner{header: head(good), body: fixed(content), trailer: tail("1 11 1234 1700000001.5 1700000001.5")}, deliverable.ErrFileChanged, request, int64(len(content))},
		{"trailer reports the file gone", &hostileRunner{header: head(good), body: fixed(content), trailer: tail("gone")}, deliverable.ErrFileChanged, request, int64(len(content))},
		{"link in a component", &hostileRunner{header: "airlock-file-v1 link 1\n"}, deliverable.ErrSymlinkDenied, request, 0},
		{"link in a component out of range", &hostileRunner{header: "airlock-file-v1 link 7\n"}, deliverable.ErrProtocol, hostSide, 0},
		{"says it is a directory", &hostileRunner{header: "airlock-file-v1 type directory\n"}, deliverable.ErrPathDenied, request, 0},
		{"unknown type", &hostileRunner{header: "airlock-file-v1 type door\n"}, deliverable.ErrProtocol, hostSide, 0},
		{"exits with an error after the body", &hostileRunner{header: head(good), body: fixed(content), trailer: tail(good), exit: &sandbox.ExitError{Status: 1}}, nil, hostSide, int64(len(content))},
		{"says nothing and fails", &hostileRunner{exit: errInjected}, errInjected, hostSide, 0},
		{"says nothing", &hostileRunner{}, deliverable.ErrProtocol, hostSide, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			ws := deliverable.RemoteWorkspace(tc.runner, "/sandbox/ws")
			_, err := f.reg.Register(t.Context(), ws, "t", "r", requestFor("out/r.csv", "k", []byte(content)))
			assert.LessOrEqual(t, tc.runner.accepted.Load(), tc.maxBytes, "body bytes the host accepted")
			assert.Equal(t, int32(1), tc.runner.scripts.Load(), "one command per registration")
			if tc.class == "" {
				require.NoError(t, err)
				assert.Len(t, filesUnder(t, f.fs, f.dir, "blobs"), 1)
				return
			}
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
			}
			if tc.want == deliverable.ErrProtocol {
				require.ErrorIs(t, err, sandbox.ErrProtocol, "deliverable.ErrProtocol is the protocol class")
				assert.NotErrorIs(t, err, sandbox.ErrTransport)
			} else {
				assert.NotErrorIs(t, err, sandbox.ErrProtocol, "only a broken protocol is ErrProtocol")
			}
			var re *deliverable.RequestError
			var he *deliverable.HostError
			switch tc.class {
			case request:
				require.ErrorAs(t, err, &re)
				assert.False(t, errors.As(err, &he))
			case hostSide:
				require.ErrorAs(t, err, &he)
				assert.False(t, errors.As(err, &re), "a sandbox that breaks the protocol is not the agent's request being wrong")
			}
			assert.Empty(t, filesUnder(t, f.fs, f.dir, "blobs"), "nothing stored")
			assert.Empty(t, filesUnder(t, f.fs, f.dir, "runs"), "nothing stored")
		})
	}
}

// TestRemoteWorkspaceCutsOffAndCancels checks that a sandbox sending more
// than it announced has its command cancelled, not only its output ignored.
func TestRemoteWorkspaceCutsOffAndCancels(t *testing.T) {
	const content = "hello world"
	st := fmt.Sprintf("1 %d 1 2 3", len(content))
	h := &hostileRunner{header: "airlock-file-v1 file " + st + "\n", body: endless}
	f := newFixture(t)
	_, err := f.reg.Register(t.Context(), deliverable.RemoteWorkspace(h, "/ws"), "t", "r", requestFor("r.csv", "k", []byte(content)))
	require.ErrorIs(t, err, deliverable.ErrFileChanged)
	require.Eventually(t, h.cancelled.Load, 5*time.Second, 10*time.Millisecond, "the command's context was cancelled")
	assert.LessOrEqual(t, h.accepted.Load(), int64(64<<10))
}

// TestRemoteWorkspaceAbandonsAStuckRunner checks that a Runner ignoring its
// context cannot hold Register: Close gives it a short grace, then returns.
func TestRemoteWorkspaceAbandonsAStuckRunner(t *testing.T) {
	const content = "hello world"
	st := fmt.Sprintf("1 %d 1 2 3", len(content))
	stuck, exited := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(stuck); <-exited }) // no goroutine outlives the test
	h := &hostileRunner{header: "airlock-file-v1 file " + fmt.Sprintf("1 %d 1 2 3", 99) + "\n", trailer: "airlock-file-end-v1 " + st + "\n", ignore: stuck}
	wrapped := runnerFunc(func(ctx context.Context, cmd sandbox.Command) error {
		defer close(exited)
		return h.Run(ctx, cmd)
	})
	f := newFixture(t)
	start := time.Now()
	_, err := f.reg.Register(t.Context(), deliverable.RemoteWorkspace(wrapped, "/ws"), "t", "r", requestFor("r.csv", "k", []byte(content)))
	require.ErrorIs(t, err, deliverable.ErrSizeMismatch)
	assert.Less(t, time.Since(start), 3*time.Second)
}

func TestRemoteWorkspaceContextEndsWhileWaiting(t *testing.T) {
	stuck, exited := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(stuck); <-exited })
	silent := runnerFunc(func(ctx context.Context, cmd sandbox.Command) error {
		defer close(exited)
		<-stuck
		return nil
	})
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err := deliverable.RemoteWorkspace(silent, "/ws").Open(ctx, "r.csv")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

type runnerFunc func(ctx context.Context, cmd sandbox.Command) error

func (f runnerFunc) Run(ctx context.Context, cmd sandbox.Command) error { return f(ctx, cmd) }

// TestRemoteWorkspaceScriptQuotesNames pins that a name is passed as data:
// a name that is shell syntax opens the file of that name and runs nothing.
func TestRemoteWorkspaceScriptQuotesNames(t *testing.T) {
	dir := t.TempDir()
	name := `$(touch pwned)'; touch pwned; '` + "`touch pwned`"
	writeFile(t, dir, name, []byte("x"))
	f, err := deliverable.RemoteWorkspace(sandbox.Local(dir), dir).Open(t.Context(), name)
	require.NoError(t, err)
	got, err := io.ReadAll(f)
	require.NoError(t, errors.Join(err, f.Close()))
	assert.Equal(t, "x", string(got))
	assert.NoFileExists(t, dir+"/pwned")
}
