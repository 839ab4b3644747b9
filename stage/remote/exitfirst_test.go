package remote_test

import (
	"bytes"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage/remote"
)

// exitFirstServer runs every command as OpenSSH may end one: it writes
// "part" on stdout and sends exit-status 0, and then, when drop is set,
// drops the TCP connection before the rest of the output ("rest"), the
// channel's EOF and its close; otherwise it sends them.
func exitFirstServer(t *testing.T, drop bool) (addr string, hostKey ssh.PublicKey) {
	t.Helper()
	signer, err := ssh.NewSignerFromKey(newKey(t))
	require.NoError(t, err)
	cfg := &ssh.ServerConfig{NoClientAuth: true}
	cfg.AddHostKey(signer)
	return listenSSH(t, func(c net.Conn) { serveExitFirst(c, cfg, drop) }), signer.PublicKey()
}

func serveExitFirst(c net.Conn, cfg *ssh.ServerConfig, drop bool) {
	defer c.Close()
	sc, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		return
	}
	defer sc.Close()
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "sessions only") // the client hung up if this fails
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			return
		}
		for req := range creqs {
			if req.Type != "exec" {
				req.Reply(false, nil) // the client hung up if this fails
				continue
			}
			req.Reply(true, nil)                                                          // likewise
			ch.Write([]byte("part"))                                                      // likewise
			ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{0})) // likewise
			if drop {
				c.Close() // the rest of the output, the EOF and the close never leave
				return
			}
			ch.Write([]byte("rest")) // likewise
			ch.CloseWrite()          // likewise
			ch.Close()               // likewise
		}
	}
}

// TestRunExitStatusThenDrop: a connection that drops after the command's
// exit status but before the rest of its output is a transport failure,
// not a command that ran to its end with less output than it wrote. A
// session that ends whole gives all of it.
func TestRunExitStatusThenDrop(t *testing.T) {
	for _, drop := range []bool{false, true} {
		addr, key := exitFirstServer(t, drop)
		h, err := remote.Dial(t.Context(), addr, remote.Config{User: "u", HostKeyCallback: ssh.FixedHostKey(key)})
		require.NoError(t, err)
		var out bytes.Buffer
		err = h.Run(t.Context(), sandbox.Command{Script: "true", Stdout: &out})
		if drop {
			require.ErrorIs(t, err, sandbox.ErrTransport)
			assert.ErrorContains(t, err, "the connection dropped as the command ended")
			assert.True(t, sandbox.Retryable(err))
		} else {
			require.NoError(t, err)
			assert.Equal(t, "partrest", out.String())
		}
		require.NoError(t, h.Close())
	}
}
