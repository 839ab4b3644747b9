package remotetest

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"
)

// Remote forwarding (RFC 4254 section 7 and OpenSSH's PROTOCOL, 2.4): the
// client asks the server to listen, and each connection the server accepts
// becomes a channel the server opens back to the client.

// tcpipForward is the payload of "tcpip-forward" and "cancel-tcpip-forward".
type tcpipForward struct {
	Addr string
	Port uint32
}

// forwardedTCPIP is the extra data of a "forwarded-tcpip" channel.
type forwardedTCPIP struct {
	Addr       string
	Port       uint32
	OriginAddr string
	OriginPort uint32
}

// streamlocalForward is the payload of "streamlocal-forward@openssh.com"
// and "cancel-streamlocal-forward@openssh.com".
type streamlocalForward struct {
	SocketPath string
}

// forwardedStreamlocal is the extra data of a
// "forwarded-streamlocal@openssh.com" channel.
type forwardedStreamlocal struct {
	SocketPath string
	Reserved   string
}

// forwards are the listeners one connection asked for, by "tcp host:port"
// or "unix path".
type forwards struct {
	s     *Server
	sconn *ssh.ServerConn
	mu    sync.Mutex
	lns   map[string]net.Listener
	done  bool
}

// serveGlobal answers a connection's global requests until the connection
// ends, then closes its forwards. Requests other than the forwarding ones
// (keepalive@openssh.com, …) are answered with failure, as OpenSSH does.
func (s *Server) serveGlobal(sconn *ssh.ServerConn, reqs <-chan *ssh.Request) {
	f := &forwards{s: s, sconn: sconn, lns: map[string]net.Listener{}}
	defer f.closeAll()
	for req := range reqs {
		if s.opts.hangForward && strings.Contains(req.Type, "forward") {
			continue // never answered
		}
		ok, reply := false, []byte(nil)
		if !s.opts.noForward {
			switch req.Type {
			case "tcpip-forward":
				ok, reply = f.listenTCP(req.Payload)
			case "cancel-tcpip-forward":
				var m tcpipForward
				ok = ssh.Unmarshal(req.Payload, &m) == nil && f.cancel("tcp "+net.JoinHostPort(m.Addr, strconv.FormatUint(uint64(m.Port), 10)))
			case "streamlocal-forward@openssh.com":
				ok = f.listenUnix(req.Payload)
			case "cancel-streamlocal-forward@openssh.com":
				var m streamlocalForward
				ok = ssh.Unmarshal(req.Payload, &m) == nil && f.cancel("unix "+m.SocketPath)
			}
		}
		if req.WantReply {
			_ = req.Reply(ok, reply) // fails only when the connection is gone
		}
	}
}

// listenTCP serves "tcpip-forward": loopback addresses only (the server
// listens on 127.0.0.1 only, like OpenSSH without GatewayPorts); port 0
// picks a port, which the reply carries.
func (f *forwards) listenTCP(payload []byte) (bool, []byte) {
	var m tcpipForward
	if ssh.Unmarshal(payload, &m) != nil || m.Port > 65535 {
		return false, nil
	}
	ip, err := netip.ParseAddr(m.Addr)
	if m.Addr == "localhost" {
		ip, err = netip.MustParseAddr("127.0.0.1"), nil
	}
	if err != nil || !ip.IsLoopback() {
		return false, nil
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), strconv.FormatUint(uint64(m.Port), 10)))
	if err != nil {
		return false, nil
	}
	port := uint32(ln.Addr().(*net.TCPAddr).Port)
	key := "tcp " + net.JoinHostPort(m.Addr, strconv.FormatUint(uint64(port), 10))
	open := func(c net.Conn) (string, []byte) {
		ra, _ := c.RemoteAddr().(*net.TCPAddr)
		o := forwardedTCPIP{Addr: m.Addr, Port: port}
		if ra != nil {
			o.OriginAddr, o.OriginPort = ra.IP.String(), uint32(ra.Port)
		}
		return "forwarded-tcpip", ssh.Marshal(&o)
	}
	if !f.add(key, ln, open) {
		return false, nil
	}
	var reply []byte
	if m.Port == 0 {
		reply = ssh.Marshal(&struct{ Port uint32 }{port})
	}
	return true, reply
}

// listenUnix serves "streamlocal-forward@openssh.com": an absolute socket
// path that does not exist yet (OpenSSH's default, without
// StreamLocalBindUnlink).
func (f *forwards) listenUnix(payload []byte) bool {
	var m streamlocalForward
	if ssh.Unmarshal(payload, &m) != nil || !filepath.IsAbs(m.SocketPath) {
		return false
	}
	ln, err := net.Listen("unix", m.SocketPath)
	if err != nil {
		return false
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(true)
	open := func(net.Conn) (string, []byte) {
		return "forwarded-streamlocal@openssh.com", ssh.Marshal(&forwardedStreamlocal{SocketPath: m.SocketPath})
	}
	return f.add("unix "+m.SocketPath, ln, open)
}

// add records ln under key and accepts its connections, each relayed over
// a channel described by open; false (and ln closed) when the key is taken
// or the connection has ended.
func (f *forwards) add(key string, ln net.Listener, open func(net.Conn) (string, []byte)) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, taken := f.lns[key]; taken || f.done {
		_ = ln.Close() // refused: nothing to report
		return false
	}
	f.lns[key] = ln
	f.s.wg.Go(func() { f.accept(ln, open) })
	return true
}

func (f *forwards) accept(ln net.Listener, open func(net.Conn) (string, []byte)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		f.s.wg.Go(func() { f.relay(c, open) })
	}
}

// relay opens the channel for c and copies both ways until either side
// ends; a client that refuses the channel gets c closed.
func (f *forwards) relay(c net.Conn, open func(net.Conn) (string, []byte)) {
	defer func() { _ = c.Close() }() // the relay is over either way
	typ, extra := open(c)
	ch, reqs, err := f.sconn.OpenChannel(typ, extra)
	if err != nil {
		return
	}
	go ssh.DiscardRequests(reqs)
	defer func() { _ = ch.Close() }() // likewise
	var wg sync.WaitGroup
	wg.Go(func() {
		_, _ = io.Copy(ch, c) // ends when the sandbox side closes or fails
		_ = ch.CloseWrite()
	})
	_, _ = io.Copy(c, ch) // ends when the client closes the channel
	if tc, ok := c.(interface{ CloseWrite() error }); ok {
		_ = tc.CloseWrite()
	}
	_ = c.Close() // unblocks the copy above
	wg.Wait()
}

// cancel closes the listener under key; false when there is none.
func (f *forwards) cancel(key string) bool {
	f.mu.Lock()
	ln, ok := f.lns[key]
	delete(f.lns, key)
	f.mu.Unlock()
	if ok {
		_ = ln.Close() // the forward is gone either way
	}
	return ok
}

func (f *forwards) closeAll() {
	f.mu.Lock()
	f.done = true
	lns := f.lns
	f.lns = nil
	f.mu.Unlock()
	for _, ln := range lns {
		_ = ln.Close() // the connection ended: so do its forwards
	}
}
