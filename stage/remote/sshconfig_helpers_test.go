package remote_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// writeFile writes content to path, making its directory.
func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

// newKey returns a fresh ed25519 private key.
func newKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	return priv
}

// writeKey writes priv to path in OpenSSH format (encrypted when
// passphrase is not ""), and its public key to path.pub when pub is true.
// It returns the public key.
func writeKey(t *testing.T, path string, priv ed25519.PrivateKey, passphrase string, pub bool) ssh.PublicKey {
	t.Helper()
	var block *pem.Block
	var err error
	if passphrase == "" {
		block, err = ssh.MarshalPrivateKey(priv, "test key")
	} else {
		block, err = ssh.MarshalPrivateKeyWithPassphrase(priv, "test key", []byte(passphrase))
	}
	require.NoError(t, err)
	writeFile(t, path, string(pem.EncodeToMemory(block)))
	signer, err := ssh.NewSignerFromKey(priv)
	require.NoError(t, err)
	if pub {
		writeFile(t, path+".pub", string(ssh.MarshalAuthorizedKey(signer.PublicKey())))
	}
	return signer.PublicKey()
}

// serveAgent serves an in-memory ssh-agent holding keys on a unix socket
// and returns the socket's path. The socket lives in a short directory of
// its own (unix socket paths are limited to about 100 bytes).
func serveAgent(t *testing.T, keys ...any) string {
	t.Helper()
	keyring := agent.NewKeyring()
	for _, k := range keys {
		require.NoError(t, keyring.Add(agent.AddedKey{PrivateKey: k}))
	}
	dir, err := os.MkdirTemp("", "agent")
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, os.RemoveAll(dir)) })
	sock := filepath.Join(dir, "s")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	t.Cleanup(func() { ln.Close() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				agent.ServeAgent(keyring, c) // returns when the client hangs up
			})
		}
	})
	return sock
}

// fakeServer is an SSH server (x/crypto) that records the public keys a
// client offers and accepts only the keys it was given; it runs nothing.
type fakeServer struct {
	addr    string
	hostKey ssh.PublicKey
	mu      sync.Mutex
	offered []ssh.PublicKey
}

func startFakeServer(t *testing.T, accept ...ssh.PublicKey) *fakeServer {
	t.Helper()
	hostSigner, err := ssh.NewSignerFromKey(newKey(t))
	require.NoError(t, err)
	s := &fakeServer{hostKey: hostSigner.PublicKey()}
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
		s.record(key)
		for _, a := range accept {
			if string(a.Marshal()) == string(key.Marshal()) {
				return &ssh.Permissions{}, nil
			}
		}
		return nil, ssh.ErrNoAuth
	}}
	cfg.AddHostKey(hostSigner)
	s.addr = listenSSH(t, func(c net.Conn) { s.serve(c, cfg) })
	return s
}

// listenSSH accepts connections on a local port until the test ends,
// each served by serve on a goroutine of its own, and returns the
// address.
func listenSSH(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	t.Cleanup(func() { ln.Close() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { serve(c) })
		}
	})
	return ln.Addr().String()
}

func (s *fakeServer) serve(c net.Conn, cfg *ssh.ServerConfig) {
	defer c.Close()
	sc, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		return // a refused login: what the test looks at is what was offered
	}
	defer sc.Close()
	go ssh.DiscardRequests(reqs)
	for ch := range chans {
		ch.Reject(ssh.Prohibited, "fakeServer runs nothing") // the client hung up if this fails
	}
}

// record notes key once, in the order offered.
func (s *fakeServer) record(key ssh.PublicKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.offered {
		if string(k.Marshal()) == string(key.Marshal()) {
			return
		}
	}
	s.offered = append(s.offered, key)
}

// Offered returns the fingerprints of the keys offered so far, in order,
// and forgets them.
func (s *fakeServer) Offered() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var fps []string
	for _, k := range s.offered {
		fps = append(fps, ssh.FingerprintSHA256(k))
	}
	s.offered = nil
	return fps
}
