package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/airlockdev/airlock/internal/shell"
)

// StopGrace is how long Stop waits, after TERM, for the processes of an
// agent process to end before it sends KILL: at most half the control
// deadline of the Runner (ControlDeadline), so that the step fits in it.
const StopGrace = 5 * time.Second

// killWait bounds how long the KILL step waits for the processes to be
// gone (at most half the control deadline too).
const killWait = 2 * time.Second

// MaxProcessScript bounds Command.Script for Start: the script travels in
// two command lines (the wrapper's and the leader's); pass data on input.
const MaxProcessScript = 64 << 10

// ProcessTagVar is the environment variable that tags every process of an
// agent process (AIRLOCK_PROCESS=<Process.Tag>); Command.Env may not set it.
const ProcessTagVar = shell.ProcessTagVar

// Exit is how an agent process ended.
type Exit struct {
	// Status is the command's exit status as the Runner reported it: -1
	// when a signal ended it or when its end was not reported (Exited
	// false).
	Status int
	// Signal is the name of the signal that ended the command ("TERM",
	// "KILL"), when one did and the Runner knows it.
	Signal string
	// Exited says the Runner reported the command's end: Status and Signal
	// are the command's. It is true too, with Status -1 and no Signal, when
	// the stop steps could not reach the process (another PID namespace,
	// see Process) and the Runner's cancellation, which Stop then used,
	// reported the end verified. False when the run failed (a lost
	// connection) or did not end within the control deadline after the
	// processes were stopped.
	Exited bool
	// Verified says the sandbox confirmed, by scanning its /proc after the
	// signals, that no live process of the command's session or process
	// group and none carrying its tag is left (zombies, which run nothing,
	// are not counted). It is the sandbox's own word: a hostile sandbox
	// can lie, and a process that both left the session and cleared its
	// environment cannot be found. Where the stop steps run in another
	// PID namespace than the process (each exec a sandbox of its own, as
	// bwrap --unshare-pid makes) no scan can see it: Verified is then the
	// Runner's word instead, true only when the cancellation of Start's
	// run returned a *StopError with Verified (Exec with
	// ExecOptions.ClientEndsSandbox: the killed client ended the sandbox).
	Verified bool
}

// Process is a long-lived command in a sandbox (an agent CLI running for
// hours), started by Start, fed by Write, read through Stdout and ended by
// Stop, with its end verified from the sandbox side.
//
// How it works, on any Runner:
//   - Start runs a wrapper script through Runner.Run (in a goroutine, for
//     the life of the process). The wrapper starts the command as the
//     leader of a new session and process group (setsid; job control where
//     setsid is missing) with ProcessTagVar=Tag() in its environment,
//     inherited by every descendant, even one that leaves the group with
//     setsid. The leader reports its pid, the group and session it leads
//     and its PID namespace in one bounded header line on stdout before the
//     command runs (a header naming a group or session other than the pid
//     is impossible for it, and refused); Start waits for it
//     within the control deadline. What follows is the command's stdout,
//     byte for byte.
//   - Write delivers input through an OS pipe that is the run's stdin; each
//     Write is a control step.
//   - Settling the process (Stop, a failed Write, the end of Start's
//     context, or the run's own end) is the shutdown path, run once: stdin
//     is closed; a control step through the Runner (a new Runner.Run)
//     sends TERM to every process of the session, the group and the tag
//     and waits up to the grace (StopGrace) for them to be gone; if some
//     are left, a second step sends KILL, repeats it for late forks and
//     waits for them to be gone; the run is then given the control
//     deadline to report the command's status. Exit.Verified is true only
//     when the sandbox answered that none is left. A step that runs in
//     another PID namespace than the process (the header names the
//     process's) signals nothing, as the pids there are other processes':
//     then the shutdown gives the command the grace to end, cancels
//     Start's run (the Runner's own way to stop it: Exec with
//     ClientEndsSandbox kills the client, which ends the sandbox) and
//     reports what the Runner said (see Exit.Verified).
//
// Guarantees: the stdout Stdout returns is the command's, byte-exact;
// Write is bounded by the control deadline, and on its failure the process
// is stopped; every step of the shutdown is bounded, so Stop returns within
// about four control deadlines; Stop, Wait and the shutdown are safe to
// call from any goroutine, any number of times, and report the same Exit.
// A broken or hostile header is ErrProtocol (unless the run failed on the
// transport: then the header was not the sandbox's to judge, see Start);
// a sandbox that cannot be reached or cannot confirm the end is Verified
// false with an error
// wrapping ErrTransport (ErrProtocol when its reply was malformed).
//
// Non-guarantees: the sandbox's answer is trusted; a process that leaves
// the session and clears or rewrites its environment escapes the scan; a
// sandbox without /proc (not Linux) gets the signals sent to the group but
// is never Verified; processes of another user (setuid programs) can be
// neither signalled nor seen; stdout must be read (it is a pipe: an unread
// one stops the command's output and, at Stop, costs the control deadline
// and the command's status). The command's end is seen when Runner.Run
// returns: a Runner that waits for the end of Command.Stdin before it
// returns (Local, Exec and remote.Host do not: Stdin is an OS pipe here)
// reports it only at CloseStdin or Stop. The session and group are found
// by the leader's pid; once every process of them is gone, a new session
// with that pid (pid reuse) would be taken for them — the shutdown runs
// as soon as the run ends, which leaves that window small.
type Process struct {
	r      Runner
	ctx    context.Context // Start's context without its cancellation: values for the Runner
	tag    string
	hw     *headerWriter
	stdin  *os.File // the write end of the run's stdin, an OS pipe
	stdinR *os.File // its read end, the run's Stdin; closed once the run is over
	stdout *io.PipeReader
	out    *io.PipeWriter
	wsem   chan struct{} // one Write at a time

	mu          sync.Mutex
	stdinClosed error // why Write can no longer deliver: nil while it can

	cancelRun context.CancelFunc
	runDone   chan struct{}
	runErr    error // set before runDone closes
	viaRunner bool  // the shutdown ended the run by its cancellation (endByRunner); settle's own

	once    sync.Once
	unwatch func() bool // stops watching Start's ctx; under mu
	done    chan struct{}
	exit    Exit  // set before done closes
	exitErr error // likewise
}

// Start starts cmd as an agent process in the sandbox r reaches and returns
// once the sandbox has reported the process's group (within the control
// deadline, ControlDeadline(r)). cmd.Stdin and cmd.Stdout must be nil (the
// Process owns them: use Write and Stdout); cmd.Stderr receives the
// command's stderr; cmd.Env and cmd.Dir are passed to r. ctx bounds the
// whole process, as in exec.CommandContext: when it ends, the process is
// stopped through Stop's path; its values reach the Runner.
//
// A header that does not parse, names another tag, or names an impossible
// pid, group or session (pid 1, or a group or session the leader does not
// lead) is an error wrapping ErrProtocol, and so is a run that succeeds
// (status 0) without a whole header; but a run that ends by itself within
// half a second of such a header with a transport failure (an exec engine
// that printed its own error there) is that failure, ErrTransport only. A
// Runner that fails, or no header within the deadline, wraps ErrTransport
// (a failure on the host itself, such as Local's temporary file on a full
// disk, keeps its own error, as with Control); a command that exits
// non-zero before its header is reported with its *ExitError. In each case whatever started is stopped
// by its tag before Start returns.
func Start(ctx context.Context, r Runner, cmd Command) (*Process, error) {
	if err := checkProcessCommand(cmd); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: sandbox: starting a process: %w", ErrTransport, err)
	}
	p, err := newProcess(ctx, r)
	if err != nil {
		return nil, err
	}
	// An OS pipe, not an io.Pipe: a Runner that runs a local program hands
	// it over as the program's stdin, so the Runner need not wait for its
	// end to report the program's (os/exec waits for a copied Stdin).
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox: Start: the stdin pipe: %w", err)
	}
	p.stdin, p.stdinR = inW, inR
	run := Command{Script: shell.ProcessWrapper(p.tag, cmd.Script), Env: cmd.Env, Dir: cmd.Dir, Stdin: inR, Stdout: p.hw, Stderr: cmd.Stderr}
	runCtx, cancel := context.WithCancel(p.ctx)
	p.cancelRun = cancel
	p.mu.Lock()
	p.unwatch = context.AfterFunc(ctx, p.shutdown)
	p.mu.Unlock()
	go p.run(runCtx, run)
	if err := p.awaitHeader(ctx); err != nil {
		p.shutdown()
		<-p.done
		if !p.exit.Verified {
			return nil, fmt.Errorf("%w; stopping what started: %w", err, p.exitErr)
		}
		return nil, err
	}
	return p, nil
}

// checkProcessCommand says why cmd cannot be started as a Process.
func checkProcessCommand(cmd Command) error {
	switch {
	case cmd.Stdin != nil:
		return errors.New("sandbox: Start: Command.Stdin must be nil: the Process owns the command's input; deliver it with Process.Write")
	case cmd.Stdout != nil:
		return errors.New("sandbox: Start: Command.Stdout must be nil: the Process owns the command's output; read it from Process.Stdout")
	case len(cmd.Script) > MaxProcessScript:
		return fmt.Errorf("sandbox: Start: the script is %d bytes, over the limit of %d (sandbox.MaxProcessScript); nothing was run; pass data on input or in a file", len(cmd.Script), MaxProcessScript)
	}
	if _, ok := cmd.Env[ProcessTagVar]; ok {
		return fmt.Errorf("sandbox: Start: environment variable %s is the process's tag, set by Start; rename it; nothing was run", ProcessTagVar)
	}
	return nil
}

// newProcess returns a Process with a fresh tag, not yet started.
func newProcess(ctx context.Context, r Runner) (*Process, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("sandbox: Start: generating the process tag: %w", err)
	}
	p := &Process{
		r:       r,
		ctx:     context.WithoutCancel(ctx),
		tag:     hex.EncodeToString(b[:]),
		wsem:    make(chan struct{}, 1),
		runDone: make(chan struct{}),
		done:    make(chan struct{}),
	}
	p.stdout, p.out = io.Pipe()
	p.hw = &headerWriter{tag: p.tag, out: p.out, ready: make(chan struct{})}
	return p, nil
}

// run runs the wrapper until it ends, then closes stdout (with an error
// when the run failed, so a cut never reads as the end) and settles.
func (p *Process) run(ctx context.Context, cmd Command) {
	err := p.r.Run(ctx, cmd)
	p.runErr = err
	p.hw.end(err)
	var ee *ExitError
	if err == nil || errors.As(err, &ee) {
		p.out.Close()
	} else {
		p.out.CloseWithError(fmt.Errorf("%w: sandbox: the process's output ended early: %w", ErrTransport, err))
	}
	close(p.runDone)
	p.shutdown()
}

// awaitHeader waits for the header within the control deadline and ctx.
func (p *Process) awaitHeader(ctx context.Context) error {
	d := ControlDeadline(p.r)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.hw.ready:
	case <-t.C:
		return fmt.Errorf("%w: sandbox: starting a process: the sandbox did not report it within the %s control deadline; check the sandbox connection", ErrTransport, d)
	case <-ctx.Done():
		return fmt.Errorf("%w: sandbox: starting a process: %w", ErrTransport, ctx.Err())
	}
	// A refused header is judged only if the run did not fail on the
	// transport: an exec engine prints its own error where the header
	// should be (shell.Unjudged).
	if p.hw.judged() && shell.Settle(p.runDone, nil) && shell.Unjudged(p.runErr) {
		return fmt.Errorf("sandbox: starting a process: %w", p.runErr)
	}
	return p.hw.result()
}

// Tag returns the value of ProcessTagVar in the environment of every
// process of p: how to find them in the sandbox (grep -lzx
// AIRLOCK_PROCESS=TAG /proc/*/environ) when Stop could not verify their end.
func (p *Process) Tag() string { return p.tag }

// PID returns the pid, in the sandbox, of the command's first process: the
// leader of its session and process group (see Process).
func (p *Process) PID() int {
	h, _ := p.hw.header()
	return h.PID
}

// Stdout returns the command's stdout, byte-exact. It reaches EOF when the
// command's output ends, and an error wrapping ErrTransport when the run
// failed or was abandoned first. Read it concurrently with everything
// else: it is a pipe, and an unread one blocks the command's output.
func (p *Process) Stdout() io.Reader { return p.stdout }

// Done returns a channel that is closed once p has been settled: its
// processes stopped (or found gone) and Wait's result known.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait waits until p has been settled and returns how it ended. It does not
// stop p: a command that runs on is waited for until it ends (and then its
// leftovers are stopped and the end verified). The error is non-nil when
// the end was not verified (see Stop), or when ctx ended first.
func (p *Process) Wait(ctx context.Context) (Exit, error) {
	select {
	case <-p.done:
		return p.exit, p.exitErr
	case <-ctx.Done():
		return Exit{Status: -1}, fmt.Errorf("sandbox: process %d: stopped waiting for its end: %w; it runs on or is still being stopped; Wait again for its end", p.PID(), ctx.Err())
	}
}

// Stop stops p, if it has not been settled already, and returns how it
// ended: stdin closed, TERM to every process of its session, group and tag,
// the grace (StopGrace, at most half the control deadline), KILL to those
// left, then the sandbox's confirmation that none is left (Exit.Verified).
// When that confirmation cannot be had (the Runner cannot run the steps, a
// process survived KILL, no /proc), Exit.Verified is false and the error
// wraps ErrTransport (ErrProtocol when the sandbox's reply was malformed)
// and says how to find what may be left. ctx bounds only the wait: the
// shutdown, bounded itself, goes on, and Wait reports it.
func (p *Process) Stop(ctx context.Context) (Exit, error) {
	p.shutdown()
	return p.Wait(ctx)
}

// shutdown starts settling p, once.
func (p *Process) shutdown() { p.once.Do(func() { go p.settle() }) }

// settle is the shutdown path: it closes stdin, stops and verifies, waits
// for the run's report, and publishes the Exit.
func (p *Process) settle() {
	p.mu.Lock()
	p.unwatch()
	p.mu.Unlock()
	p.closeStdin(fmt.Errorf("%w: sandbox: process %d: the process session is closed (Stop, a failed Write, the end of Start's context, or the command's end): %w; Wait reports how it ended", ErrTransport, p.PID(), io.ErrClosedPipe))
	verified, err := p.terminate()
	d := ControlDeadline(p.r)
	if !p.awaitRun(d) {
		p.cancelRun()
		if !p.awaitRun(time.Second) {
			p.out.CloseWithError(fmt.Errorf("%w: sandbox: process %d: its run did not end within %s after it was stopped; its output was abandoned", ErrTransport, p.PID(), d))
		}
	}
	p.cancelRun()
	p.stdinR.Close()
	exit := Exit{Status: -1, Verified: verified}
	select {
	case <-p.runDone:
		var ee *ExitError
		switch {
		case p.runErr == nil:
			exit.Status, exit.Exited = 0, true
		case errors.As(p.runErr, &ee):
			exit.Status, exit.Signal, exit.Exited = ee.Status, ee.Signal, true
		case p.viaRunner && verified:
			exit.Exited = true // the Runner's cancellation ended it, and the Runner confirmed it
		}
	default:
	}
	p.exit, p.exitErr = exit, err
	close(p.done)
}

// awaitRun reports whether the run ends within d.
func (p *Process) awaitRun(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.runDone:
		return true
	case <-t.C:
		return false
	}
}
