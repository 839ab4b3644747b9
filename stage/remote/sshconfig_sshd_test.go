package remote_test

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/airlockdev/airlock/internal/sshdtest"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage/remote"
)

// sshdBlock is a Host block that reaches srv as alias with srv's client
// key; the known_hosts settings come from the test's Host * block.
func sshdBlock(srv *sshdtest.Server, alias string) string {
	host, port, _ := net.SplitHostPort(srv.Addr()) // sshdtest's Addr is JoinHostPort's
	return fmt.Sprintf("Host %s\n  HostName %s\n  Port %s\n  IdentityFile %s\n", alias, host, port, srv.KeyFile())
}

// knownLine is srv's known_hosts line, as ssh writes it.
func knownLine(addr string, key ssh.PublicKey) string {
	return knownhosts.Line([]string{addr}, key) + "\n"
}

// dialAndEcho dials addr with cfg, runs echo over it and closes it.
func dialAndEcho(t *testing.T, addr string, cfg remote.Config) error {
	t.Helper()
	h, err := remote.Dial(t.Context(), addr, cfg)
	if err != nil {
		return err
	}
	defer func() { require.NoError(t, h.Close()) }()
	var out bytes.Buffer
	require.NoError(t, h.Run(t.Context(), sandbox.Command{Script: "echo over-ssh-config", Stdout: &out}))
	assert.Equal(t, "over-ssh-config\n", out.String())
	return nil
}

// TestLoadSSHConfigSSHD connects to a real sshd from a configuration file
// the test writes: the alias gives HostName, Port, User and IdentityFile
// (a missing one first, skipped as ssh skips it), UserKnownHostsFile,
// ConnectTimeout and ServerAliveInterval.
func TestLoadSSHConfigSSHD(t *testing.T) {
	srv := sshdtest.Start(t)
	dir := t.TempDir()
	known := writeFile(t, filepath.Join(dir, "known_hosts"), knownLine(srv.Addr(), srv.HostKey()))
	config := writeFile(t, filepath.Join(dir, "config"), sshdBlock(srv, "sandbox")+
		"  User "+srv.User()+"\n  ConnectTimeout 5\n  ServerAliveInterval 2\n"+
		"Host *\n  IdentityFile "+filepath.Join(dir, "missing-key")+"\n  UserKnownHostsFile "+known+"\n  GlobalKnownHostsFile none\n")
	addr, cfg, err := remote.LoadSSHConfig("sandbox", remote.WithSSHConfigFiles(config, ""), remote.WithSSHHome(dir), remote.WithSSHAgent(""))
	require.NoError(t, err)
	assert.Equal(t, srv.Addr(), addr)
	assert.Equal(t, srv.User(), cfg.User)
	assert.Equal(t, 5*time.Second, cfg.DialTimeout, "ConnectTimeout")
	assert.Equal(t, 2*time.Second, cfg.KeepAlive, "ServerAliveInterval")
	require.NoError(t, dialAndEcho(t, addr, cfg), "sshd log:\n%s", srv.Log())

	// The same file with the key no longer trusted.
	require.NoError(t, os.WriteFile(known, nil, 0o600))
	addr, cfg, err = remote.LoadSSHConfig("sandbox", remote.WithSSHConfigFiles(config, ""), remote.WithSSHHome(dir), remote.WithSSHAgent(""))
	require.NoError(t, err)
	err = dialAndEcho(t, addr, cfg)
	var he *remote.HostKeyError
	require.ErrorAs(t, err, &he)
	assert.ErrorIs(t, err, remote.ErrUnknownHost)
	assert.Equal(t, ssh.FingerprintSHA256(srv.HostKey()), he.Fingerprint)
	assert.Contains(t, err.Error(), "then add the host's line to "+known)
}

// TestLoadSSHConfigAcceptNewSSHD: StrictHostKeyChecking accept-new writes
// a new host's key to UserKnownHostsFile and logs in; a changed key is then
// refused, and the file is left as it was.
func TestLoadSSHConfigAcceptNewSSHD(t *testing.T) {
	srv := sshdtest.Start(t)
	dir := t.TempDir()
	known := filepath.Join(dir, "dot-ssh", "known_hosts") // does not exist yet
	config := writeFile(t, filepath.Join(dir, "config"), sshdBlock(srv, "sandbox")+
		"  StrictHostKeyChecking accept-new\n  UserKnownHostsFile "+known+"\n  GlobalKnownHostsFile none\n  User "+srv.User()+"\n")
	load := func() (string, remote.Config) {
		addr, cfg, err := remote.LoadSSHConfig("sandbox", remote.WithSSHConfigFiles(config, ""), remote.WithSSHHome(dir), remote.WithSSHAgent(""))
		require.NoError(t, err)
		return addr, cfg
	}
	addr, cfg := load()
	require.NoError(t, dialAndEcho(t, addr, cfg), "sshd log:\n%s", srv.Log())
	b, err := os.ReadFile(known)
	require.NoError(t, err)
	assert.Equal(t, knownLine(srv.Addr(), srv.HostKey()), string(b), "the new host's key is remembered")
	require.NoError(t, dialAndEcho(t, addr, cfg), "and trusted by the same Config")
	addr, cfg = load()
	require.NoError(t, dialAndEcho(t, addr, cfg), "and by a new one")
	after, err := os.ReadFile(known)
	require.NoError(t, err)
	assert.Equal(t, string(b), string(after), "written once")

	// The host is re-keyed (here: known_hosts holds another key for it).
	changed := knownLine(srv.Addr(), signerOf(t).PublicKey())
	require.NoError(t, os.WriteFile(known, []byte(changed), 0o600))
	err = dialAndEcho(t, addr, cfg)
	var he *remote.HostKeyError
	require.ErrorAs(t, err, &he)
	assert.ErrorIs(t, err, remote.ErrHostKeyMismatch)
	assert.Equal(t, []string{known + ":1"}, he.Known)
	assert.Contains(t, err.Error(), ssh.FingerprintSHA256(srv.HostKey()))
	after, err = os.ReadFile(known)
	require.NoError(t, err)
	assert.Equal(t, changed, string(after), "a changed key is not written")
}

// TestLoadSSHConfigProxyJumpSSHD reaches a target sshd through two jump
// sshds (ProxyJump j1,j2), each logged in to with its own key and each
// host key checked: a wrong key for either jump host is refused with a
// *HostKeyError naming it, and a jump host that refuses TCP forwarding
// stops the dial (so the target was reached through the hops).
func TestLoadSSHConfigProxyJumpSSHD(t *testing.T) {
	j1, j2, target := sshdtest.Start(t), sshdtest.Start(t), sshdtest.Start(t)
	noFwd := sshdtest.Start(t, sshdtest.WithoutTCPForwarding())
	dir := t.TempDir()
	known := writeFile(t, filepath.Join(dir, "known_hosts"), knownLine(j1.Addr(), j1.HostKey())+knownLine(j2.Addr(), j2.HostKey())+
		knownLine(target.Addr(), target.HostKey())+knownLine(noFwd.Addr(), noFwd.HostKey()))
	config := writeFile(t, filepath.Join(dir, "config"), sshdBlock(target, "target")+"  ProxyJump j1,j2\n"+
		sshdBlock(target, "target-via-nofwd")+"  ProxyJump j1,nofwd\n"+
		sshdBlock(j1, "j1")+sshdBlock(j2, "j2")+sshdBlock(noFwd, "nofwd")+
		"Host *\n  User "+j1.User()+"\n  IdentitiesOnly yes\n  UserKnownHostsFile "+known+"\n  GlobalKnownHostsFile none\n")
	load := func(alias string) (string, remote.Config) {
		addr, cfg, err := remote.LoadSSHConfig(alias, remote.WithSSHConfigFiles(config, ""), remote.WithSSHHome(dir), remote.WithSSHAgent(""))
		require.NoError(t, err)
		return addr, cfg
	}
	addr, cfg := load("target")
	assert.Equal(t, target.Addr(), addr)
	require.Len(t, cfg.Jumps, 2)
	assert.Equal(t, []string{j1.Addr(), j2.Addr()}, []string{cfg.Jumps[0].Addr, cfg.Jumps[1].Addr})
	require.NoError(t, dialAndEcho(t, addr, cfg), "logs:\n%s\n%s\n%s", j1.Log(), j2.Log(), target.Log())

	for _, tc := range []struct {
		name   string
		jump   *sshdtest.Server
		others []*sshdtest.Server
	}{
		{"WrongKeyForFirstJump", j1, []*sshdtest.Server{j2, target}},
		{"WrongKeyForSecondJump", j2, []*sshdtest.Server{j1, target}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines := knownLine(tc.jump.Addr(), signerOf(t).PublicKey())
			for _, o := range tc.others {
				lines += knownLine(o.Addr(), o.HostKey())
			}
			require.NoError(t, os.WriteFile(known, []byte(lines), 0o600))
			err := dialAndEcho(t, addr, cfg)
			var he *remote.HostKeyError
			require.ErrorAs(t, err, &he)
			assert.ErrorIs(t, err, remote.ErrHostKeyMismatch)
			assert.Equal(t, tc.jump.Addr(), he.Host, "the jump host is named")
			assert.Equal(t, ssh.FingerprintSHA256(tc.jump.HostKey()), he.Fingerprint)
		})
	}
	t.Run("UnknownJump", func(t *testing.T) {
		require.NoError(t, os.WriteFile(known, []byte(knownLine(j1.Addr(), j1.HostKey())+knownLine(target.Addr(), target.HostKey())), 0o600))
		err := dialAndEcho(t, addr, cfg)
		var he *remote.HostKeyError
		require.ErrorAs(t, err, &he)
		assert.ErrorIs(t, err, remote.ErrUnknownHost)
		assert.Equal(t, j2.Addr(), he.Host)
	})
	t.Run("JumpRefusesForwarding", func(t *testing.T) {
		require.NoError(t, os.WriteFile(known, []byte(knownLine(j1.Addr(), j1.HostKey())+knownLine(noFwd.Addr(), noFwd.HostKey())+knownLine(target.Addr(), target.HostKey())), 0o600))
		addr, cfg := load("target-via-nofwd")
		err := dialAndEcho(t, addr, cfg)
		require.Error(t, err)
		assert.NotErrorIs(t, err, sandbox.ErrTransport, "a configuration problem: retrying will not help")
		assert.True(t, strings.HasPrefix(err.Error(), "remote: jump host "+noFwd.Addr()+" refused to connect to "+target.Addr()+": "), err.Error())
		assert.True(t, strings.HasSuffix(err.Error(), "; it must allow TCP forwarding (AllowTcpForwarding in its sshd_config)"), err.Error())
	})
}

// TestLoadSSHConfigAgentSSHD logs in with a key only an ssh-agent holds,
// found through SSH_AUTH_SOCK; IdentitiesOnly yes offers only the agent
// keys the IdentityFiles name; an encrypted key file is refused with an
// error that names it and says to add it to the agent, and works once the
// agent holds it.
func TestLoadSSHConfigAgentSSHD(t *testing.T) {
	srv := sshdtest.Start(t)
	dir := t.TempDir() // the home: no ~/.ssh/id_* keys
	sock := serveAgent(t, privateKey(t, srv.KeyFile()))
	t.Setenv("SSH_AUTH_SOCK", sock)
	known := writeFile(t, filepath.Join(dir, "known_hosts"), knownLine(srv.Addr(), srv.HostKey()))
	host, port, err := net.SplitHostPort(srv.Addr())
	require.NoError(t, err)
	head := fmt.Sprintf("Host sandbox\n  HostName %s\n  Port %s\n  User %s\n  UserKnownHostsFile %s\n  GlobalKnownHostsFile none\n", host, port, srv.User(), known)
	load := func(t *testing.T, extra string, opts ...remote.SSHConfigOption) (string, remote.Config) {
		t.Helper()
		config := writeFile(t, filepath.Join(t.TempDir(), "config"), head+extra)
		addr, cfg, err := remote.LoadSSHConfig("sandbox", append([]remote.SSHConfigOption{remote.WithSSHConfigFiles(config, ""), remote.WithSSHHome(dir)}, opts...)...)
		require.NoError(t, err)
		return addr, cfg
	}

	t.Run("FromSSHAuthSock", func(t *testing.T) {
		addr, cfg := load(t, "")
		require.NoError(t, dialAndEcho(t, addr, cfg), "sshd log:\n%s", srv.Log())
	})
	t.Run("IdentitiesOnlyNamesTheAgentKey", func(t *testing.T) {
		pub := writeFile(t, filepath.Join(t.TempDir(), "sandbox-key.pub"), string(ssh.MarshalAuthorizedKey(srv.Signer().PublicKey())))
		addr, cfg := load(t, "  IdentitiesOnly yes\n  IdentityFile "+strings.TrimSuffix(pub, ".pub")+"\n")
		require.NoError(t, dialAndEcho(t, addr, cfg), "the agent signs for the key the .pub names")
	})
	t.Run("IdentitiesOnlyOtherKey", func(t *testing.T) {
		other := filepath.Join(t.TempDir(), "other")
		writeKey(t, other, newKey(t), "", false)
		addr, cfg := load(t, "  IdentitiesOnly yes\n  IdentityFile "+other+"\n")
		err := dialAndEcho(t, addr, cfg)
		assert.ErrorContains(t, err, "unable to authenticate", "the agent's key is not offered")
	})
	t.Run("EncryptedKey", func(t *testing.T) {
		enc := filepath.Join(t.TempDir(), "encrypted")
		writeKey(t, enc, *privateKey(t, srv.KeyFile()).(*ed25519.PrivateKey), "pass", false)
		addr, cfg := load(t, "  IdentityFile "+enc+"\n", remote.WithSSHAgent(""))
		err := dialAndEcho(t, addr, cfg)
		assert.ErrorIs(t, err, remote.ErrEncryptedKey)
		assert.ErrorContains(t, err, "identity file "+enc+", but the private key is encrypted and there is no passphrase prompt: add it to ssh-agent (ssh-add "+enc+")")

		addr, cfg = load(t, "  IdentityFile "+enc+"\n  IdentitiesOnly yes\n") // SSH_AUTH_SOCK's agent holds it
		require.NoError(t, dialAndEcho(t, addr, cfg))
	})
}
