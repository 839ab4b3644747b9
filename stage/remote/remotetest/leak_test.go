package remotetest

import (
	"runtime"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
)

// TestCloseLeavesNoGoroutine runs commands, an SFTP session, a hung exec, a
// running command and a dropped connection through one server (with latency,
// so the delay lines run too), closes it, and checks that the goroutine count
// returns to where it was. It must not run in parallel with other tests.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()

	srv, err := Start(WithHang("hang-me"), WithDropAfter(1<<20), WithLatency(time.Millisecond))
	require.NoError(t, err)
	cfg := clientConfig(srv)
	var clients []*ssh.Client
	connect := func() *ssh.Client {
		c, err := ssh.Dial("tcp", srv.Addr(), cfg)
		require.NoError(t, err)
		clients = append(clients, c)
		return c
	}

	c := connect()
	stdout, _, err := run(t, c, "echo hi; echo err >&2; exit 2", "")
	assert.Equal(t, "hi\n", stdout)
	assert.Equal(t, 2, exitError(t, err).ExitStatus())

	fc, err := sftp.NewClient(c)
	require.NoError(t, err)
	f, err := fc.Create("f")
	require.NoError(t, err)
	_, err = f.Write([]byte("data"))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	_, err = fc.Stat("f")
	require.NoError(t, err)
	// fc stays open: Close must end its server side.

	hung, err := c.NewSession()
	require.NoError(t, err)
	hungDone := make(chan error, 1)
	go func() { hungDone <- hung.Start("hang-me") }()

	running, err := c.NewSession()
	require.NoError(t, err)
	require.NoError(t, running.Start("sleep 1000 & wait"))

	dropped := connect()
	sess, err := dropped.NewSession()
	require.NoError(t, err)
	stdin, err := sess.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, sess.Start("cat > /dev/null"))
	_, err = writeUntilError(stdin, 256<<20)
	require.Error(t, err)

	require.Eventually(t, func() bool { return srv.Execs() == 4 }, 5*time.Second, time.Millisecond)
	require.NoError(t, srv.Close())
	// Close waits: none of the server's goroutines may be left, not even
	// briefly. (Client goroutines end later, when they see the connections
	// close; the poll below covers them.)
	assert.NotContains(t, allStacks(), "remotetest.(*", "a server goroutine outlived Close")

	// The clients see their connections end; closing them ends their side.
	assert.Error(t, <-hungDone)
	closeClient(t, fc)
	for _, c := range clients {
		closeClient(t, c)
	}

	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines before Start, %d after Close:\n%s", before, n, allStacks())
	}
}

func allStacks() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}
