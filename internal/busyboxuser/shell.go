package busyboxuser

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"

	"github.com/airlockdev/airlock/sandbox"
)

// ShellRunner runs each script as `<Argv> -c script` in Dir (or the
// Command's Dir): the sandbox's shell is Argv — dash, or busybox sh, whose
// applets then stand in for tar, find, stat, cat and ls — as this user.
// Env reaches the script through the process environment (tests only: a
// real Runner never puts it where ps shows it).
type ShellRunner struct {
	Argv []string
	Dir  string
}

// Run implements sandbox.Runner.
func (s ShellRunner) Run(ctx context.Context, cmd sandbox.Command) error {
	c := exec.CommandContext(ctx, s.Argv[0], append(s.Argv[1:], "-c", cmd.Script)...)
	c.Dir = s.Dir
	if cmd.Dir != "" {
		c.Dir = cmd.Dir
	}
	c.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + s.Dir, "LANG=C"}
	for k, v := range cmd.Env {
		c.Env = append(c.Env, k+"="+v)
	}
	c.Stdin, c.Stdout, c.Stderr = cmd.Stdin, cmd.Stdout, cmd.Stderr
	err := c.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		return &sandbox.ExitError{Status: ee.ExitCode()}
	case errors.As(err, &ee):
		return &sandbox.ExitError{Status: -1}
	}
	return fmt.Errorf("%w: %s: %w", sandbox.ErrTransport, s.Argv[0], err)
}
