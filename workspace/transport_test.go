package workspace_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
	"github.com/airlockdev/airlock/workspace"
)

// errConnLost is what a Runner whose connection dropped returns: a plain
// error (the Runner contract makes any error but an *ExitError a transport
// failure), deliberately not wrapping sandbox.ErrTransport.
var errConnLost = errors.New("read tcp 10.0.0.1:22: connection reset by peer")

// fault is what a faultRunner does to the commands it matches.
type fault struct {
	match func(sandbox.Command) bool
	// stdout, stdin >= 0: the command's output (input) is cut after that
	// many bytes, the command stopped, and Run fails with errConnLost.
	stdout, stdin int64
	// hang: the command runs for real, then Run never returns (until the
	// test ends), whatever its context.
	hang bool
	// record, when not nil, receives every byte the command wrote on
	// stdout (also past a cut).
	record *bytes.Buffer
}

// faultRunner runs commands through a real Runner, with the fault set at
// the time applied to the commands it matches. Its control deadline is
// control (sandbox.ControlTimeouter) when set.
type faultRunner struct {
	real    sandbox.Runner
	control time.Duration
	release chan struct{} // closed when the test ends: hung Runs return
	mu      sync.Mutex
	f       *fault
}

func newFaultRunner(t *testing.T, real sandbox.Runner, control time.Duration) *faultRunner {
	fr := &faultRunner{real: real, control: control, release: make(chan struct{})}
	t.Cleanup(func() { close(fr.release) })
	return fr
}

func (fr *faultRunner) ControlTimeout() time.Duration { return fr.control }

func (fr *faultRunner) set(f *fault) {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	fr.f = f
}

func (fr *faultRunner) Run(ctx context.Context, cmd sandbox.Command) error {
	fr.mu.Lock()
	f := fr.f
	fr.mu.Unlock()
	if f == nil || !f.match(cmd) {
		return fr.real.Run(ctx, cmd)
	}
	if f.hang {
		err := fr.real.Run(ctx, cmd)
		<-fr.release
		return err
	}
	ictx, cancel := context.WithCancel(ctx)
	defer cancel()
	if f.stdout >= 0 && cmd.Stdout != nil {
		cmd.Stdout = &cutWriter{w: cmd.Stdout, n: f.stdout, cut: cancel, record: f.record}
	} else if f.record != nil && cmd.Stdout != nil {
		cmd.Stdout = io.MultiWriter(cmd.Stdout, f.record)
	}
	if f.stdin >= 0 && cmd.Stdin != nil {
		cmd.Stdin = &cutReader{r: cmd.Stdin, n: f.stdin, cut: cancel}
	}
	_ = fr.real.Run(ictx, cmd) // whatever it says, the connection is gone
	return errConnLost
}

// cutWriter passes n bytes on, then swallows the rest and stops the command.
type cutWriter struct {
	w      io.Writer
	n      int64
	cut    func()
	record *bytes.Buffer
}

func (c *cutWriter) Write(p []byte) (int, error) {
	if c.record != nil {
		c.record.Write(p)
	}
	if c.n <= 0 {
		c.cut()
		return len(p), nil
	}
	k := min(int64(len(p)), c.n)
	if _, err := c.w.Write(p[:k]); err != nil {
		return 0, err
	}
	c.n -= k
	if c.n <= 0 {
		c.cut()
	}
	return len(p), nil
}

// cutReader passes n bytes of r, then blocks reads until the command is
// stopped (the connection went away mid-stream: no EOF ever comes).
type cutReader struct {
	r   io.Reader
	n   int64
	cut func()
}

func (c *cutReader) Read(p []byte) (int, error) {
	if c.n <= 0 {
		c.cut()
		return 0, errConnLost
	}
	if int64(len(p)) > c.n {
		p = p[:c.n]
	}
	k, err := c.r.Read(p)
	c.n -= int64(k)
	return k, err
}

func isProbe(cmd sandbox.Command) bool { return strings.Contains(cmd.Script, "gitversion") }

func isShip(cmd sandbox.Command) bool {
	return strings.Contains(cmd.Script, "g read-tree --reset -u") || strings.Contains(cmd.Script, "cannot clear")
}

func isRestore(cmd sandbox.Command) bool { return strings.Contains(cmd.Script, "airlock-restore 1") }

// streamCuts returns cut points at and around every phase boundary of the
// restore stream s: the magic line, the report line, inside the report,
// the tail line, inside the payload and its last byte.
func streamCuts(t *testing.T, s []byte) []int64 {
	t.Helper()
	var cuts []int64
	add := func(n int) {
		if n >= 0 && n < len(s) {
			cuts = append(cuts, int64(n))
		}
	}
	add(0)
	add(5)
	i := bytes.IndexByte(s, '\n') // end of the magic line
	require.Positive(t, i, "no magic line in %q", s)
	add(i)
	add(i + 1)
	j := i + 1 + bytes.IndexByte(s[i+1:], '\n') // end of the report line
	require.Greater(t, j, i)
	n, err := strconv.Atoi(strings.TrimPrefix(string(s[i+1:j]), "report "))
	require.NoError(t, err)
	add(j + 1)
	add(j + 1 + n/2)
	rep := j + 1 + n // end of the report
	add(rep)
	k := rep + bytes.IndexByte(s[rep:], '\n') // end of the tail line
	add(k - 1)
	add(k + 1)
	add(k + 1 + (len(s)-k-1)/2)
	add(len(s) - 1)
	return cuts
}

// TestTransportCutIsNotHostile cuts the connection in every phase of
// Prepare (probe, ship) and Restore (header, report, tail line, payload,
// after the last byte; Restore runs no probe): each failure wraps sandbox.ErrTransport and
// never workspace.ErrHostile, and the round restores once the connection
// is back.
func TestTransportCutIsNotHostile(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
			fr := newFaultRunner(t, e.spec.Runner, 0)
			e.spec.Runner = fr
			if kind == "git" {
				initRepo(t, e.local, map[string]string{"a": "1\n", "big": strings.Repeat("x", 100<<10)})
			} else {
				write(t, e.local, "a", "1\n")
				write(t, e.local, "big", strings.Repeat("x", 100<<10))
			}
			check := func(what string, err error) {
				t.Helper()
				require.Error(t, err, what)
				assert.ErrorIs(t, err, sandbox.ErrTransport, what)
				assert.NotErrorIs(t, err, workspace.ErrHostile, what)
				assert.NotErrorIs(t, err, sandbox.ErrProtocol, what)
			}
			// Prepare: the probe, then the ship at several points of its stdin.
			fr.set(&fault{match: isProbe, stdout: 3, stdin: -1})
			_, err := workspace.Prepare(ctx(t), e.spec)
			check("prepare: probe cut", err)
			for _, n := range []int64{0, 100, 20 << 10} {
				fr.set(&fault{match: isShip, stdout: -1, stdin: n})
				_, err := workspace.Prepare(ctx(t), e.spec)
				check(fmt.Sprintf("prepare: ship cut after %d bytes", n), err)
			}
			fr.set(nil)
			// (Recovering a sandbox that a cut left half-prepared is
			// tested on its own; start from a fresh one.)
			require.NoError(t, os.RemoveAll(e.remote))
			r, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)

			write(t, e.remote, "b", "from the sandbox\n")
			write(t, e.remote, "big2", strings.Repeat("y", 200<<10))
			// The whole stream arrives, then the connection drops before
			// the exit status: the payload's tail.
			var full bytes.Buffer
			fr.set(&fault{match: isRestore, stdout: -1, stdin: -1, record: &full})
			_, err = r.Restore(ctx(t))
			check("restore: cut after the last byte", err)
			for _, n := range streamCuts(t, full.Bytes()) {
				fr.set(&fault{match: isRestore, stdout: n, stdin: -1})
				_, err := r.Restore(ctx(t))
				check(fmt.Sprintf("restore: stream cut after %d of %d bytes", n, full.Len()), err)
			}
			if kind == "git" {
				// (A plain restore writes files as they stream in.)
				assert.False(t, exists(e.local, "b"), "a cut restore wrote b")
			}

			fr.set(nil)
			_, err = r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, "from the sandbox\n", read(t, e.local, "b"))
			assert.Equal(t, strings.Repeat("y", 200<<10), read(t, e.local, "big2"))
		})
	}
}

// within runs fn and fails the test when it does not return within limit
// (a loose bound: the operation is expected to end near its 1 s control
// deadline).
func within(t *testing.T, limit time.Duration, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		t.Fatalf("the operation did not return within %s", limit)
		return nil
	}
}

// hangScript replaces a matched command's script by one that sleeps, run
// through the real Runner with its context.
type hangScript struct {
	real    sandbox.Runner
	control time.Duration
	match   func(sandbox.Command) bool
}

func (h hangScript) ControlTimeout() time.Duration { return h.control }

func (h hangScript) Run(ctx context.Context, cmd sandbox.Command) error {
	if h.match(cmd) {
		cmd.Script = "sleep 60"
	}
	return h.real.Run(ctx, cmd)
}

// TestProbeHonoursRunnersControlTimeout: a Runner (remote.Host, or any
// sandbox.ControlTimeouter) with a 1 s control deadline whose probe hangs
// fails Prepare with ErrTransport near 1 s, not after the 30 s default.
func TestProbeHonoursRunnersControlTimeout(t *testing.T) {
	t.Run("ControlTimeouter", func(t *testing.T) {
		e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
		e.spec.Runner = hangScript{real: e.spec.Runner, control: time.Second, match: isProbe}
		initRepo(t, e.local, map[string]string{"a": "1\n"})
		start := time.Now()
		err := within(t, 25*time.Second, func() error { _, err := workspace.Prepare(ctx(t), e.spec); return err })
		require.ErrorIs(t, err, sandbox.ErrTransport)
		assert.Less(t, time.Since(start), 15*time.Second)
	})
	t.Run("remote.Config.ControlTimeout", func(t *testing.T) {
		e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
		srv := remotetest.NewServer(t, remotetest.WithDir(filepath.Dir(e.remote)), remotetest.WithHang("gitversion"))
		cfg := srv.Config()
		cfg.ControlTimeout = time.Second
		e.spec.Runner = dialHost(t, srv.Addr(), cfg, filepath.Dir(e.remote)) // through a wrapper that passes the deadline on
		initRepo(t, e.local, map[string]string{"a": "1\n"})
		start := time.Now()
		err := within(t, 25*time.Second, func() error { _, err := workspace.Prepare(ctx(t), e.spec); return err })
		require.ErrorIs(t, err, sandbox.ErrTransport)
		assert.Less(t, time.Since(start), 15*time.Second)
	})
}

// TestRunnerNeverReturns: every command of Prepare and Restore runs for
// real and then its Runner never returns (an exec client that does not
// exit): each operation fails with ErrTransport within the (1 s) control
// deadline, and the round works again once the Runner does.
func TestRunnerNeverReturns(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
			fr := newFaultRunner(t, e.spec.Runner, time.Second)
			e.spec.Runner = fr
			if kind == "git" {
				initRepo(t, e.local, map[string]string{"a": "1\n"})
			} else {
				write(t, e.local, "a", "1\n")
			}
			op := func(what string, fn func() error) {
				t.Helper()
				start := time.Now()
				err := within(t, 25*time.Second, fn)
				require.ErrorIs(t, err, sandbox.ErrTransport, what)
				assert.NotErrorIs(t, err, workspace.ErrHostile, what)
				assert.NotErrorIs(t, err, sandbox.ErrProtocol, what)
				assert.Less(t, time.Since(start), 15*time.Second, what)
			}
			for name, m := range map[string]func(sandbox.Command) bool{"probe": isProbe, "ship": isShip} {
				fr.set(&fault{match: m, hang: true, stdout: -1, stdin: -1})
				op("prepare: "+name, func() error { _, err := workspace.Prepare(ctx(t), e.spec); return err })
			}
			fr.set(nil)
			require.NoError(t, os.RemoveAll(e.remote)) // as above
			r, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			write(t, e.remote, "b", "from the sandbox\n")
			fr.set(&fault{match: isRestore, hang: true, stdout: -1, stdin: -1})
			op("restore", func() error { _, err := r.Restore(ctx(t)); return err })
			fr.set(nil)
			_, err = r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, "from the sandbox\n", read(t, e.local, "b"))
		})
	}
}
