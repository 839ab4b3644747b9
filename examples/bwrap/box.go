//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/airlockdev/airlock/sandbox"
)

// SandboxWork is where the sandbox sees its one writable directory.
const SandboxWork = "/work"

// DefaultBwrap is where New looks for bubblewrap when Config.Bwrap is "".
const DefaultBwrap = "/usr/bin/bwrap"

// Config says how to build the sandbox.
type Config struct {
	Bwrap string // bwrap's path; "" means DefaultBwrap, then PATH
	Work  string // existing host directory, bound writable at SandboxWork; nothing else of the host is writable
}

// Box is a bubblewrap sandbox: every command runs in a fresh bwrap with
// the same flags, sharing only the work directory.
//
// Guarantees, each probed by New before the first command runs (and
// checked by the example's test from inside): every namespace unshared
// (a new PID namespace, no network device but its own lo); no
// capability, so that root in the sandbox cannot remount a read-only bind
// writable; /usr read-only and the host's top-level links into it; / read
// only; a private /tmp, /proc and /dev; nothing of /etc, /home, /root or
// the host's other files; bwrap killed with its parent (and the sandbox with
// bwrap) and run in a new session; bwrap started with an empty
// environment, since its own environ is readable inside as
// /proc/1/environ.
//
// Not guaranteed: resource limits (no cgroup limits are set), seccomp
// filtering of system calls, and isolation from kernel bugs.
type Box struct {
	bwrap string
	work  string
	args  []string // flags, up to and including "--"
}

// UnsupportedError reports that this machine cannot give one of the
// isolation guarantees of Box: New never builds a weaker sandbox instead.
type UnsupportedError struct {
	Missing string // what is missing: "bwrap", "namespaces", "capability drop", …
	Err     error
}

func (e *UnsupportedError) Error() string {
	return "bwrap sandbox: " + e.Missing + " unsupported on this machine: " + e.Err.Error() +
		" (the example never runs with weaker isolation; install bubblewrap, or allow user and PID namespaces)"
}

func (e *UnsupportedError) Unwrap() error { return e.Err }

// StartError reports that bwrap did not start the command: it wrote no
// exit status on its --json-status-fd, so its exit status is its own (a
// bind that failed, a namespace refused), not the command's. It wraps
// sandbox.ErrTransport: the command did not run.
type StartError struct {
	Stderr string // the end of bwrap's stderr
	Err    error  // how bwrap ended
}

func (e *StartError) Error() string {
	return fmt.Sprintf("bwrap did not start the command (%v): %s; check Config and the probe's message", e.Err, strings.TrimSpace(e.Stderr))
}

func (e *StartError) Unwrap() []error { return []error{sandbox.ErrTransport, e.Err} }

// New finds bwrap, builds the flags and probes, in a sandbox made with
// exactly those flags, that every guarantee of Box holds here. A missing
// one is an *UnsupportedError.
func New(ctx context.Context, cfg Config) (*Box, error) {
	bin := cfg.Bwrap
	if bin == "" {
		bin = DefaultBwrap
		if _, err := os.Stat(bin); err != nil {
			if p, err := exec.LookPath("bwrap"); err == nil {
				bin = p
			}
		}
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, &UnsupportedError{Missing: "bwrap", Err: fmt.Errorf("%s: %w (apt-get install bubblewrap)", bin, err)}
	}
	fi, err := os.Stat(cfg.Work)
	if err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("bwrap sandbox: the work directory %q must be an existing directory: %v", cfg.Work, err)
	}
	b := &Box{bwrap: bin, work: cfg.Work, args: flags(cfg.Work)}
	if err := b.probe(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

// flags returns bwrap's flags for the work directory work, ending in "--".
func flags(work string) []string {
	args := []string{
		"--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
		"--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", SandboxWork,
		"--hostname", "sandbox", "--ro-bind", "/usr", "/usr",
	}
	for _, top := range []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"} {
		p := "/" + top
		if target, err := os.Readlink(p); err == nil {
			args = append(args, "--symlink", target, p)
		} else if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			args = append(args, "--ro-bind", p, p)
		}
	}
	return append(args, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
		"--bind", work, SandboxWork, "--chdir", SandboxWork, "--remount-ro", "/",
		"--json-status-fd", "3", "--")
}

// Argv returns the argv prefix of the sandbox, ending in "--".
func (b *Box) Argv() []string { return append([]string{b.bwrap}, b.args...) }

// stderrTail keeps the last bytes of bwrap's stderr for StartError.
const stderrTail = 4 << 10

// exec runs argv in a fresh sandbox. bwrap starts with an empty
// environment, its parent-death signal set on the OS thread that starts
// and waits it (the signal is per thread: the goroutine stays locked to
// the thread for bwrap's whole life), and its --json-status-fd read to tell
// a command that ran (an "exit-code" record) from bwrap failing to start
// it.
func (b *Box) exec(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("bwrap status pipe: %w: %w", err, sandbox.ErrTransport)
	}
	defer statusR.Close()
	tail := &tailBuffer{max: stderrTail}
	cmd := exec.CommandContext(ctx, b.bwrap, append(b.Argv()[1:], argv...)...)
	cmd.Env = []string{}
	cmd.Stdin, cmd.Stdout = stdin, stdout
	cmd.Stderr = tail
	if stderr != nil {
		cmd.Stderr = io.MultiWriter(stderr, tail)
	}
	cmd.ExtraFiles = []*os.File{statusW} // fd 3
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	cmd.WaitDelay = 2 * time.Second
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cmd.Start(); err != nil {
		statusW.Close()
		return &StartError{Stderr: tail.String(), Err: err}
	}
	statusW.Close()
	var wg sync.WaitGroup
	var exited bool
	wg.Go(func() { exited = readStatus(statusR) })
	err = cmd.Wait()
	wg.Wait()
	if !exited && ctx.Err() == nil {
		return &StartError{Stderr: tail.String(), Err: err}
	}
	return err
}

// readStatus reads bwrap's JSON status lines (bounded) and reports
// whether one carried the command's "exit-code".
func readStatus(r io.Reader) bool {
	exited := false
	sc := bufio.NewScanner(io.LimitReader(r, 64<<10))
	for sc.Scan() {
		var rec map[string]json.RawMessage
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["exit-code"] != nil {
			exited = true
		}
	}
	io.Copy(io.Discard, r)
	return exited
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// probeScript prints one line per guarantee; the probe compares them with
// probeWant. It runs in a sandbox made with Box's flags.
const probeScript = `w=no; touch ./.probe 2>/dev/null && rm -f ./.probe && w=yes; echo "work-writable $w"
r=yes; touch /.probe 2>/dev/null && r=no; echo "root-readonly $r"
u=yes; touch /usr/.probe 2>/dev/null && u=no; echo "usr-readonly $u"
echo "net $(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\n' ' ')"
echo "caps $(grep '^CapEff:' /proc/self/status | cut -f2)"
echo "pid1 $(cat /proc/1/comm)"
echo "environ $(tr '\0' '\n' < /proc/1/environ | wc -l)"
h=yes; for d in /home /root /etc; do [ -e "$d" ] && h=no; done; echo "no-host-dirs $h"
`

var probeWant = []struct{ line, missing string }{
	{"work-writable yes", "a writable work directory"},
	{"root-readonly yes", "a read-only root (--remount-ro /)"},
	{"usr-readonly yes", "a read-only /usr"},
	{"net lo ", "a network namespace (--unshare-net)"},
	{"caps 0000000000000000", "capability drop (--cap-drop ALL)"},
	{"pid1 bwrap", "a PID namespace (--unshare-pid)"},
	{"environ 0", "an empty environment for bwrap"},
	{"no-host-dirs yes", "a root without the host's /etc, /home, /root"},
}

// probe runs probeScript in the sandbox and checks every line.
func (b *Box) probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, sandbox.MaxControlTimeout)
	defer cancel()
	var out, errOut bytes.Buffer
	err := b.exec(ctx, []string{"sh", "-c", probeScript}, nil, &out, &errOut)
	if se := (*StartError)(nil); errors.As(err, &se) {
		return &UnsupportedError{Missing: "namespaces or a bwrap flag", Err: err}
	}
	if err != nil {
		return &UnsupportedError{Missing: "a working sandbox", Err: fmt.Errorf("the probe failed: %w: %s", err, strings.TrimSpace(errOut.String()))}
	}
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	for i, w := range probeWant {
		if i >= len(got) || got[i] != w.line {
			line := ""
			if i < len(got) {
				line = got[i]
			}
			return &UnsupportedError{Missing: w.missing, Err: fmt.Errorf("the probe reported %q, want %q", line, w.line)}
		}
	}
	return nil
}
