package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/airlockdev/airlock/internal/shell"
)

// Write delivers b to the command's stdin as a control step: it returns
// once all of b is in the pipe the Runner reads the command's stdin from
// (for Local, the command's own stdin), within the control deadline
// (ControlDeadline of the Runner) and ctx. Writes are delivered one at a
// time, in the order they get their turn.
//
// A Write that fails, expires or is cancelled part-way leaves the input
// stream in an unknown state, so it closes the process session through the
// shutdown path (as Stop does, without waiting for it: Wait reports the
// end) and returns an error wrapping ErrTransport; every later Write fails
// the same way. A ctx that has ended before Write starts delivers nothing
// and closes nothing. A Write cut off by CloseStdin or by the shutdown
// (Stop, the end of Start's context, the command's end) wraps ErrTransport
// and says so; so does a Write after the shutdown. Only a Write that starts
// after CloseStdin fails with an error that does not wrap ErrTransport: the
// caller closed the input.
func (p *Process) Write(ctx context.Context, b []byte) error {
	if err := p.writable(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: sandbox: process %d: input not delivered: %w", ErrTransport, p.PID(), err)
	}
	if len(b) == 0 {
		return nil
	}
	d := ControlDeadline(p.r)
	deadline := time.Now().Add(d)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case p.wsem <- struct{}{}:
	case <-t.C:
		return p.writeFailed(len(b), fmt.Errorf("the previous input was still being delivered when the %s control deadline expired", d))
	case <-ctx.Done():
		return p.writeFailed(len(b), ctx.Err())
	}
	defer func() { <-p.wsem }()
	if err := p.writable(); err != nil {
		return err
	}
	// The deadline counts from the start of Write; ctx's end moves it to now.
	_ = p.stdin.SetWriteDeadline(deadline)
	unwatch := context.AfterFunc(ctx, func() { _ = p.stdin.SetWriteDeadline(time.Unix(1, 0)) })
	_, err := p.stdin.Write(b)
	unwatch()
	if err == nil {
		return nil
	}
	if werr := p.writable(); werr != nil {
		// CloseStdin or the shutdown closed the pipe under it.
		return fmt.Errorf("%w: sandbox: process %d: delivering %d bytes of input: cut off, part of it may have reached the command: %w", ErrTransport, p.PID(), len(b), werr)
	}
	why := err
	switch {
	case ctx.Err() != nil:
		why = ctx.Err()
	case errors.Is(err, os.ErrDeadlineExceeded):
		why = fmt.Errorf("the sandbox did not take it within the %s control deadline (the command may have stopped reading)", d)
	}
	return p.writeFailed(len(b), why)
}

// writable says why Write cannot deliver anything, or nil.
func (p *Process) writable() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stdinClosed != nil {
		return p.stdinClosed
	}
	return nil
}

// writeFailed closes the session after a failed delivery of n bytes.
func (p *Process) writeFailed(n int, why error) error {
	err := fmt.Errorf("%w: sandbox: process %d: delivering %d bytes of input: %w; the process session is closed and the process is being stopped (Wait reports its end)", ErrTransport, p.PID(), n, why)
	p.closeStdin(err)
	p.shutdown()
	return err
}

// CloseStdin closes the command's stdin: the command reads EOF once it has
// read what was delivered. Later Writes fail. It does not wait for a Write
// in progress and is safe to call more than once.
func (p *Process) CloseStdin() error {
	p.closeStdin(fmt.Errorf("sandbox: process %d: Write after CloseStdin: the command's input is closed", p.PID()))
	return nil
}

// closeStdin closes stdin (EOF for the command) and records why Write
// cannot deliver any more; the first reason stays.
func (p *Process) closeStdin(why error) {
	p.mu.Lock()
	if p.stdinClosed == nil {
		p.stdinClosed = why
	}
	p.mu.Unlock()
	p.stdin.Close()
}

// terminate runs the TERM step and, unless it found every process gone, the
// KILL step; it reports whether the sandbox confirmed that none is left,
// and otherwise why not. A step that runs in another PID namespace than
// the process cannot reach it: then the Runner's cancellation ends it
// (endByRunner).
func (p *Process) terminate() (bool, error) {
	h, ok := p.hw.header()
	if !ok {
		h = shell.ProcessHeader{Group: -1, Session: -1}
	}
	where := describe(h, ok, p.tag)
	d := ControlDeadline(p.r)
	rep, termErr := p.signal(h, "TERM", min(StopGrace, d/2))
	switch {
	case termErr == nil && rep.Gone:
		return true, nil
	case termErr == nil && rep.OtherNS:
		return p.endByRunner(where)
	}
	rep, err := p.signal(h, "KILL", min(killWait, d/2))
	switch {
	case err == nil && rep.Gone:
		return true, nil
	case err == nil && rep.OtherNS:
		return p.endByRunner(where)
	}
	find := fmt.Sprintf("find what is left with grep -lzx %s=%s /proc/*/environ and the process group, and kill it from the sandbox", ProcessTagVar, p.tag)
	switch {
	case err != nil && errors.Is(err, ErrProtocol):
		return false, fmt.Errorf("%s: its end is not verified: %w; %s", where, err, find)
	case err != nil:
		return false, fmt.Errorf("%s: its end is not verified: %w; %s", where, asTransport(err), find)
	case rep.NoProc:
		return false, fmt.Errorf("%w: %s: its end is not verified: the sandbox has no /proc to check; its process group was signalled; processes that left it may remain", ErrTransport, where)
	}
	return false, fmt.Errorf("%w: %s: its end is not verified: %d processes were still running after KILL (uninterruptible, or forking faster than they die); %s", ErrTransport, where, rep.Left, find)
}

// endByRunner stops a process the signal steps cannot reach (they run in
// another PID namespace: each exec a sandbox of its own, as bwrap
// --unshare-pid makes): it gives the command the grace to end on its own
// (its stdin is closed), then cancels Start's run, which is the Runner's
// own way to stop it, and waits for the run's report. The end is verified
// only when the Runner says so: a *StopError with Verified (for Exec with
// ExecOptions.ClientEndsSandbox: the killed client ended the sandbox).
func (p *Process) endByRunner(where string) (bool, error) {
	d := ControlDeadline(p.r)
	const why = "the stop steps run in another PID namespace than the process (each exec a sandbox of its own?), so they can neither see nor signal it"
	if p.awaitRun(min(StopGrace, d/2)) {
		return false, fmt.Errorf("%w: %s: its end is not verified: %s, and its run ended by itself; if the sandbox ends with its client (ExecOptions.ClientEndsSandbox), nothing of it is left", ErrTransport, where, why)
	}
	p.viaRunner = true
	p.cancelRun()
	if !p.awaitRun(d) {
		return false, fmt.Errorf("%w: %s: its end is not verified: %s, and its run did not end within %s of its cancellation; kill it from the host that runs the sandbox", ErrTransport, where, why, d)
	}
	var se *StopError
	if errors.As(p.runErr, &se) && se.Verified {
		return true, nil
	}
	if p.runErr == nil || errors.As(p.runErr, new(*ExitError)) {
		return false, fmt.Errorf("%w: %s: its end is not verified: %s, and its run ended on its own at its cancellation; if the sandbox ends with its client (ExecOptions.ClientEndsSandbox), nothing of it is left", ErrTransport, where, why)
	}
	return false, fmt.Errorf("%s: its end is not verified: %s, and the Runner's cancellation did not confirm its end: %w", where, why, asTransport(p.runErr))
}

// describe names the process h for an error: its pid, the session or
// group it leads, its tag.
func describe(h shell.ProcessHeader, ok bool, tag string) string {
	switch {
	case !ok:
		return fmt.Sprintf("sandbox: a process that never reported itself (tagged %s=%s)", ProcessTagVar, tag)
	case h.Session > 0:
		return fmt.Sprintf("sandbox: process %d (leading session and group %d, tagged %s=%s)", h.PID, h.Session, ProcessTagVar, tag)
	case h.Group > 0:
		return fmt.Sprintf("sandbox: process %d (leading group %d, tagged %s=%s)", h.PID, h.Group, ProcessTagVar, tag)
	}
	return fmt.Sprintf("sandbox: process %d (in no group of its own, tagged %s=%s)", h.PID, ProcessTagVar, tag)
}

// asTransport makes err wrap ErrTransport.
func asTransport(err error) error {
	if errors.Is(err, ErrTransport) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrTransport, err)
}

// signal runs one signal step: sig to every process of p, then a wait of up
// to wait for them to be gone, in the sandbox, as a control step.
func (p *Process) signal(h shell.ProcessHeader, sig string, wait time.Duration) (shell.ProcessReply, error) {
	out := &shell.LimitedBuffer{Max: shell.MaxProcessReply + 1, Truncate: true}
	cmd := Command{Script: shell.ProcessSignal(p.tag, h, sig, int(wait/(100*time.Millisecond))), Stdout: out}
	if err := control(p.ctx, p.r, ControlDeadline(p.r), "the process "+sig+" step", cmd); err != nil {
		return shell.ProcessReply{}, err
	}
	return shell.ParseProcessReply(out.Bytes(), p.tag)
}

// headerWriter is the run's stdout: it parses the header line (at most
// shell.MaxProcessHeader bytes), then passes everything after it to out.
// A header that does not parse is refused: the rest of the output is
// discarded, never refused to the Runner, so that the run ends by itself
// if it will and its own error can be judged (awaitHeader).
type headerWriter struct {
	tag   string
	out   io.Writer
	ready chan struct{} // closed once the header is parsed or failed

	mu      sync.Mutex
	buf     []byte
	hdr     shell.ProcessHeader
	err     error // the header's failure
	good    bool  // the header parsed: pass through
	refused bool  // err is the verdict on the run's output (not the run's end)
}

// Write implements io.Writer.
func (w *headerWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	if w.good {
		w.mu.Unlock()
		if _, err := w.out.Write(b); err != nil {
			return 0, err
		}
		return len(b), nil
	}
	if w.err != nil {
		w.mu.Unlock()
		return len(b), nil // refused, or the run ended: discarded
	}
	take := min(len(b), shell.MaxProcessHeader-len(w.buf))
	w.buf = append(w.buf, b[:take]...)
	i := bytes.IndexByte(w.buf, '\n')
	if i < 0 {
		if len(w.buf) >= shell.MaxProcessHeader {
			w.refuse(fmt.Errorf("%w: sandbox: starting a process: the header line is longer than %d bytes", ErrProtocol, shell.MaxProcessHeader))
		}
		w.mu.Unlock()
		return len(b), nil
	}
	h, err := shell.ParseProcessHeader(w.buf[:i], w.tag)
	if err != nil {
		w.refuse(fmt.Errorf("sandbox: starting a process: %w", err))
		w.mu.Unlock()
		return len(b), nil
	}
	rest := append(w.buf[i+1:], b[take:]...)
	w.hdr, w.good, w.buf = h, true, nil
	close(w.ready)
	w.mu.Unlock()
	if len(rest) > 0 {
		if _, err := w.out.Write(rest); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}

// refuse records the verdict on a header that does not parse; w.mu is held.
func (w *headerWriter) refuse(err error) {
	w.refused = true
	w.fail(err)
}

// fail records the header's failure; w.mu is held.
func (w *headerWriter) fail(err error) {
	w.err, w.buf = err, nil
	close(w.ready)
}

// end records that the run ended with runErr: a header still missing fails.
// A run that succeeded without it broke the protocol (the wrapper exits
// with the leader's status, and the leader prints the header before the
// command starts): ErrProtocol. A Runner failure keeps its class when it
// has one (ErrTransport, ErrProtocol, ErrBadCommand, the host's own: see
// Control) and wraps ErrTransport otherwise.
func (w *headerWriter) end(runErr error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.good || w.err != nil {
		return
	}
	var ee *ExitError
	switch {
	case runErr == nil && len(w.buf) > 0:
		w.fail(fmt.Errorf("%w: sandbox: starting a process: the wrapper exited (status 0) in the middle of the header line %q; the sandbox is broken or hostile", ErrProtocol, shell.Truncate(string(w.buf), 64)))
	case runErr == nil:
		w.fail(fmt.Errorf("%w: sandbox: starting a process: the wrapper exited (status 0) without the header line its process prints before it runs; the sandbox is broken or hostile (is its /bin/sh a POSIX shell?)", ErrProtocol))
	case errors.As(runErr, &ee):
		w.fail(fmt.Errorf("sandbox: starting a process: the wrapper ended before the process reported itself: %w; see its stderr", runErr))
	case shell.KeepsClass(runErr):
		w.fail(fmt.Errorf("sandbox: starting a process: %w", runErr))
	default:
		w.fail(fmt.Errorf("%w: sandbox: starting a process: %w", ErrTransport, runErr))
	}
}

// result returns the header's failure, or nil once it parsed.
func (w *headerWriter) result() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// judged reports whether the header's failure is the verdict on the run's
// output (a header that does not parse), not the run's end.
func (w *headerWriter) judged() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.refused
}

// header returns the parsed header (ok) or the header's failure.
func (w *headerWriter) header() (h shell.ProcessHeader, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.hdr, w.good
}
