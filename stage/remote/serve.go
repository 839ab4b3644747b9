package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockdev/airlock/sandbox"
)

// Limits of what ServeInSandbox lets the sandbox send. They bound the
// host's memory whatever the sandbox does: at most MaxForwardConns
// connections are served at once (each connection beyond is accepted and
// closed at once, so the SSH connection never stalls behind a listener that
// stopped accepting), a request's header is at most MaxForwardHeaderBytes
// and its body at most MaxForwardBodyBytes (more is cut off with 413 by the
// time the handler reads it), a request's header must arrive within
// ForwardHeaderTimeout, a connection idle between requests is closed
// after ForwardIdleTimeout, and one whose reader stops reading is closed
// once a single write of the response has waited ForwardWriteTimeout (SSH
// channels have no deadlines of their own; the forward gives them read
// deadlines, reading at most 32 KiB ahead, and write deadlines). A
// connection is closed after its MaxForwardConnRequests-th response (sent
// with "Connection: close"; clients reconnect), so that one that pipelines
// requests without reading the answers frees its slot too.
// A sandbox that keeps every slot busy locks itself out of the forward,
// and no more, until its connections time out.
const (
	MaxForwardConns        = 16
	MaxForwardHeaderBytes  = 16 << 10
	MaxForwardBodyBytes    = 4 << 20
	ForwardHeaderTimeout   = 10 * time.Second
	ForwardIdleTimeout     = 60 * time.Second
	ForwardWriteTimeout    = 30 * time.Second
	MaxForwardConnRequests = 1000
)

// The timeouts ServeInSandbox uses; tests shorten them.
var (
	forwardHeaderTimeout = ForwardHeaderTimeout
	forwardIdleTimeout   = ForwardIdleTimeout
	forwardWriteTimeout  = ForwardWriteTimeout
)

// ErrForward: the SSH server refused to forward the address (OpenSSH's
// AllowTcpForwarding or AllowStreamLocalForwarding is off, the port or
// socket path is taken, or the server does not implement forwarding).
var ErrForward = errors.New("remote: the SSH server refused the forward")

// ServeInSandbox serves handler on an address inside the sandbox, through
// this Host's SSH connection (remote forwarding: tcpip-forward for "tcp",
// streamlocal-forward@openssh.com for "unix"), so that a process in the
// sandbox reaches the host's handler while the sandbox has no route to the
// host. It returns the address the server bound in the sandbox: for
// "tcp" "127.0.0.1:0" the port it chose.
//
// network is "tcp", with address a loopback IP and a port ("127.0.0.1:0",
// "[::1]:8080"; no host name, no wildcard address: the forward must not be
// reachable from the sandbox's network), or "unix", with address an
// absolute socket path (the server creates it; OpenSSH refuses a path that
// exists unless StreamLocalBindUnlink is set).
//
// The handler is served until ctx ends or the Host is closed (closing the
// connection ends every forward); then the forward is cancelled and its
// connections are closed. The sandbox's requests are bounded: see
// MaxForwardConns, MaxForwardHeaderBytes, MaxForwardBodyBytes. The handler
// sees the requests of whatever runs in the sandbox: it does its own
// authorization.
func (h *Host) ServeInSandbox(ctx context.Context, network, address string, handler http.Handler) (net.Addr, error) {
	if handler == nil {
		return nil, errors.New("remote: ServeInSandbox: handler is nil")
	}
	if err := checkForwardAddr(network, address); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("remote: ServeInSandbox %s %s: %w", network, address, err)
	}
	select {
	case <-h.closed:
		return nil, fmt.Errorf("remote: ServeInSandbox %s %s: the Host is closed (%w); dial a new one with remote.Dial", network, address, net.ErrClosed)
	default:
	}
	ln, err := h.listen(ctx, network, address)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{
		Handler: countRequests(http.MaxBytesHandler(handler, MaxForwardBodyBytes)),
		ConnContext: func(ctx context.Context, _ net.Conn) context.Context {
			return context.WithValue(ctx, connRequests{}, new(atomic.Int64))
		},
		ReadHeaderTimeout: forwardHeaderTimeout,
		IdleTimeout:       forwardIdleTimeout,
		MaxHeaderBytes:    MaxForwardHeaderBytes,
		ErrorLog:          slog.NewLogLogger(h.log.Handler(), slog.LevelDebug),
	}
	lim := &limitListener{Listener: ln, sem: make(chan struct{}, MaxForwardConns), writeTimeout: forwardWriteTimeout}
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := srv.Serve(lim)
		h.log.Debug("remote: forward ended", "network", network, "addr", ln.Addr().String(), "err", err)
	}()
	go func() {
		select {
		case <-ctx.Done():
		case <-h.closed:
		case <-done:
		}
		_ = srv.Close() // closes the listener (cancelling the forward) and every connection
	}()
	return ln.Addr(), nil
}

// connRequests keys a connection's request count in its context.
type connRequests struct{}

// countRequests closes a connection after its MaxForwardConnRequests-th
// response.
func countRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n, ok := r.Context().Value(connRequests{}).(*atomic.Int64); ok && n.Add(1) >= MaxForwardConnRequests {
			w.Header().Set("Connection", "close")
		}
		next.ServeHTTP(w, r)
	})
}

// listen asks the server for the forward, under the control deadline: a
// server that never answers the global request does not hang the caller.
func (h *Host) listen(ctx context.Context, network, address string) (net.Listener, error) {
	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		var r result
		if network == "unix" {
			r.ln, r.err = h.c.ListenUnix(address)
		} else {
			r.ln, r.err = h.c.Listen("tcp", address)
		}
		ch <- r
	}()
	t := time.NewTimer(h.controlTimeout)
	defer t.Stop()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("%w: %s %s: %w; %s", ErrForward, network, address, r.err, h.refusalHint(network, address))
		}
		return r.ln, nil
	case <-ctx.Done():
	case <-t.C:
	case <-h.closed:
	}
	// The request is still out: whatever it yields is closed when it comes.
	go func() {
		if r := <-ch; r.ln != nil {
			_ = r.ln.Close()
		}
	}()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("remote: ServeInSandbox %s %s: %w", network, address, err)
	}
	return nil, fmt.Errorf("%w: remote: ServeInSandbox %s %s: the server did not answer the forward request within %v", sandbox.ErrTransport, network, address, h.controlTimeout)
}

// refusalHint says what to do about a refused forward: for a unix socket
// whose directory is missing in the sandbox, or whose path is taken, that
// (looked up over SFTP, within the control deadline); else the general
// remedy.
func (h *Host) refusalHint(network, address string) string {
	general := "allow forwarding on the server (OpenSSH: AllowTcpForwarding, AllowStreamLocalForwarding) or pick a free address"
	if network != "unix" {
		return general
	}
	hint := make(chan string, 1)
	go func() {
		c, err := h.SFTP()
		if err != nil {
			hint <- general
			return
		}
		dir := path.Dir(address)
		if _, err := c.Stat(dir); errors.Is(err, os.ErrNotExist) {
			hint <- fmt.Sprintf("the directory %s does not exist in the sandbox; create it first or pick a socket path in an existing directory", dir)
			return
		}
		if _, err := c.Lstat(address); err == nil {
			hint <- fmt.Sprintf("a file is in the way at %s in the sandbox; remove it or pick a free path", address)
			return
		}
		hint <- general
	}()
	t := time.NewTimer(h.controlTimeout)
	defer t.Stop()
	select {
	case s := <-hint:
		return s
	case <-t.C:
		return general
	}
}

// checkForwardAddr accepts "tcp" with a loopback IP and a port, and "unix"
// with an absolute, clean path.
func checkForwardAddr(network, address string) error {
	switch network {
	case "tcp":
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("remote: ServeInSandbox: tcp address %q is not IP:port (%v); use a loopback address such as \"127.0.0.1:0\"", address, err)
		}
		if !ap.Addr().IsLoopback() {
			return fmt.Errorf("remote: ServeInSandbox: tcp address %q is not a loopback address; use 127.0.0.1 or ::1, so that the forward is not reachable from the sandbox's network", address)
		}
		return nil
	case "unix":
		if !path.IsAbs(address) || path.Clean(address) != address {
			return fmt.Errorf("remote: ServeInSandbox: unix socket path %q is not a clean absolute path; pass one such as \"/tmp/airlock.sock\"", address)
		}
		return nil
	}
	return fmt.Errorf("remote: ServeInSandbox: network %q is not \"tcp\" or \"unix\"", network)
}

// limitListener serves at most cap(sem) connections at once. It never
// stops accepting: a connection beyond the limit is closed as soon as it is
// accepted, so the SSH connection's channel dispatch (which blocks while a
// forward's listener is not accepting) keeps moving.
type limitListener struct {
	net.Listener
	sem          chan struct{}
	writeTimeout time.Duration // forwardWriteTimeout when the forward began
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
			return nil, err
		}
		if err != nil {
			// One forwarded channel failed to open; the forward goes on.
			continue
		}
		select {
		case l.sem <- struct{}{}:
			return newDeadlineConn(c, l.writeTimeout, func() { <-l.sem }), nil
		default:
			_ = c.Close() // over the limit: refused
		}
	}
}

// forwardChunk is the most a deadlineConn reads ahead of its reader.
const forwardChunk = 32 << 10

// deadlineConn gives a forwarded connection (an SSH channel, whose
// SetReadDeadline is not supported) working read deadlines, so that
// http.Server's header and idle timeouts hold: one goroutine reads the
// channel a chunk at a time and waits until Read has handed the chunk out;
// Read waits for a chunk, the deadline, or a change of the deadline. A
// Write that has not completed by the write deadline or within
// writeTimeout, whichever is sooner, closes the connection (the channel
// write cannot be interrupted otherwise) and fails with
// os.ErrDeadlineExceeded.
type deadlineConn struct {
	net.Conn
	chunks  chan chunk
	ack     chan struct{}
	closed  chan struct{}
	once    sync.Once
	release func()

	writeTimeout time.Duration
	timedOut     atomic.Bool // a Write's deadline closed the connection

	mu       sync.Mutex
	deadline time.Time
	wdl      time.Time     // the write deadline
	changed  chan struct{} // closed and replaced when the deadline changes

	pending []byte // the rest of the chunk being handed out; Read's alone
	err     error  // the pump's final error, once its chunks are handed out
}

type chunk struct {
	b   []byte
	err error
}

func newDeadlineConn(c net.Conn, writeTimeout time.Duration, release func()) *deadlineConn {
	d := &deadlineConn{Conn: c, chunks: make(chan chunk), ack: make(chan struct{}), closed: make(chan struct{}),
		release: release, changed: make(chan struct{}), writeTimeout: writeTimeout}
	go d.pump()
	return d
}

func (d *deadlineConn) pump() {
	buf := make([]byte, forwardChunk)
	for {
		n, err := d.Conn.Read(buf)
		select {
		case d.chunks <- chunk{buf[:n], err}:
		case <-d.closed:
			return
		}
		if err != nil {
			return
		}
		select { // buf is Read's until it acknowledges
		case <-d.ack:
		case <-d.closed:
			return
		}
	}
}

func (d *deadlineConn) Read(p []byte) (int, error) {
	if len(d.pending) == 0 && d.err != nil {
		return 0, d.err
	}
	for len(d.pending) == 0 {
		d.mu.Lock()
		dl, changed := d.deadline, d.changed
		d.mu.Unlock()
		var expired <-chan time.Time
		stop := func() bool { return false }
		if !dl.IsZero() {
			wait := time.Until(dl)
			if wait <= 0 {
				return 0, os.ErrDeadlineExceeded
			}
			t := time.NewTimer(wait)
			expired, stop = t.C, t.Stop
		}
		err := d.wait(changed, expired)
		stop()
		if err != nil {
			return 0, err
		}
	}
	n := copy(p, d.pending)
	d.pending = d.pending[n:]
	if len(d.pending) == 0 && d.err == nil {
		select {
		case d.ack <- struct{}{}:
		case <-d.closed:
		}
	}
	return n, nil
}

// wait waits for the pump's next chunk (kept in pending), the deadline,
// a change of the deadline (nil: the caller looks again) or Close.
func (d *deadlineConn) wait(changed <-chan struct{}, expired <-chan time.Time) error {
	for {
		select {
		case c := <-d.chunks:
			d.err = c.err
			if len(c.b) > 0 {
				d.pending = c.b
				return nil
			}
			if c.err != nil {
				return c.err
			}
			select { // an empty read: the pump goes on
			case d.ack <- struct{}{}:
			case <-d.closed:
				return net.ErrClosed
			}
		case <-expired:
			return os.ErrDeadlineExceeded
		case <-changed:
			return nil
		case <-d.closed:
			return net.ErrClosed
		}
	}
}

func (d *deadlineConn) SetReadDeadline(t time.Time) error {
	d.mu.Lock()
	d.deadline = t
	close(d.changed)
	d.changed = make(chan struct{})
	d.mu.Unlock()
	return nil
}

func (d *deadlineConn) SetDeadline(t time.Time) error {
	_ = d.SetWriteDeadline(t)
	return d.SetReadDeadline(t)
}

func (d *deadlineConn) SetWriteDeadline(t time.Time) error {
	d.mu.Lock()
	d.wdl = t
	d.mu.Unlock()
	return nil
}

// Write writes p, closing the connection when the write deadline or
// writeTimeout passes first: a reader that never reads frees its slot.
func (d *deadlineConn) Write(p []byte) (int, error) {
	if d.timedOut.Load() {
		return 0, os.ErrDeadlineExceeded
	}
	d.mu.Lock()
	limit := time.Now().Add(d.writeTimeout)
	if !d.wdl.IsZero() && d.wdl.Before(limit) {
		limit = d.wdl
	}
	d.mu.Unlock()
	wait := time.Until(limit)
	if wait <= 0 {
		return 0, os.ErrDeadlineExceeded
	}
	t := time.AfterFunc(wait, func() {
		d.timedOut.Store(true)
		_ = d.Close()
	})
	n, err := d.Conn.Write(p)
	if !t.Stop() && d.timedOut.Load() {
		return n, os.ErrDeadlineExceeded
	}
	return n, err
}

func (d *deadlineConn) Close() error {
	err := d.Conn.Close()
	d.once.Do(func() {
		close(d.closed)
		d.release()
	})
	return err
}
