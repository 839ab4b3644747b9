package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
)

// stubborn is a script that ignores TERM, starts a child that does too,
// and writes its pid (its group's id) to $PF.
const stubborn = `trap '' TERM; sleep 30 & echo $$ >"$PF"; wait; sleep 30`

// startStubborn runs stubborn through r under ctx and returns its group id
// and the channel Run's result arrives on.
func startStubborn(t *testing.T, ctx context.Context, r sandbox.Runner) (int, <-chan error) {
	t.Helper()
	pf := filepath.Join(t.TempDir(), "pid")
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, sandbox.Command{Script: stubborn, Env: map[string]string{"PF": pf}}) }()
	pg := readPid(t, pf)
	killGroupAtEnd(t, pg)
	return pg, done
}

// TestExecWatchdog: a script that ignores ctx and TERM, run through a
// client that ignores ctx too and whose kill call fails (a dead
// transport), is still killed by the deadline, inside the sandbox: its
// whole group is gone soon after the deadline. Without a deadline the
// same setup leaves it running (so the watchdog is what killed it).
func TestExecWatchdog(t *testing.T) {
	f := &fakeSDK{ignoreCtx: true, failKill: true}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	pg, done := startStubborn(t, ctx, sandbox.FromExec(f.exec))
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of a 2s deadline")
	}
	var se *sandbox.StopError
	require.ErrorAs(t, err, &se)
	assert.False(t, se.Verified, "the kill call failed, yet termination is reported verified")
	assert.Contains(t, se.Detail, "connection refused")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorIs(t, err, sandbox.ErrTransport)
	assert.True(t, waitGone(t, pg, 5*time.Second), "the script's group %d is alive %s after a 2s deadline", pg, time.Since(start).Round(time.Millisecond))

	t.Run("without a deadline it stays", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		pg, done := startStubborn(t, ctx, sandbox.FromExec((&fakeSDK{ignoreCtx: true, failKill: true}).exec))
		time.Sleep(3 * time.Second)
		cancel()
		<-done
		assert.True(t, groupAlive(t, pg), "the group died without a watchdog: the test cannot tell the watchdog's work")
	})
}

// TestExecCancelVerified: over a client whose kill call works, a cancelled
// stubborn command's group is gone and Run says so (a StopError with
// Verified); the group is checked from this machine, the sandbox.
func TestExecCancelVerified(t *testing.T) {
	runners := map[string]sandbox.Runner{"FromExec": sandbox.FromExec((&fakeSDK{}).exec)}
	for name, prefix := range execPrefixes(t) {
		runners[name] = sandbox.Exec(prefix...)
	}
	for name, r := range runners {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			pg, done := startStubborn(t, ctx, r)
			cancel()
			err := <-done
			var se *sandbox.StopError
			require.ErrorAs(t, err, &se)
			assert.True(t, se.Verified, "termination not verified: %v", err)
			assert.ErrorIs(t, err, context.Canceled)
			assert.ErrorIs(t, err, sandbox.ErrTransport)
			assert.False(t, groupAlive(t, pg), "the group %d is alive although Run said it is gone", pg)
		})
	}
}

// TestExecCancelNotVerified: when the kill call fails, Run says that
// termination is not verified, and why.
func TestExecCancelNotVerified(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pg, done := startStubborn(t, ctx, sandbox.FromExec((&fakeSDK{failKill: true}).exec))
	cancel()
	err := <-done
	var se *sandbox.StopError
	require.ErrorAs(t, err, &se)
	assert.False(t, se.Verified)
	assert.Contains(t, err.Error(), "not verified")
	assert.Contains(t, err.Error(), "connection refused")
	assert.True(t, groupAlive(t, pg), "the group is gone: the test did not exercise an unverified stop")

	t.Run("kill through an exec that fails", func(t *testing.T) {
		// The CLI's second exec runs the same argv prefix: one that fails
		// when it sees the kill script.
		r := sandbox.Exec("sh", "-c", `case "$3" in *airlock-exec-kill*) exit 7;; esac; exec "$@"`, "sh")
		ctx, cancel := context.WithCancel(context.Background())
		pg, done := startStubborn(t, ctx, r)
		cancel()
		err := <-done
		var se *sandbox.StopError
		require.ErrorAs(t, err, &se)
		assert.False(t, se.Verified)
		assert.Contains(t, se.Detail, "exit status 7")
		assert.True(t, groupAlive(t, pg))
	})
}

// failingReader yields data, then (after wait, when set) fails.
type failingReader struct {
	data []byte
	err  error
	wait func()
}

func (f *failingReader) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		if f.wait != nil {
			f.wait()
		}
		return 0, f.err
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

// TestExecStdinFails: when Command.Stdin fails mid-stream the sandbox sees
// no end of its input: a script that writes its stdin to a file and then
// marks it done never marks it. With a clean end, it does (so the test can
// fail).
func TestExecStdinFails(t *testing.T) {
	injected := errors.New("injected read failure")
	runners := map[string]func() sandbox.Runner{"FromExec": func() sandbox.Runner { return sandbox.FromExec((&fakeSDK{}).exec) }}
	for name, prefix := range execPrefixes(t) {
		runners[name] = func() sandbox.Runner { return sandbox.Exec(prefix...) }
	}
	for name, newRunner := range runners {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			cmd := sandbox.Command{Script: `cat > f && : > done`, Dir: dir}
			data := []byte(strings.Repeat("part of a tar stream\n", 1000))
			// The failure comes once the script has read all the data, and
			// is waiting for more.
			waitRead := func() {
				for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
					if fi, err := os.Stat(filepath.Join(dir, "f")); err == nil && fi.Size() == int64(len(data)) {
						return
					}
				}
				t.Errorf("the script did not write the data it read")
			}
			cmd.Stdin = &failingReader{data: data, err: injected, wait: waitRead}
			_, _, err := run(t, newRunner(), cmd)
			assert.ErrorIs(t, err, sandbox.ErrTransport)
			assert.ErrorIs(t, err, injected)
			assert.Contains(t, err.Error(), "reading Command.Stdin failed")
			time.Sleep(300 * time.Millisecond)
			assert.NoFileExists(t, filepath.Join(dir, "done"), "the sandbox took a failed stdin for its end")

			cmd.Stdin = &failingReader{data: []byte("whole\n"), err: io.EOF}
			_, _, err = run(t, newRunner(), cmd)
			require.NoError(t, err)
			assert.FileExists(t, filepath.Join(dir, "done"))
			b, err := os.ReadFile(filepath.Join(dir, "f"))
			require.NoError(t, err)
			assert.Equal(t, "whole\n", string(b))
		})
	}
}

// TestExecNoSetsid: in a sandbox without setsid the script shares the
// wrapper's process group; a stop kills the script's own process and says
// that termination is not verified (its children cannot be told apart).
func TestExecNoSetsid(t *testing.T) {
	bin := t.TempDir()
	for _, tool := range []string{"sh", "sleep", "rm"} { // sh: the local client, found on Environ's PATH
		p, err := exec.LookPath(tool)
		require.NoError(t, err)
		require.NoError(t, os.Symlink(p, filepath.Join(bin, tool)))
	}
	r := sandbox.ExecWith(sandbox.ExecOptions{Environ: []string{"PATH=" + bin}})
	out, _, err := run(t, r, sandbox.Command{Script: "echo ran"})
	require.NoError(t, err)
	assert.Equal(t, "ran\n", out)

	ctx, cancel := context.WithCancel(context.Background())
	pf := filepath.Join(t.TempDir(), "pid")
	done := make(chan error, 1)
	go func() {
		done <- r.Run(ctx, sandbox.Command{Script: `trap '' TERM; echo $$ >"$PF"; while :; do sleep 1; done`, Env: map[string]string{"PF": pf}})
	}()
	pid := readPid(t, pf)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	cancel()
	err = <-done
	var se *sandbox.StopError
	require.ErrorAs(t, err, &se)
	assert.False(t, se.Verified)
	assert.Contains(t, se.Detail, "no setsid")
	assert.Eventually(t, func() bool { return syscall.Kill(pid, 0) != nil || isZombie(pid) }, 3*time.Second, 20*time.Millisecond, "the script %d outlived the stop", pid)
}

// isZombie reports whether pid is a zombie.
func isZombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(f) > 0 && f[0] == "Z"
}

// TestExecEnviron: ExecOptions.Environ is the client's environment (and so
// the plain prefix's script's); by default this process's environment
// stays here but for the listed variables.
func TestExecEnviron(t *testing.T) {
	t.Setenv("AIRLOCK_HOST_SECRET", "host-secret")
	t.Setenv("KUBECONFIG", "/k/config")
	script := `printf '%s|%s|%s' "$AIRLOCK_HOST_SECRET" "$KUBECONFIG" "$AIRLOCK_CLIENT"`
	out, _, err := run(t, sandbox.Exec(), sandbox.Command{Script: script})
	require.NoError(t, err)
	assert.Equal(t, "|/k/config|", out, "the default client environment")
	out, _, err = run(t, sandbox.ExecWith(sandbox.ExecOptions{Environ: []string{"PATH=/usr/bin:/bin", "AIRLOCK_CLIENT=c"}}), sandbox.Command{Script: script})
	require.NoError(t, err)
	assert.Equal(t, "||c", out, "ExecOptions.Environ")
}

// shortControl gives a Runner a control deadline of d.
type shortControl struct {
	sandbox.Runner
	d time.Duration
}

func (s shortControl) ControlTimeout() time.Duration { return s.d }

// TestExecWatchdogThroughControl: sandbox.Control's deadline reaches the
// sandbox: a control step whose script ignores TERM, over a transport
// that can neither stop the client nor run the kill call, is killed in
// the sandbox when the control deadline passes.
func TestExecWatchdogThroughControl(t *testing.T) {
	r := shortControl{sandbox.FromExec((&fakeSDK{ignoreCtx: true, failKill: true}).exec), 2 * time.Second}
	pf := filepath.Join(t.TempDir(), "pid")
	done := make(chan error, 1)
	go func() {
		done <- sandbox.Control(context.Background(), r, sandbox.Command{Script: stubborn, Env: map[string]string{"PF": pf}})
	}()
	pg := readPid(t, pf)
	killGroupAtEnd(t, pg)
	err := <-done
	assert.ErrorIs(t, err, sandbox.ErrTransport)
	assert.Contains(t, err.Error(), "control deadline")
	assert.True(t, waitGone(t, pg, 5*time.Second), "the control step's group %d outlived its deadline", pg)
}

// TestExecClientEndsSandbox: over bwrap with its own PID namespace the
// sandbox ends with the client; with ExecOptions.ClientEndsSandbox a
// cancelled stubborn command is gone (checked on this machine, by its
// unique command line) and the stop is verified; without it the kill
// exec, in a new namespace, cannot find the command and the stop is not
// verified.
func TestExecClientEndsSandbox(t *testing.T) {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		t.Skip("bwrap (Debian bubblewrap) is not installed")
	}
	argv := []string{bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--unshare-pid", "--die-with-parent", "--new-session", "--"}
	if out, err := exec.Command(argv[0], append(argv[1:], "true")...).CombinedOutput(); err != nil {
		t.Skipf("bwrap does not work on this machine (user namespaces?): %v: %s", err, out)
	}
	shared := append(append([]string{}, argv[:8]...), "--bind", t.TempDir(), "/tmp")
	shared = append(shared, argv[10:]...)
	for _, c := range []struct {
		name   string
		argv   []string
		ends   bool
		detail string
	}{
		{"ClientEndsSandbox", argv, true, ""},
		{"a private /tmp: no run file", argv, false, "run file was not found"},
		{"a shared /tmp: another namespace", shared, false, "another PID namespace"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ends := c.ends
			r := sandbox.ExecWith(sandbox.ExecOptions{Environ: []string{"PATH=/usr/bin:/bin"}, ClientEndsSandbox: ends}, c.argv...)
			marker := strconv.Itoa(3000 + time.Now().Nanosecond()%1000)
			ctx, cancel := context.WithCancel(context.Background())
			out := make(chan struct{})
			done := make(chan error, 1)
			go func() {
				done <- r.Run(ctx, sandbox.Command{Script: `trap '' TERM; sleep ` + marker + ` & echo up; wait`, Stdout: closeOnWrite(out)})
			}()
			select {
			case <-out:
			case err := <-done:
				t.Fatalf("the command ended before it started: %v", err)
			}
			cancel()
			err := <-done
			var se *sandbox.StopError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, ends, se.Verified, "Verified: %v", err)
			assert.Contains(t, se.Detail, c.detail)
			assert.Eventually(t, func() bool { return !cmdlineRunning("sleep\x00" + marker + "\x00") }, 3*time.Second, 20*time.Millisecond,
				"the sandbox's sleep %s outlived the killed bwrap", marker)
		})
	}
}

// closeOnWrite returns a writer that closes c on its first write.
func closeOnWrite(c chan struct{}) io.Writer {
	var once sync.Once
	return writerFunc(func(p []byte) (int, error) { once.Do(func() { close(c) }); return len(p), nil })
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// cmdlineRunning reports whether a live process on this machine has a
// command line holding needle.
func cmdlineRunning(needle string) bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(b, []byte(needle)) {
			if n, err := strconv.Atoi(e.Name()); err == nil && !isZombie(n) {
				return true
			}
		}
	}
	return false
}
