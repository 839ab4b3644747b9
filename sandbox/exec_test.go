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

	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/stage/stagetest"
)

// execPrefixes are the CLI prefixes every Exec test runs over: the plain
// sh -c prefix, a prefix that is a process of its own in front of the
// wrapper's sh, and (where it is installed) busybox's sh running the
// wrapper.
func execPrefixes(t *testing.T) map[string][]string {
	p := map[string][]string{
		"plain":  nil,
		"prefix": {"sh", "-c", `exec "$@"`, "sh"},
	}
	if _, err := exec.LookPath("busybox"); err == nil {
		p["busybox"] = []string{"busybox"}
	} else {
		t.Logf("busybox is not installed: the wrapper is not run under busybox sh")
	}
	return p
}

func TestExecConformance(t *testing.T) {
	for name, prefix := range execPrefixes(t) {
		t.Run(name, func(t *testing.T) {
			stagetest.TestRunner(t, func(t *testing.T) sandbox.Runner { return sandbox.Exec(prefix...) })
		})
	}
	t.Run("FromExec", func(t *testing.T) {
		stagetest.TestRunner(t, func(t *testing.T) sandbox.Runner { return sandbox.FromExec((&fakeSDK{}).exec) })
	})
}

func TestExecBridgeConformance(t *testing.T) {
	runners := map[string]func() sandbox.Runner{
		"plain":    func() sandbox.Runner { return sandbox.Exec() },
		"prefix":   func() sandbox.Runner { return sandbox.Exec("sh", "-c", `exec "$@"`, "sh") },
		"FromExec": func() sandbox.Runner { return sandbox.FromExec((&fakeSDK{}).exec) },
	}
	for name, newRunner := range runners {
		t.Run(name, func(t *testing.T) {
			stagetest.TestTarget(t, func(t *testing.T) (stage.Target, string) {
				return stage.NewBridge(newRunner()), filepath.ToSlash(filepath.Join(t.TempDir(), "home", "agent", "rt"))
			}, stagetest.WithSandboxShell(func(*testing.T, stage.Target) (sandbox.Runner, string) {
				return sandbox.Local("/"), "" // the sandbox is this machine
			}))
		})
	}
}

// fakeSDK is an in-process stand-in for a provider's Go SDK exec call: it
// runs argv on this machine through stream copies of its own (as an SDK
// would), and can play a broken one.
type fakeSDK struct {
	failKill  bool // the kill call (the second exec) fails
	ignoreCtx bool // the first call goes on when its ctx ends
	mu        sync.Mutex
	argvs     [][]string
	stdins    []*bytes.Buffer // what each call read from stdin, up to 1 MiB
}

// isKill reports whether argv is the Runner's kill call.
func isKill(argv []string) bool {
	return len(argv) == 3 && strings.Contains(argv[2], "airlock-exec-kill: ")
}

func (f *fakeSDK) exec(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	seen := &bytes.Buffer{}
	f.mu.Lock()
	f.argvs = append(f.argvs, argv)
	f.stdins = append(f.stdins, seen)
	f.mu.Unlock()
	if isKill(argv) && f.failKill {
		return errors.New("fake SDK: connection refused")
	}
	c := exec.Command(argv[0], argv[1:]...)
	c.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	c.Stdin = io.TeeReader(stdin, &capWriter{b: seen, mu: &f.mu, max: 1 << 20})
	c.Stdout, c.Stderr = struct{ io.Writer }{stdout}, struct{ io.Writer }{stderr}
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.WaitDelay = time.Second
	if err := c.Start(); err != nil {
		return err
	}
	if !f.ignoreCtx || isKill(argv) {
		stop := context.AfterFunc(ctx, func() { _ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL) })
		defer stop()
	}
	return c.Wait()
}

func (f *fakeSDK) calls() ([][]string, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var in []string
	for _, b := range f.stdins {
		in = append(in, b.String())
	}
	return append([][]string(nil), f.argvs...), in
}

// capWriter keeps up to max bytes.
type capWriter struct {
	b   *bytes.Buffer
	mu  *sync.Mutex
	max int
}

func (w *capWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if room := w.max - w.b.Len(); room > 0 {
		w.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// run runs cmd through r with a minute's deadline, capturing the streams
// it leaves nil.
func run(t *testing.T, r sandbox.Runner, cmd sandbox.Command) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
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

// groupAlive reports whether a process of group pg is alive on this
// machine (a zombie is not).
func groupAlive(t *testing.T, pg int) bool {
	t.Helper()
	if syscall.Kill(-pg, 0) != nil {
		return false
	}
	ents, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 2 && f[0] != "Z" && f[2] == strconv.Itoa(pg) {
			return true
		}
	}
	return false
}

// waitGone waits up to within for group pg to be gone.
func waitGone(t *testing.T, pg int, within time.Duration) bool {
	t.Helper()
	for end := time.Now().Add(within); ; time.Sleep(20 * time.Millisecond) {
		if !groupAlive(t, pg) {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}

// killGroupAtEnd kills group pg when the test ends (a test that leaves it
// alive on purpose).
func killGroupAtEnd(t *testing.T, pg int) {
	t.Cleanup(func() { _ = syscall.Kill(-pg, syscall.SIGKILL) })
}

// readPid waits for the file p to hold a pid and returns it.
func readPid(t *testing.T, p string) int {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile(p)
		if n, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil && strings.HasSuffix(string(b), "\n") {
			return n
		}
	}
	t.Fatalf("no pid in %s after 30s", p)
	return 0
}
