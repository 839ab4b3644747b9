package mcptool_test

// Attack tests written from go doc only: ServeInSandbox with forwarders
// that answer oddly, and the forward's end with its context.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable"
	"github.com/airlockdev/airlock/deliverable/mcptool"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
)

// a23Forwarder answers every forward with addr and err, recording what was
// asked.
type a23Forwarder struct {
	addr             net.Addr
	err              error
	network, address string
	handler          http.Handler
}

func (f *a23Forwarder) ServeInSandbox(_ context.Context, network, address string, h http.Handler) (net.Addr, error) {
	f.network, f.address, f.handler = network, address, h
	return f.addr, f.err
}

// TestAttack23ServeInSandboxOddAnswers: the URL ServeInSandbox returns is
// "http://127.0.0.1:<port>/mcp" with the port the sandbox bound, asked for
// on a loopback address; a forwarder that answers with no address, a unix
// socket, port 0 or an address that is not loopback gets an error (or at
// least never a URL that is not the documented form), never a panic.
func TestAttack23ServeInSandboxOddAnswers(t *testing.T) {
	_, reg := newStore(t)
	s := mcptool.New(reg, deliverable.RemoteWorkspace(nil, "/work"), "task-1", "run-1")
	good := &a23Forwarder{addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40123}}
	url, err := mcptool.ServeInSandbox(t.Context(), good, s)
	require.NoError(t, err)
	assert.Equal(t, "http://127.0.0.1:40123/mcp", url)
	assert.Equal(t, "tcp", good.network)
	host, port, err := net.SplitHostPort(good.address)
	require.NoError(t, err)
	assert.True(t, net.ParseIP(host).IsLoopback(), "asked to listen on %q", good.address)
	assert.Equal(t, "0", port)

	for _, tc := range []struct {
		name string
		addr net.Addr
	}{
		{"nil address", nil},
		{"unix socket", &net.UnixAddr{Name: "/tmp/x.sock", Net: "unix"}},
		{"port zero", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 0}},
		{"wildcard", &net.TCPAddr{IP: net.IPv4zero, Port: 40124}},
		{"public", &net.TCPAddr{IP: net.IPv4(10, 0, 0, 5), Port: 40125}},
		{"ipv6 loopback", &net.TCPAddr{IP: net.IPv6loopback, Port: 40126}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var url string
			var err error
			func() {
				defer func() {
					if p := recover(); p != nil {
						err = fmt.Errorf("panic: %v", p)
						t.Errorf("ServeInSandbox panicked: %v", p)
					}
				}()
				url, err = mcptool.ServeInSandbox(t.Context(), &a23Forwarder{addr: tc.addr}, s)
			}()
			t.Logf("url %q, err %v", url, err)
			if err != nil {
				assert.Empty(t, url)
				return
			}
			if tc.name == "ipv6 loopback" {
				assert.Equal(t, "http://[::1]:40126/mcp", url, "the URL must reach the address the sandbox bound")
				return
			}
			assert.Regexp(t, `^http://127\.0\.0\.1:[1-9][0-9]*/mcp$`, url, "a URL that is not the documented form, for a forward the sandbox bound at %v", tc.addr)
		})
	}
}

// TestAttack23ServeInSandboxEndsWithContext: over remotetest, the tool
// answers at the URL; once ctx ends, the forward is gone within a couple
// of seconds (connections refused or failing), and the Host keeps working.
func TestAttack23ServeInSandboxEndsWithContext(t *testing.T) {
	srv := remotetest.NewServer(t)
	h := srv.Dial(t)
	_, reg := newStore(t)
	s := mcptool.New(reg, deliverable.RemoteWorkspace(h, srv.Dir()), "task-1", "run-1")
	ctx, cancel := context.WithCancel(t.Context())
	url, err := mcptool.ServeInSandbox(ctx, h, s)
	require.NoError(t, err)
	client := &http.Client{Timeout: 2 * time.Second}
	post := func() (int, error) {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		return resp.StatusCode, nil
	}
	code, err := post()
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, code)

	cancel()
	deadline := time.Now().Add(3 * time.Second)
	for {
		_, err := post()
		if err != nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "the forward still answers after its context ended")
		time.Sleep(50 * time.Millisecond)
	}
	url2, err := mcptool.ServeInSandbox(t.Context(), h, s)
	require.NoError(t, err, "the Host can forward again")
	assert.NotEmpty(t, url2)
}
