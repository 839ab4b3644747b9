package sandbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/airlockdev/airlock/internal/shell"
)

// LocalOption configures Local.
type LocalOption func(*localRunner)

// WithEnviron sets the environment the local child starts with (before
// Command.Env is added), as os/exec's Cmd.Env does: "KEY=value" strings.
// WithEnviron(os.Environ()) passes this process's whole environment on.
// Default: a minimal environment, see Local.
func WithEnviron(env []string) LocalOption {
	return func(l *localRunner) { l.environ = slices.Clone(env) }
}

// Local returns a Runner that runs each script with /bin/sh on this
// machine, in dir unless the Command names another directory (a relative
// one is taken relative to dir). It serves tests and the local lane; it
// isolates nothing (see Exec with bwrap for a local sandbox that does).
//
// The script is sh's only argument; Env values travel in the process
// environment, never in argv. The child starts with a minimal environment:
// PATH, HOME and LANG as this process has them (PATH defaults to
// /usr/local/bin:/usr/bin:/bin), unless WithEnviron says otherwise, so no
// host secret in this process's environment reaches the sandbox by
// default. An Env key outside [A-Za-z_][A-Za-z0-9_]*, or a value holding
// NUL, is refused before anything runs, and so is a working directory that
// is missing or not a directory. A script over 64 KiB (more than an argv
// string can hold) is written to a private temporary file, removed when
// Run returns, and run as `. FILE`; $0 and $@ are the same either way. A
// failure to write that file (a full disk) is the host's own error, with
// its path, not a transport failure: nothing was run.
//
// When ctx ends, the script and everything it started (its process group)
// are killed with SIGKILL, whatever signals they ignore, and Run returns an
// error wrapping ErrTransport and ctx.Err(). A failed read of Command.Stdin
// kills the group before the script can see an end of its input, and Run
// returns an error wrapping ErrTransport and that failure. A write to
// Command.Stdout or Stderr that fails (a full disk) stops that output, as
// a closed pipe would, and Run returns the write error, "writing the
// command's stdout: …", in place of what followed (a SIGPIPE). A script that exits 0 while a process it
// left behind holds its output open is a success after a second's wait;
// what that process writes later is not read. A script killed by a signal
// is reported as an ExitError with Status -1 and the signal's name.
func Local(dir string, opts ...LocalOption) Runner {
	l := &localRunner{dir: dir, environ: minimalEnviron()}
	for _, o := range opts {
		o(l)
	}
	return l
}

type localRunner struct {
	dir     string
	environ []string
}

var _ Runner = (*localRunner)(nil)

// minimalEnviron is Local's default environment.
func minimalEnviron() []string {
	env := []string{"PATH=" + cmp.Or(os.Getenv("PATH"), "/usr/local/bin:/usr/bin:/bin")}
	for _, k := range []string{"HOME", "LANG"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// Run implements Runner: it runs cmd.Script with /bin/sh -c on the host.
func (l *localRunner) Run(ctx context.Context, cmd Command) error {
	if err := CheckEnv(cmd.Env); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	dir := l.workDir(cmd.Dir)
	if dir != "" {
		// Checked first: a chdir that fails in the child is reported by
		// os/exec as if /bin/sh were missing.
		if err := checkWorkDir(dir); err != nil {
			return err
		}
	}
	arg, cleanup, err := localScript(cmd.Script)
	if err != nil {
		return err
	}
	defer cleanup()
	c := exec.CommandContext(ctx, "/bin/sh", "-c", arg)
	c.Dir = dir
	c.Env = slices.Clone(l.environ)
	for _, k := range slices.Sorted(maps.Keys(cmd.Env)) {
		c.Env = append(c.Env, k+"="+cmd.Env[k])
	}
	var outs []*outputWriter
	c.Stdout, outs = localOutput(cmd.Stdout, "stdout", outs)
	c.Stderr, outs = localOutput(cmd.Stderr, "stderr", outs)
	killGroup(c)
	c.WaitDelay = time.Second
	in, err := startLocal(c, cmd.Stdin)
	if err != nil {
		if derr := checkWorkDir(dir); dir != "" && derr != nil {
			return derr // removed between the check and the start
		}
		return fmt.Errorf("sandbox: starting /bin/sh: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err := <-done:
		in.close()
		if serr := in.failure(); serr != nil {
			return fmt.Errorf("%w: sandbox: local command: %w", ErrTransport, serr)
		}
		return localResult(ctx, err, outs)
	case serr := <-in.failed:
		// The script must not see an end of its input: its group dies
		// before the pipe is closed.
		_ = c.Cancel()
		<-done
		in.close()
		return fmt.Errorf("%w: sandbox: local command: %w; its process group was killed", ErrTransport, serr)
	}
}

// workDir is the directory a command runs in.
func (l *localRunner) workDir(d string) string {
	switch {
	case d == "":
		return l.dir
	case filepath.IsAbs(d):
		return d
	}
	return filepath.Join(l.dir, d)
}

// localScript returns the argument of sh -c for script: the script
// itself, or, over shell.MaxArgScript (an argv string is bounded by the
// kernel: 128 KiB on Linux), ". FILE" of a private temporary file that
// cleanup removes. Either way $0 is /bin/sh and $@ is empty.
func localScript(script string) (arg string, cleanup func(), err error) {
	if len(script) <= shell.MaxArgScript {
		return script, func() {}, nil
	}
	f, err := os.CreateTemp("", "airlock-script-*.sh") // mode 0600
	if err != nil {
		return "", nil, fmt.Errorf("sandbox: a temporary file for a %d-byte script: %w; check the host's temporary directory (TMPDIR); nothing was run", len(script), err)
	}
	_, werr := f.WriteString(script)
	if err := cmp.Or(werr, f.Close()); err != nil {
		_ = os.Remove(f.Name())
		return "", nil, fmt.Errorf("sandbox: writing a %d-byte script to %s: %w; nothing was run", len(script), f.Name(), err)
	}
	return ". " + shell.Quote(f.Name()), func() { _ = os.Remove(f.Name()) }, nil
}

// localOutput returns what the child writes w through: w itself when it
// is nil or a file (the child writes it directly), else an outputWriter
// that keeps w's first error, added to outs.
func localOutput(w io.Writer, what string, outs []*outputWriter) (io.Writer, []*outputWriter) {
	if _, ok := w.(*os.File); ok || w == nil {
		return w, outs
	}
	o := newOutputWriter(w, what)
	return o, append(outs, o)
}

// localInput is the pipe Command.Stdin is fed through, so that a failed
// read of it never closes the child's stdin (os/exec would).
type localInput struct {
	pw     *os.File // nil: no pipe
	failed chan error
}

// startLocal starts c with in on its stdin.
func startLocal(c *exec.Cmd, in io.Reader) (*localInput, error) {
	li := &localInput{failed: make(chan error, 1)}
	if _, ok := in.(*os.File); ok || in == nil {
		c.Stdin = in
		return li, c.Start()
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("%w: a pipe for stdin: %w", ErrTransport, err)
	}
	c.Stdin = pr
	err = c.Start()
	pr.Close()
	if err != nil {
		pw.Close()
		return nil, err
	}
	li.pw = pw
	go feed(pw, "", in, li.failed)
	return li, nil
}

// close ends the pipe once the child is gone (what it did not read was
// for nobody).
func (li *localInput) close() {
	if li.pw != nil {
		li.pw.Close()
	}
}

// failure returns a read error of Command.Stdin already reported.
func (li *localInput) failure() error {
	select {
	case err := <-li.failed:
		return err
	default:
		return nil
	}
}

// localResult maps how the child ended onto Runner's errors.
func localResult(ctx context.Context, err error, outs []*outputWriter) error {
	if err == nil || errors.Is(err, exec.ErrWaitDelay) {
		// ErrWaitDelay: the script exited 0, and a process it left
		// behind (a daemon started with &) holds its output open; what
		// that process writes later is not read.
		return firstOutputErr(outs...)
	}
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%w: sandbox: the local command was stopped (%w); its process group was killed", ErrTransport, cerr)
	}
	if oerr := firstOutputErr(outs...); oerr != nil {
		return oerr
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return fmt.Errorf("%w: sandbox: local command: %w", ErrTransport, err)
	}
	if ee.Exited() {
		return &ExitError{Status: ee.ExitCode()}
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return &ExitError{Status: -1, Signal: signalName(ws.Signal())}
	}
	return &ExitError{Status: -1}
}

// checkWorkDir says why dir cannot be a command's working directory.
func checkWorkDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("sandbox: the working directory %s is missing: %w; create it or pass another Command.Dir", dir, err)
	case err != nil:
		return fmt.Errorf("sandbox: the working directory %s cannot be used: %w", dir, err)
	case !fi.IsDir():
		return fmt.Errorf("sandbox: the working directory %s is not a directory: %w", dir, &fs.PathError{Op: "chdir", Path: dir, Err: syscall.ENOTDIR})
	}
	return nil
}
