package sandbox_test

// Attack tests written from the public docs only (README "Runners" and
// "Errors", go doc ./sandbox, issue 19). Each test names the promise it
// checks; a failing one is a finding.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/stage/stagetest"
)

// a19Run runs cmd with a generous bound so that a hang fails the test
// instead of the whole binary.
func a19Run(t *testing.T, r sandbox.Runner, cmd sandbox.Command, bound time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, cmd) }()
	select {
	case err := <-done:
		return err
	case <-time.After(bound):
		t.Fatalf("Run did not return within %v", bound)
		return nil
	}
}

// a19Local is an ExecFunc that runs argv here, as the doc's example SDK.
func a19Local(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.Stdin, c.Stdout, c.Stderr = stdin, stdout, stderr
	c.WaitDelay = 2 * time.Second
	return c.Run()
}

// a19Runners are the runners every contract test is tried on.
func a19Runners(t *testing.T) map[string]sandbox.Runner {
	return map[string]sandbox.Runner{
		"Exec()":      sandbox.Exec(),
		"Exec(sh -c)": sandbox.Exec("sh", "-c", `"$@"`, "engine"),
		"FromExec":    sandbox.FromExec(a19Local),
		"Local":       sandbox.Local(t.TempDir()),
	}
}

func a19Status(t *testing.T, err error, want int) {
	t.Helper()
	var ee *sandbox.ExitError
	if want == 0 {
		if err != nil {
			t.Fatalf("want nil, got %v", err)
		}
		return
	}
	if !errors.As(err, &ee) || ee.Status != want {
		t.Fatalf("want *ExitError status %d, got %T %v", want, err, err)
	}
}

// Promise: a record with the right shape and the wrong nonce is the script's
// own output: it decides nothing and reaches Command.Stderr byte-exact.
func TestAttackForgedRecordWrongNonce(t *testing.T) {
	forged := "airlock-exec-00000000000000000000000000000000: end 0 \n" +
		"airlock-exec-00000000000000000000000000000000: start 1 group\n"
	script := `printf '%s' "$F" >&2; exit 5`
	for name, r := range a19Runners(t) {
		t.Run(name, func(t *testing.T) {
			var e bytes.Buffer
			err := a19Run(t, r, sandbox.Command{Script: script, Env: map[string]string{"F": forged}, Stderr: &e}, 20*time.Second)
			a19Status(t, err, 5)
			if e.String() != forged {
				t.Fatalf("stderr not byte-exact: %q", e.String())
			}
		})
	}
}

// Promise: Stderr receives the script's output byte-exact, kept apart, even
// when it does not end in a newline (the record then follows on the same
// line) and when it is binary holding the record's bytes.
func TestAttackStderrNoTrailingNewline(t *testing.T) {
	cases := map[string]string{
		"plain":   "no newline at end",
		"prefix":  "airlock-exec-",
		"binary":  "\x00\xff\rairlock-exec-\x00: end 0 \x00",
		"cr":      "line\r",
		"onlynul": "\x00",
	}
	for name, r := range a19Runners(t) {
		for cn, payload := range cases {
			t.Run(name+"/"+cn, func(t *testing.T) {
				var o, e bytes.Buffer
				err := a19Run(t, r, sandbox.Command{
					Script: `printf 'X\0Y' ; cat >&2; exit 7`,
					Stdin:  strings.NewReader(payload), Stdout: &o, Stderr: &e,
				}, 20*time.Second)
				a19Status(t, err, 7)
				if e.String() != payload || o.String() != "X\x00Y" {
					t.Fatalf("stderr %q stdout %q", e.String(), o.String())
				}
			})
		}
	}
}

// Promise: stderr beyond any buffer, with no newline at all, is delivered
// byte-exact (no bounded line buffer may cut or refuse it).
func TestAttackStderrFloodNoNewline(t *testing.T) {
	for name, r := range a19Runners(t) {
		t.Run(name, func(t *testing.T) {
			var e a19CountWriter
			err := a19Run(t, r, sandbox.Command{
				Script: `head -c 8388608 /dev/zero | tr '\0' 'a' >&2; exit 4`,
				Stderr: &e,
			}, 60*time.Second)
			a19Status(t, err, 4)
			if e.n != 8<<20 || e.other {
				t.Fatalf("stderr: %d bytes (other bytes: %v), want %d", e.n, e.other, 8<<20)
			}
		})
	}
}

type a19CountWriter struct {
	mu    sync.Mutex
	n     int
	other bool
}

func (c *a19CountWriter) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n += len(b)
	if bytes.IndexFunc(b, func(r rune) bool { return r != 'a' }) >= 0 {
		c.other = true
	}
	return len(b), nil
}

// Promise: a script that closes its stderr still reports its own status.
func TestAttackScriptClosesStderr(t *testing.T) {
	for name, r := range a19Runners(t) {
		t.Run(name, func(t *testing.T) {
			err := a19Run(t, r, sandbox.Command{Script: `exec 2>&-; exec 2>/dev/null; exit 9`}, 20*time.Second)
			a19Status(t, err, 9)
		})
	}
}

// Promise: output written after the script's end by a background child that
// kept stderr open still reaches Stderr (byte-exact), and the status is the
// script's.
func TestAttackLateStderrAfterRecord(t *testing.T) {
	for name, r := range a19Runners(t) {
		t.Run(name, func(t *testing.T) {
			var e bytes.Buffer
			var mu sync.Mutex
			err := a19Run(t, r, sandbox.Command{
				Script: `(sleep 0.3; printf late >&2) & printf early >&2; exit 3`,
				Stderr: a19WriterFunc(func(b []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return e.Write(b) }),
			}, 20*time.Second)
			a19Status(t, err, 3)
			mu.Lock()
			defer mu.Unlock()
			if e.String() != "earlylate" {
				t.Fatalf("stderr %q, want %q", e.String(), "earlylate")
			}
		})
	}
}

type a19WriterFunc func([]byte) (int, error)

func (f a19WriterFunc) Write(b []byte) (int, error) { return f(b) }

// Promise: no record is ErrTransport, whatever the client's exit. A script
// that kills its wrapper leaves no record.
func TestAttackScriptKillsWrapper(t *testing.T) {
	for name, r := range a19Runners(t) {
		if name == "Local" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			err := a19Run(t, r, sandbox.Command{Script: `kill -9 $PPID; exit 0`}, 20*time.Second)
			if !errors.Is(err, sandbox.ErrTransport) {
				t.Fatalf("want ErrTransport, got %T %v", err, err)
			}
		})
	}
}

// Promise: an exec client that exits 0 before the script ended (kubectl's
// "exit 0 mid-command") is ErrTransport, not success.
func TestAttackClientExitsZeroEarly(t *testing.T) {
	r := sandbox.Exec("sh", "-c", `"$@" & sleep 0.2; exit 0`, "engine")
	err := a19Run(t, r, sandbox.Command{Script: `sleep 2; exit 0`}, 20*time.Second)
	if !errors.Is(err, sandbox.ErrTransport) {
		t.Fatalf("want ErrTransport, got %T %v", err, err)
	}
	fr := sandbox.FromExec(func(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
		c := exec.Command(argv[0], argv[1:]...)
		c.Stdin, c.Stdout, c.Stderr = stdin, stdout, io.Discard
		if err := c.Start(); err != nil {
			return err
		}
		go c.Wait()
		time.Sleep(200 * time.Millisecond)
		return nil
	})
	err = a19Run(t, fr, sandbox.Command{Script: `sleep 2; exit 0`}, 20*time.Second)
	if !errors.Is(err, sandbox.ErrTransport) {
		t.Fatalf("FromExec: want ErrTransport, got %T %v", err, err)
	}
}

// Promise: a client that fails after the record is ErrTransport too (the
// output may be cut).
func TestAttackClientFailsAfterRecord(t *testing.T) {
	r := sandbox.Exec("sh", "-c", `"$@"; exit 1`, "engine")
	err := a19Run(t, r, sandbox.Command{Script: `exit 0`}, 20*time.Second)
	if !errors.Is(err, sandbox.ErrTransport) {
		t.Fatalf("want ErrTransport, got %T %v", err, err)
	}
	fr := sandbox.FromExec(func(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
		if err := a19Local(ctx, argv, stdin, stdout, stderr); err != nil {
			return err
		}
		return errors.New("stream reset by peer")
	})
	err = a19Run(t, fr, sandbox.Command{Script: `exit 0`}, 20*time.Second)
	if !errors.Is(err, sandbox.ErrTransport) {
		t.Fatalf("FromExec: want ErrTransport, got %T %v", err, err)
	}
}

// Promise: an fn that ignores ctx is abandoned a second after the kill call;
// Control's deadline holds whatever the Runner does.
func TestAttackClientHangsAfterScript(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	fr := sandbox.FromExec(func(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
		_ = a19Local(context.Background(), argv, stdin, stdout, stderr)
		<-block // never returns, ignores ctx
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	err := sandbox.Control(ctx, fr, sandbox.Command{Script: `exit 0`})
	if el := time.Since(start); el > 8*time.Second {
		t.Fatalf("Control took %v", el)
	}
	// The script ended with a record; a client that never returns is
	// either nil (record seen) or ErrTransport. Anything else is wrong.
	if err != nil && !errors.Is(err, sandbox.ErrTransport) {
		t.Fatalf("got %T %v", err, err)
	}
}

// Promise: Control's deadline is enforced even when r ignores its context,
// with an error wrapping ErrTransport.
func TestAttackControlNeverReturns(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	r := a19ShortRunner{d: time.Second, f: func(ctx context.Context, cmd sandbox.Command) error { <-block; return nil }}
	start := time.Now()
	err := sandbox.Control(context.Background(), r, sandbox.Command{Script: "true"})
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("Control held %v past a 1s deadline", el)
	}
	if !errors.Is(err, sandbox.ErrTransport) || !sandbox.Retryable(err) {
		t.Fatalf("want retryable ErrTransport, got %v", err)
	}
	// Caller's cancellation: wraps ErrTransport and ctx's error.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = sandbox.Control(ctx, r, sandbox.Command{Script: "true"})
	if !errors.Is(err, sandbox.ErrTransport) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: want ErrTransport and Canceled, got %v", err)
	}
	// A plain error from the Runner is wrapped in ErrTransport.
	r2 := a19ShortRunner{d: time.Second, f: func(ctx context.Context, cmd sandbox.Command) error { return errors.New("boom") }}
	if err := sandbox.Control(context.Background(), r2, sandbox.Command{}); !errors.Is(err, sandbox.ErrTransport) {
		t.Fatalf("plain runner error: want ErrTransport, got %v", err)
	}
	// An ExitError stays an ExitError, with stderr in the message.
	r3 := sandbox.Exec()
	err = sandbox.Control(context.Background(), r3, sandbox.Command{Script: `echo why-it-failed >&2; exit 2`})
	var ee *sandbox.ExitError
	if !errors.As(err, &ee) || ee.Status != 2 || !strings.Contains(err.Error(), "why-it-failed") || errors.Is(err, sandbox.ErrTransport) {
		t.Fatalf("exit 2: got %v", err)
	}
}

type a19ShortRunner struct {
	d time.Duration
	f func(ctx context.Context, cmd sandbox.Command) error
}

func (s a19ShortRunner) Run(ctx context.Context, cmd sandbox.Command) error { return s.f(ctx, cmd) }
func (s a19ShortRunner) ControlTimeout() time.Duration                      { return s.d }

// Promise: an fn that dies mid-stdin is ErrTransport (not an ExitError and
// not success).
func TestAttackClientDiesMidStdin(t *testing.T) {
	fr := sandbox.FromExec(func(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
		buf := make([]byte, 10)
		_, _ = io.ReadFull(stdin, buf)
		return errors.New("connection lost")
	})
	err := a19Run(t, fr, sandbox.Command{Script: `cat >/dev/null`, Stdin: strings.NewReader(strings.Repeat("x", 1<<20))}, 20*time.Second)
	if !errors.Is(err, sandbox.ErrTransport) {
		t.Fatalf("want ErrTransport, got %T %v", err, err)
	}
	r := sandbox.Exec("sh", "-c", `head -c 100 >/dev/null; exit 0`, "engine")
	err = a19Run(t, r, sandbox.Command{Script: `cat >/dev/null`, Stdin: strings.NewReader(strings.Repeat("x", 1<<20))}, 20*time.Second)
	if !errors.Is(err, sandbox.ErrTransport) {
		t.Fatalf("Exec: want ErrTransport, got %T %v", err, err)
	}
}

// Promise: Env reaches the script byte-exact: every byte but NUL.
func TestAttackEnvEveryByte(t *testing.T) {
	var all []byte
	for b := 1; b < 256; b++ {
		all = append(all, byte(b))
	}
	val := string(all) + "\n\n"
	env := map[string]string{"V": val, "W": "'\"$(touch /tmp/a19pwn)`x`\\\n__airlock_env_end\nexport X=1"}
	for name, r := range a19Runners(t) {
		t.Run(name, func(t *testing.T) {
			var o bytes.Buffer
			err := a19Run(t, r, sandbox.Command{Script: `printf '%s|%s' "$V" "$W"`, Env: env, Stdout: &o}, 20*time.Second)
			a19Status(t, err, 0)
			if want := env["V"] + "|" + env["W"]; o.String() != want {
				t.Fatalf("env not byte-exact:\n got %q\nwant %q", o.String(), want)
			}
		})
	}
	if _, err := os.Stat("/tmp/a19pwn"); err == nil {
		t.Fatal("a value was evaluated: /tmp/a19pwn exists")
	}
}

// Promise: any valid shell name is delivered byte-exact (CheckEnv refuses
// only non-names, NUL and sizes). Names the wrapper uses itself, PATH and
// IFS must neither break the run nor be altered.
func TestAttackEnvAwkwardNames(t *testing.T) {
	cases := []struct{ name, val, script string }{
		{"__airlock_x", "mine", `printf %s "$__airlock_x"`},
		{"__airlock_c", "mine", `printf %s "$__airlock_c"`},
		{"__airlock_b", "mine", `printf %s "$__airlock_b"`},
		{"__airlock_f", "mine", `printf %s "$__airlock_f"`},
		{"__airlock_n", "mine", `printf %s "$__airlock_n"`},
		{"__airlock_v", "mine", `printf %s "$__airlock_v"`},
		{"IFS", ":/ ", `printf %s "$IFS"`},
		{"PATH", "/nonexistent-a19", `printf %s "$PATH"`},
		{"TMPDIR", "/nonexistent-a19", `printf %s "$TMPDIR"`},
		{"ENV", "/nonexistent-a19", `printf %s "$ENV"`},
	}
	for name, r := range a19Runners(t) {
		for _, c := range cases {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				var o, e bytes.Buffer
				env := map[string]string{c.name: c.val}
				err := a19Run(t, r, sandbox.Command{Script: c.script, Env: env, Stdout: &o, Stderr: &e}, 20*time.Second)
				// Documented (Command, CheckEnv): names starting with
				// __airlock_ are reserved and refused by CheckEnv on every
				// Runner, before anything runs.
				if strings.HasPrefix(c.name, "__airlock_") {
					cerr := sandbox.CheckEnv(env)
					if cerr == nil || err == nil || !strings.Contains(err.Error(), cerr.Error()) || o.Len() != 0 {
						t.Fatalf("Env %s: want CheckEnv's refusal from Run, got CheckEnv %v, Run %v, stdout %q", c.name, cerr, err, o.String())
					}
					return
				}
				// Documented (Command): sh resets IFS when it starts, on
				// every Runner: the script sees the default.
				if c.name == "IFS" {
					if err != nil || o.String() != " \t\n" {
						t.Fatalf("Env IFS=%q: want the default IFS, got err %v, stdout %q, stderr %q", c.val, err, o.String(), e.String())
					}
					return
				}
				if err != nil || o.String() != c.val {
					t.Fatalf("Env %s=%q: err %v, stdout %q, stderr %q", c.name, c.val, err, o.String(), e.String())
				}
			})
		}
	}
}

// Promise: Dir is the working directory; a missing one wraps fs.ErrNotExist
// and nothing runs.
func TestAttackDirAwkward(t *testing.T) {
	base := t.TempDir()
	odd := filepath.Join(base, "a dir\nwith 'quotes' $(x) and\ttabs")
	if err := os.Mkdir(odd, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, r := range a19Runners(t) {
		t.Run(name, func(t *testing.T) {
			var o bytes.Buffer
			err := a19Run(t, r, sandbox.Command{Script: `pwd -P`, Dir: odd, Stdout: &o}, 20*time.Second)
			if err != nil || o.String() != odd+"\n" {
				t.Fatalf("odd dir: err %v, pwd %q", err, o.String())
			}
			marker := filepath.Join(base, "ran-"+strings.ReplaceAll(name, " ", "_"))
			err = a19Run(t, r, sandbox.Command{Script: `touch "$M"`, Env: map[string]string{"M": marker}, Dir: filepath.Join(base, "missing")}, 20*time.Second)
			if !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("missing dir: want fs.ErrNotExist, got %T %v", err, err)
			}
			if _, serr := os.Stat(marker); serr == nil {
				t.Fatal("missing dir: the script ran anyway")
			}
			f := filepath.Join(base, "file")
			_ = os.WriteFile(f, nil, 0o644)
			if err := a19Run(t, r, sandbox.Command{Script: `true`, Dir: f}, 20*time.Second); err == nil {
				t.Fatal("Dir naming a file: no error")
			}
		})
	}
}

// Promise: scripts of up to 1 MiB run (over 64 KiB they travel on stdin,
// with Command.Stdin still delivered byte-exact after them).
func TestAttackBigScript(t *testing.T) {
	for _, size := range []int{64 << 10, 1 << 20} {
		var b strings.Builder
		b.WriteString("x=0\n")
		for b.Len() < size-200 {
			b.WriteString(": 'padding padding padding padding padding padding padding'\n")
		}
		b.WriteString(`printf 'end:%s' "$(cat)"`)
		script := b.String()
		for name, r := range a19Runners(t) {
			t.Run(fmt.Sprintf("%s/%d", name, size), func(t *testing.T) {
				var o, e bytes.Buffer
				err := a19Run(t, r, sandbox.Command{Script: script, Stdin: strings.NewReader("in"), Stdout: &o, Stderr: &e}, 60*time.Second)
				if err != nil || o.String() != "end:in" {
					t.Fatalf("script of %d bytes: err %v, stdout %q stderr %.200q", len(script), err, o.String(), e.String())
				}
			})
		}
	}
}

// Promise: Env never appears in any command line, on either side, nor in
// the client's environment.
func TestAttackEnvNotInArgvOrClientEnviron(t *testing.T) {
	secret := "a19-secret-" + strconv.Itoa(os.Getpid())
	r := sandbox.Exec("sh", "-c", `"$@"; exit $?`, "a19-engine")
	done := make(chan error, 1)
	go func() {
		done <- r.Run(context.Background(), sandbox.Command{Script: `sleep 1`, Env: map[string]string{"S": secret}})
	}()
	time.Sleep(500 * time.Millisecond)
	ents, _ := os.ReadDir("/proc")
	for _, de := range ents {
		if _, err := strconv.Atoi(de.Name()); err != nil {
			continue
		}
		cl, _ := os.ReadFile("/proc/" + de.Name() + "/cmdline")
		if bytes.Contains(cl, []byte(secret)) {
			t.Errorf("secret in argv of pid %s: %q", de.Name(), cl)
		}
		if bytes.Contains(cl, []byte("a19-engine")) {
			en, _ := os.ReadFile("/proc/" + de.Name() + "/environ")
			if bytes.Contains(en, []byte(secret)) {
				t.Errorf("secret in the client's environ (pid %s)", de.Name())
			}
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Promise: never a TTY: a tty flag before "--" makes every Run fail with an
// error naming it.
func TestAttackTTYFlags(t *testing.T) {
	for _, flag := range []string{"-t", "--tty", "-it", "-ti", "--tty=true", "-dit", "-itd", "--tty=1", "-e=X", "--interactive=true"} {
		r := sandbox.Exec("sh", "-c", `shift 2; "$@"`, "engine", flag, "--")
		err := a19Run(t, r, sandbox.Command{Script: "true"}, 20*time.Second)
		tty := flag != "-e=X" && flag != "--interactive=true"
		if tty && (err == nil || !strings.Contains(err.Error(), flag)) {
			t.Errorf("flag %s: want an error naming it, got %v", flag, err)
		}
		if !tty && err != nil {
			t.Errorf("flag %s (no tty): got %v", flag, err)
		}
	}
}

// Promise: a ctx deadline is enforced inside the sandbox too: a watchdog
// kills the script's process group when it passes, even when the host can
// no longer reach it (here: the client ignores ctx, and the kill call
// fails).
func TestAttackWatchdogWhenClientGone(t *testing.T) {
	pidf := filepath.Join(t.TempDir(), "pid")
	calls := 0
	var mu sync.Mutex
	fr := sandbox.FromExec(func(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n > 1 {
			return errors.New("unreachable") // the kill call cannot reach the sandbox
		}
		c := exec.Command(argv[0], argv[1:]...)
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		c.Stdin, c.Stdout, c.Stderr = stdin, stdout, stderr
		if err := c.Start(); err != nil {
			return err
		}
		go c.Wait()
		<-ctx.Done() // the host loses the sandbox; the command is left there
		return ctx.Err()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := fr.Run(ctx, sandbox.Command{Script: `echo $$ >"$P"; while :; do sleep 0.1; done`, Env: map[string]string{"P": pidf}})
	if !errors.Is(err, sandbox.ErrTransport) {
		t.Fatalf("want ErrTransport, got %v", err)
	}
	time.Sleep(3 * time.Second)
	b, rerr := os.ReadFile(pidf)
	if rerr != nil {
		t.Fatalf("script never ran: %v", rerr)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if a19Alive(pid) {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		t.Fatalf("script pid %d still alive 3s past its deadline: the watchdog did not fire", pid)
	}
}

func a19Alive(pid int) bool {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// Promise: cancellation kills the script's group by its nonce with a second
// exec and returns a *StopError saying whether that was verified; with a TERM
// ignoring tree (children, grandchildren) none is left.
func TestAttackCancelTermIgnoringTree(t *testing.T) {
	for name, r := range a19Runners(t) {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			ctx, cancel := context.WithCancel(context.Background())
			script := `trap '' TERM HUP INT; (trap '' TERM; (trap '' TERM; echo $$ >"$D/gc"; while :; do sleep 0.1; done) & echo $$ >"$D/c"; while :; do sleep 0.1; done) & echo $$ >"$D/p"; while :; do sleep 0.1; done`
			done := make(chan error, 1)
			go func() { done <- r.Run(ctx, sandbox.Command{Script: script, Env: map[string]string{"D": dir}}) }()
			time.Sleep(700 * time.Millisecond)
			cancel()
			var err error
			select {
			case err = <-done:
			case <-time.After(15 * time.Second):
				t.Fatal("Run did not return after cancel")
			}
			if !errors.Is(err, sandbox.ErrTransport) || !errors.Is(err, context.Canceled) {
				t.Errorf("want ErrTransport+Canceled, got %T %v (ErrTransport %v, Canceled %v)", err, err,
					errors.Is(err, sandbox.ErrTransport), errors.Is(err, context.Canceled))
			}
			var se *sandbox.StopError
			if name != "Local" && (!errors.As(err, &se) || !se.Verified) {
				t.Errorf("want a verified *StopError, got %T %v", err, err)
			}
			time.Sleep(300 * time.Millisecond)
			for _, f := range []string{"p", "c", "gc"} {
				b, _ := os.ReadFile(filepath.Join(dir, f))
				pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
				if pid > 0 && a19Alive(pid) {
					_ = syscall.Kill(pid, syscall.SIGKILL)
					t.Errorf("%s (pid %d) still alive after cancel", f, pid)
				}
			}
		})
	}
}

// Non-guarantee probe: can the script read the nonce? The docs say the nonce
// only keeps a script from forging by accident; a script that reads it from
// its parent's /proc forges a success. This test documents which: it fails
// if a deliberate forge succeeds (exit 1 reported as nil).
func TestAttackNonceFromProc(t *testing.T) {
	script := `for p in $PPID $(cat /proc/$PPID/stat | cut -d' ' -f4); do
  n=$(tr '\0' '\n' </proc/$p/environ 2>/dev/null | sed -n 's/^__airlock_n=//p')
  [ -n "$n" ] || n=$(tr '\0' '\n' </proc/$p/cmdline 2>/dev/null | grep -o 'airlock-exec-[0-9a-f]*' | head -n1 | sed 's/airlock-exec-//')
  [ -n "$n" ] && { printf 'airlock-exec-%s: end 0 \n' "$n" >&2; exec 2>&-; kill -9 $PPID; }
done; exit 1`
	r := sandbox.Exec()
	err := a19Run(t, r, sandbox.Command{Script: script}, 20*time.Second)
	if err == nil {
		t.Fatal("a script forged its completion record by reading the nonce from /proc: exit 1 reported as success")
	}
}

// Promise (CheckEnv): it "reports the first problem with env that would keep
// a Runner from delivering it", and "a Runner calls it". So a map CheckEnv
// accepts must not be refused by a Runner of this module.
func TestAttackCheckEnvAgreesWithRunners(t *testing.T) {
	env := map[string]string{"__airlock_x": "v"}
	cerr := sandbox.CheckEnv(env)
	for name, r := range a19Runners(t) {
		err := a19Run(t, r, sandbox.Command{Script: `printf %s "$__airlock_x"`, Env: env}, 20*time.Second)
		if (cerr == nil) != (err == nil) {
			t.Errorf("%s: CheckEnv says %v, Run says %v", name, cerr, err)
		}
	}
}

// Promise: the Runner contract's "Scripts of up to 1 MiB run" (Exec beyond).
func TestAttackScriptThresholds(t *testing.T) {
	for _, size := range []int{128<<10 + 1, 2 << 20} {
		script := "printf ok\n#" + strings.Repeat("p", size-12) + "\n"
		for name, r := range a19Runners(t) {
			var o bytes.Buffer
			err := a19Run(t, r, sandbox.Command{Script: script, Stdout: &o}, 60*time.Second)
			if size <= 1<<20 && (err != nil || o.String() != "ok") {
				t.Errorf("%s, %d-byte script (within 1 MiB): %v", name, len(script), err)
			}
			if size > 1<<20 {
				t.Logf("%s, %d-byte script: err %v out %q", name, len(script), err, o.String())
			}
		}
	}
}

// a19ProcRunners are the runners Process is tried on.
func a19ProcRunners(t *testing.T) map[string]sandbox.Runner {
	return map[string]sandbox.Runner{
		"Local":    sandbox.Local(t.TempDir()),
		"Exec()":   sandbox.Exec(),
		"FromExec": sandbox.FromExec(a19Local),
	}
}

// a19Tagged lists live (non-zombie) pids whose environ carries tag.
func a19Tagged(tag string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, de := range ents {
		pid, err := strconv.Atoi(de.Name())
		if err != nil {
			continue
		}
		en, _ := os.ReadFile("/proc/" + de.Name() + "/environ")
		for _, kv := range bytes.Split(en, []byte{0}) {
			if string(kv) == sandbox.ProcessTagVar+"="+tag && a19Alive(pid) {
				out = append(out, pid)
			}
		}
	}
	return out
}

func a19Drain(p *sandbox.Process) <-chan []byte {
	ch := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(p.Stdout()); ch <- b }()
	return ch
}

// Promise: Stop, Wait and the shutdown are safe from any goroutine, any
// number of times, and report the same Exit; with a TERM-ignoring tree that
// escapes with setsid (keeping its tag) nothing is left and Exit.Verified.
func TestAttackProcessStopConcurrentTree(t *testing.T) {
	for name, r := range a19ProcRunners(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			p, err := sandbox.Start(ctx, r, sandbox.Command{Script: `trap '' TERM
(trap '' TERM; setsid sh -c 'trap "" TERM; while :; do sleep 0.1; done' & while :; do sleep 0.1; done) &
echo ready; while :; do sleep 0.1; done`})
			if err != nil {
				t.Fatal(err)
			}
			out := a19Drain(p)
			time.Sleep(500 * time.Millisecond)
			tag := p.Tag()
			if n := len(a19Tagged(tag)); n < 3 {
				t.Fatalf("only %d tagged processes before Stop", n)
			}
			var wg sync.WaitGroup
			exits := make([]sandbox.Exit, 4)
			errs := make([]error, 4)
			for i := range 4 {
				wg.Add(1)
				go func() { defer wg.Done(); exits[i], errs[i] = p.Stop(ctx) }()
			}
			wg.Wait()
			for i := range 4 {
				if exits[i] != exits[0] || (errs[i] == nil) != (errs[0] == nil) {
					t.Errorf("Stop %d: %+v %v, Stop 0: %+v %v", i, exits[i], errs[i], exits[0], errs[0])
				}
			}
			if errs[0] != nil || !exits[0].Verified {
				t.Errorf("Stop: %+v %v, want Verified", exits[0], errs[0])
			}
			if left := a19Tagged(tag); len(left) > 0 {
				for _, pid := range left {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
				t.Errorf("tagged processes left after a verified Stop: %v", left)
			}
			if b := <-out; string(b) != "ready\n" {
				t.Errorf("stdout %q", b)
			}
			e2, err2 := p.Wait(ctx)
			if e2 != exits[0] || (err2 == nil) != (errs[0] == nil) {
				t.Errorf("Wait after Stop: %+v %v", e2, err2)
			}
			// Write after Stop: fails.
			if err := p.Write(ctx, []byte("x")); err == nil {
				t.Error("Write after Stop succeeded")
			}
		})
	}
}

// Non-guarantee, documented: a process that leaves the session and
// rewrites its environment escapes. Probe: does Stop still claim Verified?
// (Documented as possible; logged, not failed.)
func TestAttackProcessEscapeEnvRewrite(t *testing.T) {
	r := sandbox.Local(t.TempDir())
	pidf := filepath.Join(t.TempDir(), "pid")
	p, err := sandbox.Start(context.Background(), r, sandbox.Command{
		Script: `setsid env -u AIRLOCK_PROCESS sh -c 'echo $$ >"$P"; exec sleep 30' </dev/null >/dev/null 2>&1 & sleep 0.3; echo go; while :; do sleep 0.1; done`,
		Env:    map[string]string{"P": pidf},
	})
	if err != nil {
		t.Fatal(err)
	}
	out := a19Drain(p)
	time.Sleep(600 * time.Millisecond)
	ex, err := p.Stop(context.Background())
	<-out
	b, _ := os.ReadFile(pidf)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	esc := pid > 0 && a19Alive(pid)
	if esc {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	t.Logf("escapee alive after Stop: %v; Exit %+v err %v (documented non-guarantee)", esc, ex, err)
}

// Promise: Stop before any output, a process that exits immediately, and
// Stdout never read all settle within about four control deadlines.
func TestAttackProcessEdgeLifetimes(t *testing.T) {
	cases := map[string]string{
		"exit-now":     `exit 3`,
		"no-output":    `sleep 30`,
		"flood-unread": `head -c 10000000 /dev/zero`,
	}
	for name, r := range a19ProcRunners(t) {
		for cn, script := range cases {
			t.Run(name+"/"+cn, func(t *testing.T) {
				rr := a19ShortRunnerWrap{r: r, d: 4 * time.Second}
				p, err := sandbox.Start(context.Background(), rr, sandbox.Command{Script: script})
				if err != nil {
					t.Fatalf("Start: %v", err)
				}
				if cn == "exit-now" {
					go io.Copy(io.Discard, p.Stdout())
					ex, err := p.Wait(context.Background())
					if !ex.Exited || ex.Status != 3 || !ex.Verified || err != nil {
						t.Errorf("exit 3: %+v %v", ex, err)
					}
					return
				}
				start := time.Now()
				ex, err := p.Stop(context.Background())
				if el := time.Since(start); el > 17*time.Second {
					t.Errorf("Stop took %v, more than four 4s control deadlines", el)
				}
				t.Logf("Exit %+v err %v", ex, err)
				if cn == "no-output" && (err != nil || !ex.Verified) {
					t.Errorf("Stop before output: %+v %v", ex, err)
				}
				if tagged := a19Tagged(p.Tag()); len(tagged) > 0 {
					t.Errorf("left after Stop: %v", tagged)
				}
			})
		}
	}
}

type a19ShortRunnerWrap struct {
	r sandbox.Runner
	d time.Duration
}

func (s a19ShortRunnerWrap) Run(ctx context.Context, cmd sandbox.Command) error {
	return s.r.Run(ctx, cmd)
}
func (s a19ShortRunnerWrap) ControlTimeout() time.Duration { return s.d }

// Promise: ctx already ended: Start fails (its deadline ended) and nothing
// is left running; Write with an ended ctx delivers nothing and closes
// nothing.
func TestAttackProcessCancelledCtx(t *testing.T) {
	for name, r := range a19ProcRunners(t) {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			p, err := sandbox.Start(ctx, r, sandbox.Command{Script: `touch "$D/ran"; sleep 30`, Env: map[string]string{"D": dir}})
			if err == nil {
				ex, serr := p.Stop(context.Background())
				t.Errorf("Start with a cancelled ctx succeeded (Stop: %+v %v)", ex, serr)
			}
			time.Sleep(300 * time.Millisecond)
			if _, serr := os.Stat(filepath.Join(dir, "ran")); serr == nil {
				t.Logf("the command ran with a cancelled ctx (err %v)", err)
			}
			p, err = sandbox.Start(context.Background(), r, sandbox.Command{Script: `cat`})
			if err != nil {
				t.Fatal(err)
			}
			out := a19Drain(p)
			if err := p.Write(ctx, []byte("lost\n")); err == nil {
				t.Error("Write with ended ctx succeeded")
			} else {
				t.Logf("Write with ended ctx: %v (retryable %v)", err, sandbox.Retryable(err))
			}
			if err := p.Write(context.Background(), []byte("kept\n")); err != nil {
				t.Errorf("Write after a cancelled Write: %v", err)
			}
			_ = p.CloseStdin()
			ex, err := p.Wait(context.Background())
			if b := <-out; string(b) != "kept\n" || err != nil || ex.Status != 0 {
				t.Errorf("stdout %q exit %+v err %v", b, ex, err)
			}
		})
	}
}

// Promise: huge Writes are delivered byte-exact; a Write concurrent with
// Stop returns (bounded) rather than hanging.
func TestAttackProcessHugeWrite(t *testing.T) {
	for name, r := range a19ProcRunners(t) {
		t.Run(name, func(t *testing.T) {
			p, err := sandbox.Start(context.Background(), r, sandbox.Command{Script: `cat`})
			if err != nil {
				t.Fatal(err)
			}
			out := a19Drain(p)
			big := bytes.Repeat([]byte("0123456789abcdef"), 1<<20) // 16 MiB
			if err := p.Write(context.Background(), big); err != nil {
				t.Fatalf("16 MiB write: %v", err)
			}
			_ = p.CloseStdin()
			if err := p.Write(context.Background(), []byte("x")); err == nil || errors.Is(err, sandbox.ErrTransport) {
				t.Errorf("Write after CloseStdin: %v, want a non-transport error", err)
			}
			ex, err := p.Wait(context.Background())
			if b := <-out; !bytes.Equal(b, big) || err != nil || !ex.Verified {
				t.Errorf("echo of 16 MiB: %d bytes, exit %+v, err %v", len(b), ex, err)
			}
		})
	}
	// A Write blocked on a command that never reads, and a Stop meanwhile.
	p, err := sandbox.Start(context.Background(), sandbox.Local(t.TempDir()), sandbox.Command{Script: `sleep 60`})
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, p.Stdout())
	wdone := make(chan error, 1)
	go func() { wdone <- p.Write(context.Background(), make([]byte, 8<<20)) }()
	time.Sleep(300 * time.Millisecond)
	if _, err := p.Stop(context.Background()); err != nil {
		t.Errorf("Stop: %v", err)
	}
	select {
	case err := <-wdone:
		if !errors.Is(err, sandbox.ErrTransport) {
			t.Errorf("blocked Write after Stop: %v, want ErrTransport", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("a blocked Write did not return after Stop")
	}
}

// Promise: Start refuses Stdin/Stdout set, the tag variable in Env and a
// script over MaxProcessScript, with errors, before anything runs.
func TestAttackProcessRefusals(t *testing.T) {
	r := sandbox.Local(t.TempDir())
	bad := []sandbox.Command{
		{Script: "true", Stdin: strings.NewReader("")},
		{Script: "true", Stdout: io.Discard},
		{Script: "true", Env: map[string]string{sandbox.ProcessTagVar: "x"}},
		{Script: "true #" + strings.Repeat("x", sandbox.MaxProcessScript)},
		{Script: "true", Env: map[string]string{"1BAD": "x"}},
	}
	for i, c := range bad {
		p, err := sandbox.Start(context.Background(), r, c)
		if err == nil {
			_, _ = p.Stop(context.Background())
			t.Errorf("case %d: Start accepted it", i)
		}
	}
}

// Promise: a hostile sandbox whose header is broken is ErrProtocol; and a
// sandbox that cannot be reached at Stop is Verified false with ErrTransport.
func TestAttackProcessDeadTransportAtStop(t *testing.T) {
	var mu sync.Mutex
	dead := false
	fr := sandbox.FromExec(func(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
		mu.Lock()
		d := dead
		mu.Unlock()
		if d {
			return errors.New("connection refused")
		}
		return a19Local(ctx, argv, stdin, stdout, stderr)
	})
	p, err := sandbox.Start(context.Background(), a19ShortRunnerWrap{r: fr, d: 3 * time.Second}, sandbox.Command{Script: `trap '' TERM; while :; do sleep 0.1; done`})
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, p.Stdout())
	mu.Lock()
	dead = true
	mu.Unlock()
	ex, err := p.Stop(context.Background())
	tag := p.Tag()
	for _, pid := range a19Tagged(tag) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if ex.Verified || !errors.Is(err, sandbox.ErrTransport) || !strings.Contains(err.Error(), tag) {
		t.Errorf("Stop over a dead transport: %+v %v (want Verified false, ErrTransport, the tag named)", ex, err)
	}
}

// a19Marked lists live pids whose environ holds kv.
func a19Marked(kv string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, de := range ents {
		pid, err := strconv.Atoi(de.Name())
		if err != nil {
			continue
		}
		en, _ := os.ReadFile("/proc/" + de.Name() + "/environ")
		if bytes.Contains(append([]byte{0}, en...), []byte("\x00"+kv+"\x00")) && a19Alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// Promise: a header that does not parse, names another tag or names an
// impossible pid is ErrProtocol, and whatever started is stopped by its tag
// before Start returns.
func TestAttackProcessForgedHeader(t *testing.T) {
	forgeries := map[string]string{
		"garbage":  "hello world\n",
		"othertag": "airlock-process-v1 00000000000000000000000000000000 1234 1234 1234\n",
		"pid0":     "airlock-process-v1 %TAG% 0 0 0\n",
		"negative": "airlock-process-v1 %TAG% -5 -5 -5\n",
		"huge":     "airlock-process-v1 " + strings.Repeat("9", 1<<20),
		"mismatch": "airlock-process-v1 %TAG% 100 200 300\n",
		"extra":    "airlock-process-v1 %TAG% 100 100 100 extra\n",
		"overflow": "airlock-process-v1 %TAG% 99999999999999999999 1 1\n",
	}
	tagRe := regexp.MustCompile(`AIRLOCK_PROCESS='?([0-9a-f]+)`)
	for name, forged := range forgeries {
		t.Run(name, func(t *testing.T) {
			mark := "A19MARK=" + name + strconv.Itoa(os.Getpid())
			first := true
			var mu sync.Mutex
			fr := sandbox.FromExec(func(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
				mu.Lock()
				f := first
				first = false
				mu.Unlock()
				if !f {
					return a19Local(ctx, argv, stdin, stdout, stderr)
				}
				// Read the prelude to learn the tag, then forge the header.
				pr, pw := io.Pipe()
				var seen bytes.Buffer
				var smu sync.Mutex
				tee := a19WriterFunc(func(b []byte) (int, error) { smu.Lock(); defer smu.Unlock(); return seen.Write(b) })
				go func() { _, err := io.Copy(pw, io.TeeReader(stdin, tee)); pw.CloseWithError(err) }()
				c := exec.CommandContext(ctx, argv[0], argv[1:]...)
				c.Stdin, c.Stderr = pr, stderr
				c.Stdout = io.Discard
				c.WaitDelay = time.Second
				if err := c.Start(); err != nil {
					return err
				}
				time.Sleep(200 * time.Millisecond)
				smu.Lock()
				m := tagRe.FindStringSubmatch(seen.String() + strings.Join(argv, " "))
				smu.Unlock()
				tag := "unknown"
				if m != nil {
					tag = m[1]
				}
				_, _ = io.WriteString(stdout, strings.ReplaceAll(forged, "%TAG%", tag))
				return c.Wait()
			})
			p, err := sandbox.Start(context.Background(), a19ShortRunnerWrap{r: fr, d: 3 * time.Second},
				sandbox.Command{Script: `sleep 30`, Env: map[string]string{"A19MARK": strings.TrimPrefix(mark, "A19MARK=")}})
			if err == nil {
				go io.Copy(io.Discard, p.Stdout())
				ex, serr := p.Stop(context.Background())
				t.Errorf("forged header %q accepted (Stop: %+v %v)", forged[:min(len(forged), 80)], ex, serr)
			} else if !errors.Is(err, sandbox.ErrProtocol) {
				t.Errorf("forged header: want ErrProtocol, got %v", err)
			}
			if left := a19Marked(mark); len(left) > 0 {
				for _, pid := range left {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
				t.Errorf("left running after Start failed: %v", left)
			}
		})
	}
}

// Promise (Retryable): each class answers as documented.
func TestAttackRetryableTable(t *testing.T) {
	type tmp struct{ error }
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"transport", fmt.Errorf("x: %w", sandbox.ErrTransport), true},
		{"protocol", fmt.Errorf("x: %w", sandbox.ErrProtocol), false},
		{"limit", fmt.Errorf("x: %w", sandbox.ErrLimit), false},
		{"exit", &sandbox.ExitError{Status: 1}, false},
		{"protocol+transport", fmt.Errorf("%w %w", sandbox.ErrTransport, sandbox.ErrProtocol), false},
		{"canceled", context.Canceled, false},
		{"deadline", context.DeadlineExceeded, false},
		{"deadline-wrapped", fmt.Errorf("op: %w", context.DeadlineExceeded), false},
		{"eintr", &os.PathError{Op: "read", Path: "/x", Err: syscall.EINTR}, true},
		{"eagain", syscall.EAGAIN, true},
		{"emfile", &os.SyscallError{Syscall: "open", Err: syscall.EMFILE}, true},
		{"enospc", &os.PathError{Op: "write", Path: "/x", Err: syscall.ENOSPC}, false},
		{"edquot", syscall.EDQUOT, false},
		{"stop", &sandbox.StopError{Err: context.Canceled}, true},
		{"fs-notexist", fs.ErrNotExist, false},
		{"plain", errors.New("boom"), false},
		{"self-false-over-transport", fmt.Errorf("%w: %w", a19Self(false), sandbox.ErrTransport), false},
		{"self-true-over-protocol", fmt.Errorf("%w: %w", a19Self(true), sandbox.ErrProtocol), true},
		{"temporary-in-join", errors.Join(errors.New("a"), syscall.EAGAIN), true},
		{"tmp-struct", tmp{syscall.EAGAIN}, false},
	}
	for _, c := range cases {
		if got := sandbox.Retryable(c.err); got != c.want {
			t.Errorf("%s: Retryable(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

type a19Self bool

func (s a19Self) Error() string   { return "self " + strconv.FormatBool(bool(s)) }
func (s a19Self) Retryable() bool { return bool(s) }

// Promise (Retryable): a full disk is not retryable, "the error names the
// path". A host disk that fills while a Runner writes Command.Stdout is the
// realistic way to meet it: the Runner's error must not turn it retryable,
// nor must Control's, which runs every control step.
func TestAttackRetryableFullDiskStdout(t *testing.T) {
	full := a19WriterFunc(func(b []byte) (int, error) {
		return 0, &os.PathError{Op: "write", Path: "/host/out", Err: syscall.ENOSPC}
	})
	for name, r := range a19Runners(t) {
		for how, run := range map[string]func(cmd sandbox.Command) error{
			"Run":     func(cmd sandbox.Command) error { return a19Run(t, r, cmd, 20*time.Second) },
			"Control": func(cmd sandbox.Command) error { return sandbox.Control(context.Background(), r, cmd) }, // bounded by its deadline
		} {
			t.Run(name+"/"+how, func(t *testing.T) {
				err := run(sandbox.Command{Script: `head -c 100000 /dev/zero`, Stdout: full})
				if err == nil {
					t.Fatal("a Stdout that fails: nil error")
				}
				if sandbox.Retryable(err) || errors.Is(err, sandbox.ErrTransport) || !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "/host/out") {
					t.Errorf("full disk on Stdout: %v (retryable %v, ErrTransport %v, ENOSPC %v)", err, sandbox.Retryable(err), errors.Is(err, sandbox.ErrTransport), errors.Is(err, syscall.ENOSPC))
				}
			})
		}
	}
}

// a19Trickle splits records across writes: it writes one byte per Write,
// except that the middle of a long write (all but its first and last 256
// bytes) goes in one, so that a 3 MiB fetch does not take 3 million writes
// under the race detector (20 s).
type a19Trickle struct{ w io.Writer }

func (c a19Trickle) Write(b []byte) (int, error) {
	const edge = 256
	for i := 0; i < len(b); {
		n := 1
		if i == edge && len(b) > 2*edge+1 {
			n = len(b) - 2*edge
		}
		if _, err := c.w.Write(b[i : i+n]); err != nil {
			return i, err
		}
		i += n
	}
	return len(b), nil
}

// a19TrickleExec is an engine that delivers stdout and stderr a byte per
// write (but for the middle of long writes, see a19Trickle).
func a19TrickleExec(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return a19Local(ctx, argv, io.LimitReader(stdin, 1<<62), a19Trickle{stdout}, a19Trickle{stderr})
}

// Promise: the Runner contract (stagetest.TestRunner) holds over Exec and
// over an engine that splits the completion record across writes.
func TestAttackRunnerConformanceTrickle(t *testing.T) {
	stagetest.TestRunner(t, func(t *testing.T) sandbox.Runner { return sandbox.FromExec(a19TrickleExec) })
}

// Promise: stage.NewBridge(sandbox.Exec(...)) passes stagetest.TestTarget,
// hostile sandbox shell included.
func TestAttackBridgeOverExec(t *testing.T) {
	for name, r := range map[string]sandbox.Runner{
		"Exec()":           sandbox.Exec(),
		"Exec(sh engine)":  sandbox.Exec("sh", "-c", `"$@"; exit $?`, "engine"),
		"FromExec trickle": sandbox.FromExec(a19TrickleExec),
	} {
		t.Run(name, func(t *testing.T) {
			stagetest.TestTarget(t, func(t *testing.T) (stage.Target, string) {
				return stage.NewBridge(r), filepath.Join(t.TempDir(), "rt")
			}, stagetest.WithSandboxShell(func(t *testing.T, _ stage.Target) (sandbox.Runner, string) {
				return sandbox.Exec(), ""
			}))
		})
	}
}

// a19FailingReader yields n bytes, then fails.
type a19FailingReader struct{ n int }

func (f *a19FailingReader) Read(b []byte) (int, error) {
	if f.n <= 0 {
		time.Sleep(200 * time.Millisecond)
		return 0, errors.New("host source vanished")
	}
	k := min(len(b), f.n)
	for i := range k {
		b[i] = 'x'
	}
	f.n -= k
	return k, nil
}

// Promise: a failed read of Command.Stdin never looks like its end to the
// sandbox (the client is killed, not its stdin closed; for FromExec, "an fn
// that stops on ctx never forwards a false EOF" — the doc's own example SDK
// is exec.CommandContext).
func TestAttackStdinFailureNoFalseEOF(t *testing.T) {
	for name, r := range a19Runners(t) {
		t.Run(name, func(t *testing.T) {
			d := t.TempDir()
			err := a19Run(t, r, sandbox.Command{
				Script: `cat >"$D/f"; touch "$D/eof"; sleep 5`,
				Env:    map[string]string{"D": d}, Stdin: &a19FailingReader{n: 4096},
			}, 30*time.Second)
			if !errors.Is(err, sandbox.ErrTransport) || !strings.Contains(err.Error(), "host source vanished") {
				t.Errorf("want ErrTransport naming the stdin failure, got %v", err)
			}
			time.Sleep(500 * time.Millisecond)
			if _, serr := os.Stat(filepath.Join(d, "eof")); serr == nil {
				t.Errorf("the script saw EOF after a failed Stdin (false end of input); err %v", err)
			}
		})
	}
}

// Promise: Control's deadline holds over Exec when the script ignores TERM
// and when Command.Stdout blocks forever; nothing of the script is left.
func TestAttackControlDeadlineOverExec(t *testing.T) {
	for name, r := range map[string]sandbox.Runner{"Exec()": sandbox.Exec(), "FromExec": sandbox.FromExec(a19Local)} {
		t.Run(name, func(t *testing.T) {
			d := t.TempDir()
			rr := a19ShortRunnerWrap{r: r, d: 2 * time.Second}
			start := time.Now()
			err := sandbox.Control(context.Background(), rr, sandbox.Command{
				Script: `trap '' TERM; echo $$ >"$D/p"; while :; do sleep 0.1; done`, Env: map[string]string{"D": d}})
			if el := time.Since(start); el > 4*time.Second || !errors.Is(err, sandbox.ErrTransport) {
				t.Errorf("TERM-ignoring script: %v after %v", err, el)
			}
			time.Sleep(time.Second)
			b, _ := os.ReadFile(filepath.Join(d, "p"))
			if pid, _ := strconv.Atoi(strings.TrimSpace(string(b))); pid > 0 && a19Alive(pid) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				t.Errorf("script pid %d alive after its control step expired", pid)
			}
			block := make(chan struct{})
			defer close(block)
			start = time.Now()
			err = sandbox.Control(context.Background(), rr, sandbox.Command{
				Script: `echo out`, Stdout: a19WriterFunc(func(b []byte) (int, error) { <-block; return len(b), nil })})
			if el := time.Since(start); el > 4*time.Second || !errors.Is(err, sandbox.ErrTransport) {
				t.Errorf("blocked Stdout: %v after %v", err, el)
			}
		})
	}
}

// Promise: Env bounds — an entry of exactly MaxEnvEntryBytes and a total of
// MaxEnvBytes arrive byte-exact on every Runner; one byte more is refused
// naming the variable.
func TestAttackEnvBounds(t *testing.T) {
	one := map[string]string{"BIG": strings.Repeat("v", sandbox.MaxEnvEntryBytes-len("BIG")-2)}
	total := map[string]string{}
	per := sandbox.MaxEnvBytes / 8
	for i := range 8 {
		n := fmt.Sprintf("V%d", i)
		total[n] = strings.Repeat("w", per-len(n)-2)
	}
	for name, r := range a19Runners(t) {
		t.Run(name, func(t *testing.T) {
			for label, env := range map[string]map[string]string{"entry": one, "total": total} {
				var o bytes.Buffer
				err := a19Run(t, r, sandbox.Command{Script: `env | grep -c '^[VB][0-9I]' ; printf '%s' "$BIG$V0" | wc -c`, Env: env, Stdout: &o}, 30*time.Second)
				if err != nil {
					t.Errorf("%s at the bound: %v", label, err)
				}
			}
			over := map[string]string{"BIG": one["BIG"] + "v"}
			if err := a19Run(t, r, sandbox.Command{Script: "true", Env: over}, 10*time.Second); err == nil || !strings.Contains(err.Error(), "BIG") {
				t.Errorf("over the entry bound: %v", err)
			}
		})
	}
}

// Promise (ExecWith ClientEndsSandbox, bwrap): cancellation ends every
// process of the sandbox, verified; Process works there.
func TestAttackBwrapClientEndsSandbox(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bwrap not installed")
	}
	r := sandbox.ExecWith(sandbox.ExecOptions{ClientEndsSandbox: true},
		"bwrap", "--dev-bind", "/", "/", "--proc", "/proc", "--unshare-pid", "--die-with-parent", "--")
	if err := a19Run(t, r, sandbox.Command{Script: "true"}, 20*time.Second); err != nil {
		t.Skipf("bwrap cannot run here: %v", err)
	}
	d := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- r.Run(ctx, sandbox.Command{Script: `trap '' TERM; (setsid sh -c 'trap "" TERM; while :; do sleep 0.1; done' &) ; touch "$D/up"; while :; do sleep 0.1; done`, Env: map[string]string{"D": d}})
	}()
	time.Sleep(800 * time.Millisecond)
	t0 := time.Now()
	cancel()
	err := <-done
	t.Logf("cancel returned after %v: %v", time.Since(t0), err)
	var se *sandbox.StopError
	if !errors.As(err, &se) || !se.Verified {
		t.Errorf("bwrap cancel: %T %v, want a verified *StopError", err, err)
	}
	p, err := sandbox.Start(context.Background(), r, sandbox.Command{Script: `trap '' TERM; echo hi; while :; do sleep 0.1; done`})
	if err != nil {
		t.Fatalf("Start over bwrap: %v", err)
	}
	out := a19Drain(p)
	t0 = time.Now()
	ex, err := p.Stop(context.Background())
	t.Logf("Stop returned after %v: %+v %v", time.Since(t0), ex, err)
	if b := <-out; string(b) != "hi\n" || err != nil || !ex.Verified {
		t.Errorf("Process over bwrap: stdout %q exit %+v err %v", b, ex, err)
	}
}

// Promise: on cancellation "the error says whether termination was
// verified". Over plain Exec (no ClientEndsSandbox) with bwrap the kill exec
// is a second bwrap, another PID namespace: it cannot see the first's
// processes, so it must not report them verified gone while they live
// (here bwrap without --die-with-parent, and the README's own line with it).
func TestAttackBwrapPlainExecVerifiedClaim(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bwrap not installed")
	}
	for name, argv := range map[string][]string{
		"no-die-with-parent": {"bwrap", "--dev-bind", "/", "/", "--proc", "/proc", "--unshare-pid", "--new-session", "--"},
		"readme-line":        {"bwrap", "--dev-bind", "/", "/", "--proc", "/proc", "--unshare-pid", "--die-with-parent", "--new-session", "--"},
	} {
		t.Run(name, func(t *testing.T) {
			r := sandbox.Exec(argv...)
			if err := a19Run(t, r, sandbox.Command{Script: "true"}, 20*time.Second); err != nil {
				t.Skipf("bwrap cannot run here: %v", err)
			}
			mark := "A19BW=" + name + strconv.Itoa(os.Getpid())
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				done <- r.Run(ctx, sandbox.Command{Script: `trap '' TERM HUP; while :; do sleep 0.1; done`, Env: map[string]string{"A19BW": strings.TrimPrefix(mark, "A19BW=")}})
			}()
			time.Sleep(800 * time.Millisecond)
			if len(a19Marked(mark)) == 0 {
				t.Fatal("script not seen running")
			}
			cancel()
			err := <-done
			time.Sleep(500 * time.Millisecond)
			left := a19Marked(mark)
			for _, pid := range left {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			var se *sandbox.StopError
			verified := errors.As(err, &se) && se.Verified
			t.Logf("err %v; left %v", err, left)
			if verified && len(left) > 0 {
				t.Errorf("StopError.Verified true while %d processes of the command live: %v", len(left), err)
			}
		})
	}
}

// Promise: Control's deadline holds when the script leaves a daemon that
// keeps stdout and stderr open after the script ended.
func TestAttackLingeringDaemonHoldsPipes(t *testing.T) {
	for name, r := range a19Runners(t) {
		t.Run(name, func(t *testing.T) {
			d := t.TempDir()
			rr := a19ShortRunnerWrap{r: r, d: 3 * time.Second}
			start := time.Now()
			err := sandbox.Control(context.Background(), rr, sandbox.Command{
				Script: `setsid sh -c 'echo $$ >"$D/p"; exec sleep 20' & exit 0`, Env: map[string]string{"D": d}})
			el := time.Since(start)
			b, _ := os.ReadFile(filepath.Join(d, "p"))
			if pid, _ := strconv.Atoi(strings.TrimSpace(string(b))); pid > 0 {
				defer syscall.Kill(pid, syscall.SIGKILL)
			}
			t.Logf("err %v after %v", err, el)
			if el > 5*time.Second {
				t.Errorf("Control held %v past a 3s deadline", el)
			}
			if err != nil && !errors.Is(err, sandbox.ErrTransport) {
				t.Errorf("got %v", err)
			}
		})
	}
}

// Promise (Exit.Exited): false when the run failed; an engine that exits 0
// mid-command (kubectl) gives no record, so the Process must not report a
// clean exit 0.
func TestAttackProcessClientExitsZeroEarly(t *testing.T) {
	first := true
	var mu sync.Mutex
	fr := sandbox.FromExec(func(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
		mu.Lock()
		f := first
		first = false
		mu.Unlock()
		if !f {
			return a19Local(ctx, argv, stdin, stdout, stderr)
		}
		c := exec.Command(argv[0], argv[1:]...)
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		c.Stdin, c.Stdout, c.Stderr = stdin, stdout, stderr
		if err := c.Start(); err != nil {
			return err
		}
		go c.Wait()
		time.Sleep(time.Second)
		return nil // the stream idle timeout: exit 0, command still running
	})
	p, err := sandbox.Start(context.Background(), a19ShortRunnerWrap{r: fr, d: 4 * time.Second}, sandbox.Command{Script: `echo hi; sleep 30`})
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, p.Stdout())
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	ex, err := p.Wait(ctx)
	t.Logf("Exit %+v err %v", ex, err)
	if ex.Exited && ex.Status == 0 && err == nil {
		t.Error("an engine that exited 0 mid-command was reported as the command's clean exit 0")
	}
	if left := a19Tagged(p.Tag()); len(left) > 0 {
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		t.Errorf("left after settle: %v", left)
	}
}

// Promise (Runner contract): "Run returns nil when the script exited with
// status 0". A script that starts a service in the background (`server &`,
// output not redirected) and exits 0 is reported as a retryable transport
// failure, and a caller that retries starts a second service.
func TestAttackDaemonExitZeroIsTransport(t *testing.T) {
	for name, r := range map[string]sandbox.Runner{"Exec()": sandbox.Exec(), "Local": sandbox.Local(t.TempDir())} {
		t.Run(name, func(t *testing.T) {
			d := t.TempDir()
			var o bytes.Buffer
			err := a19Run(t, r, sandbox.Command{Stdout: &o,
				Script: `sh -c 'echo $$ >"$D/p"; exec sleep 8' & echo started; exit 0`, Env: map[string]string{"D": d}}, 20*time.Second)
			b, _ := os.ReadFile(filepath.Join(d, "p"))
			if pid, _ := strconv.Atoi(strings.TrimSpace(string(b))); pid > 0 {
				defer syscall.Kill(pid, syscall.SIGKILL)
			}
			if err != nil {
				t.Errorf("script exited 0, Run says %v (retryable %v)", err, sandbox.Retryable(err))
			}
		})
	}
}

// Promise: a header naming an impossible pid is ErrProtocol. pid/group 1 is
// never the leader of a session the wrapper made (bwrap's init is 1, the
// command a child); accepting it would aim the shutdown's group signals at
// "-1", every process of the user. The stop steps here never run anything.
func TestAttackProcessHeaderPidOne(t *testing.T) {
	tagRe := regexp.MustCompile(`AIRLOCK_PROCESS='?([0-9a-f]+)`)
	var mu sync.Mutex
	calls := 0
	var steps []string
	fr := sandbox.FromExec(func(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		var b []byte
		one := make([]byte, 1)
		for !bytes.HasSuffix(b, []byte("__airlock_env_end\n")) && len(b) < 1<<16 {
			if _, err := stdin.Read(one); err != nil {
				break
			}
			b = append(b, one[0])
		}
		if n > 1 {
			mu.Lock()
			steps = append(steps, strings.Join(argv, " ")+string(b))
			mu.Unlock()
			return errors.New("not run")
		}
		tag := "unknown"
		if m := tagRe.FindStringSubmatch(string(b)); m != nil {
			tag = m[1]
		}
		_, _ = io.WriteString(stdout, "airlock-process-v1 "+tag+" 1 1 1\n")
		<-ctx.Done()
		return ctx.Err()
	})
	p, err := sandbox.Start(context.Background(), a19ShortRunnerWrap{r: fr, d: 2 * time.Second}, sandbox.Command{Script: "sleep 30"})
	if err == nil {
		go io.Copy(io.Discard, p.Stdout())
		ex, serr := p.Stop(context.Background())
		mu.Lock()
		kill1 := 0
		for _, s := range steps {
			if strings.Contains(s, " -1") || strings.Contains(s, "-- -1") {
				kill1++
			}
		}
		mu.Unlock()
		t.Errorf("header with pid/group/session 1 accepted (Stop %+v %v; %d stop steps mention -1)", ex, serr, kill1)
	} else if !errors.Is(err, sandbox.ErrProtocol) {
		t.Errorf("want ErrProtocol, got %v", err)
	}
}

// Probe of the documented non-guarantee ("the nonce only keeps the script
// from forging by accident"): a script that rewrites the file by which the
// kill exec finds its group ($TMPDIR/.airlock-exec-*), pointing it at a dead
// pid, survives cancellation. Does the StopError still claim Verified?
// TMPDIR is private so no other run's file is touched.
func TestAttackRewritePidFileVerified(t *testing.T) {
	tmp := t.TempDir()
	r := sandbox.ExecWith(sandbox.ExecOptions{Environ: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=" + tmp}})
	mark := "A19PF=" + strconv.Itoa(os.Getpid())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- r.Run(ctx, sandbox.Command{Env: map[string]string{"A19PF": strings.TrimPrefix(mark, "A19PF="), "T": tmp}, Script: `sleep 0.2
for f in "$T"/.airlock-exec-*; do [ -f "$f" ] && printf '999999 group %s\n' "$(readlink /proc/self/ns/pid)" >"$f"; done
ls -la "$T" >&2
setsid sh -c 'trap "" TERM HUP; while :; do sleep 0.1; done' & trap '' TERM HUP; while :; do sleep 0.1; done`})
	}()
	time.Sleep(time.Second)
	files, _ := filepath.Glob(filepath.Join(tmp, ".airlock-exec-*"))
	cancel()
	err := <-done
	time.Sleep(300 * time.Millisecond)
	left := a19Marked(mark)
	for _, pid := range left {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	var se *sandbox.StopError
	t.Logf("pid files %v; err %v; left %v", files, err, left)
	if errors.As(err, &se) && se.Verified && len(left) > 0 {
		t.Logf("non-guarantee confirmed: Verified true while %d processes live", len(left))
	}
}

// Promise (Process over ExecWith ClientEndsSandbox, bwrap): Stop's
// Exit.Verified means no process is left; Stop is prompt for a command that
// merely ignores TERM (KILL after StopGrace, not a whole control deadline),
// and Exited reports the KILL.
func TestAttackBwrapProcessStop(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bwrap not installed")
	}
	r := sandbox.ExecWith(sandbox.ExecOptions{ClientEndsSandbox: true},
		"bwrap", "--dev-bind", "/", "/", "--proc", "/proc", "--unshare-pid", "--die-with-parent", "--")
	if err := a19Run(t, r, sandbox.Command{Script: "true"}, 20*time.Second); err != nil {
		t.Skipf("bwrap cannot run here: %v", err)
	}
	mark := "A19BP=" + strconv.Itoa(os.Getpid())
	p, err := sandbox.Start(context.Background(), r, sandbox.Command{Script: `trap '' TERM; echo hi; while :; do sleep 0.1; done`,
		Env: map[string]string{"A19BP": strings.TrimPrefix(mark, "A19BP=")}})
	if err != nil {
		t.Fatalf("Start over bwrap: %v", err)
	}
	out := a19Drain(p)
	time.Sleep(300 * time.Millisecond)
	t0 := time.Now()
	ex, err := p.Stop(context.Background())
	el := time.Since(t0)
	<-out
	left := a19Marked(mark)
	for _, pid := range left {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	t.Logf("Stop after %v: %+v %v; left %v", el, ex, err, left)
	if ex.Verified && len(left) > 0 {
		t.Errorf("Verified with %d processes alive", len(left))
	}
	if el > sandbox.StopGrace+10*time.Second || !ex.Exited {
		t.Errorf("Stop of a TERM-ignoring command over bwrap took %v and reported Exited %v (over Exec() it is StopGrace plus a few seconds, Exited true)", el, ex.Exited)
	}
}
