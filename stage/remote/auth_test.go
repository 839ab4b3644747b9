package remote_test

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/airlockdev/airlock/internal/sshdtest"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage/remote"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
)

// TestDialAgentAuthSSHD logs in to a real sshd with a key that only an
// ssh-agent holds: the caller passes agent.NewClient(conn)'s signers, and
// the library reads no environment variable (SSH_AUTH_SOCK is pointed at
// nothing to prove it).
func TestDialAgentAuthSSHD(t *testing.T) {
	srv := sshdtest.Start(t)
	t.Setenv("SSH_AUTH_SOCK", filepath.Join(t.TempDir(), "no-agent-here"))

	keyring := agent.NewKeyring()
	require.NoError(t, keyring.Add(agent.AddedKey{PrivateKey: privateKey(t, srv.KeyFile())}))
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = agent.ServeAgent(keyring, c) // ends with io.EOF when the client hangs up
			}()
		}
	}()

	conn, err := net.Dial("unix", sock)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	cfg := srv.Config()
	cfg.Auth = []ssh.AuthMethod{ssh.PublicKeysCallback(agent.NewClient(conn).Signers)}
	h, err := remote.Dial(t.Context(), srv.Addr(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })

	var out bytes.Buffer
	require.NoError(t, h.Run(t.Context(), sandbox.Command{Script: "echo agent-ok", Stdout: &out}))
	assert.Equal(t, "agent-ok\n", out.String())

	// Without the agent's signers the same server refuses the login.
	cfg.Auth = nil
	_, err = remote.Dial(t.Context(), srv.Addr(), cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "unable to authenticate")
}

// privateKey reads an OpenSSH private key file into the raw key agent.Add
// wants.
func privateKey(t *testing.T, file string) any {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	k, err := ssh.ParseRawPrivateKey(b)
	require.NoError(t, err)
	return k
}

// TestHostKeyErrorSaysHowToTrust pins the whole message of each host-key
// refusal: the host as dialled, the cause, the presented key's type and
// SHA256 fingerprint, and what to do about it.
func TestHostKeyErrorSaysHowToTrust(t *testing.T) {
	srv := remotetest.NewServer(t)
	other := remotetest.NewServer(t)
	fp := ssh.FingerprintSHA256(srv.HostKey())
	typ := srv.HostKey().Type()

	refusal := func(t *testing.T, cb ssh.HostKeyCallback) *remote.HostKeyError {
		t.Helper()
		cfg := srv.Config()
		cfg.HostKeyCallback = cb
		_, err := remote.Dial(t.Context(), srv.Addr(), cfg)
		var he *remote.HostKeyError
		require.ErrorAs(t, err, &he)
		assert.Contains(t, err.Error(), he.Error(), "Dial's error carries the whole HostKeyError text")
		return he
	}

	t.Run("Fixed", func(t *testing.T) {
		cb, err := remote.FixedHostKey(string(ssh.MarshalAuthorizedKey(other.HostKey())))
		require.NoError(t, err)
		he := refusal(t, cb)
		assert.Equal(t, "remote: "+srv.Addr()+": host key mismatch: the server presented "+typ+" key "+fp+
			"; the only trusted key is "+other.HostKey().Type()+" "+ssh.FingerprintSHA256(other.HostKey())+
			"; if the host was re-keyed, check the new fingerprint out of band and pass its key line", he.Error())
	})

	host, port, err := splitAddr(srv.Addr())
	require.NoError(t, err)
	t.Run("Unknown", func(t *testing.T) {
		kh := filepath.Join(t.TempDir(), "known_hosts")
		require.NoError(t, os.WriteFile(kh, []byte("[elsewhere.example]:22 "+string(ssh.MarshalAuthorizedKey(srv.HostKey()))), 0o600))
		cb, err := remote.KnownHosts(kh)
		require.NoError(t, err)
		he := refusal(t, cb)
		assert.Equal(t, "remote: "+srv.Addr()+": host is not in known_hosts: the server presented "+typ+" key "+fp+
			"; check that fingerprint out of band (ssh-keygen -lf on the server's host key), then add the host's line to "+kh+
			" (for example from ssh-keyscan)", he.Error())
		assert.Empty(t, he.Known)
	})
	t.Run("Mismatch", func(t *testing.T) {
		kh := filepath.Join(t.TempDir(), "known_hosts")
		require.NoError(t, os.WriteFile(kh, []byte("# first line\n["+host+"]:"+port+" "+string(ssh.MarshalAuthorizedKey(other.HostKey()))), 0o600))
		cb, err := remote.KnownHosts(kh)
		require.NoError(t, err)
		he := refusal(t, cb)
		assert.Equal(t, []string{kh + ":2"}, he.Known)
		assert.Equal(t, "remote: "+srv.Addr()+": host key mismatch: the server presented "+typ+" key "+fp+
			"; known_hosts trusts another key for it ("+kh+":2); if the host was re-keyed, check the new fingerprint out of band and replace that line", he.Error())
	})
	t.Run("Revoked", func(t *testing.T) {
		kh := filepath.Join(t.TempDir(), "known_hosts")
		require.NoError(t, os.WriteFile(kh, []byte("@revoked * "+string(ssh.MarshalAuthorizedKey(srv.HostKey()))), 0o600))
		cb, err := remote.KnownHosts(kh)
		require.NoError(t, err)
		he := refusal(t, cb)
		assert.Equal(t, "remote: "+srv.Addr()+": "+he.Err.Error()+": the server presented "+typ+" key "+fp+
			"; that key is marked @revoked in "+kh+":1; it will not be trusted", he.Error())
	})
}
