//go:build linux

package sandbox_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/sshdtest"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage/remote"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
)

// procDeadline is the control deadline of the runners of these tests but
// SSHD's: the grace after TERM is half of it. sshdDeadline is SSHD's: 3 s
// was too short for an sshd session to start under a CI run twice as slow
// as usual.
const (
	procDeadline = 3 * time.Second
	sshdDeadline = 8 * time.Second
)

// procRig is one runner whose sandbox is this machine, so that the tests
// can check from the sandbox side what is left.
type procRig struct {
	r   sandbox.Runner
	dir string // a directory of the sandbox the commands may use
	cut func() // makes the transport dead (nil: the runner has none)
}

// procRunners are the runners every Process test runs over.
var procRunners = []struct {
	name string
	rig  func(t *testing.T) procRig // its cut is non-nil where the runner has a transport
	wire bool                       // the runner has a transport to cut
}{
	{"Local", func(t *testing.T) procRig {
		dir := t.TempDir()
		return procRig{r: shortRunner{sandbox.Local(dir), procDeadline}, dir: dir}
	}, false},
	{"Exec", func(t *testing.T) procRig {
		dir := t.TempDir()
		return procRig{r: dirRunner{shortRunner{sandbox.Exec(), procDeadline}, dir}, dir: dir}
	}, false},
	{"Remotetest", func(t *testing.T) procRig {
		srv := remotetest.NewServer(t)
		h := dialHost(t, srv.Addr(), srv.Config(), procDeadline)
		return procRig{r: h, dir: srv.Dir(), cut: func() { require.NoError(t, srv.Close()) }}
	}, true},
	{"SSHD", func(t *testing.T) procRig {
		srv := sshdtest.Start(t)
		h := dialHost(t, srv.Addr(), srv.Config(), sshdDeadline)
		return procRig{r: h, dir: srv.Dir(), cut: func() { require.NoError(t, h.Close()) }}
	}, true},
}

func dialHost(t *testing.T, addr string, cfg remote.Config, deadline time.Duration) *remote.Host {
	t.Helper()
	cfg.ControlTimeout = deadline
	h, err := remote.Dial(t.Context(), addr, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	return h
}

// eachRunner runs fn over every runner.
func eachRunner(t *testing.T, fn func(t *testing.T, rig procRig)) {
	for _, pr := range procRunners {
		t.Run(pr.name, func(t *testing.T) {
			t.Parallel() // mostly waiting out graces; each has its own tag
			fn(t, pr.rig(t))
		})
	}
}

// shortRunner gives a Runner a control deadline of its own.
type shortRunner struct {
	sandbox.Runner
	d time.Duration
}

func (s shortRunner) ControlTimeout() time.Duration { return s.d }

// dirRunner runs every Command in dir unless it names another.
type dirRunner struct {
	shortRunner
	dir string
}

func (d dirRunner) Run(ctx context.Context, cmd sandbox.Command) error {
	if cmd.Dir == "" {
		cmd.Dir = d.dir
	}
	return d.shortRunner.Run(ctx, cmd)
}

// failingRunner runs through its Runner until failed is set, then fails
// every Run as a dead transport would.
type failingRunner struct {
	sandbox.Runner
	failed atomic.Bool
}

func (f *failingRunner) Run(ctx context.Context, cmd sandbox.Command) error {
	if f.failed.Load() {
		return fmt.Errorf("%w: test: the connection is gone", sandbox.ErrTransport)
	}
	return f.Runner.Run(ctx, cmd)
}

func (f *failingRunner) ControlTimeout() time.Duration { return sandbox.ControlDeadline(f.Runner) }

// termIgnoringTree starts children and grandchildren that all ignore TERM,
// backgrounded subshells with sleeps, and one process that leaves the
// session and group (setsid) and can be found by its tag alone.
const termIgnoringTree = `trap '' TERM
m=$(mktemp -d)
sh -c 'trap "" TERM; sleep 300 & sleep 300 & : > "$1/child"; wait' sh "$m" &
( trap '' TERM; ( trap '' TERM; : > "$m/sub"; sleep 300 ) & sleep 300 ) &
setsid sh -c 'trap "" TERM; sleep 300 & : > "$1/escaped"; wait' sh "$m" >/dev/null 2>&1 &
until [ -e "$m/child" ] && [ -e "$m/sub" ] && [ -e "$m/escaped" ]; do sleep 0.05; done
rm -r "$m"
echo ready
wait
`

// member is a live process of this machine that belongs to an agent process.
type member struct{ pid, session int }

// members scans /proc, as the sandbox would, for the live (not zombie)
// processes that carry tag or are in the session or group pid.
func members(t *testing.T, tag string, pid int) []member {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var found []member
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 4 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		pgrp, _ := strconv.Atoi(f[2])
		sid, _ := strconv.Atoi(f[3])
		env, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		tagged := bytes.Contains(append([]byte{0}, env...), []byte("\x00"+sandbox.ProcessTagVar+"="+tag+"\x00"))
		if tagged || (pid > 1 && (pgrp == pid || sid == pid)) {
			found = append(found, member{n, sid})
		}
	}
	return found
}

// reap kills, from this machine, whatever is left of an agent process, so
// that a test that leaves processes (a dead transport, a failure) does not
// leak them.
func reap(t *testing.T, tag string, pid int) {
	for range 50 {
		left := members(t, tag, pid)
		if len(left) == 0 {
			return
		}
		for _, m := range left {
			_ = syscall.Kill(m.pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("processes of tag %s are still running after SIGKILL from the test", tag)
}

// started is an agent process of a test, its output read in the background.
type started struct {
	p     *sandbox.Process
	out   chan []byte // all of stdout, once it ends
	ready chan struct{}
}

// start starts script over r and reads its stdout until it ends; ready is
// closed once a line "ready" has been read. Whatever is left at the end of
// the test is reaped.
func start(t *testing.T, r sandbox.Runner, script string, env map[string]string) started {
	t.Helper()
	p, err := sandbox.Start(t.Context(), r, sandbox.Command{Script: script, Env: env})
	require.NoError(t, err)
	t.Cleanup(func() { reap(t, p.Tag(), p.PID()) })
	s := started{p: p, out: make(chan []byte, 1), ready: make(chan struct{})}
	go func() {
		var all bytes.Buffer
		br := bufio.NewReader(p.Stdout())
		seen := false
		for {
			line, err := br.ReadBytes('\n')
			all.Write(line)
			if !seen && string(line) == "ready\n" {
				seen = true
				close(s.ready)
			}
			if err != nil {
				s.out <- all.Bytes()
				return
			}
		}
	}()
	return s
}

func (s started) awaitReady(t *testing.T) {
	t.Helper()
	select {
	case <-s.ready:
	case <-time.After(10 * time.Second):
		t.Fatal("the agent process did not print ready within 10 s")
	}
}

// TestProcessStopsTermIgnoringTree: Stop ends a tree of processes that all
// ignore TERM, one of them outside the session and group, and the sandbox
// side finds none of them left.
func TestProcessStopsTermIgnoringTree(t *testing.T) {
	eachRunner(t, func(t *testing.T, rig procRig) {
		s := start(t, rig.r, termIgnoringTree, nil)
		s.awaitReady(t)
		pid := s.p.PID()
		before := members(t, s.p.Tag(), pid)
		require.GreaterOrEqual(t, len(before), 6, "the tree is there before Stop: %v", before)
		escaped := 0
		for _, m := range before {
			if m.session != pid {
				escaped++
			}
		}
		require.Positive(t, escaped, "one process of the tree left the session: only its tag finds it")

		began := time.Now()
		exit, err := s.p.Stop(t.Context())
		require.NoError(t, err)
		assert.Equal(t, sandbox.Exit{Status: -1, Signal: "KILL", Exited: true, Verified: true}, exit)
		assert.Less(t, time.Since(began), 4*sandbox.ControlDeadline(rig.r), "Stop is bounded")
		assert.Empty(t, members(t, s.p.Tag(), pid), "no process of the tree is left")
		assert.Equal(t, "ready\n", string(<-s.out))

		again, err := s.p.Stop(t.Context())
		require.NoError(t, err)
		assert.Equal(t, exit, again, "a second Stop reports the same end")
		err = s.p.Write(t.Context(), []byte("x"))
		assert.ErrorIs(t, err, io.ErrClosedPipe)
		assert.ErrorIs(t, err, sandbox.ErrTransport, "a Write after the shutdown is a transport failure, not the caller's CloseStdin")
		assert.ErrorContains(t, err, "the process session is closed (Stop, a failed Write, the end of Start's context, or the command's end)")
	})
}

// TestProcessStopDeadTransport: a Stop whose steps cannot run says the end
// is not verified, wraps ErrTransport and names the tag — and the processes
// really are still there.
func TestProcessStopDeadTransport(t *testing.T) {
	for _, pr := range procRunners {
		hows := []string{"RunFails"}
		if pr.wire {
			hows = append(hows, "Cut") // the server closed, the connection closed
		}
		for _, how := range hows {
			t.Run(pr.name+"/"+how, func(t *testing.T) {
				t.Parallel()
				rig := pr.rig(t)
				fr := &failingRunner{Runner: rig.r}
				s := start(t, fr, termIgnoringTree, nil)
				s.awaitReady(t)
				if how == "Cut" {
					rig.cut()
				} else {
					fr.failed.Store(true)
				}
				exit, err := s.p.Stop(t.Context())
				require.ErrorIs(t, err, sandbox.ErrTransport)
				assert.False(t, exit.Verified)
				assert.ErrorContains(t, err, "its end is not verified")
				assert.ErrorContains(t, err, sandbox.ProcessTagVar+"="+s.p.Tag())
				assert.NotEmpty(t, members(t, s.p.Tag(), s.p.PID()), "the tree is really still running: Verified false was the truth")
			})
		}
	}
}

// TestProcessWriteEcho: Write delivers bytes exactly (cat echoes them), the
// output is byte-exact, and the end after CloseStdin is the command's own.
func TestProcessWriteEcho(t *testing.T) {
	eachRunner(t, func(t *testing.T, rig procRig) {
		s := start(t, rig.r, "cat", map[string]string{"UNUSED": "x\ny"})
		var want bytes.Buffer
		for i := range 256 {
			want.WriteByte(byte(i))
		}
		noise := make([]byte, 300<<10)
		_, err := rand.Read(noise)
		require.NoError(t, err)
		want.Write(noise)
		for chunk := range slicesChunk(want.Bytes(), 7001) {
			require.NoError(t, s.p.Write(t.Context(), chunk))
		}
		require.NoError(t, s.p.Write(t.Context(), nil), "an empty Write delivers nothing and succeeds")
		require.NoError(t, s.p.CloseStdin())
		exit, err := s.p.Wait(t.Context())
		require.NoError(t, err)
		assert.Equal(t, sandbox.Exit{Status: 0, Exited: true, Verified: true}, exit)
		got := <-s.out
		assert.True(t, bytes.Equal(want.Bytes(), got), "stdout is the input byte for byte (%d bytes in, %d out)", want.Len(), len(got))
		err = s.p.Write(t.Context(), []byte("late"))
		assert.ErrorContains(t, err, "Write after CloseStdin")
		assert.NotErrorIs(t, err, sandbox.ErrTransport)
	})
}

func slicesChunk(b []byte, n int) func(func([]byte) bool) {
	return func(yield func([]byte) bool) {
		for len(b) > 0 {
			k := min(n, len(b))
			if !yield(b[:k]) {
				return
			}
			b = b[k:]
		}
	}
}

// TestProcessStdoutBinary: the command's binary output arrives byte-exact,
// nothing of the header in it; its exit status is reported.
func TestProcessStdoutBinary(t *testing.T) {
	eachRunner(t, func(t *testing.T, rig procRig) {
		data := make([]byte, 1<<20)
		_, err := rand.Read(data)
		require.NoError(t, err)
		copy(data, "\x00\nairlock-process-v1 \xff\n")
		f := filepath.Join(rig.dir, "blob")
		require.NoError(t, os.WriteFile(f, data, 0o644))
		s := start(t, rig.r, `cat "$BLOB"; exit 3`, map[string]string{"BLOB": f})
		exit, err := s.p.Wait(t.Context())
		require.NoError(t, err)
		assert.Equal(t, sandbox.Exit{Status: 3, Exited: true, Verified: true}, exit)
		got := <-s.out
		assert.True(t, bytes.Equal(data, got), "stdout is the file byte for byte (%d bytes, got %d)", len(data), len(got))
	})
}

// TestProcessWriteStalled: a Write into a command that stopped reading
// fails at the control deadline with ErrTransport and stops the process.
func TestProcessWriteStalled(t *testing.T) {
	eachRunner(t, func(t *testing.T, rig procRig) {
		s := start(t, rig.r, "trap '' TERM; echo ready; sleep 300", nil)
		s.awaitReady(t)
		began := time.Now()
		err := s.p.Write(t.Context(), make([]byte, 64<<20))
		require.ErrorIs(t, err, sandbox.ErrTransport)
		d := sandbox.ControlDeadline(rig.r)
		assert.ErrorContains(t, err, fmt.Sprintf("did not take it within the %s control deadline", d))
		assert.ErrorContains(t, err, "the process session is closed and the process is being stopped")
		assert.Less(t, time.Since(began), d+2*time.Second, "the Write returned at its deadline")
		again := s.p.Write(t.Context(), []byte("x"))
		assert.ErrorIs(t, again, sandbox.ErrTransport, "later Writes fail the same way")
		exit, err := s.p.Wait(t.Context())
		require.NoError(t, err)
		assert.True(t, exit.Verified)
		assert.Equal(t, "KILL", exit.Signal)
		assert.Empty(t, members(t, s.p.Tag(), s.p.PID()))
	})
}

// TestProcessWriteCutByStop: a Write blocked on a command that does not
// read, cut off by Stop, fails with ErrTransport saying it was cut off and
// that part of it may have been delivered; a Write after it fails the same
// way.
func TestProcessWriteCutByStop(t *testing.T) {
	eachRunner(t, func(t *testing.T, rig procRig) {
		s := start(t, rig.r, "echo ready; sleep 300", nil)
		s.awaitReady(t)
		wrote, started := make(chan error, 1), make(chan struct{})
		input := make([]byte, 64<<20) // allocated (and zeroed) before the clock starts
		go func() {
			close(started)
			wrote <- s.p.Write(context.Background(), input)
		}()
		// Long enough, once the writing goroutine runs, for the Write to be
		// under way (and blocked: the command never reads) on a loaded
		// machine; 300 ms was not always, and 1 s counted from the go
		// statement was not under a CI run twice as slow as usual (2 s now).
		<-started
		time.Sleep(2 * time.Second)
		_, err := s.p.Stop(t.Context())
		require.NoError(t, err)
		select {
		case err = <-wrote:
		case <-time.After(sandbox.ControlDeadline(rig.r)):
			t.Fatal("the blocked Write did not return after Stop")
		}
		require.ErrorIs(t, err, sandbox.ErrTransport)
		assert.ErrorContains(t, err, "delivering 67108864 bytes of input: cut off, part of it may have reached the command")
		assert.ErrorContains(t, err, "the process session is closed")
		again := s.p.Write(t.Context(), []byte("x"))
		assert.ErrorIs(t, again, sandbox.ErrTransport)
		assert.ErrorContains(t, again, "the process session is closed (Stop, a failed Write, the end of Start's context, or the command's end)")
	})
}

// TestProcessLeftoversOfAnEndedCommand: a command that ends and leaves a
// TERM-ignoring child behind is settled: the child is stopped and the end
// verified.
func TestProcessLeftoversOfAnEndedCommand(t *testing.T) {
	eachRunner(t, func(t *testing.T, rig procRig) {
		s := start(t, rig.r, "(trap '' TERM; exec sleep 300) >/dev/null 2>&1 & exit 0", nil)
		exit, err := s.p.Wait(t.Context())
		require.NoError(t, err)
		assert.Equal(t, sandbox.Exit{Status: 0, Exited: true, Verified: true}, exit)
		assert.Empty(t, members(t, s.p.Tag(), s.p.PID()))
	})
}

// TestProcessStartContext: the end of Start's context stops the process.
func TestProcessStartContext(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	p, err := sandbox.Start(ctx, shortRunner{sandbox.Local(dir), procDeadline}, sandbox.Command{Script: "trap '' TERM; sleep 300"})
	require.NoError(t, err)
	t.Cleanup(func() { reap(t, p.Tag(), p.PID()) })
	go func() { _, _ = io.Copy(io.Discard, p.Stdout()) }()
	require.NotEmpty(t, members(t, p.Tag(), p.PID()))
	cancel()
	select {
	case <-p.Done():
	case <-time.After(4 * procDeadline):
		t.Fatal("the process was not settled after its context ended")
	}
	exit, err := p.Wait(t.Context())
	require.NoError(t, err)
	assert.True(t, exit.Verified)
	assert.Empty(t, members(t, p.Tag(), p.PID()))
}

// TestProcessStartRefuses: what Start refuses before it runs anything.
func TestProcessStartRefuses(t *testing.T) {
	r := sandbox.Local(t.TempDir())
	for name, c := range map[string]struct {
		cmd  sandbox.Command
		want string
	}{
		"Stdin":  {sandbox.Command{Script: "true", Stdin: strings.NewReader("")}, "Command.Stdin must be nil"},
		"Stdout": {sandbox.Command{Script: "true", Stdout: io.Discard}, "Command.Stdout must be nil"},
		"Big":    {sandbox.Command{Script: strings.Repeat("#", sandbox.MaxProcessScript+1)}, "over the limit of 65536"},
		"Tag":    {sandbox.Command{Script: "true", Env: map[string]string{sandbox.ProcessTagVar: "x"}}, "is the process's tag"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := sandbox.Start(t.Context(), r, c.cmd)
			assert.ErrorContains(t, err, c.want)
		})
	}
	t.Run("MissingDir", func(t *testing.T) {
		_, err := sandbox.Start(t.Context(), r, sandbox.Command{Script: "true", Dir: "missing"})
		assert.ErrorIs(t, err, os.ErrNotExist)
		assert.ErrorContains(t, err, "starting a process")
	})
}

// TestProcessWriteCancelled: a Write whose ctx ends part-way closes the
// session too; one whose ctx ended before it began delivers nothing and
// closes nothing.
func TestProcessWriteCancelled(t *testing.T) {
	r := shortRunner{sandbox.Local(t.TempDir()), procDeadline}
	s := start(t, r, "echo ready; sleep 300", nil)
	s.awaitReady(t)
	done, cancel := context.WithCancel(t.Context())
	cancel()
	err := s.p.Write(done, []byte("x"))
	require.ErrorIs(t, err, context.Canceled)
	assert.ErrorContains(t, err, "input not delivered")
	select {
	case <-s.p.Done():
		t.Fatal("a Write that delivered nothing closed the session")
	case <-time.After(100 * time.Millisecond):
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	err = s.p.Write(ctx, make([]byte, 16<<20))
	require.ErrorIs(t, err, sandbox.ErrTransport)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	exit, err := s.p.Wait(t.Context())
	require.NoError(t, err)
	assert.Equal(t, sandbox.Exit{Status: -1, Signal: "TERM", Exited: true, Verified: true}, exit)
}

// TestProcessStopWaitBounded: Stop's ctx bounds only the wait; the
// shutdown goes on and Wait reports it.
func TestProcessStopWaitBounded(t *testing.T) {
	r := shortRunner{sandbox.Local(t.TempDir()), procDeadline}
	s := start(t, r, "trap '' TERM; echo ready; sleep 300", nil)
	s.awaitReady(t)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err := s.p.Stop(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorContains(t, err, "stopped waiting for its end")
	exit, err := s.p.Wait(t.Context())
	require.NoError(t, err)
	assert.Equal(t, sandbox.Exit{Status: -1, Signal: "KILL", Exited: true, Verified: true}, exit)
}
