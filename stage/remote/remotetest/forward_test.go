package remotetest

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// echoOnce accepts one forwarded connection and echoes what it reads.
func echoOnce(t *testing.T, ln net.Listener) {
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(c, c)
	}()
}

func roundTrip(t *testing.T, network, address string) string {
	t.Helper()
	c, err := net.DialTimeout(network, address, 5*time.Second)
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "ping")
	require.NoError(t, err)
	require.NoError(t, c.(interface{ CloseWrite() error }).CloseWrite())
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	b, err := io.ReadAll(c)
	require.NoError(t, err)
	return string(b)
}

func gone(t *testing.T, network, address string) {
	t.Helper()
	require.Eventually(t, func() bool {
		c, err := net.DialTimeout(network, address, time.Second)
		if err != nil {
			return true
		}
		_ = c.Close()
		return false
	}, 5*time.Second, 10*time.Millisecond, "%s %s still listens", network, address)
}

func TestForwardTCP(t *testing.T) {
	c := dial(t, NewServer(t))
	_, err := c.Listen("tcp", "0.0.0.0:0")
	require.Error(t, err, "a non-loopback forward is refused")
	ln, err := c.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	echoOnce(t, ln)
	assert.Equal(t, "ping", roundTrip(t, "tcp", addr))
	require.NoError(t, ln.Close(), "cancel-tcpip-forward is answered")
	gone(t, "tcp", addr)
}

func TestForwardUnix(t *testing.T) {
	dir, err := os.MkdirTemp("", "fw")
	require.NoError(t, err)
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "s.sock")
	c := dial(t, NewServer(t))
	_, err = c.ListenUnix("relative.sock")
	require.Error(t, err)
	ln, err := c.ListenUnix(sock)
	require.NoError(t, err)
	_, err = c.ListenUnix(sock)
	require.Error(t, err, "a path in use is refused")
	echoOnce(t, ln)
	assert.Equal(t, "ping", roundTrip(t, "unix", sock))
	require.NoError(t, ln.Close())
	gone(t, "unix", sock)
	assert.NoFileExists(t, sock, "the socket is removed with the forward")
}

// TestForwardEndsWithConnection: the forwards of a connection close when
// it ends, and the server's Close leaves no listener.
func TestForwardEndsWithConnection(t *testing.T) {
	srv := NewServer(t)
	c := dial(t, srv)
	ln, err := c.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, c.Close())
	gone(t, "tcp", addr)

	c2 := dial(t, srv)
	ln2, err := c2.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	require.NoError(t, srv.Close())
	gone(t, "tcp", ln2.Addr().String())
}

func TestWithoutForwarding(t *testing.T) {
	c := dial(t, NewServer(t, WithoutForwarding()))
	_, err := c.Listen("tcp", "127.0.0.1:0")
	require.ErrorContains(t, err, "tcpip-forward request denied by peer")
}
