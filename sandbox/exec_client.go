package sandbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

// cliClient runs the local client of a CLI exec engine.
type cliClient struct {
	prefix  []string
	environ []string
}

// clientWaitDelay bounds how long the client's output pipes are read after
// it exited (a process it left behind may hold them).
const clientWaitDelay = 2 * time.Second

// run is cliClient's ExecFunc: prefix... argv... in a process group of
// its own, killed whole when ctx ends.
func (c *cliClient) run(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	full := append(slices.Clone(c.prefix), argv...)
	prog, err := c.lookPath(full[0])
	if err != nil {
		return startErr(full[0], err)
	}
	cmd := exec.CommandContext(ctx, prog, full[1:]...)
	cmd.Args[0] = full[0]
	cmd.Env = c.environ
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.WaitDelay = clientWaitDelay
	clientProcAttr(cmd)
	errc := make(chan error, 1)
	go func() {
		// The parent-death signal (Linux) is sent when the thread that
		// started the child ends: this goroutine keeps its thread until the
		// child has been waited for.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			errc <- startErr(full[0], err)
			return
		}
		errc <- cmd.Wait()
	}()
	return <-errc
}

// lookPath finds the client's program: a name holding a slash as it is,
// a bare name in the directories of the client's own PATH (the last PATH
// of ExecOptions.Environ, as the client's environment keeps it; this
// process's when Environ has none). Relative directories of that PATH are
// passed over.
func (c *cliClient) lookPath(name string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	dirs := os.Getenv("PATH") // an Environ without PATH: this process's
	for _, kv := range c.environ {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			dirs = v
		}
	}
	for _, d := range filepath.SplitList(dirs) {
		if !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", &exec.Error{Name: name, Err: exec.ErrNotFound}
}

// startErr is the error of a client that could not be started. One that
// is not installed, not found on the client's PATH, not executable or not
// a program (exec.ErrNotFound, fs.ErrNotExist, fs.ErrPermission, ENOEXEC,
// ENOTDIR, exec.ErrDot) matches ErrBadCommand: nothing ran, and trying
// again unchanged cannot help. Any other failure (EAGAIN, EMFILE: a host
// short of processes or descriptors) stays the transport's.
func startErr(name string, err error) error {
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, exec.ErrDot), errors.Is(err, fs.ErrNotExist),
		errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.ENOEXEC), errors.Is(err, syscall.ENOTDIR):
		where := ""
		if !strings.Contains(name, "/") {
			where = " (a bare name is looked up in the PATH of ExecOptions.Environ, by default this process's; relative directories are passed over)"
		}
		return &badCommand{msg: fmt.Sprintf("sandbox: Exec: the exec client %q could not be started: %v; nothing ran; install it, or fix its name or path in Exec's argv%s", name, err, where), err: err}
	}
	return fmt.Errorf("starting %s: %w", name, err)
}

// ttyFlag reports whether the argv token a asks an engine for a TTY:
// --tty, --tty=V or -t=V with V other than false or 0, or a single-dash
// cluster made only of the boolean letters d, i, q and t that holds t
// (-t, -it, -dit). A flag that takes a value (-c test, -w /tmp) is none.
func ttyFlag(a string) bool {
	if name, v, ok := strings.Cut(a, "="); ok {
		return (name == "--tty" || name == "-t") && v != "false" && v != "0"
	}
	if a == "--tty" {
		return true
	}
	c, ok := strings.CutPrefix(a, "-")
	if !ok || c == "" || strings.HasPrefix(c, "-") || strings.Trim(c, "diqt") != "" {
		return false
	}
	return strings.Contains(c, "t")
}

// checkArgv refuses a TTY flag before the first "--".
func checkArgv(argv []string) error {
	for _, a := range argv {
		if a == "--" {
			break
		}
		if ttyFlag(a) {
			return refuse("sandbox: Exec: the argument %q asks %s for a TTY, which mixes stdout and stderr and mangles binary streams; drop it (use -i alone); nothing was run", a, cmp.Or(strings.Join(argv[:1], ""), "the engine"))
		}
	}
	return nil
}

// execEnvKeys are the variables the default client environment keeps.
var execEnvKeys = []string{"HOME", "LANG", "DOCKER_HOST", "DOCKER_CONFIG", "DOCKER_CONTEXT", "DOCKER_CERT_PATH", "DOCKER_TLS_VERIFY",
	"KUBECONFIG", "CONTAINER_HOST", "CONTAINER_CONNECTION", "XDG_RUNTIME_DIR"}

// execEnviron is the default ExecOptions.Environ.
func execEnviron() []string {
	env := []string{"PATH=" + cmp.Or(os.Getenv("PATH"), "/usr/local/bin:/usr/bin:/bin")}
	for _, k := range execEnvKeys {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}
