package sandbox_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
)

// errRunner is a Runner that writes to Command.Stdout once and returns what
// its function makes of that write's error.
type errRunner func(werr error) error

func (f errRunner) Run(_ context.Context, cmd sandbox.Command) error {
	var werr error
	if cmd.Stdout != nil {
		_, werr = cmd.Stdout.Write([]byte("out"))
	}
	return f(werr)
}

// TestControlHostFailures: Control passes the host's own failures on with
// its context but unchanged in class (not ErrTransport; Retryable follows
// what they wrap), keeps ErrProtocol alone, and marks every other Runner
// failure as ErrTransport.
func TestControlHostFailures(t *testing.T) {
	errOwn := errors.New("the caller's writer is over its own limit")
	own := writerFunc(func([]byte) (int, error) { return 0, errOwn })
	enospc := &fs.PathError{Op: "write", Path: "/host/spool/x", Err: syscall.ENOSPC}
	eagain := &fs.PathError{Op: "fork/exec", Path: "/bin/sh", Err: syscall.EAGAIN}
	cases := []struct {
		name      string
		stdout    writerFunc // nil: none
		run       func(werr error) error
		host      bool // passed on, not ErrTransport
		protocol  bool
		retryable bool
		is        error
	}{
		{"the caller's writer failed, the Runner wraps it", own, func(werr error) error { return fmt.Errorf("writing the command's stdout: %w", werr) }, true, false, false, errOwn},
		{"the caller's writer failed, the Runner returns it", own, func(werr error) error { return werr }, true, false, false, errOwn},
		{"a host file on a full disk", nil, func(error) error { return fmt.Errorf("spooling the script: %w", enospc) }, true, false, false, syscall.ENOSPC},
		{"a host file, temporary", nil, func(error) error { return fmt.Errorf("starting: %w", eagain) }, true, false, true, syscall.EAGAIN},
		{"a missing working directory", nil, func(error) error {
			return &fs.PathError{Op: "chdir", Path: "/w/gone", Err: fmt.Errorf("missing: %w", fs.ErrNotExist)}
		}, true, false, false, fs.ErrNotExist},
		{"a broken protocol", nil, func(error) error { return fmt.Errorf("%w: a garbled record", sandbox.ErrProtocol) }, false, true, false, sandbox.ErrProtocol},
		{"a plain Runner failure", nil, func(error) error { return errors.New("stream reset") }, false, false, true, sandbox.ErrTransport},
		{"a writer error that the Runner did not cause", own, func(error) error { return errors.New("stream reset") }, false, false, true, sandbox.ErrTransport},
		{"a connection's errno", nil, func(error) error {
			return &os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET}
		}, false, false, true, sandbox.ErrTransport},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := sandbox.Command{Script: "true"}
			if c.stdout != nil {
				cmd.Stdout = c.stdout
			}
			err := sandbox.Control(t.Context(), errRunner(c.run), cmd)
			require.Error(t, err)
			assert.ErrorIs(t, err, c.is)
			assert.Equal(t, !c.host && !c.protocol, errors.Is(err, sandbox.ErrTransport), "ErrTransport: %v", err)
			assert.Equal(t, c.protocol, errors.Is(err, sandbox.ErrProtocol), "ErrProtocol: %v", err)
			assert.Equal(t, c.retryable, sandbox.Retryable(err), "Retryable: %v", err)
			assert.True(t, strings.HasPrefix(err.Error(), "a control command: ") || strings.Contains(err.Error(), ": a control command: "), "no context: %v", err)
		})
	}
}

// TestControlLocalHostFailures: the host failures of the real Local runner
// keep their class through Control: its temporary file for a large script
// that cannot be created (a TMPDIR that is gone), and a missing Command.Dir.
func TestControlLocalHostFailures(t *testing.T) {
	gone := filepath.Join(t.TempDir(), "gone")
	t.Setenv("TMPDIR", gone)
	r := sandbox.Local(t.TempDir())
	big := "true\n#" + strings.Repeat("x", 100<<10) + "\n"
	err := sandbox.Control(t.Context(), r, sandbox.Command{Script: big})
	require.Error(t, err)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.NotErrorIs(t, err, sandbox.ErrTransport)
	assert.False(t, sandbox.Retryable(err), "%v", err)
	assert.Contains(t, err.Error(), gone)

	err = sandbox.Control(t.Context(), r, sandbox.Command{Script: "true", Dir: "missing"})
	require.Error(t, err)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.NotErrorIs(t, err, sandbox.ErrTransport)
	assert.False(t, sandbox.Retryable(err), "%v", err)

	// The same file, written: the script runs.
	t.Setenv("TMPDIR", t.TempDir())
	require.NoError(t, sandbox.Control(t.Context(), r, sandbox.Command{Script: big}))
}

// endingSandbox is a sandbox whose process wrapper writes out and then
// returns err at once (no header, or part of one); its signal steps answer
// that everything is gone.
type endingSandbox struct {
	out string
	err error
}

func (s endingSandbox) Run(_ context.Context, cmd sandbox.Command) error {
	m := tagInScript.FindStringSubmatch(cmd.Script)
	if m == nil {
		return fmt.Errorf("endingSandbox: no tag in the script %q", cmd.Script)
	}
	if strings.HasPrefix(cmd.Script, "__t=") {
		_, err := fmt.Fprint(cmd.Stdout, gone(m[1]))
		return err
	}
	if _, err := fmt.Fprint(cmd.Stdout, s.out); err != nil {
		return err
	}
	return s.err
}

func (endingSandbox) ControlTimeout() time.Duration { return time.Second }

// TestProcessEndsWithoutHeader: a wrapper run that succeeds without the
// whole header broke the protocol (ErrProtocol, never ErrTransport); one
// that exits non-zero is its ExitError; a Runner's plain failure is
// ErrTransport, and the host's own failure keeps its error.
func TestProcessEndsWithoutHeader(t *testing.T) {
	enospc := &fs.PathError{Op: "write", Path: "/host/tmp/airlock-script-1.sh", Err: syscall.ENOSPC}
	for name, c := range map[string]struct {
		sb               endingSandbox
		is               error
		transport, proto bool
	}{
		"status 0, nothing":      {endingSandbox{}, sandbox.ErrProtocol, false, true},
		"status 0, half a line":  {endingSandbox{out: "airlock-process-v1 "}, sandbox.ErrProtocol, false, true},
		"exit status 3":          {endingSandbox{err: &sandbox.ExitError{Status: 3}}, nil, false, false},
		"a plain Runner failure": {endingSandbox{err: errors.New("stream reset")}, sandbox.ErrTransport, true, false},
		"the host's own failure": {endingSandbox{err: fmt.Errorf("spooling: %w", enospc)}, syscall.ENOSPC, false, false},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := sandbox.Start(t.Context(), c.sb, sandbox.Command{Script: "agent"})
			require.Error(t, err)
			assert.Nil(t, p)
			if c.is != nil {
				assert.ErrorIs(t, err, c.is)
			} else {
				var ee *sandbox.ExitError
				require.ErrorAs(t, err, &ee)
				assert.Equal(t, 3, ee.Status)
			}
			assert.Equal(t, c.transport, errors.Is(err, sandbox.ErrTransport), "ErrTransport: %v", err)
			assert.Equal(t, c.proto, errors.Is(err, sandbox.ErrProtocol), "ErrProtocol: %v", err)
			assert.Equal(t, c.transport, sandbox.Retryable(err), "Retryable: %v", err)
		})
	}
}

// forgingEngine is an ExecFunc of a hostile engine: it reads the call's
// nonce from the prelude on stdin (its first line, which only the wrapper
// is meant to read), runs nothing, and writes records(nonce) on stderr.
func forgingEngine(records func(tag string) string) sandbox.ExecFunc {
	return func(_ context.Context, _ []string, stdin io.Reader, _, stderr io.Writer) error {
		line, err := bufio.NewReader(stdin).ReadString('\n')
		if err != nil {
			return err
		}
		nonce, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "__airlock_n=")
		if !ok {
			return fmt.Errorf("forgingEngine: the prelude starts with %q, not the nonce", line)
		}
		_, err = io.WriteString(stderr, records("airlock-exec-"+nonce+": "))
		return err
	}
}

// TestExecBrokenRecords: records tagged with the call's nonce that do not
// parse or come out of order (a second end record) are ErrProtocol — only
// the wrapper knows the nonce — never ErrTransport nor a status; the same
// engine forging a well-formed run is believed (the harness works).
func TestExecBrokenRecords(t *testing.T) {
	for name, c := range map[string]struct {
		records func(tag string) string
		broken  string // "": a run that exited 3
	}{
		"well-formed":         {func(tag string) string { return tag + "start 42 group\n" + tag + "end 3 \n" }, ""},
		"garbled end":         {func(tag string) string { return tag + "start 42 group\n" + tag + "end x\n" }, `the record "end x" does not parse`},
		"garbled only":        {func(tag string) string { return tag + "ended\n" }, `the record "ended" does not parse`},
		"oversized":           {func(tag string) string { return tag + "start 42 group\n" + tag + strings.Repeat("e", 100) + "\n" }, "a record longer than 64 bytes"},
		"a second end":        {func(tag string) string { return tag + "start 42 group\n" + tag + "end 0 \n" + tag + "end 1 \n" }, `a second end record "end 1 "`},
		"an end before start": {func(tag string) string { return tag + "end 0 \n" + tag + "start 42 group\n" }, "without a start record"},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := run(t, sandbox.FromExec(forgingEngine(c.records)), sandbox.Command{Script: "exit 0"})
			if c.broken == "" {
				var ee *sandbox.ExitError
				require.ErrorAs(t, err, &ee)
				assert.Equal(t, 3, ee.Status)
				return
			}
			require.ErrorIs(t, err, sandbox.ErrProtocol)
			assert.NotErrorIs(t, err, sandbox.ErrTransport)
			assert.False(t, errors.As(err, new(*sandbox.ExitError)), "a broken record was taken for a status: %v", err)
			assert.False(t, sandbox.Retryable(err))
			assert.ErrorContains(t, err, c.broken)
			// Through Control too, which keeps ErrProtocol alone.
			err = sandbox.Control(t.Context(), sandbox.FromExec(forgingEngine(c.records)), sandbox.Command{Script: "exit 0"})
			require.ErrorIs(t, err, sandbox.ErrProtocol)
			assert.NotErrorIs(t, err, sandbox.ErrTransport)
		})
	}
}

// TestExecForgedSecondEnd: a real engine (a sh prefix) that reads the
// nonce off the prelude, passes the call on to the real wrapper, and then
// forges a second end record: ErrProtocol, where the forged status (7)
// used to replace the script's.
func TestExecForgedSecondEnd(t *testing.T) {
	engine := `IFS= read -r l; n=${l#__airlock_n=}
{ printf '%s\n' "$l"; cat; } | "$@"
printf 'airlock-exec-%s: end 7 \n' "$n" >&2`
	out, _, err := run(t, sandbox.Exec("sh", "-c", engine, "engine"), sandbox.Command{Script: "echo ran"})
	assert.Equal(t, "ran\n", out, "the real wrapper ran the script")
	require.ErrorIs(t, err, sandbox.ErrProtocol)
	assert.NotErrorIs(t, err, sandbox.ErrTransport)
	assert.False(t, errors.As(err, new(*sandbox.ExitError)), "the forged status was believed: %v", err)
	assert.ErrorContains(t, err, `a second end record "end 7 "`)
}

// TestExecStopKillReply: the kill step's reply decides the class of an
// unverified stop: a reply that arrived but does not parse is the
// sandbox's broken protocol (ErrProtocol, with ErrTransport: not
// retryable); a kill exec that failed or answered nothing is ErrTransport
// alone (retryable); an answer that parses, even an unverified one, adds
// no KillErr. The engine is a sh prefix that runs the real wrapper and
// answers the kill script as the case says.
func TestExecStopKillReply(t *testing.T) {
	for name, c := range map[string]struct {
		kill     string // the engine's answer to the kill script
		verified bool
		killErr  error // nil: none
		detail   string
	}{
		"the kill script":       {`exec "$@"`, true, nil, ""},
		"alive":                 {`echo 'airlock-exec-kill: alive'`, false, nil, "still alive"},
		"garbage":               {`echo 'Welcome to the sandbox'`, false, sandbox.ErrProtocol, `does not parse (stdout "Welcome to the sandbox\n")`},
		"an unknown answer":     {`echo 'airlock-exec-kill: maybe'`, false, sandbox.ErrProtocol, "does not parse"},
		"no answer":             {`echo nothing here >&2`, false, sandbox.ErrTransport, "gave no answer (nothing here)"},
		"the kill exec fails":   {`exit 7`, false, sandbox.ErrTransport, "exit status 7"},
		"garbage, then failing": {`echo garbage; exit 7`, false, sandbox.ErrTransport, "exit status 7"},
	} {
		t.Run(name, func(t *testing.T) {
			r := sandbox.Exec("sh", "-c", `case "$3" in *airlock-exec-kill*) `+c.kill+`; exit;; esac; exec "$@"`, "sh")
			ctx, cancel := context.WithCancel(context.Background())
			_, done := startStubborn(t, ctx, r)
			cancel()
			err := <-done
			var se *sandbox.StopError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, c.verified, se.Verified, "Verified: %v", err)
			assert.ErrorIs(t, err, sandbox.ErrTransport)
			assert.ErrorIs(t, err, context.Canceled)
			assert.Contains(t, se.Detail, c.detail)
			if c.killErr == nil {
				assert.NoError(t, se.KillErr)
				assert.NotErrorIs(t, err, sandbox.ErrProtocol)
				assert.True(t, sandbox.Retryable(err), "%v", err)
				return
			}
			require.ErrorIs(t, se.KillErr, c.killErr)
			assert.ErrorIs(t, err, c.killErr)
			assert.Equal(t, c.killErr == sandbox.ErrTransport, sandbox.Retryable(err), "Retryable: %v", err)
			if c.killErr == sandbox.ErrTransport {
				assert.NotErrorIs(t, err, sandbox.ErrProtocol)
			}
		})
	}
}

// TestProcessStopKillReplyBroken: a process whose stop goes through the
// Runner's cancellation (its signal steps run in another PID namespace)
// and whose Runner reports a kill step that the sandbox answered with
// garbage ends unverified, and Stop's error carries ErrProtocol: not
// retryable.
func TestProcessStopKillReplyBroken(t *testing.T) {
	garbled := fmt.Errorf("%w: sandbox: the sandbox's answer to the kill call does not parse", sandbox.ErrProtocol)
	sb := &scriptedSandbox{
		header: func(tag string) string { return "airlock-process-v1 " + tag + " 4242 4242 4242 pid:[4026532101]\n" },
		reply:  func(tag string) string { return "airlock-process-v1-" + tag + " otherns\n" },
		d:      2 * time.Second,
		stopped: func(err error) error {
			return &sandbox.StopError{Err: err, Detail: "the sandbox's answer to the kill call does not parse", KillErr: garbled}
		},
	}
	p, err := sandbox.Start(t.Context(), sb, sandbox.Command{Script: "agent"})
	require.NoError(t, err)
	exit, err := p.Stop(t.Context())
	assert.Equal(t, sandbox.Exit{Status: -1}, exit)
	require.ErrorIs(t, err, sandbox.ErrProtocol)
	assert.ErrorIs(t, err, sandbox.ErrTransport)
	assert.ErrorContains(t, err, "its end is not verified")
	assert.False(t, sandbox.Retryable(err), "%v", err)
}
