package gitexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ErrNotFound reports that no git executable is on the host's PATH.
var ErrNotFound = errors.New("git not found on the host")

// Error reports a git command that ran and failed.
type Error struct {
	Args   []string // the git arguments, without the isolating -c options
	Status int      // exit status; -1 when killed by a signal
	Stderr string   // trimmed, at most 4 KiB
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("git %s exited with status %d", strings.Join(e.Args, " "), e.Status)
	if e.Stderr != "" {
		msg += ": " + e.Stderr
	}
	return msg
}

// hostErrors are the messages (C locale strerror) of the host-side
// failures a git command may report in Stderr.
var hostErrors = []struct {
	msg   string
	errno syscall.Errno
}{
	{"No space left on device", syscall.ENOSPC},
	{"Disk quota exceeded", syscall.EDQUOT},
	{"Read-only file system", syscall.EROFS},
	{"Input/output error", syscall.EIO},
}

// Unwrap returns the host-side failure git reported (ENOSPC, EDQUOT,
// EROFS, EIO, read from Stderr), so that errors.Is(err, syscall.ENOSPC)
// holds for a git command that failed on a full disk; nil otherwise.
func (e *Error) Unwrap() error {
	for _, h := range hostErrors {
		if strings.Contains(e.Stderr, h.msg) {
			return h.errno
		}
	}
	return nil
}

// Git runs git commands in one repository directory.
type Git struct {
	Dir string   // working directory; also the ceiling of repository discovery
	Env []string // extra KEY=VALUE entries, applied after the scrub
}

// Cmd is one git command.
type Cmd struct {
	Args   []string
	Env    []string // extra KEY=VALUE entries for this command only
	Stdin  io.Reader
	Stdout io.Writer // nil: discarded
}

// isolation is prepended to every command line.
var isolation = []string{"-c", "core.hooksPath=/dev/null", "-c", "core.pager=cat", "-c", "core.fsmonitor=false", "-c", "credential.helper=", "-c", "protocol.allow=never", "-c", "protocol.file.allow=always"}

// Env returns the environment a command runs with: the process's
// environment without any GIT_* variable, plus the isolating variables,
// then extra.
func (g *Git) environ(extra []string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "GIT_") || k == "LC_ALL" || k == "LANG" || k == "LANGUAGE" {
			continue
		}
		env = append(env, kv)
	}
	env = append(env,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ASKPASS=",
		"GIT_PAGER=cat",
		"GIT_OPTIONAL_LOCKS=0",
		"LC_ALL=C",
		"LANG=C",
	)
	if g.Dir != "" {
		env = append(env, "GIT_CEILING_DIRECTORIES="+filepath.Dir(g.Dir))
	}
	env = append(env, g.Env...)
	return append(env, extra...)
}

// Run runs c. A failed command is an *Error.
func (g *Git) Run(ctx context.Context, c Cmd) error {
	path, err := exec.LookPath("git")
	if err != nil {
		return fmt.Errorf("%w: install git 2.38 or later: %w", ErrNotFound, err)
	}
	args := append(append([]string(nil), isolation...), c.Args...)
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = g.Dir
	cmd.Env = g.environ(c.Env)
	cmd.Stdin = c.Stdin
	cmd.Stdout = c.Stdout
	var stderr capped
	cmd.Stderr = &stderr
	err = cmd.Run()
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("git %s: %w", strings.Join(c.Args, " "), cerr)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		st := -1
		if ee.Exited() {
			st = ee.ExitCode()
		}
		return &Error{Args: c.Args, Status: st, Stderr: strings.TrimSpace(stderr.String())}
	}
	return fmt.Errorf("running git %s: %w", strings.Join(c.Args, " "), err)
}

// Output runs git with args and returns its standard output.
func (g *Git) Output(ctx context.Context, args ...string) ([]byte, error) {
	var out bytes.Buffer
	err := g.Run(ctx, Cmd{Args: args, Stdout: &out})
	return out.Bytes(), err
}

// Line runs git with args and returns its output without the trailing
// newline.
func (g *Git) Line(ctx context.Context, args ...string) (string, error) {
	out, err := g.Output(ctx, args...)
	return strings.TrimSuffix(string(out), "\n"), err
}

// Status returns the exit status of err when it is an *Error, else -2.
func Status(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return -2
}

// ParseVersion reads "git version 2.39.5" (and vendor suffixes such as
// "2.39.5 (Apple Git-143)" or "2.45.windows.1") into major and minor.
func ParseVersion(out string) (major, minor int, ok bool) {
	s, found := strings.CutPrefix(strings.TrimSpace(out), "git version ")
	if !found {
		return 0, 0, false
	}
	f := strings.SplitN(s, ".", 3)
	if len(f) < 2 {
		return 0, 0, false
	}
	major, err1 := strconv.Atoi(f[0])
	minorDigits := f[1]
	if i := strings.IndexFunc(minorDigits, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		minorDigits = minorDigits[:i]
	}
	minor, err2 := strconv.Atoi(minorDigits)
	if err1 != nil || err2 != nil || major < 0 || minor < 0 {
		return 0, 0, false
	}
	return major, minor, true
}

// capped keeps the first 4 KiB written to it.
type capped struct{ bytes.Buffer }

func (c *capped) Write(p []byte) (int, error) {
	if room := 4<<10 - c.Len(); room > 0 {
		c.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
