package remotetest

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
)

func TestWithHang(t *testing.T) {
	srv := NewServer(t, WithHang("hang-me"))
	c := dial(t, srv)

	for _, how := range []string{"Start", "Run"} {
		t.Run(how, func(t *testing.T) {
			sess, err := c.NewSession()
			require.NoError(t, err)
			done := make(chan error, 1)
			go func() {
				if how == "Start" {
					done <- sess.Start("echo hang-me")
				} else {
					done <- sess.Run("echo hang-me")
				}
			}()
			select {
			case err := <-done:
				t.Fatalf("hung exec returned: %v", err)
			case <-time.After(300 * time.Millisecond):
			}

			// The connection still serves other commands meanwhile.
			stdout, _, err := run(t, c, "echo fine", "")
			require.NoError(t, err)
			assert.Equal(t, "fine\n", stdout)

			// Closing the channel releases the hung request.
			closeSession(t, sess)
			select {
			case err := <-done:
				assert.Error(t, err)
			case <-time.After(5 * time.Second):
				t.Fatal("hung exec not released by closing its session")
			}
		})
	}

	t.Run("released by Close", func(t *testing.T) {
		srv := NewServer(t, WithHang("hang-me"))
		c := dial(t, srv)
		sess, err := c.NewSession()
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() { done <- sess.Start("hang-me") }()
		require.Eventually(t, func() bool { return srv.Execs() == 1 }, 5*time.Second, time.Millisecond)
		require.NoError(t, srv.Close())
		select {
		case err := <-done:
			assert.Error(t, err)
		case <-time.After(5 * time.Second):
			t.Fatal("hung exec not released by Server.Close")
		}
	})
}

func TestWithDropAfter(t *testing.T) {
	const limit = 256 << 10
	srv := NewServer(t, WithDropAfter(limit))
	c := dial(t, srv)

	// Small traffic is fine.
	stdout, _, err := run(t, c, "echo before", "")
	require.NoError(t, err)
	assert.Equal(t, "before\n", stdout)

	sess, err := c.NewSession()
	require.NoError(t, err)
	stdin, err := sess.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, sess.Start("cat > /dev/null"))
	// The client's window and the kernel's buffers absorb some bytes past the
	// drop; the write fails once they are full or the reset arrives.
	n, err := writeUntilError(stdin, 256<<20)
	require.Error(t, err, "writing past the limit must fail")
	assert.Greater(t, n, int64(limit/2))

	// The connection is gone: Wait returns and new sessions fail.
	connDone := make(chan error, 1)
	go func() { connDone <- c.Wait() }()
	select {
	case <-connDone:
	case <-time.After(5 * time.Second):
		t.Fatal("connection not closed after the drop")
	}
	_, err = c.NewSession()
	require.Error(t, err)

	// A new connection starts counting afresh.
	c2 := dial(t, srv)
	stdout, _, err = run(t, c2, "echo after", "")
	require.NoError(t, err)
	assert.Equal(t, "after\n", stdout)
	assert.Equal(t, int64(2), srv.Conns())
}

func TestWithLatency(t *testing.T) {
	const latency = 20 * time.Millisecond
	srv := NewServer(t, WithLatency(latency))
	c := dial(t, srv)

	t.Run("round trips", func(t *testing.T) {
		start := time.Now()
		for range 10 {
			_, _, err := run(t, c, "true", "")
			require.NoError(t, err)
		}
		assert.GreaterOrEqual(t, time.Since(start), 10*latency)
	})
	t.Run("one request is one round trip", func(t *testing.T) {
		fast := dial(t, NewServer(t)) // the same requests without the option
		for _, tc := range []struct {
			c        *ssh.Client
			slow     bool
			name     string
			duration time.Duration
		}{{c: fast, name: "no latency"}, {c: c, slow: true, name: "latency"}} {
			start := time.Now()
			for range 10 {
				_, _, err := tc.c.SendRequest("keepalive@openssh.com", true, nil)
				require.NoError(t, err)
			}
			elapsed := time.Since(start)
			if tc.slow {
				assert.GreaterOrEqual(t, elapsed, 10*latency)
			} else {
				assert.Less(t, elapsed, 10*latency)
			}
			t.Logf("%s: 10 keepalives in %v", tc.name, elapsed)
		}
	})

	// A 10 MiB transfer moves in SSH packets of at most 32 KiB: 320 of them.
	// Serializing a delay per packet would cost 320*latency = 6.4 s.
	const size = 10 << 20
	serialized := time.Duration(size/(32<<10)) * latency
	t.Run("download throughput", func(t *testing.T) {
		start := time.Now()
		stdout, _, err := run(t, c, fmt.Sprintf("head -c %d /dev/zero", size), "")
		elapsed := time.Since(start)
		require.NoError(t, err)
		assert.Len(t, stdout, size)
		assert.Less(t, elapsed, serialized/2)
		t.Logf("10 MiB down in %v", elapsed)
	})
	t.Run("upload throughput", func(t *testing.T) {
		start := time.Now()
		stdout, _, err := run(t, c, "wc -c", strings.Repeat("x", size))
		elapsed := time.Since(start)
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprint(size), strings.TrimSpace(stdout))
		assert.Less(t, elapsed, serialized/2)
		t.Logf("10 MiB up in %v", elapsed)
	})
}

func TestWithLatencyKeepsOrder(t *testing.T) {
	srv := NewServer(t, WithLatency(2*time.Millisecond))
	c := dial(t, srv)
	sess, err := c.NewSession()
	require.NoError(t, err)
	defer closeSession(t, sess)
	var in bytes.Buffer
	for i := range 20000 {
		fmt.Fprintf(&in, "%d\n", i)
	}
	sess.Stdin = bytes.NewReader(in.Bytes())
	var out bytes.Buffer
	sess.Stdout = &out
	require.NoError(t, sess.Run("cat"))
	assert.True(t, bytes.Equal(in.Bytes(), out.Bytes()), "cat output differs from its input")
}
