package stage

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// LocalRunner returns a Runner that runs each script with /bin/sh on this
// machine, in dir unless the Command names another directory (a relative
// one is taken relative to dir). It serves tests and the local lane.
//
// The script is sh's only argument; Env values travel in the process
// environment (which otherwise is this process's own), never in argv. When
// ctx ends, the script and everything it started (its process group) are
// killed.
func LocalRunner(dir string) Runner { return &localRunner{dir: dir} }

type localRunner struct{ dir string }

var _ Runner = (*localRunner)(nil)

func (l *localRunner) Run(ctx context.Context, cmd Command) error {
	c := exec.CommandContext(ctx, "/bin/sh", "-c", cmd.Script)
	c.Dir = l.dir
	if cmd.Dir != "" {
		c.Dir = cmd.Dir
		if !filepath.IsAbs(cmd.Dir) {
			c.Dir = filepath.Join(l.dir, cmd.Dir)
		}
	}
	if len(cmd.Env) > 0 {
		env := c.Environ()
		keys := make([]string, 0, len(cmd.Env))
		for k := range cmd.Env {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			v := cmd.Env[k]
			if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
				return fmt.Errorf("stage: environment variable %q: a name must be non-empty without '=' or NUL, a value without NUL", k)
			}
			env = append(env, k+"="+v)
		}
		c.Env = env
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
		return &ExitError{Status: -1}
	}
	return err
}
