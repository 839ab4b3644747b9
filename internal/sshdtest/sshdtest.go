// Package sshdtest starts a throwaway OpenSSH sshd on a loopback port for
// integration tests: real OpenSSH behaviour (login shell, exec, internal
// SFTP, keepalives), where remotetest is the in-process stand-in.
//
// Start skips the test, with a message that says how to get sshd, when
// /usr/sbin/sshd (or ssh-keygen) is missing; CI installs openssh-server.
// Keys, config and logs live in a temporary directory of the test.
package sshdtest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/airlockdev/airlock/stage/remote"
)

// Path is where Start looks for sshd.
const Path = "/usr/sbin/sshd"

// Server is a running sshd.
type Server struct {
	addr    string
	dir     string
	user    string
	signer  ssh.Signer
	hostKey ssh.PublicKey
	log     string
	base    string
}

// Addr returns "127.0.0.1:PORT".
func (s *Server) Addr() string { return s.addr }

// Dir returns a fresh directory the tests may stage into (the sshd user's
// to write; absolute).
func (s *Server) Dir() string { return s.dir }

// HostKey returns the server's host key.
func (s *Server) HostKey() ssh.PublicKey { return s.hostKey }

// Config returns a client config that trusts exactly this server and logs
// in as the current user with the generated key.
func (s *Server) Config() remote.Config {
	cb, err := remote.FixedHostKey(string(ssh.MarshalAuthorizedKey(s.hostKey)))
	if err != nil {
		panic(err) // a key we just generated always parses
	}
	return remote.Config{User: s.user, Auth: []ssh.AuthMethod{ssh.PublicKeys(s.signer)}, HostKeyCallback: cb}
}

// User returns the user the server lets in (the current user).
func (s *Server) User() string { return s.user }

// Signer returns the client key the server authorizes.
func (s *Server) Signer() ssh.Signer { return s.signer }

// KeyFile returns the path of the client's private key (OpenSSH format,
// no passphrase), for `ssh -i` and the examples' -i flag.
func (s *Server) KeyFile() string { return filepath.Join(s.base, "client") }

// KnownHostsFile returns the path of a known_hosts file that lists exactly
// this server's host key under its address, "[127.0.0.1]:PORT".
func (s *Server) KnownHostsFile() string { return filepath.Join(s.base, "known_hosts") }

// Log returns what sshd has written to its log so far.
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.log)
	return string(b)
}

// SSHConfig returns an OpenSSH client configuration block that reaches
// this server as alias: HostName, Port, User, the client key as the only
// IdentityFile, and KnownHostsFile as the only known_hosts file.
func (s *Server) SSHConfig(alias string) string {
	host, port, _ := net.SplitHostPort(s.addr) // s.addr is JoinHostPort's
	return fmt.Sprintf("Host %s\n  HostName %s\n  Port %s\n  User %s\n  IdentityFile %s\n  IdentitiesOnly yes\n  UserKnownHostsFile %s\n  GlobalKnownHostsFile none\n  StrictHostKeyChecking yes\n",
		alias, host, port, s.user, s.KeyFile(), s.KnownHostsFile())
}

// An Option configures Start.
type Option func(*options)

type options struct {
	noTCPForwarding bool
}

// WithoutTCPForwarding makes the server refuse TCP forwarding
// (AllowTcpForwarding no), as a jump host that must not be one does.
// Default: allowed (a server can be a ProxyJump hop).
func WithoutTCPForwarding() Option {
	return func(o *options) { o.noTCPForwarding = true }
}

// Start starts sshd for tb and stops it on tb.Cleanup. It skips tb when
// sshd or ssh-keygen is missing.
func Start(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if _, err := os.Stat(Path); err != nil {
		tb.Skipf("sshdtest: %s not found (%v); install OpenSSH's server (apt-get install openssh-server) to run the real-sshd tests — .ci/run does", Path, err)
	}
	keygen, err := exec.LookPath("ssh-keygen")
	if err != nil {
		tb.Skipf("sshdtest: ssh-keygen not found; install openssh-client to run the real-sshd tests")
	}
	u, err := user.Current()
	if err != nil {
		tb.Fatalf("sshdtest: current user: %v", err)
	}
	base := tb.TempDir()
	if err := os.Chmod(base, 0o755); err != nil {
		tb.Fatal(err)
	}
	for _, k := range []string{"host", "client"} {
		out, err := exec.Command(keygen, "-q", "-t", "ed25519", "-N", "", "-C", "airlock-"+k, "-f", filepath.Join(base, k)).CombinedOutput()
		if err != nil {
			tb.Fatalf("sshdtest: ssh-keygen: %v: %s", err, out)
		}
	}
	clientPub, err := os.ReadFile(filepath.Join(base, "client.pub"))
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "authorized_keys"), clientPub, 0o600); err != nil {
		tb.Fatal(err)
	}
	hostPub, err := os.ReadFile(filepath.Join(base, "host.pub"))
	if err != nil {
		tb.Fatal(err)
	}
	hostKey, _, _, _, err := ssh.ParseAuthorizedKey(hostPub)
	if err != nil {
		tb.Fatal(err)
	}
	clientKey, err := os.ReadFile(filepath.Join(base, "client"))
	if err != nil {
		tb.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(clientKey)
	if err != nil {
		tb.Fatal(err)
	}
	if os.Geteuid() == 0 {
		// sshd refuses to start without its privilege separation directory.
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			tb.Fatalf("sshdtest: %v", err)
		}
	}
	port, err := freePort()
	if err != nil {
		tb.Fatal(err)
	}
	forwarding := "yes"
	if o.noTCPForwarding {
		forwarding = "no"
	}
	cfg := fmt.Sprintf(`ListenAddress 127.0.0.1
Port %d
HostKey %s
AuthorizedKeysFile %s
PidFile %s
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
AllowUsers %s
Subsystem sftp internal-sftp
AllowTcpForwarding %s
AllowStreamLocalForwarding yes
ClientAliveInterval 0
MaxSessions 64
MaxStartups 64
LogLevel ERROR
`, port, filepath.Join(base, "host"), filepath.Join(base, "authorized_keys"), filepath.Join(base, "sshd.pid"), u.Username, forwarding)
	cfgPath := filepath.Join(base, "sshd_config")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		tb.Fatal(err)
	}
	logPath := filepath.Join(base, "sshd.log")
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, Path, "-D", "-e", "-f", cfgPath, "-E", logPath)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		cancel()
		tb.Fatalf("sshdtest: starting sshd: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	tb.Cleanup(func() {
		cancel()
		<-exited
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		select {
		case err := <-exited:
			log, _ := os.ReadFile(logPath)
			tb.Fatalf("sshdtest: sshd exited: %v: %s%s", err, stderr.String(), log)
		default:
		}
		if time.Now().After(deadline) {
			tb.Fatalf("sshdtest: sshd did not listen on %s within 10 s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	dir := filepath.Join(base, "sandbox")
	if err := os.Mkdir(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	known := fmt.Sprintf("[127.0.0.1]:%d %s", port, hostPub)
	if err := os.WriteFile(filepath.Join(base, "known_hosts"), []byte(known), 0o600); err != nil {
		tb.Fatal(err)
	}
	return &Server{addr: addr, dir: dir, user: u.Username, signer: signer, hostKey: hostKey, log: logPath, base: base}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
