package remotetest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage/remote"
)

func TestExec(t *testing.T) {
	srv := NewServer(t)
	c := dial(t, srv)
	cases := []struct {
		name, command, stdin string
		stdout, stderr       string
		status               int // 0: Run returns nil
	}{
		{name: "stdout and stderr", command: "echo out; echo err >&2", stdout: "out\n", stderr: "err\n"},
		{name: "stdin to stdout", command: "cat; echo done", stdin: "in\nput", stdout: "in\nputdone\n"},
		{name: "exit status", command: "cat >&2; exit 3", stdin: "x", stderr: "x", status: 3},
		{name: "runs in Dir", command: "pwd -P", stdout: srv.Dir() + "\n"},
		{name: "shell syntax", command: `for i in 1 2; do printf "%s," "$i"; done`, stdout: "1,2,"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, err := run(t, c, tc.command, tc.stdin)
			assert.Equal(t, tc.stdout, stdout)
			assert.Equal(t, tc.stderr, stderr)
			if tc.status == 0 {
				assert.NoError(t, err)
				return
			}
			ee := exitError(t, err)
			assert.Equal(t, tc.status, ee.ExitStatus())
			assert.Empty(t, ee.Signal())
		})
	}
}

func TestExecOutputForwardedBeforeExitStatus(t *testing.T) {
	srv := NewServer(t)
	c := dial(t, srv)
	const n = 5 << 20
	stdout, stderr, err := run(t, c, fmt.Sprintf("head -c %d /dev/zero; head -c %d /dev/zero >&2; exit 4", n, n), "")
	assert.Len(t, stdout, n)
	assert.Len(t, stderr, n)
	assert.Equal(t, 4, exitError(t, err).ExitStatus())
}

func TestExecStdinEOF(t *testing.T) {
	srv := NewServer(t)
	c := dial(t, srv)
	sess, err := c.NewSession()
	require.NoError(t, err)
	defer closeSession(t, sess)
	stdin, err := sess.StdinPipe()
	require.NoError(t, err)
	var out bytes.Buffer
	sess.Stdout = &out
	require.NoError(t, sess.Start("wc -c"))
	_, err = io.WriteString(stdin, "12345")
	require.NoError(t, err)
	require.NoError(t, stdin.Close()) // EOF: wc must see the end and exit
	require.NoError(t, wait(t, sess))
	assert.Equal(t, "5", strings.TrimSpace(out.String()))
}

func TestExitSignal(t *testing.T) {
	srv := NewServer(t)
	c := dial(t, srv)
	for _, sig := range []string{"KILL", "TERM"} {
		t.Run(sig, func(t *testing.T) {
			_, _, err := run(t, c, "echo before; kill -"+sig+" $$; echo after", "")
			ee := exitError(t, err)
			assert.Equal(t, sig, ee.Signal())
			assert.Equal(t, 128+int(map[string]int{"KILL": 9, "TERM": 15}[sig]), ee.ExitStatus())
		})
	}
}

func TestSignalRequestKillsCommand(t *testing.T) {
	srv := NewServer(t)
	c := dial(t, srv)
	sess, pid, _ := startWithPID(t, c, "echo $$; sleep 1000")
	require.NoError(t, sess.Signal(ssh.SIGTERM))
	ee := exitError(t, wait(t, sess))
	assert.Equal(t, "TERM", ee.Signal())
	assert.Eventually(t, func() bool { return processGone(t, pid) }, 5*time.Second, 10*time.Millisecond)
}

func TestSignalRequestReachesProcessGroup(t *testing.T) {
	srv := NewServer(t)
	c := dial(t, srv)
	// Only a signal to the group reaches the background sleep; the shell's
	// trap alone would exit 7 and leave the sleep running.
	sess, sleepPID, _ := startWithPID(t, c, `trap "exit 7" TERM; sleep 1000 & echo $!; wait`)
	// Until its exec, the forked child may still run the shell's trap.
	waitExec(t, sleepPID, "sleep")
	require.NoError(t, sess.Signal(ssh.SIGTERM))
	assert.Equal(t, 7, exitError(t, wait(t, sess)).ExitStatus())
	assert.Eventually(t, func() bool { return processGone(t, sleepPID) }, 5*time.Second, 10*time.Millisecond)
}

func TestCloseKillsProcessGroup(t *testing.T) {
	cases := []struct {
		name  string
		close func(t *testing.T, c *ssh.Client, s *ssh.Session)
	}{
		{name: "session closed", close: func(t *testing.T, _ *ssh.Client, s *ssh.Session) { require.NoError(t, s.Close()) }},
		{name: "connection closed", close: func(t *testing.T, c *ssh.Client, _ *ssh.Session) { require.NoError(t, c.Close()) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := NewServer(t)
			c := dial(t, srv)
			// The group, not just the shell: the sleep is a background child.
			sess, pid, _ := startWithPID(t, c, "sleep 1000 & echo $!; wait")
			tc.close(t, c, sess)
			assert.Eventually(t, func() bool { return processGone(t, pid) }, 5*time.Second, 10*time.Millisecond)
		})
	}
}

func TestServerCloseKillsProcessGroup(t *testing.T) {
	srv, err := Start()
	require.NoError(t, err)
	c, err := ssh.Dial("tcp", srv.Addr(), clientConfig(srv))
	require.NoError(t, err)
	sess, pid, _ := startWithPID(t, c, "sleep 1000 & echo $!; wait")
	waitErr := make(chan error, 1)
	go func() { waitErr <- sess.Wait() }()
	require.NoError(t, srv.Close())
	assert.Eventually(t, func() bool { return processGone(t, pid) }, 5*time.Second, 10*time.Millisecond)
	select {
	case err := <-waitErr:
		assert.Error(t, err) // the connection went away: no exit status
	case <-time.After(5 * time.Second):
		t.Fatal("session.Wait did not return after Close")
	}
	closeClient(t, c)
}

func TestEnvRequestRefusedAndNotApplied(t *testing.T) {
	srv := NewServer(t)
	c := dial(t, srv)
	sess, err := c.NewSession()
	require.NoError(t, err)
	defer closeSession(t, sess)
	assert.EqualError(t, sess.Setenv("AIRLOCK_REMOTETEST_ENV", "leaked"), "ssh: setenv failed")
	out, err := sess.Output(`printf %s "${AIRLOCK_REMOTETEST_ENV-unset}"`)
	require.NoError(t, err)
	assert.Equal(t, "unset", string(out))
}

func TestRefusedRequests(t *testing.T) {
	srv := NewServer(t)
	c := dial(t, srv)

	t.Run("pty-req", func(t *testing.T) {
		sess, err := c.NewSession()
		require.NoError(t, err)
		defer closeSession(t, sess)
		assert.EqualError(t, sess.RequestPty("xterm", 24, 80, ssh.TerminalModes{}), "ssh: pty-req failed")
	})
	t.Run("shell", func(t *testing.T) {
		sess, err := c.NewSession()
		require.NoError(t, err)
		defer closeSession(t, sess)
		assert.EqualError(t, sess.Shell(), "ssh: could not start shell")
	})
	t.Run("unknown subsystem", func(t *testing.T) {
		sess, err := c.NewSession()
		require.NoError(t, err)
		defer closeSession(t, sess)
		assert.EqualError(t, sess.RequestSubsystem("netconf"), "ssh: subsystem request failed")
	})
	t.Run("second exec on a channel", func(t *testing.T) {
		sess, err := c.NewSession()
		require.NoError(t, err)
		defer closeSession(t, sess)
		require.NoError(t, sess.Start("sleep 1000"))
		ok, err := sessionRequest(sess, "exec", ssh.Marshal(struct{ Command string }{"true"}))
		require.NoError(t, err)
		assert.False(t, ok)
	})
	t.Run("unknown channel request", func(t *testing.T) {
		sess, err := c.NewSession()
		require.NoError(t, err)
		defer closeSession(t, sess)
		ok, err := sessionRequest(sess, "x-unknown@example.com", nil)
		require.NoError(t, err)
		assert.False(t, ok)
	})
	t.Run("keepalive global request", func(t *testing.T) {
		ok, payload, err := c.SendRequest("keepalive@openssh.com", true, nil)
		require.NoError(t, err)
		assert.False(t, ok) // what OpenSSH answers; the answer is what keeps a client alive
		assert.Empty(t, payload)
	})
	t.Run("non-session channel", func(t *testing.T) {
		_, _, err := c.OpenChannel("direct-tcpip", nil)
		var oce *ssh.OpenChannelError
		require.ErrorAs(t, err, &oce)
		assert.Equal(t, ssh.UnknownChannelType, oce.Reason)
	})
	// The connection is still good after all of that.
	stdout, _, err := run(t, c, "echo ok", "")
	require.NoError(t, err)
	assert.Equal(t, "ok\n", stdout)
}

// sessionRequest sends a raw want-reply channel request on sess.
func sessionRequest(sess *ssh.Session, name string, payload []byte) (bool, error) {
	return sess.SendRequest(name, true, payload)
}

func TestAuth(t *testing.T) {
	srv := NewServer(t)
	_, otherKey, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	otherSigner, err := ssh.NewSignerFromKey(otherKey)
	require.NoError(t, err)

	t.Run("wrong client key", func(t *testing.T) {
		cfg := clientConfig(srv)
		cfg.Auth = []ssh.AuthMethod{ssh.PublicKeys(otherSigner)}
		_, err := ssh.Dial("tcp", srv.Addr(), cfg)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "unable to authenticate")
	})
	t.Run("no auth", func(t *testing.T) {
		cfg := clientConfig(srv)
		cfg.Auth = nil
		_, err := ssh.Dial("tcp", srv.Addr(), cfg)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "unable to authenticate")
	})
	t.Run("config pins the host key", func(t *testing.T) {
		other := NewServer(t)
		cfg := clientConfig(srv) // trusts srv's key, not other's
		_, err := ssh.Dial("tcp", other.Addr(), cfg)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "host key mismatch")
	})
	t.Run("any user name", func(t *testing.T) {
		cfg := clientConfig(srv)
		cfg.User = "someone-else"
		c, err := ssh.Dial("tcp", srv.Addr(), cfg)
		require.NoError(t, err)
		closeClient(t, c)
	})
	cfg := srv.Config()
	assert.NotEmpty(t, cfg.User)
	assert.Len(t, cfg.Auth, 1)
	assert.NotNil(t, cfg.HostKeyCallback)
	assert.Equal(t, ssh.KeyAlgoED25519, srv.HostKey().Type())
}

func TestExecsAndConns(t *testing.T) {
	srv := NewServer(t, WithHang("hang-me"))
	assert.Equal(t, int64(0), srv.Execs())
	assert.Equal(t, int64(0), srv.Conns())
	c := dial(t, srv)
	for range 3 {
		_, _, err := run(t, c, "true", "")
		require.NoError(t, err)
	}
	// A session that never execs does not count.
	sess, err := c.NewSession()
	require.NoError(t, err)
	closeSession(t, sess)
	// A hung exec counts.
	hung, err := c.NewSession()
	require.NoError(t, err)
	hungDone := make(chan error, 1)
	go func() { hungDone <- hung.Start("hang-me") }()
	assert.Eventually(t, func() bool { return srv.Execs() == 4 }, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, int64(1), srv.Conns())
	dial(t, srv)
	assert.Equal(t, int64(2), srv.Conns())
	assert.Equal(t, int64(4), srv.Execs())

	closeClient(t, c) // releases the hung request
	assert.Error(t, <-hungDone)
}

func TestDir(t *testing.T) {
	t.Run("default is removed on Close", func(t *testing.T) {
		srv, err := Start()
		require.NoError(t, err)
		dir := srv.Dir()
		assert.True(t, filepath.IsAbs(dir))
		fi, err := os.Stat(dir)
		require.NoError(t, err)
		assert.True(t, fi.IsDir())
		require.NoError(t, srv.Close())
		_, err = os.Stat(dir)
		assert.ErrorIs(t, err, os.ErrNotExist)
	})
	t.Run("WithDir is used and kept", func(t *testing.T) {
		dir := t.TempDir()
		srv, err := Start(WithDir(dir))
		require.NoError(t, err)
		assert.Equal(t, dir, srv.Dir())
		c, err := ssh.Dial("tcp", srv.Addr(), clientConfig(srv))
		require.NoError(t, err)
		_, _, err = run(t, c, "echo hi > made-here", "")
		require.NoError(t, err)
		closeClient(t, c)
		require.NoError(t, srv.Close())
		b, err := os.ReadFile(filepath.Join(dir, "made-here"))
		require.NoError(t, err)
		assert.Equal(t, "hi\n", string(b))
	})
	t.Run("WithDir relative is made absolute", func(t *testing.T) {
		t.Chdir(t.TempDir())
		require.NoError(t, os.Mkdir("rel", 0o755))
		srv := NewServer(t, WithDir("rel"))
		wd, err := os.Getwd()
		require.NoError(t, err)
		assert.Equal(t, filepath.Join(wd, "rel"), srv.Dir())
	})
}

func TestStartErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	cases := []struct {
		name string
		opt  Option
		err  string
	}{
		{"negative latency", WithLatency(-time.Millisecond), "remotetest: WithLatency(-1ms): negative latency"},
		{"empty hang", WithHang(""), "remotetest: WithHang: empty match would hang every command"},
		{"zero drop", WithDropAfter(0), "remotetest: WithDropAfter(0): n must be positive"},
		{"empty dir", WithDir(""), "remotetest: WithDir: empty directory name"},
		{"missing dir", WithDir(filepath.Join(t.TempDir(), "missing")), "no such file or directory"},
		{"file as dir", WithDir(file), "remotetest: WithDir: " + file + " is not a directory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := Start(tc.opt)
			require.Error(t, err)
			assert.Nil(t, srv)
			assert.Contains(t, err.Error(), tc.err)
		})
	}
}

func TestCloseIdempotent(t *testing.T) {
	srv, err := Start()
	require.NoError(t, err)
	addr := srv.Addr()
	require.NoError(t, srv.Close())
	require.NoError(t, srv.Close())
	_, err = ssh.Dial("tcp", addr, clientConfig(srv))
	assert.ErrorContains(t, err, "connection refused")
}

// TestConfigHostKeyErrorIsProduction: a Config that trusts another
// server's key is refused by remote.Dial with the production
// *remote.HostKeyError — the presented fingerprint, the trusted one and
// the advice — not x/crypto's bare "ssh: host key mismatch".
func TestConfigHostKeyErrorIsProduction(t *testing.T) {
	srv := NewServer(t)
	other := NewServer(t)
	_, err := remote.Dial(t.Context(), srv.Addr(), other.Config()) // trusts other's key only
	var he *remote.HostKeyError
	require.ErrorAs(t, err, &he)
	assert.ErrorIs(t, err, remote.ErrHostKeyMismatch)
	assert.Equal(t, srv.Addr(), he.Host)
	assert.Equal(t, ssh.FingerprintSHA256(srv.HostKey()), he.Fingerprint)
	assert.EqualError(t, err, "remote: "+srv.Addr()+": host key mismatch: the server presented ssh-ed25519 key "+ssh.FingerprintSHA256(srv.HostKey())+
		"; the only trusted key is ssh-ed25519 "+ssh.FingerprintSHA256(other.HostKey())+
		"; if the host was re-keyed, check the new fingerprint out of band and pass its key line")

	// Its own key passes.
	h, err := remote.Dial(t.Context(), srv.Addr(), srv.Config())
	require.NoError(t, err)
	require.NoError(t, h.Close())
}

// TestServerDial: Dial hands a test a connected Host that runs commands
// and is closed when the test ends.
func TestServerDial(t *testing.T) {
	srv := NewServer(t)
	var host *remote.Host
	t.Run("dial", func(t *testing.T) {
		host = srv.Dial(t)
		var out bytes.Buffer
		require.NoError(t, host.Run(t.Context(), sandbox.Command{Script: "echo ok", Stdout: &out}))
		assert.Equal(t, "ok\n", out.String())
	})
	err := host.Run(t.Context(), sandbox.Command{Script: "true"})
	assert.ErrorIs(t, err, sandbox.ErrTransport, "the subtest's cleanup closed the Host")
}
