package sandbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"
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
// is missing or not a directory. When ctx ends, the script and everything
// it started (its process group) are killed with SIGKILL, whatever signals
// they ignore. A script killed by a signal is reported as an ExitError with
// Status -1 and the signal's name.
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
	c := exec.CommandContext(ctx, "/bin/sh", "-c", cmd.Script)
	c.Dir = l.dir
	if cmd.Dir != "" {
		c.Dir = cmd.Dir
		if !filepath.IsAbs(cmd.Dir) {
			c.Dir = filepath.Join(l.dir, cmd.Dir)
		}
	}
	if err := CheckEnv(cmd.Env); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	env := slices.Clone(l.environ)
	for _, k := range slices.Sorted(maps.Keys(cmd.Env)) {
		env = append(env, k+"="+cmd.Env[k])
	}
	c.Env = env
	if c.Dir != "" {
		// Checked first: a chdir that fails in the child is reported by
		// os/exec as if /bin/sh were missing.
		if err := checkWorkDir(c.Dir); err != nil {
			return err
		}
	}
	c.Stdin, c.Stdout, c.Stderr = cmd.Stdin, cmd.Stdout, cmd.Stderr
	killGroup(c)
	c.WaitDelay = time.Second
	err := c.Run()
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("local command stopped: %w", cerr)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ee.Exited() {
			return &ExitError{Status: ee.ExitCode()}
		}
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return &ExitError{Status: -1, Signal: signalName(ws.Signal())}
		}
		return &ExitError{Status: -1}
	}
	if c.Dir != "" {
		if derr := checkWorkDir(c.Dir); derr != nil {
			return derr // removed between the check and the start
		}
	}
	return err
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
