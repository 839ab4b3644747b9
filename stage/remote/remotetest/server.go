package remotetest

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/airlockdev/airlock/stage/remote"
)

// A Server is an in-process SSH server listening on 127.0.0.1. Its methods
// are safe for concurrent use.
type Server struct {
	opts       options
	dir        string
	removeDir  bool
	user       string
	ln         net.Listener
	sshConfig  *ssh.ServerConfig
	hostKey    ssh.PublicKey
	clientAuth ssh.Signer

	execs atomic.Int64
	conns atomic.Int64

	wg sync.WaitGroup // every goroutine the server starts

	mu     sync.Mutex
	closed bool
	open   map[net.Conn]struct{}

	closeOnce sync.Once
	closeErr  error
}

// Start starts a Server configured by opts. The caller must Close it.
func Start(opts ...Option) (*Server, error) {
	var o options
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	s := &Server{opts: o, open: make(map[net.Conn]struct{})}

	hostSigner, err := newSigner()
	if err != nil {
		return nil, fmt.Errorf("remotetest: host key: %w", err)
	}
	clientSigner, err := newSigner()
	if err != nil {
		return nil, fmt.Errorf("remotetest: client key: %w", err)
	}
	s.hostKey = hostSigner.PublicKey()
	s.clientAuth = clientSigner
	clientKey := clientSigner.PublicKey().Marshal()
	s.sshConfig = &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if subtle.ConstantTimeCompare(key.Marshal(), clientKey) == 1 {
				return &ssh.Permissions{}, nil
			}
			return nil, errors.New("remotetest: unknown client key")
		},
	}
	s.sshConfig.AddHostKey(hostSigner)

	s.user = "airlock"
	if u, err := user.Current(); err == nil && u.Username != "" {
		s.user = u.Username
	}

	if err := s.setupDir(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.removeOwnDir()
		return nil, fmt.Errorf("remotetest: listen: %w", err)
	}
	s.ln = ln
	s.wg.Go(s.acceptLoop)
	return s, nil
}

// NewServer starts a Server for a test, failing tb if it cannot start, and
// closes it when the test and its subtests finish (tb.Cleanup).
func NewServer(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	s, err := Start(opts...)
	if err != nil {
		tb.Fatalf("remotetest.NewServer: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("remotetest: Close: %v", err)
		}
	})
	return s
}

// Dial connects a remote.Host to the server for a test with Config,
// failing tb if it cannot, and closes the Host when the test and its
// subtests finish (a failed Close fails tb). The test's whole sandbox is
// then two lines:
//
//	srv := remotetest.NewServer(t)
//	host := srv.Dial(t)
func (s *Server) Dial(tb testing.TB) *remote.Host {
	tb.Helper()
	h, err := remote.Dial(tb.Context(), s.Addr(), s.Config())
	if err != nil {
		tb.Fatalf("remotetest: Dial %s: %v", s.Addr(), err)
	}
	tb.Cleanup(func() {
		if err := h.Close(); err != nil {
			tb.Errorf("remotetest: closing the Host: %v", err)
		}
	})
	return h
}

// Addr returns the address the server listens on, "127.0.0.1:PORT".
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Dir returns the absolute directory commands run in.
func (s *Server) Dir() string { return s.dir }

// Config returns a client configuration that authenticates with this
// server's client key and trusts exactly this server's host key through
// remote.FixedHostKey, the production callback: another key is refused
// with the *remote.HostKeyError a real host's would be (the fingerprint
// presented, the one trusted, and what to do). Each call returns a fresh
// value the caller may modify.
func (s *Server) Config() remote.Config {
	hostKeys, err := remote.FixedHostKey(string(ssh.MarshalAuthorizedKey(s.hostKey)))
	if err != nil {
		panic("remotetest: the host key does not parse: " + err.Error()) // a key Start generated always does
	}
	return remote.Config{
		User:            s.user,
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(s.clientAuth)},
		HostKeyCallback: hostKeys,
	}
}

// ClientSigner returns the ephemeral key Config authenticates with, for a
// client Config cannot reach: one in another process, say, through an
// ssh-agent.
func (s *Server) ClientSigner() ssh.Signer { return s.clientAuth }

// HostKey returns the server's ephemeral host public key.
func (s *Server) HostKey() ssh.PublicKey { return s.hostKey }

// Execs returns the number of exec requests received so far, hung ones
// included.
func (s *Server) Execs() int64 { return s.execs.Load() }

// Conns returns the number of TCP connections accepted so far, whether or not
// their SSH handshake succeeded.
func (s *Server) Conns() int64 { return s.conns.Load() }

// Close stops the listener, closes every connection, kills every running
// command's process group, waits for every goroutine the server started and,
// unless WithDir was given, removes the directory. It is idempotent: later
// calls return the first call's result.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		open := make([]net.Conn, 0, len(s.open))
		for c := range s.open {
			open = append(open, c)
		}
		s.mu.Unlock()

		err := s.ln.Close()
		for _, c := range open {
			_ = c.Close() // closing also ends the conn's goroutines; their error is not ours
		}
		s.wg.Wait()
		s.closeErr = errors.Join(err, s.removeOwnDir())
	})
	return s.closeErr
}

func newSigner() (ssh.Signer, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	return ssh.NewSignerFromKey(priv)
}

func (s *Server) setupDir() error {
	if s.opts.dir == "" {
		dir, err := os.MkdirTemp("", "remotetest-")
		if err != nil {
			return fmt.Errorf("remotetest: %w", err)
		}
		// Canonical, so that `pwd -P` in a command prints Dir().
		real, err := filepath.EvalSymlinks(dir)
		if err != nil {
			return errors.Join(fmt.Errorf("remotetest: %w", err), os.RemoveAll(dir))
		}
		s.dir, s.removeDir = real, true
		return nil
	}
	dir, err := filepath.Abs(s.opts.dir)
	if err != nil {
		return fmt.Errorf("remotetest: WithDir: %w", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("remotetest: WithDir: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("remotetest: WithDir: %s is not a directory", dir)
	}
	s.dir = dir
	return nil
}

func (s *Server) removeOwnDir() error {
	if !s.removeDir {
		return nil
	}
	if err := os.RemoveAll(s.dir); err != nil {
		return fmt.Errorf("remotetest: remove directory: %w", err)
	}
	return nil
}

func (s *Server) acceptLoop() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors or similar: back off instead of spinning.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		s.conns.Add(1)
		s.wg.Go(func() { s.serveConn(c) })
	}
}

// track registers c so Close can close it; false means the server is closed
// and c has been closed.
func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		_ = c.Close() // refused connection: nothing to report
		return false
	}
	s.open[c] = struct{}{}
	return true
}

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.open, c)
	s.mu.Unlock()
}

func (s *Server) serveConn(raw net.Conn) {
	var c net.Conn = raw
	if s.opts.dropAfter > 0 {
		c = &dropConn{Conn: c, left: s.opts.dropAfter}
	}
	if s.opts.latency > 0 {
		c = newDelayConn(c, s.opts.latency/2, &s.wg)
	}
	if !s.track(c) {
		return
	}
	defer s.untrack(c)
	defer func() { _ = c.Close() }() // the connection is over either way

	sconn, chans, reqs, err := ssh.NewServerConn(c, s.sshConfig)
	if err != nil {
		return // handshake or authentication failed; the client sees why
	}
	s.wg.Go(func() { s.serveGlobal(sconn, reqs) })
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "remotetest serves session channels only")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			continue
		}
		s.wg.Go(func() { s.serveSession(ch, creqs) })
	}
	_ = sconn.Close()
	_ = sconn.Wait()
}
