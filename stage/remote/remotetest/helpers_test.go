package remotetest

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
)

// clientConfig turns the server's remote.Config into an ssh.ClientConfig the
// way a client would.
func clientConfig(srv *Server) *ssh.ClientConfig {
	cfg := srv.Config()
	return &ssh.ClientConfig{
		User:            cfg.User,
		Auth:            cfg.Auth,
		HostKeyCallback: cfg.HostKeyCallback,
		Timeout:         10 * time.Second,
	}
}

func dial(t *testing.T, srv *Server) *ssh.Client {
	t.Helper()
	c, err := ssh.Dial("tcp", srv.Addr(), clientConfig(srv))
	require.NoError(t, err)
	t.Cleanup(func() { closeClient(t, c) })
	return c
}

// closeClient closes c, which may already be closed by the test or the server.
func closeClient(t *testing.T, c io.Closer) {
	t.Helper()
	if err := c.Close(); err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.EOF) {
		t.Errorf("close client: %v", err)
	}
}

// run runs command with stdin and returns what it wrote and how it exited.
func run(t *testing.T, c *ssh.Client, command, stdin string) (stdout, stderr string, err error) {
	t.Helper()
	sess, err := c.NewSession()
	require.NoError(t, err)
	defer closeSession(t, sess)
	var out, errOut bytes.Buffer
	sess.Stdin = strings.NewReader(stdin)
	sess.Stdout = &out
	sess.Stderr = &errOut
	err = sess.Run(command)
	return out.String(), errOut.String(), err
}

// closeSession closes a session that may already be closed by its end or by
// the end of its connection.
func closeSession(t *testing.T, s *ssh.Session) {
	t.Helper()
	if err := s.Close(); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		t.Errorf("close session: %v", err)
	}
}

// startWithPID starts command, which must print a pid on its first line, and
// returns the session, the pid and the rest of stdout.
func startWithPID(t *testing.T, c *ssh.Client, command string) (*ssh.Session, int, *bufio.Reader) {
	t.Helper()
	sess, err := c.NewSession()
	require.NoError(t, err)
	t.Cleanup(func() { closeSession(t, sess) })
	stdout, err := sess.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, sess.Start(command))
	r := bufio.NewReader(stdout)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	require.NoError(t, err)
	require.False(t, processGone(t, pid), "pid %d should be running", pid)
	return sess, pid, r
}

// processGone reports whether pid has exited: no such process, or a zombie
// nobody has reaped yet (init in a container may never reap it).
func processGone(t *testing.T, pid int) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, os.ErrNotExist) {
		return true
	}
	require.NoError(t, err)
	i := bytes.LastIndexByte(b, ')')
	require.Positive(t, i, "malformed /proc/%d/stat: %q", pid, b)
	fields := strings.Fields(string(b[i+1:]))
	require.NotEmpty(t, fields)
	return fields[0] == "Z" || fields[0] == "X"
}

func exitError(t *testing.T, err error) *ssh.ExitError {
	t.Helper()
	var ee *ssh.ExitError
	require.ErrorAs(t, err, &ee)
	return ee
}

// waitExec waits until pid runs program (its exec is done), so that a signal
// sent now meets program's dispositions, not those of the shell that forked it.
func waitExec(t *testing.T, pid int, program string) {
	t.Helper()
	require.Eventually(t, func() bool {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		return err == nil && bytes.HasPrefix(b, []byte(program+"\x00"))
	}, 5*time.Second, time.Millisecond, "pid %d never ran %s", pid, program)
}

// wait is sess.Wait bounded by a deadline, so a broken server fails the test
// instead of hanging it.
func wait(t *testing.T, sess *ssh.Session) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- sess.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("session.Wait did not return within 10s")
		return nil
	}
}

// writeUntilError writes to w in 64 KiB chunks until a write fails or limit
// bytes are written, and returns the count and the error.
func writeUntilError(w io.Writer, limit int64) (int64, error) {
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	var n int64
	for n < limit {
		m, err := w.Write(chunk)
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
