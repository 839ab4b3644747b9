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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"
)

// ErrNotFound reports that no git executable is on the host's PATH.
var ErrNotFound = errors.New("git not found on the host")

// Error reports a git command that ran and failed.
type Error struct {
	Args   []string // the git arguments, without the isolating -c options
	Status int      // exit status; -1 when killed by a signal
	Stderr string   // trimmed, at most 4 KiB

	// Cause is what the file system showed when git said a write failed
	// without naming why (ENOSPC: no block or inode left; EROFS: mounted
	// read-only), looked at in CauseDir, the nearest existing directory of
	// the path git named (else of the command's directory); 0 when git
	// named the cause itself or the file system showed none.
	Cause    syscall.Errno
	CauseDir string
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("git %s exited with status %d", strings.Join(e.Args, " "), e.Status)
	if e.Stderr != "" {
		msg += ": " + e.Stderr
	}
	if e.Cause != 0 {
		msg += fmt.Sprintf(" (the file system of %s: %v)", e.CauseDir, e.Cause)
	}
	return msg
}

// ErrWrite reports that git said it could not write a file ("unable to
// write", "write error", "short write", ...): a host-side write failure.
// An *Error unwraps to the cause as well when git named it, or when the
// file system showed it (Error.Cause).
var ErrWrite = errors.New("git could not write a file")

// hostErrors are the host-side causes a git command may report in
// Stderr, each as git spells it: the C locale's strerror after ": "
// (die_errno, error_errno), or git's own wording.
var hostErrors = []struct {
	suffix string // the end of a line
	errno  syscall.Errno
}{
	{": No space left on device", syscall.ENOSPC},
	{" write error. Out of diskspace", syscall.ENOSPC}, // csum-file.c: write(2) wrote nothing
	{": Disk quota exceeded", syscall.EDQUOT},
	{": Read-only file system", syscall.EROFS},
	{": Input/output error", syscall.EIO},
	{": File too large", syscall.EFBIG},
	{": Permission denied", syscall.EACCES},
}

// writeFailures are git's wordings of a failed write.
var writeFailures = []string{"write error", "unable to write", "could not write", "couldn't write", "failed to write", "short write", "write failure", "error when closing", "fsync error"}

// parse reads git's own message lines of Stderr ("fatal: ", "error: " or
// "warning: " and then the message): the errnos their ends name, whether
// one says a write failed (in its unquoted words; a write on a pipe whose
// reader went away, Broken pipe, is none), and the names quoted in those.
// A name git quotes in a message decides nothing.
func (e *Error) parse() (errnos []syscall.Errno, write bool, named []string) {
	for _, l := range strings.Split(e.Stderr, "\n") {
		l = strings.TrimSpace(l)
		msg, ok := strings.CutPrefix(l, "fatal: ")
		if !ok {
			msg, ok = strings.CutPrefix(l, "error: ")
		}
		if !ok {
			msg, ok = strings.CutPrefix(l, "warning: ")
		}
		if !ok {
			continue
		}
		for _, h := range hostErrors {
			if strings.HasSuffix(msg, h.suffix) && !slices.Contains(errnos, h.errno) {
				errnos = append(errnos, h.errno)
			}
		}
		words, quoted := unquoted(msg)
		low := strings.ToLower(words)
		if !strings.HasSuffix(msg, ": Broken pipe") && slices.ContainsFunc(writeFailures, func(w string) bool { return strings.Contains(low, w) }) {
			write = true
			named = append(named, quoted...)
		}
	}
	return errnos, write, named
}

// Unwrap returns the host-side failures git reported in Stderr: the errno
// a message line names (ENOSPC, EDQUOT, EROFS, EIO, EFBIG, EACCES), so
// that errors.Is(err, syscall.ENOSPC) holds for a git command that failed
// on a full disk, ErrWrite when a line says a write failed, and Cause.
// Only git's own message lines count, only their ends for an errno and
// only their unquoted words for a write failure.
func (e *Error) Unwrap() []error {
	errnos, write, _ := e.parse()
	var errs []error
	for _, n := range errnos {
		errs = append(errs, n)
	}
	if e.Cause != 0 && !slices.Contains(errnos, e.Cause) {
		errs = append(errs, e.Cause)
	}
	if write {
		errs = append(errs, ErrWrite)
	}
	return errs
}

// lookAtCause sets Cause when git said a write failed without naming why:
// the file system of the first path it named (absolute ones first,
// relative ones below dir), else of dir, is looked at, in the nearest
// directory of it that exists.
func (e *Error) lookAtCause(dir string) {
	errnos, write, named := e.parse()
	if !write || len(errnos) > 0 {
		return
	}
	// An absolute name is the file's path; a relative one may be a ref's.
	slices.SortStableFunc(named, func(a, b string) int {
		if filepath.IsAbs(a) == filepath.IsAbs(b) {
			return 0
		}
		if filepath.IsAbs(a) {
			return -1
		}
		return 1
	})
	for _, p := range append(named, ".") {
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		for d := p; ; d = filepath.Dir(d) {
			if fi, err := os.Stat(d); err == nil && fi.IsDir() {
				if c := fsCause(d); c != 0 {
					e.Cause, e.CauseDir = c, d
				}
				return
			}
			if d == filepath.Dir(d) {
				break
			}
		}
	}
}

// unquoted splits msg into its words outside git's quotes ('name') and
// the quoted names. A quote opens after a character that is not a letter
// (so "couldn't" is a word) and closes before one.
func unquoted(msg string) (string, []string) {
	var b, q strings.Builder
	var names []string
	rs := []rune(msg)
	letter := func(i int) bool { return i >= 0 && i < len(rs) && unicode.IsLetter(rs[i]) }
	in := false
	for i, r := range rs {
		switch {
		case r == '\'' && !in && !letter(i-1):
			in = true
		case r == '\'' && in && !letter(i+1):
			names = append(names, q.String())
			q.Reset()
			in = false
		case in:
			q.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String(), names
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

	// UserConfig reads the user's system and global configuration too,
	// for the commands that must do what the user's own git does in
	// the work tree: the checkout conversions (core.autocrlf, a filter
	// driver such as git-lfs's, which git lfs install puts in the
	// global file), from the files the user's git reads (the process's
	// GIT_CONFIG_GLOBAL, GIT_CONFIG_SYSTEM and GIT_CONFIG_NOSYSTEM pass).
	// Hooks stay off and the scrub of every other GIT_* variable stays.
	UserConfig bool
}

// waitDelay bounds how long git's output is read once git has exited or
// been killed: a process git started (a filter driver) may hold it open.
const waitDelay = time.Second

// isolation is prepended to every command line.
var isolation = []string{"-c", "core.hooksPath=/dev/null", "-c", "core.pager=cat", "-c", "core.fsmonitor=false", "-c", "credential.helper=", "-c", "protocol.allow=never", "-c", "protocol.file.allow=always"}

// Env returns the environment a command runs with: the process's
// environment without any GIT_* variable, plus the isolating variables,
// then extra.
func (g *Git) environ(extra []string, userConfig bool) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if userConfig && (k == "GIT_CONFIG_GLOBAL" || k == "GIT_CONFIG_SYSTEM" || k == "GIT_CONFIG_NOSYSTEM") {
			env = append(env, kv) // which files the user's configuration is in
			continue
		}
		if strings.HasPrefix(k, "GIT_") || k == "LC_ALL" || k == "LANG" || k == "LANGUAGE" {
			continue
		}
		env = append(env, kv)
	}
	if !userConfig {
		env = append(env, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	}
	env = append(env,
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
	cmd.Env = g.environ(c.Env, c.UserConfig)
	cmd.Stdin = c.Stdin
	cmd.Stdout = c.Stdout
	var stderr capped
	cmd.Stderr = &stderr
	killGroup(cmd)
	cmd.WaitDelay = waitDelay
	out := startOutput(cmd, c.Stdout)
	if err = cmd.Start(); err == nil {
		err = cmd.Wait()
	}
	if oerr := out.wait(); oerr != nil && (err == nil || errors.Is(err, exec.ErrWaitDelay)) {
		err = oerr
	}
	if err == nil || errors.Is(err, exec.ErrWaitDelay) { // git exited 0; a child of its holds stdin or stderr
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
		e := &Error{Args: c.Args, Status: st, Stderr: strings.TrimSpace(stderr.String())}
		dir := g.Dir
		if dir == "" {
			dir = "."
		}
		e.lookAtCause(dir)
		return e
	}
	return fmt.Errorf("running git %s: %w", strings.Join(c.Args, " "), err)
}

// output copies git's standard output into a writer that is not a file.
// exec.Cmd would copy it on a goroutine of its own that Wait, once git has
// exited, gives up after WaitDelay, discarding what git wrote and the
// writer had not taken yet (a reader slower than that, on a loaded
// machine: a Restore read a cut list of objects as the whole of it). Here
// the copy goes on, after git exited, as long as the pipe has something
// to read: only a read that waits WaitDelay for bytes that do not come (a
// process git started holds the pipe open) ends it, as Wait's would.
type output struct {
	r      *os.File
	w      *os.File
	done   chan error
	exited chan struct{}
}

// startOutput sets cmd's standard output to dst: through output's pipe
// when dst is a writer other than a file (nil: as exec.Cmd does).
func startOutput(cmd *exec.Cmd, dst io.Writer) *output {
	if _, file := dst.(*os.File); dst == nil || file {
		cmd.Stdout = dst
		return nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		cmd.Stdout = dst // exec.Cmd's own copy
		return nil
	}
	o := &output{r: r, w: w, done: make(chan error, 1), exited: make(chan struct{})}
	cmd.Stdout = w
	go func() {
		err := o.copy(dst)
		r.Close() // a git still writing gets EPIPE
		o.done <- err
	}()
	return o
}

// copy copies the pipe into dst until its end, or until a read after git
// exited finds nothing for WaitDelay.
func (o *output) copy(dst io.Writer) error {
	buf := make([]byte, 64<<10)
	for {
		select {
		case <-o.exited:
			_ = o.r.SetReadDeadline(time.Now().Add(waitDelay))
		default:
		}
		n, err := o.r.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		switch {
		case err == io.EOF, errors.Is(err, os.ErrDeadlineExceeded):
			return nil
		case err != nil:
			return err
		}
	}
}

// wait closes the pipe's writing end (git's copy is its own), lets the
// copy run until it ends, and returns its error; o may be nil.
func (o *output) wait() error {
	if o == nil {
		return nil
	}
	o.w.Close()
	close(o.exited)
	_ = o.r.SetReadDeadline(time.Now().Add(waitDelay)) // a read already waiting
	return <-o.done
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
