//go:build linux

package remote

import (
	"io"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// quickAckMode reports whether the kernel acknowledges c's incoming data
// at once (TCP_QUICKACK reads 1) rather than delaying the ACK (0: the
// "ping-pong" mode a request/reply exchange puts a socket in).
func quickAckMode(t *testing.T, c *net.TCPConn) int {
	t.Helper()
	rc, err := c.SyscallConn()
	require.NoError(t, err)
	v, gerr := -1, error(nil)
	require.NoError(t, rc.Control(func(fd uintptr) { v, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_QUICKACK) }))
	require.NoError(t, gerr)
	return v
}

// TestCountingConnQuickAck: a read of fewer bytes than asked (the peer
// paused, as an SSH server does when it holds its next small reply for
// our ACK) leaves the socket acknowledging at once; a read that fills
// the buffer (a bulk transfer still flowing) makes no system call and
// leaves the kernel's choice alone.
func TestCountingConnQuickAck(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	served := make(chan error, 1)
	go func() { // echo
		s, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer s.Close()
		_, err = io.Copy(s, s)
		served <- err
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	tc := raw.(*net.TCPConn)
	c := &countingConn{Conn: tc, raw: rawTCP(tc)}
	require.NotNil(t, c.raw)

	msg := []byte("hello")
	exchange := func(buf []byte) {
		t.Helper()
		_, err := c.Write(msg)
		require.NoError(t, err)
		_, err = io.ReadFull(tc, buf[:len(msg)]) // the raw socket: no quickAck
		require.NoError(t, err)
	}
	// Request and reply put the socket in delayed-ACK mode.
	buf := make([]byte, 100)
	delayed := func() {
		t.Helper()
		for i := 0; quickAckMode(t, tc) != 0; i++ {
			require.Less(t, i, 50, "the kernel never delayed an ACK after %d request/reply exchanges", i)
			exchange(buf)
		}
	}

	// A full read leaves the mode alone. The kernel itself leaves
	// delayed-ACK mode when this goroutine is held up past its 40 ms
	// timer (a loaded machine): a quick mode seen after every one of five
	// tries is the read's doing.
	full := 0
	for range 5 {
		delayed()
		_, err = c.Write(msg)
		require.NoError(t, err)
		n, err := c.Read(buf[:len(msg)]) // fills the buffer
		require.NoError(t, err)
		require.Equal(t, len(msg), n)
		if full++; quickAckMode(t, tc) == 0 {
			break
		}
		require.Less(t, full, 5, "a full read asked for the quick ACK")
	}

	delayed()
	_, err = c.Write(msg)
	require.NoError(t, err)
	n, err := io.ReadAtLeast(c, buf, len(msg)) // a short read
	require.NoError(t, err)
	require.Equal(t, len(msg), n)
	require.Equal(t, 1, quickAckMode(t, tc), "a short read left the ACK delayed")
	require.Equal(t, uint64((full+1)*len(msg)), c.read.Load(), "bytes read through the countingConn")

	require.NoError(t, tc.Close())
	require.NoError(t, <-served)
}
