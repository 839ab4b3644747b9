package stagetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	mrand "math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/airlockdev/airlock/sandbox"
)

// TestRunner is the conformance suite every sandbox.Runner passes. newRunner
// returns a Runner for each subtest; its sandbox needs POSIX sh with awk,
// cat, sleep, kill, mkdir and rm. The suite checks how a command ended (a
// status as *sandbox.ExitError, a signal as Status -1), that Env reaches the
// command intact and never appears in any process's command line (it scans
// /proc on this machine and, through the Runner, in the sandbox, where
// there is one), that an invalid Env key is refused before anything runs,
// the working directory (and that a missing one is reported as such),
// stdin, stdout and stderr kept apart and intact in sizes far beyond a
// pipe buffer, a stdin whose read fails never shown to the command as its
// end (sandbox.ErrTransport), and that cancelling returns promptly even when the command
// ignores SIGTERM, leaving no process behind.
func TestRunner(t *testing.T, newRunner func(t *testing.T) sandbox.Runner) {
	t.Helper()
	for _, c := range runnerCases {
		t.Run(c.name, func(t *testing.T) {
			r := newRunner(t)
			must(t, r != nil, "newRunner returned a nil Runner")
			c.run(t, r)
		})
	}
}

var runnerCases = []struct {
	name string
	run  func(t *testing.T, r sandbox.Runner)
}{
	{"ExitStatus", testExitStatus},
	{"KilledBySignal", testKilledBySignal},
	{"Env", testEnv},
	{"EnvNotInArgv", testEnvNotInArgv},
	{"BadEnvKey", testBadEnvKey},
	{"Dir", testDir},
	{"MissingDir", testMissingDir},
	{"StdinWithEnv", testStdinWithEnv},
	{"StdoutAndStderr", testStdoutAndStderr},
	{"LargeOutput", testLargeOutput},
	{"LargeStdin", testLargeStdin},
	{"StdinNotRead", testStdinNotRead},
	{"StdinFails", testStdinFails},
	{"NilStreams", testNilStreams},
	{"Cancel", testCancel},
	{"CancelledBeforeStart", testRunCancelledBeforeStart},
	{"Concurrent", testRunConcurrent},
}

// runTimeout bounds every command the suite runs to its end.
const runTimeout = time.Minute

// runCmd runs cmd with stdout and stderr captured (unless cmd sets them).
func runCmd(r sandbox.Runner, cmd sandbox.Command) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	var o, e bytes.Buffer
	if cmd.Stdout == nil {
		cmd.Stdout = &o
	}
	if cmd.Stderr == nil {
		cmd.Stderr = &e
	}
	err = r.Run(ctx, cmd)
	return o.String(), e.String(), err
}

// runOK runs cmd, which must succeed, and returns its stdout.
func runOK(t *testing.T, r sandbox.Runner, cmd sandbox.Command) string {
	t.Helper()
	out, stderr, err := runCmd(r, cmd)
	mustNoError(t, err, "running %q (stderr %q)", firstLine(cmd.Script), stderr)
	return out
}

func testExitStatus(t *testing.T, r sandbox.Runner) {
	out := runOK(t, r, sandbox.Command{Script: "echo fine; exit 0"})
	expectEqual(t, "fine\n", out, "stdout of a command that succeeded")
	for _, status := range []int{1, 3, 255} {
		out, stderr, err := runCmd(r, sandbox.Command{Script: fmt.Sprintf("echo out; echo err >&2; exit %d", status)})
		var ee *sandbox.ExitError
		if !errors.As(err, &ee) {
			t.Errorf("exit %d: Run returned %v, want an error errors.As finds as *sandbox.ExitError", status, err)
			continue
		}
		expectEqual(t, status, ee.Status, "ExitError.Status of exit %d", status)
		expectEqual(t, "", ee.Signal, "ExitError.Signal of exit %d", status)
		expectEqual(t, "out\n", out, "stdout of a command that failed")
		expectEqual(t, "err\n", stderr, "stderr of a command that failed")
	}
}

func testKilledBySignal(t *testing.T, r sandbox.Runner) {
	for _, sig := range []string{"KILL", "TERM"} {
		_, _, err := runCmd(r, sandbox.Command{Script: "kill -s " + sig + " $$; sleep 5"})
		var ee *sandbox.ExitError
		if !errors.As(err, &ee) {
			t.Errorf("killed by SIG%s: Run returned %v, want an error errors.As finds as *sandbox.ExitError", sig, err)
			continue
		}
		expectEqual(t, -1, ee.Status, "ExitError.Status of a command killed by SIG%s", sig)
		switch ee.Signal {
		case sig:
		case "":
			t.Logf("the Runner does not report which signal killed a command (SIG%s)", sig)
		default:
			t.Errorf("ExitError.Signal of a command killed by SIG%s is %q, want %q (or \"\" when the Runner cannot know)", sig, ee.Signal, sig)
		}
	}
}

// awkwardValues are Env values that a Runner quoting them for a shell, or
// splitting them on the way, would mangle.
var awkwardValues = map[string]string{
	"AIRLOCK_SPACE":     "with  two spaces",
	"AIRLOCK_QUOTES":    `it's "quoted"`,
	"AIRLOCK_NEWLINES":  "new\nline\n\n",
	"AIRLOCK_DOLLAR":    "$HOME ${HOME} $(echo no) `echo no` $$",
	"AIRLOCK_UNICODE":   "ünïcødé ✓ 日本",
	"AIRLOCK_BACKSLASH": `back\slash\n\\`,
	"AIRLOCK_EMPTY":     "",
	"AIRLOCK_DASH":      "-n",
	"AIRLOCK_EQUALS":    "a=b=c",
	"AIRLOCK_TRAILING":  "trailing space ",
	"AIRLOCK_GLOB":      "* ? [a]",
	"_lower_1":          "lowercase key",
}

func testEnv(t *testing.T, r sandbox.Runner) {
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range awkwardValues {
			if !yield(k) {
				return
			}
		}
	})
	// A child shell prints them, so they must be in the environment, not
	// only shell variables; \037 separates them.
	var args strings.Builder
	for _, k := range keys {
		args.WriteString(` "$` + k + `"`)
	}
	out := runOK(t, r, sandbox.Command{Script: `exec /bin/sh -c 'printf "%s\037"` + args.String() + `'`, Env: awkwardValues})
	got := strings.Split(out, "\037")
	must(t, len(got) == len(keys)+1 && got[len(keys)] == "", "the command printed %q, want %d values", out, len(keys))
	for i, k := range keys {
		expectEqual(t, awkwardValues[k], got[i], "the value of %s as the command sees it", k)
	}
}

// procScanner reads the command line of every process it can see in
// /proc, looking for needle.
type procScanner struct {
	needle []byte
	seen   int      // command lines read
	found  []string // those that hold the needle
}

func (p *procScanner) scanOnce() {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue // gone, or not ours to read
		}
		p.seen++
		if bytes.Contains(b, p.needle) && len(p.found) < 5 {
			p.found = append(p.found, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
}

// signalWriter collects what it is written and closes ready once a line
// is complete.
type signalWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	ready chan struct{}
	once  sync.Once
}

func newSignalWriter() *signalWriter { return &signalWriter{ready: make(chan struct{})} }

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if bytes.IndexByte(w.buf.Bytes(), '\n') >= 0 {
		w.once.Do(func() { close(w.ready) })
	}
	return len(p), nil
}

func (w *signalWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// testEnvNotInArgv runs a command that holds a secret in its Env for a
// second and, meanwhile, reads every command line on this machine and, in
// a second command, every command line in the sandbox: the secret is in
// none of them, and the command sees it.
func testEnvNotInArgv(t *testing.T, r sandbox.Runner) {
	secret := "stagetest-env-" + rand.Text()
	out := newSignalWriter()
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
		defer cancel()
		done <- r.Run(ctx, sandbox.Command{
			Script: `printf '%s\n' "$AIRLOCK_SECRET"; sleep 1; /bin/sh -c 'sleep 1; printf "%s\n" "$AIRLOCK_SECRET"'`,
			Env:    map[string]string{"AIRLOCK_SECRET": secret},
			Stdout: out,
		})
	}()
	host := &procScanner{needle: []byte(secret)}
	select {
	case <-out.ready:
	case err := <-done:
		t.Fatalf("the command ended before it printed its value: %v", err)
	}
	// The sandbox's own view, through the Runner (its script holds no
	// secret): every command line, again and again, while the first
	// command still runs.
	sandboxView := make(chan string, 1)
	go func() {
		o, _, err := runCmd(r, sandbox.Command{Script: `[ -r /proc/self/cmdline ] || { echo no-proc; exit 0; }
i=0; while [ $i -lt 20 ]; do cat /proc/[0-9]*/cmdline 2>/dev/null; echo; i=$((i+1)); sleep 0.05 2>/dev/null || :; done; exit 0`})
		if err != nil {
			o = "error: " + err.Error()
		}
		sandboxView <- o
	}()
	var err error
scan:
	for {
		host.scanOnce()
		select {
		case err = <-done:
			break scan
		case <-time.After(2 * time.Millisecond):
		}
	}
	mustNoError(t, err, "the command holding the secret")
	expectEqual(t, secret+"\n"+secret+"\n", out.String(), "the value, as the command and its child see it")
	expect(t, len(host.found) == 0, "the secret Env value appears in a command line on this machine: %q", host.found)
	if host.seen == 0 {
		t.Logf("no /proc on this machine: its command lines were not scanned")
	}
	switch view := <-sandboxView; {
	case strings.HasPrefix(view, "error: "):
		t.Errorf("scanning the sandbox's command lines: %s", view)
	case view == "no-proc\n":
		t.Logf("no /proc in the sandbox: its command lines were not scanned")
	default:
		expect(t, !strings.Contains(view, secret), "the secret Env value appears in a command line in the sandbox")
	}
}

func testBadEnvKey(t *testing.T, r sandbox.Runner) {
	for _, key := range []string{"", "A=B", "=A", "A-B", "1A", "9", "A\x00B", "A B", "A.B", "é", "A\nB"} {
		out, _, err := runCmd(r, sandbox.Command{Script: "echo ran", Env: map[string]string{"OK_KEY": "v", key: "v"}})
		if err == nil {
			t.Errorf("Env key %q was accepted; a Runner must refuse any key outside [A-Za-z_][A-Za-z0-9_]*", key)
			continue
		}
		var ee *sandbox.ExitError
		expect(t, !errors.As(err, &ee), "Env key %q: the refusal is an ExitError (%v): the key must be refused before anything runs", key, err)
		expectEqual(t, "", out, "Env key %q: the command must not run", key)
	}
	out := runOK(t, r, sandbox.Command{Script: `printf '%s %s %s' "$_1" "$A_b9" "$z"`, Env: map[string]string{"_1": "one", "A_b9": "two", "z": "three"}})
	expectEqual(t, "one two three", out, "valid keys")
}

// sandboxTempDir creates a directory in the sandbox (its name holds a
// space) and returns its physical path; it is removed at the end of the
// test.
func sandboxTempDir(t *testing.T, r sandbox.Runner) string {
	t.Helper()
	out := runOK(t, r, sandbox.Command{Script: `d="${TMPDIR:-/tmp}/stagetest runner.$$" && rm -rf "$d" && mkdir "$d" && cd "$d" && pwd -P`})
	dir := strings.TrimSuffix(out, "\n")
	must(t, strings.HasPrefix(dir, "/"), "creating a directory in the sandbox printed %q", out)
	t.Cleanup(func() {
		_, _, err := runCmd(r, sandbox.Command{Script: `rm -rf "$D"`, Env: map[string]string{"D": dir}})
		expectNoError(t, err, "removing %s in the sandbox", dir)
	})
	return dir
}

func testDir(t *testing.T, r sandbox.Runner) {
	dir := sandboxTempDir(t, r)
	runOK(t, r, sandbox.Command{Script: `mkdir "$D/sub dir"`, Env: map[string]string{"D": dir}})
	for _, d := range []string{dir, dir + "/sub dir", "/"} {
		out := runOK(t, r, sandbox.Command{Script: "pwd -P", Dir: d})
		expectEqual(t, d+"\n", out, "the working directory of a command with Dir %q", d)
	}
	runOK(t, r, sandbox.Command{Script: "pwd -P"}) // the Runner's default, whatever it is
}

func testMissingDir(t *testing.T, r sandbox.Runner) {
	missing := sandboxTempDir(t, r) + "/missing"
	out, _, err := runCmd(r, sandbox.Command{Script: "echo ran", Dir: missing})
	must(t, err != nil, "a command with a missing Dir %s succeeded (it printed %q)", missing, out)
	expectEqual(t, "", out, "a command with a missing Dir must not run")
	msg := strings.ToLower(err.Error())
	expect(t, strings.Contains(err.Error(), missing), "the error for a missing Dir must name it (%s): %v", missing, err)
	expect(t, errors.Is(err, fs.ErrNotExist) || strings.Contains(msg, "missing") || strings.Contains(msg, "not exist") || strings.Contains(msg, "no such"),
		"the error for a missing Dir must say that it is missing: %v", err)
}

func testStdinWithEnv(t *testing.T, r sandbox.Runner) {
	out := runOK(t, r, sandbox.Command{
		Script: `printf '%s|' "$AIRLOCK_IN"; cat`,
		Env:    map[string]string{"AIRLOCK_IN": "v a l"},
		Stdin:  strings.NewReader("line one\nline two\nno newline"),
	})
	expectEqual(t, "v a l|line one\nline two\nno newline", out, "Env and stdin together")
}

func testStdoutAndStderr(t *testing.T, r sandbox.Runner) {
	out, stderr, err := runCmd(r, sandbox.Command{Script: "printf out1; printf err1 >&2; printf out2; printf err2 >&2"})
	mustNoError(t, err, "Run")
	expectEqual(t, "out1out2", out, "stdout")
	expectEqual(t, "err1err2", stderr, "stderr")
	var e bytes.Buffer
	_, _, err = runCmd(r, sandbox.Command{Script: "printf out; printf err >&2", Stdout: io.Discard, Stderr: &e})
	mustNoError(t, err, "Run")
	expectEqual(t, "err", e.String(), "stderr with stdout discarded")
}

// numbered returns what awk prints for lines 0..n-1 of "%07d\n" where
// i%every == 0.
func numbered(n, every int) []byte {
	var b bytes.Buffer
	for i := 0; i < n; i += every {
		fmt.Fprintf(&b, "%07d\n", i)
	}
	return b.Bytes()
}

// expectSameBytes compares long outputs by length and SHA-256.
func expectSameBytes(t *testing.T, want, got []byte, what string) {
	t.Helper()
	if !bytes.Equal(want, got) {
		t.Errorf("%s: %d bytes with SHA-256 %x, want %d bytes with SHA-256 %x", what, len(got), sha256.Sum256(got), len(want), sha256.Sum256(want))
	}
}

func testLargeOutput(t *testing.T, r sandbox.Runner) {
	const lines = 1 << 20 // 8 MiB on stdout, 1 MiB on stderr, interleaved
	out, stderr, err := runCmd(r, sandbox.Command{Script: fmt.Sprintf(
		`awk 'BEGIN { for (i = 0; i < %d; i++) { printf "%%07d\n", i; if (i %% 8 == 0) printf "%%07d\n", i > "/dev/stderr" } }'`, lines)})
	mustNoError(t, err, "Run")
	expectSameBytes(t, numbered(lines, 1), []byte(out), "stdout")
	expectSameBytes(t, numbered(lines, 8), []byte(stderr), "stderr")
}

func testLargeStdin(t *testing.T, r sandbox.Runner) {
	in := make([]byte, 4<<20+3)
	rng := mrand.NewChaCha8([32]byte{1})
	_, _ = rng.Read(in)
	out, _, err := runCmd(r, sandbox.Command{Script: "cat", Stdin: bytes.NewReader(in)})
	mustNoError(t, err, "Run")
	expectSameBytes(t, in, []byte(out), "stdin copied to stdout")
}

func testStdinNotRead(t *testing.T, r sandbox.Runner) {
	in := bytes.Repeat([]byte("unread "), 1<<20)
	out, _, err := runCmd(r, sandbox.Command{Script: "echo done", Stdin: bytes.NewReader(in)})
	expectNoError(t, err, "a command that exits 0 without reading its stdin")
	expectEqual(t, "done\n", out, "stdout")
}

// testStdinFails: a Command.Stdin whose read fails (after some bytes) is
// never shown to the command as its end: the command is stopped, not
// left to take what arrived for the whole, and Run fails with
// sandbox.ErrTransport.
func testStdinFails(t *testing.T, r sandbox.Runner) {
	in := io.MultiReader(bytes.NewReader(make([]byte, 300<<10)), iotest.ErrReader(errors.New("disk read failed")))
	out, _, err := runCmd(r, sandbox.Command{Script: "cat >/dev/null && echo took-it-whole", Stdin: in})
	must(t, err != nil, "a failed read of Command.Stdin: Run returned nil (stdout %q)", out)
	must(t, errors.Is(err, sandbox.ErrTransport), "a failed read of Command.Stdin: %v, want sandbox.ErrTransport", err)
	must(t, !strings.Contains(out, "took-it-whole"), "the command took the stdin read so far for the whole: stdout %q", out)
}

func testNilStreams(t *testing.T, r sandbox.Runner) {
	var e bytes.Buffer
	_, _, err := runCmd(r, sandbox.Command{
		Script: `cat; echo stdin-empty >&2; awk 'BEGIN { for (i = 0; i < 131072; i++) printf "%07d\n", i }'`,
		Stdout: nil, Stderr: &e,
	})
	expectNoError(t, err, "a nil Stdin must read as empty, a nil Stdout must discard")
	expectEqual(t, "stdin-empty\n", e.String(), "stderr")
}

// testCancel cancels a command that ignores SIGTERM (and whose child does
// too): Run returns within 2 s with the context's error, and neither the
// shell nor its child is left running.
func testCancel(t *testing.T, r sandbox.Runner) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := newSignalWriter()
	done := make(chan error, 1)
	go func() {
		done <- r.Run(ctx, sandbox.Command{Script: `trap '' TERM; sleep 30 & echo "$$ $!"; wait; sleep 30`, Stdout: out})
	}()
	select {
	case <-out.ready:
	case err := <-done:
		t.Fatalf("the command ended before it started its child: %v", err)
	case <-time.After(runTimeout):
		t.Fatalf("the command did not start within %s", runTimeout)
	}
	pids := strings.Fields(out.String())
	must(t, len(pids) == 2, "the command printed %q, want two process ids", out.String())
	cancel()
	start := time.Now()
	select {
	case err := <-done:
		expect(t, errors.Is(err, context.Canceled), "Run of a cancelled command returned %v, want an error wrapping context.Canceled", err)
		expect(t, time.Since(start) < 2*time.Second, "Run returned %s after the cancellation, want < 2s", time.Since(start).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatalf("Run did not return within 10s of the cancellation of a command that ignores SIGTERM")
	}
	// Neither process may stay (a zombie waiting for its reaper is gone).
	script := `for p in $PIDS; do
if kill -0 "$p" 2>/dev/null; then s=; [ -r /proc/$p/stat ] && s=$(sed 's/.*) //' /proc/$p/stat | cut -c1); [ "$s" = Z ] || echo "$p"; fi
done`
	var left string
	for deadline := time.Now().Add(3 * time.Second); ; {
		left = runOK(t, r, sandbox.Command{Script: script, Env: map[string]string{"PIDS": strings.Join(pids, " ")}})
		if left == "" || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	expectEqual(t, "", left, "processes of the cancelled command still running (shell %s, child %s)", pids[0], pids[1])
}

func testRunCancelledBeforeStart(t *testing.T, r sandbox.Runner) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out bytes.Buffer
	start := time.Now()
	err := r.Run(ctx, sandbox.Command{Script: "echo ran", Stdout: &out})
	expect(t, errors.Is(err, context.Canceled), "Run with a cancelled context returned %v, want an error wrapping context.Canceled", err)
	expect(t, time.Since(start) < 2*time.Second, "Run with a cancelled context took %s", time.Since(start))
	expectEqual(t, "", out.String(), "a command whose context has ended must not run")
}

func testRunConcurrent(t *testing.T, r sandbox.Runner) {
	const n = 8
	outs := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			outs[i], _, errs[i] = runCmd(r, sandbox.Command{
				Script: `printf '%s:' "$AIRLOCK_N"; cat`,
				Env:    map[string]string{"AIRLOCK_N": strconv.Itoa(i)},
				Stdin:  strings.NewReader(strings.Repeat(strconv.Itoa(i), 1000)),
			})
		})
	}
	wg.Wait()
	for i := range n {
		expectNoError(t, errs[i], "command %d", i)
		expectEqual(t, strconv.Itoa(i)+":"+strings.Repeat(strconv.Itoa(i), 1000), outs[i], "output of command %d", i)
	}
}
