package sandbox

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/airlockdev/airlock/internal/shell"
)

// ExecFunc runs argv in the sandbox with the streams wired: stdin copied to
// the sandbox process's standard input (and that closed when stdin ends),
// its standard output and error written to stdout and stderr. It returns
// when the process ended: nil when it exited 0, an error otherwise (a
// failed call, a lost connection, a non-zero exit). When ctx ends it stops
// the call and returns promptly. It must never allocate a TTY. argv is a
// command vector (["sh", "-c", wrapper] from the Runner); an SDK whose
// exec takes one command string gets the words quoted for sh, each in
// single quotes.
//
// A provider with a Go SDK exec call (E2B, Daytona, Modal, client-go's
// remotecommand…) is an ExecFunc in a few lines; FromExec makes it a
// Runner.
type ExecFunc func(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error

// ExecOptions configures ExecWith.
type ExecOptions struct {
	// Environ is the environment the local client (kubectl, docker,
	// podman, bwrap…) starts with, as os/exec's Cmd.Env: "KEY=value"
	// strings. Command.Env never goes there. nil: PATH, HOME and LANG as
	// this process has them (PATH defaults to /usr/local/bin:/usr/bin:/bin)
	// and, when set, the engines' own variables: DOCKER_HOST,
	// DOCKER_CONFIG, DOCKER_CONTEXT, DOCKER_CERT_PATH, DOCKER_TLS_VERIFY,
	// KUBECONFIG, CONTAINER_HOST, CONTAINER_CONNECTION, XDG_RUNTIME_DIR.
	// A bare client name (argv[0] without a slash; "sh" when argv is
	// empty) is looked up in this environment's PATH, the one the client
	// runs with (this process's when Environ holds no PATH).
	Environ []string
	// ClientEndsSandbox says that killing the client's process group ends
	// every process the command started: the sandbox lives and dies with
	// the client, as bwrap's does with --unshare-pid and --die-with-parent
	// (its PID namespace ends with it). A stop then runs no kill exec (a
	// second client would be another sandbox, which cannot see the
	// first's processes) and is verified once the killed client has
	// exited and closed its output. Default false: the engine keeps the
	// command running without the client (docker, podman, kubectl).
	ClientEndsSandbox bool
}

// Exec returns a Runner for a CLI exec engine: each Command runs as
// `argv... sh -c <wrapper>` on this machine, with the default
// ExecOptions, for example
//
//	sandbox.Exec("kubectl", "exec", "-i", "pod/agent-7", "-c", "agent", "--")
//	sandbox.Exec("docker", "exec", "-i", "agent-7")
//	sandbox.Exec("podman", "exec", "-i", "agent-7")
//	sandbox.Exec("bwrap", "--ro-bind", "/usr", "/usr", …, "--")
//
// and Exec() with no argv runs `sh -c <wrapper>` here (the plain sh -c
// prefix: tests, and the local lane with no isolation).
//
// What those engines do, and what the Runner does about it:
//   - Env travels on stdin, in the prelude internal/shell writes ahead of
//     Command.Stdin: never in either side's argv nor in the client's
//     environment (kubectl has no env flag anyway). Scripts over 64 KiB
//     travel on stdin too, after the prelude.
//   - The client's exit status means nothing (kubectl has exited 0
//     mid-command; exit 1 is both "the script exited 1" and "the transport
//     failed"): the wrapper writes a completion record tagged with a
//     per-call random nonce on stderr, stripped before Command.Stderr sees
//     it; no record is ErrTransport, whatever the client's exit (its
//     error quotes the client's stdout when that is short, and the end of
//     its stderr, with every Command.Env value of 6 bytes or more
//     replaced by <Env NAME>: an engine that
//     failed before it reached the sandbox, as docker's "OCI runtime exec
//     failed" with exit 126, prints its own error there, which callers
//     never judge as the command's output), and a client that fails
//     after the record is ErrTransport too (the output may be cut). A
//     client that cannot be started (not installed, not on its PATH, not
//     executable) matches ErrBadCommand and wraps the cause: nothing ran,
//     and a retry cannot help. A record with the nonce that does not
//     parse, or comes out of order (a second end record), is ErrProtocol:
//     only the wrapper knows the nonce. A client that exits 0 after the
//     record but whose output a process left behind by the script (a
//     daemon started with &) keeps open is a success after a wait of 2s;
//     what that process writes later is not read.
//   - A write to Command.Stdout that fails (a full disk) stops the
//     output there, as a closed pipe would, and Run returns that error,
//     "writing the command's stdout: …" (not ErrTransport, nor the
//     SIGPIPE or client failure that follows it). One to Command.Stderr
//     discards the rest of stderr (the records still travel there) and
//     is returned the same way once the command ended.
//   - A ctx deadline (a control step's, see Control) is enforced inside
//     the sandbox too: a watchdog kills the script's process group when it
//     passes, even when the host can no longer reach the sandbox.
//   - Killing the client does not stop the command in the container: when
//     ctx ends (or Command.Stdin fails), Run kills the client's process
//     group, then runs a second exec with the same argv that kills the
//     script's process group found by the call's run id, and returns a
//     *StopError saying whether the sandbox confirmed that no process of
//     the group is left.
//   - A failed read of Command.Stdin never looks like its end to the
//     sandbox: the client is killed, not its stdin closed (but an engine
//     that turns a killed client into EOF, as docker and kubectl may,
//     delivers EOF if the kill exec is slower: frame what must arrive
//     whole, as stage's tar stream and its complete marker do).
//   - Never a TTY: an argv token before the first "--" that asks for one
//     makes every Run fail with an error naming it: --tty, --tty=V or
//     -t=V (V anything but false or 0), and -t or a cluster of the
//     boolean letters d, i, q and t that holds t (-it, -ti, -dit, -itd).
//
// The script runs as `/bin/sh -c`, in a process group of its own when the
// sandbox has setsid (util-linux and busybox do); without it, cancellation
// kills the script's own process only and is never reported verified.
//
// Non-guarantees: a hostile sandbox can forge anything about itself — its
// records, its exit status, the kill step's answer; the nonce only keeps
// the script (and nested calls) from forging one by accident.
func Exec(argv ...string) Runner { return ExecWith(ExecOptions{}, argv...) }

// ExecWith is Exec with options.
func ExecWith(o ExecOptions, argv ...string) Runner {
	env := o.Environ
	if env == nil {
		env = execEnviron()
	}
	c := &cliClient{prefix: append([]string(nil), argv...), environ: append([]string(nil), env...)}
	name := "the exec client"
	if len(argv) > 0 {
		name = argv[0]
	}
	return &execRunner{fn: c.run, name: name, bad: checkArgv(argv), endsAll: o.ClientEndsSandbox}
}

// FromExec returns a Runner that runs each Command through fn as
// `sh -c <wrapper>`, with everything Exec promises: env on stdin, the
// completion record, the watchdog, cancellation by a second call of fn.
// fn receives a pipe as stdin; when Command.Stdin fails, fn's ctx is
// cancelled and the pipe is neither closed nor ended until fn has
// returned and the kill call has run, so an fn that stops on ctx never
// forwards a false EOF. An fn that ignores ctx is abandoned a second after
// the kill call.
func FromExec(fn ExecFunc) Runner { return &execRunner{fn: fn, name: "the exec call"} }

type execRunner struct {
	fn      ExecFunc
	name    string // for errors: argv[0] or "the exec call"
	bad     error  // the argv was refused
	endsAll bool   // ExecOptions.ClientEndsSandbox
}

var _ Runner = (*execRunner)(nil)

// The bounds of a stop: the kill call, then the first call's return.
const (
	killTimeout  = 3 * time.Second
	abandonAfter = time.Second
)

// StopError reports a command that Run stopped before it ended: its ctx
// ended (Err is ctx.Err()) or Command.Stdin failed (Err is that failure).
// It wraps ErrTransport and Err, and KillErr when set. Verified says that
// the sandbox confirmed, after the kill, that no process of the command's
// process group is left (zombies aside); false means processes may still
// run there, and Detail says why it could not be told.
type StopError struct {
	Verified bool
	Err      error
	Detail   string
	// KillErr is the kill step's failure when it gave no usable answer:
	// an error wrapping ErrProtocol when the sandbox answered with
	// something that does not parse (it is broken or hostile: the
	// StopError is then not Retryable), or ErrTransport when the kill
	// call failed or answered nothing. nil when the sandbox answered
	// (whether or not it confirmed the end: Detail says what it found),
	// and when no kill call ran (ExecOptions.ClientEndsSandbox).
	KillErr error
}

// Error implements error.
func (e *StopError) Error() string {
	if e.Verified {
		return fmt.Sprintf("sandbox command stopped (%v); the sandbox confirmed that none of its processes is left", e.Err)
	}
	return fmt.Sprintf("sandbox command stopped (%v); its termination is not verified: %s; processes of it may still run in the sandbox", e.Err, e.Detail)
}

// Unwrap returns ErrTransport and Err, and KillErr when it is set.
func (e *StopError) Unwrap() []error {
	if e.KillErr != nil {
		return []error{ErrTransport, e.Err, e.KillErr}
	}
	return []error{ErrTransport, e.Err}
}

// Run implements Runner.
func (r *execRunner) Run(ctx context.Context, cmd Command) error {
	if err := r.check(cmd); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sandbox: %s: the command was not started: %w", r.name, err)
	}
	call := shell.ExecCall{Nonce: token(), ID: token(), Script: cmd.Script, Dir: cmd.Dir, Env: cmd.Env, Deadline: deadlineSeconds(ctx)}
	wrapper, prelude := shell.ExecWrapper(call)
	pr, pw, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("%w: sandbox: %s: a pipe for stdin: %w", ErrTransport, r.name, err)
	}
	rec := shell.NewRecordWriter(call.Nonce, cmd.Stderr)
	stdout := newOutputWriter(cmd.Stdout, "stdout")
	ectx, ecancel := context.WithCancel(context.WithoutCancel(ctx))
	defer ecancel()
	done := make(chan error, 1)
	go func() { done <- r.fn(ectx, []string{"sh", "-c", wrapper}, pr, stdout, rec) }()
	failed := make(chan error, 1)
	go feed(pw, prelude, cmd.Stdin, failed)
	s := &stopper{r: r, call: call, rec: rec, cancel: ecancel, done: done, pr: pr, pw: pw}
	select {
	case err := <-done:
		pr.Close()
		rec.Flush()
		select {
		case serr := <-failed:
			pw.Close() // the client is gone: its stdin cannot end early now
			return fmt.Errorf("%w: sandbox: %s: %w", ErrTransport, r.name, serr)
		default:
		}
		return r.result(err, rec, stdout, cmd)
	case <-ctx.Done():
		return s.stop(ctx.Err())
	case serr := <-failed:
		return s.stop(serr)
	}
}

// check refuses what Run must not start.
func (r *execRunner) check(cmd Command) error {
	if r.fn == nil {
		return errors.New("sandbox: FromExec was given a nil ExecFunc; nothing was run")
	}
	if r.bad != nil {
		return r.bad
	}
	if err := CheckEnv(cmd.Env); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	if err := shell.CheckEnvNames(cmd.Env); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	return nil
}

// result maps what the wrapper reported, and how the client ended, onto
// Runner's errors.
func (r *execRunner) result(err error, rec *shell.RecordWriter, stdout *outputWriter, cmd Command) error {
	rs := rec.Records()
	if rs.Broken != "" {
		// Only the wrapper knows the nonce: whatever else went wrong, the
		// sandbox (or the engine) answered with records it did not write.
		return fmt.Errorf("%w: sandbox: %s: the wrapper's records on stderr break the protocol: %s; the sandbox or the engine is broken or hostile; the command may or may not have run", ErrProtocol, r.name, rs.Broken)
	}
	if rs.Ended && errors.Is(err, exec.ErrWaitDelay) {
		// The client exited 0 after the completion record, and a process
		// the script left behind (a daemon started with &) holds the
		// output open: the command's end is known; what that process
		// writes later is not read.
		err = nil
	}
	if oerr := stdout.Err(); oerr != nil && !rs.NoDir {
		return oerr // what followed (SIGPIPE, a failed client) is its doing
	}
	if werr := rec.Err(); werr != nil && rs.Ended && err == nil {
		return fmt.Errorf("sandbox: writing the command's stderr: %w; the rest of its stderr was discarded (the command ran to its end); fix the destination (free space) and run it again", werr)
	}
	switch {
	case rs.NoDir:
		return &fs.PathError{Op: "chdir", Path: cmd.Dir, Err: fmt.Errorf("the working directory is missing or not a directory in the sandbox: %w", fs.ErrNotExist)}
	case !rs.Ended && errors.Is(err, ErrBadCommand):
		return err // the client could not be started: nothing ran
	case !rs.Ended && err != nil:
		return fmt.Errorf("%w: sandbox: %s ended without the command's completion record (%v)%s; the command may or may not have run; check the engine and the sandbox", ErrTransport, r.name, err, said(rec, stdout, cmd.Env))
	case !rs.Ended:
		return fmt.Errorf("%w: sandbox: %s exited 0 without the command's completion record%s; the command may or may not have run (a cut exec stream? an exec without -i, which gives the sandbox no stdin?)", ErrTransport, r.name, said(rec, stdout, cmd.Env))
	case err != nil:
		return fmt.Errorf("%w: sandbox: %s failed after the command ended: %w; the command's output may be incomplete", ErrTransport, r.name, err)
	case rs.Signal != "":
		return &ExitError{Status: -1, Signal: rs.Signal}
	case rs.Status != 0:
		return &ExitError{Status: rs.Status}
	}
	return nil
}

// said quotes what the client said, for the error of a command without
// its completion record: the end of its stderr, and its stdout when that
// is short (an engine that failed before it reached the sandbox prints its
// own error there, as docker does with its OCI runtime errors), with the
// values of env redacted (redact): errors end up in logs.
func said(rec *shell.RecordWriter, stdout *outputWriter, env map[string]string) string {
	var b strings.Builder
	if t := strings.TrimSpace(redact(stdout.Said(), env)); t != "" {
		fmt.Fprintf(&b, "; its stdout was %q", t)
	}
	if t := strings.TrimSpace(redact(rec.Tail(), env)); t != "" {
		fmt.Fprintf(&b, "; its stderr ended with %q", t)
	}
	return b.String()
}

// minRedacted is the shortest Command.Env value an error's quote of the
// command's output redacts: shorter ones (a flag, a port) would blank out
// ordinary text, and are no secret.
const minRedacted = 6

// redact replaces, in s, each value of env at least minRedacted bytes long
// with <Env NAME>, the longest values first.
func redact(s string, env map[string]string) string {
	keys := slices.Collect(maps.Keys(env))
	slices.SortFunc(keys, func(a, b string) int {
		return cmp.Or(cmp.Compare(len(env[b]), len(env[a])), cmp.Compare(a, b))
	})
	for _, k := range keys {
		if v := env[k]; len(v) >= minRedacted {
			s = strings.ReplaceAll(s, v, "<Env "+k+">")
		}
	}
	return s
}

// feed writes the prelude and Command.Stdin to pw, and closes pw at
// Stdin's end. A read error of Stdin leaves pw open (the sandbox must not
// see an end) and is sent on failed.
func feed(pw *os.File, prelude string, in io.Reader, failed chan<- error) {
	if _, err := io.WriteString(pw, prelude); err != nil || in == nil {
		pw.Close()
		return
	}
	src := &shell.ReadTracker{R: in}
	buf := make([]byte, 256<<10)
	_, err := io.CopyBuffer(struct{ io.Writer }{pw}, src, buf)
	if err != nil && src.Err != nil {
		failed <- fmt.Errorf("reading Command.Stdin failed: %w; the command's input was not closed (but an engine whose killed client shows the sandbox an end, as docker and kubectl may, leaves the command what arrived: it may have run on cut input)", src.Err)
		return
	}
	pw.Close()
}

// token returns 128 random bits in lowercase hex.
func token() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// deadlineSeconds returns ctx's deadline as whole seconds from now,
// rounded up; 0 when it has none.
func deadlineSeconds(ctx context.Context) int {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	return max(1, int(math.Ceil(time.Until(dl).Seconds())))
}
