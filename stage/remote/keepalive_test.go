package remote_test

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage/remote"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
)

// freezingProxy forwards one TCP connection to addr until freeze is
// called; from then on it forwards nothing in either direction and closes
// nothing, the way a peer that died without a FIN (a crashed host, a cut
// cable) looks.
type freezingProxy struct {
	ln     net.Listener
	frozen atomic.Bool
	wg     sync.WaitGroup
	conns  []net.Conn
	mu     sync.Mutex
}

func newFreezingProxy(t *testing.T, addr string) *freezingProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &freezingProxy{ln: ln}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", addr)
		if err != nil {
			c.Close()
			return
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		pump := func(dst, src net.Conn) {
			defer p.wg.Done()
			buf := make([]byte, 32<<10)
			for {
				n, err := src.Read(buf)
				if p.frozen.Load() {
					io.Copy(io.Discard, src) // swallow everything, answer nothing
					return
				}
				if n > 0 {
					if _, werr := dst.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}
		p.wg.Add(2)
		go pump(up, c)
		go pump(c, up)
	}()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

// TestHostKeepAliveFindsDeadPeer: a long command on a connection whose
// peer stops answering fails with ErrTransport once a keepalive goes
// unanswered, instead of waiting for the command.
func TestHostKeepAliveFindsDeadPeer(t *testing.T) {
	srv := remotetest.NewServer(t)
	p := newFreezingProxy(t, srv.Addr())
	cfg := srv.Config()
	cfg.KeepAlive = 200 * time.Millisecond
	h, err := remote.Dial(t.Context(), p.ln.Addr().String(), cfg)
	require.NoError(t, err)
	defer h.Close()
	require.NoError(t, h.Run(t.Context(), sandbox.Command{Script: "true"}), "the connection works before the freeze")

	done := make(chan error, 1)
	go func() { done <- h.Run(t.Context(), sandbox.Command{Script: "sleep 60"}) }()
	time.Sleep(300 * time.Millisecond)
	p.frozen.Store(true)
	start := time.Now()
	select {
	case err := <-done:
		require.ErrorIs(t, err, sandbox.ErrTransport)
		assert.Less(t, time.Since(start), 12*time.Second)
	case <-time.After(30 * time.Second):
		t.Fatal("a dead peer was not detected within 30 s")
	}
	err = h.Run(t.Context(), sandbox.Command{Script: "true"})
	assert.ErrorIs(t, err, sandbox.ErrTransport, "every later call fails with ErrTransport")
}
