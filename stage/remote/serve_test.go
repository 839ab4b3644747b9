package remote_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/sshdtest"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage/remote"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
)

// hello answers every request with its method and path.
var hello = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	fmt.Fprintf(w, "hello %s %s", r.Method, r.URL.Path)
})

// sandboxClient is an HTTP client on the sandbox's side of a forward: it
// dials network/address (on this machine, which is the sandbox of
// remotetest and sshdtest) whatever the URL's host.
func sandboxClient(network, address string) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, address)
		},
	}}
}

func get(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	resp, err := c.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	return string(b)
}

// shortSocket returns a socket path short enough for sun_path (108 bytes).
func shortSocket(t *testing.T) string {
	dir, err := os.MkdirTemp("", "fw")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return filepath.Join(dir, "s.sock")
}

func testServeTCPAndUnix(t *testing.T, h *remote.Host) {
	addr, err := h.ServeInSandbox(t.Context(), "tcp", "127.0.0.1:0", hello)
	require.NoError(t, err)
	ta, ok := addr.(*net.TCPAddr)
	require.True(t, ok, "addr is %T", addr)
	require.NotZero(t, ta.Port, "the server's chosen port is reported")
	assert.Equal(t, "127.0.0.1", ta.IP.String())
	c := sandboxClient("tcp", addr.String())
	assert.Equal(t, "hello GET /mcp", get(t, c, "http://"+addr.String()+"/mcp"))

	sock := shortSocket(t)
	uaddr, err := h.ServeInSandbox(t.Context(), "unix", sock, hello)
	require.NoError(t, err)
	assert.Equal(t, sock, uaddr.String())
	assert.Equal(t, "hello GET /x", get(t, sandboxClient("unix", sock), "http://sandbox/x"))
}

func TestServeInSandboxRemotetest(t *testing.T) {
	testServeTCPAndUnix(t, dial(t, remotetest.NewServer(t)))
}

func TestServeInSandboxSSHD(t *testing.T) {
	srv := sshdtest.Start(t)
	h, err := remote.Dial(t.Context(), srv.Addr(), srv.Config())
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	testServeTCPAndUnix(t, h)
}

func TestServeInSandboxRefusesAddresses(t *testing.T) {
	h := dial(t, remotetest.NewServer(t))
	for _, c := range []struct{ network, address, want string }{
		{"tcp", "0.0.0.0:0", `tcp address "0.0.0.0:0" is not a loopback address; use 127.0.0.1 or ::1`},
		{"tcp", "10.0.0.1:80", `tcp address "10.0.0.1:80" is not a loopback address`},
		{"tcp", "localhost:0", `tcp address "localhost:0" is not IP:port`},
		{"tcp", "127.0.0.1", `tcp address "127.0.0.1" is not IP:port`},
		{"udp", "127.0.0.1:0", `network "udp" is not "tcp" or "unix"`},
		{"unix", "rel.sock", `unix socket path "rel.sock" is not a clean absolute path`},
		{"unix", "/tmp/../etc/x.sock", `unix socket path "/tmp/../etc/x.sock" is not a clean absolute path`},
	} {
		_, err := h.ServeInSandbox(t.Context(), c.network, c.address, hello)
		require.Error(t, err, "%s %s", c.network, c.address)
		assert.Contains(t, err.Error(), c.want)
	}
	_, err := h.ServeInSandbox(t.Context(), "tcp", "127.0.0.1:0", nil)
	require.EqualError(t, err, "remote: ServeInSandbox: handler is nil")
}

func TestServeInSandboxForwardRefused(t *testing.T) {
	h := dial(t, remotetest.NewServer(t, remotetest.WithoutForwarding()))
	_, err := h.ServeInSandbox(t.Context(), "tcp", "127.0.0.1:0", hello)
	require.ErrorIs(t, err, remote.ErrForward)
	assert.Contains(t, err.Error(), "tcp 127.0.0.1:0")
	assert.Contains(t, err.Error(), "AllowTcpForwarding")
	_, err = h.ServeInSandbox(t.Context(), "unix", shortSocket(t), hello)
	require.ErrorIs(t, err, remote.ErrForward)
}

func TestServeInSandboxUnixPathTaken(t *testing.T) {
	h := dial(t, remotetest.NewServer(t))
	sock := shortSocket(t)
	require.NoError(t, os.WriteFile(sock, []byte("x"), 0o600))
	_, err := h.ServeInSandbox(t.Context(), "unix", sock, hello)
	require.ErrorIs(t, err, remote.ErrForward)
	assert.Contains(t, err.Error(), "unix "+sock)
	assert.Contains(t, err.Error(), "a file is in the way at "+sock+" in the sandbox; remove it or pick a free path")
	b, err := os.ReadFile(sock)
	require.NoError(t, err)
	assert.Equal(t, "x", string(b), "the file in the way is left alone")
}

// TestServeInSandboxServerNeverAnswers: a forward request the server
// leaves unanswered fails under the control deadline, as ErrTransport.
func TestServeInSandboxServerNeverAnswers(t *testing.T) {
	h := dial(t, remotetest.NewServer(t, remotetest.WithHangForward()), func(c *remote.Config) {
		c.ControlTimeout = 300 * time.Millisecond
		c.KeepAlive = -1
	})
	start := time.Now()
	_, err := h.ServeInSandbox(t.Context(), "tcp", "127.0.0.1:0", hello)
	require.ErrorIs(t, err, sandbox.ErrTransport)
	assert.Contains(t, err.Error(), "the server did not answer the forward request within 300ms")
	assert.Less(t, time.Since(start), 5*time.Second)

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err = h.ServeInSandbox(ctx, "tcp", "127.0.0.1:0", hello)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// refused waits until address no longer accepts connections.
func refused(t *testing.T, network, address string) {
	t.Helper()
	require.Eventually(t, func() bool {
		c, err := net.DialTimeout(network, address, time.Second)
		if err != nil {
			return true
		}
		_ = c.Close()
		return false
	}, 5*time.Second, 10*time.Millisecond, "%s %s still accepts connections", network, address)
}

func TestServeInSandboxEndsWithContextAndHost(t *testing.T) {
	srv := remotetest.NewServer(t)
	h := dial(t, srv)
	ctx, cancel := context.WithCancel(t.Context())
	addr, err := h.ServeInSandbox(ctx, "tcp", "127.0.0.1:0", hello)
	require.NoError(t, err)
	get(t, sandboxClient("tcp", addr.String()), "http://sandbox/")
	cancel()
	refused(t, "tcp", addr.String())

	sock := shortSocket(t)
	_, err = h.ServeInSandbox(t.Context(), "unix", sock, hello)
	require.NoError(t, err)
	get(t, sandboxClient("unix", sock), "http://sandbox/")
	require.NoError(t, h.Close())
	refused(t, "unix", sock)
	_, err = h.ServeInSandbox(t.Context(), "tcp", "127.0.0.1:0", hello)
	require.ErrorIs(t, err, net.ErrClosed)
	assert.Contains(t, err.Error(), "the Host is closed")
	assert.Contains(t, err.Error(), "dial a new one with remote.Dial")
}

// TestServeInSandboxFloodIsBounded: a sandbox that opens many more
// connections than MaxForwardConns never has more than that many served at
// once; the rest are closed unanswered, and the forward still works after.
func TestServeInSandboxFloodIsBounded(t *testing.T) {
	h := dial(t, remotetest.NewServer(t))
	var inside, peak atomic.Int64
	release := make(chan struct{})
	block := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inside.Add(1)
		defer inside.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		if r.URL.Path == "/block" {
			<-release
		}
		fmt.Fprint(w, "ok")
	})
	addr, err := h.ServeInSandbox(t.Context(), "tcp", "127.0.0.1:0", block)
	require.NoError(t, err)

	const flood = 4 * remote.MaxForwardConns
	conns := make([]net.Conn, 0, flood)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range flood {
		c, err := net.Dial("tcp", addr.String())
		require.NoError(t, err)
		_, err = io.WriteString(c, "GET /block HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		conns = append(conns, c)
	}
	require.Eventually(t, func() bool { return inside.Load() == remote.MaxForwardConns }, 10*time.Second, 10*time.Millisecond)
	// Every connection beyond the limit is closed without an answer.
	closed := 0
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		if errors.Is(err, io.EOF) {
			closed++
		}
	}
	assert.Equal(t, flood-remote.MaxForwardConns, closed)
	assert.Equal(t, int64(remote.MaxForwardConns), peak.Load())
	close(release)
	require.Eventually(t, func() bool { return inside.Load() == 0 }, 10*time.Second, 10*time.Millisecond)
	// Idle connections hold their slots until the sandbox closes them (or
	// ForwardIdleTimeout); once closed, the forward serves again.
	for _, c := range conns {
		_ = c.Close()
	}
	c := sandboxClient("tcp", addr.String())
	require.Eventually(t, func() bool {
		resp, err := c.Get("http://sandbox/after")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return err == nil && string(b) == "ok"
	}, 10*time.Second, 20*time.Millisecond, "the forward does not serve again once the flood is gone")
}

// TestServeInSandboxBoundsRequests: a header over MaxForwardHeaderBytes is
// refused with 431 and a body over MaxForwardBodyBytes is cut off, so the
// handler never holds more.
func TestServeInSandboxBoundsRequests(t *testing.T) {
	h := dial(t, remotetest.NewServer(t))
	var read atomic.Int64
	sink := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		read.Store(n)
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			http.Error(w, "too large", http.StatusRequestEntityTooLarge)
			return
		}
		fmt.Fprint(w, n)
	})
	addr, err := h.ServeInSandbox(t.Context(), "tcp", "127.0.0.1:0", sink)
	require.NoError(t, err)
	c := sandboxClient("tcp", addr.String())

	big := strings.NewReader(strings.Repeat("x", remote.MaxForwardBodyBytes+1))
	resp, err := c.Post("http://sandbox/", "application/octet-stream", big)
	if err == nil { // the server may also reset the upload before the client finished it
		_ = resp.Body.Close()
		assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	}
	assert.Equal(t, int64(remote.MaxForwardBodyBytes), read.Load())

	conn, err := net.Dial("tcp", addr.String())
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", strings.Repeat("y", 2*remote.MaxForwardHeaderBytes))
	require.NoError(t, err)
	status, err := bufio.NewReader(conn).ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "HTTP/1.1 431 Request Header Fields Too Large\r\n", status)
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestServeInSandboxFloodHoldsMemory: a sandbox that opens eight times
// MaxForwardConns connections and pushes a large body down each, to a
// handler that does not read it, grows the host's heap by a bounded amount
// (the served connections' SSH windows), not by what it sends.
func TestServeInSandboxFloodHoldsMemory(t *testing.T) {
	h := dial(t, remotetest.NewServer(t))
	var inside atomic.Int64
	release := make(chan struct{})
	stall := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inside.Add(1)
		_, _ = r.Body.Read(make([]byte, 1))
		<-release
	})
	addr, err := h.ServeInSandbox(t.Context(), "tcp", "127.0.0.1:0", stall)
	require.NoError(t, err)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	const flood, body = 8 * remote.MaxForwardConns, 64 << 20
	var conns []net.Conn
	defer func() {
		close(release)
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range flood {
		c, err := net.Dial("tcp", addr.String())
		require.NoError(t, err)
		conns = append(conns, c)
		go func() {
			_, _ = fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", body)
			_, _ = io.Copy(c, io.LimitReader(zeros{}, body)) // blocks once every buffer is full
		}()
	}
	require.Eventually(t, func() bool { return inside.Load() >= remote.MaxForwardConns }, 10*time.Second, 10*time.Millisecond)
	time.Sleep(time.Second) // let every window and buffer fill
	assert.Equal(t, int64(remote.MaxForwardConns), inside.Load(), "connections served at once")
	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapInuse) - int64(before.HeapInuse)
	t.Logf("heap grew by %d MiB while the sandbox tried to send %d MiB", grown>>20, flood*body>>20)
	assert.Less(t, grown, int64(96<<20), "the host's heap grew with what the sandbox sent")
}

// TestServeInSandboxSilentConnectionsTimeOut: SSH channels have no read
// deadlines of their own; the forward gives them some, so a sandbox that
// fills every slot with connections that send nothing (or half a header,
// or stay idle after a request) loses them after the header or idle
// timeout, and the forward serves again.
func TestServeInSandboxSilentConnectionsTimeOut(t *testing.T) {
	defer remote.SetForwardTimeouts(300*time.Millisecond, 300*time.Millisecond)()
	h := dial(t, remotetest.NewServer(t))
	addr, err := h.ServeInSandbox(t.Context(), "tcp", "127.0.0.1:0", hello)
	require.NoError(t, err)

	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for i := range remote.MaxForwardConns {
		c, err := net.Dial("tcp", addr.String())
		require.NoError(t, err)
		conns = append(conns, c)
		switch i % 3 {
		case 1:
			_, err = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n") // half a header
		case 2:
			_, err = io.WriteString(c, "GET /idle HTTP/1.1\r\nHost: x\r\n\r\n") // then idle
		}
		require.NoError(t, err)
	}
	start := time.Now()
	for i, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b, err := io.ReadAll(c)
		require.NoError(t, err, "connection %d was not closed by the server", i)
		if i%3 == 2 {
			assert.Contains(t, string(b), "hello GET /idle", "the idle connection got its answer first")
		}
	}
	assert.Less(t, time.Since(start), 3*time.Second)
	assert.Equal(t, "hello GET /after", get(t, sandboxClient("tcp", addr.String()), "http://sandbox/after"))
}

// TestServeInSandboxUnixDirMissing: a socket in a directory the sandbox
// lacks is refused with that said, not "allow forwarding".
func TestServeInSandboxUnixDirMissing(t *testing.T) {
	h := dial(t, remotetest.NewServer(t))
	dir := filepath.Join(filepath.Dir(shortSocket(t)), "nodir")
	_, err := h.ServeInSandbox(t.Context(), "unix", dir+"/s.sock", hello)
	require.ErrorIs(t, err, remote.ErrForward)
	assert.Contains(t, err.Error(), "the directory "+dir+" does not exist in the sandbox; create it first or pick a socket path in an existing directory")
	assert.NotContains(t, err.Error(), "AllowStreamLocalForwarding")
}

// TestServeInSandboxNonReadersTimeOut: connections that ask for a large
// response and never read it are closed once a write has waited the write
// timeout, so their slots free and the forward serves again.
func TestServeInSandboxNonReadersTimeOut(t *testing.T) {
	defer remote.SetForwardWriteTimeout(500 * time.Millisecond)()
	big := strings.Repeat("x", 1<<20)
	h := dial(t, remotetest.NewServer(t))
	addr, err := h.ServeInSandbox(t.Context(), "tcp", "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/big" {
			hello.ServeHTTP(w, r)
			return
		}
		for range 64 {
			if _, err := io.WriteString(w, big); err != nil {
				return
			}
		}
	}))
	require.NoError(t, err)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range remote.MaxForwardConns {
		c, err := net.Dial("tcp", addr.String())
		require.NoError(t, err)
		_, err = io.WriteString(c, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		conns = append(conns, c)
	}
	start := time.Now()
	for {
		c := &http.Client{Timeout: time.Second, Transport: sandboxClient("tcp", addr.String()).Transport}
		resp, err := c.Get("http://sandbox/after")
		if err == nil {
			b, rerr := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			require.NoError(t, rerr)
			assert.Equal(t, "hello GET /after", string(b))
			break
		}
		require.Less(t, time.Since(start), 15*time.Second, "the non-readers still hold every slot: %v", err)
		time.Sleep(200 * time.Millisecond)
	}
}

// TestServeInSandboxPipelinersFreeTheirSlots: connections that pipeline
// requests and never read the small answers are closed after
// MaxForwardConnRequests responses, long before any buffer fills.
func TestServeInSandboxPipelinersFreeTheirSlots(t *testing.T) {
	h := dial(t, remotetest.NewServer(t))
	addr, err := h.ServeInSandbox(t.Context(), "tcp", "127.0.0.1:0", hello)
	require.NoError(t, err)
	pipeline := strings.Repeat("GET /p HTTP/1.1\r\nHost: x\r\n\r\n", 3*remote.MaxForwardConnRequests)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range remote.MaxForwardConns {
		c, err := net.Dial("tcp", addr.String())
		require.NoError(t, err)
		conns = append(conns, c)
		go func() { _, _ = io.WriteString(c, pipeline) }() // fails once the server closes the connection
	}
	start := time.Now()
	for {
		c := &http.Client{Timeout: time.Second, Transport: sandboxClient("tcp", addr.String()).Transport}
		resp, err := c.Get("http://sandbox/after")
		if err == nil {
			b, rerr := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			require.NoError(t, rerr)
			assert.Equal(t, "hello GET /after", string(b))
			break
		}
		require.Less(t, time.Since(start), 20*time.Second, "the pipeliners still hold every slot: %v", err)
		time.Sleep(200 * time.Millisecond)
	}
	// A pipeliner's connection ends right after its last allowed answer.
	_ = conns[0].SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(conns[0])
	require.NoError(t, err, "the pipelining connection was not closed")
	assert.Equal(t, remote.MaxForwardConnRequests, strings.Count(string(b), "hello GET /p"))
	assert.Equal(t, 1, strings.Count(string(b), "Connection: close"))
}
