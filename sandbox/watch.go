package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockdev/airlock/internal/shell"
)

// WatchOptions configures Watch.
type WatchOptions struct {
	// Op says what the command does, for errors ("sending the tree to
	// /x").
	Op string
	// Deadline is the control deadline of the command's end once armed;
	// <= 0 means ControlDeadline of the Runner.
	Deadline time.Duration
	// After, when not nil, runs in the Runner's goroutine once Run has
	// returned, with its error, before Done is closed (to close the pipes
	// the command wrote into).
	After func(err error)
	// OnExpire, when not nil, runs once when the armed deadline expires
	// (to unblock a reader of the command's output: close its pipe with
	// the error it is given, which wraps ErrTransport).
	OnExpire func(err error)
	// ArmAtEOF arms the deadline when the Runner has read cmd.Stdin to
	// its end (every read is a sign of life). An *os.File stdin is left
	// alone (a Runner may hand its descriptor on, and may wait for a copy
	// of anything else to end): arm it with ArmWhenRead.
	ArmAtEOF bool
	// ArmAtEnd makes the command report its own end: the script runs in
	// a subshell, after which the shell writes an end line on stderr
	// (which the Command's Stderr never sees), and the deadline is armed
	// when it arrives. For commands that go on working after the host has
	// fed them their last byte (a checkout), or whose output's end the
	// host cannot tell (a git bundle).
	ArmAtEnd bool
}

// Watched is a command that Watch runs in a goroutine of its own.
type Watched struct {
	op       string
	d        time.Duration
	onExpire func(error)

	done    chan struct{}
	err     error // set before done is closed
	expired chan struct{}

	armOnce sync.Once
	last    atomic.Int64 // unix nanoseconds of the last sign of life
}

// Watch runs cmd through r in a goroutine of its own, under ctx. Until
// Arm is called the command is a data command, bounded only by ctx (and
// by the Runner honouring it). Arm says the host has finished feeding it:
// it has written the last byte of its stdin, or received the last byte
// the protocol announced, or the command reported its end (ArmAtEnd).
// From then on, the wait for the command's end is a control step: when
// the Runner has not returned within the deadline of the last sign of
// life (a write to the command's stdout or stderr restarts it, so output
// still in flight is not cut), the command is abandoned (it may still be
// running, and the Runner's goroutine with it), OnExpire runs, Expired is
// closed and Wait returns an error wrapping ErrTransport. This bounds a
// Runner whose call never returns after its command ended (an exec client
// that does not exit), whatever its context.
func Watch(ctx context.Context, r Runner, cmd Command, o WatchOptions) *Watched {
	w := &Watched{op: o.Op, d: o.Deadline, onExpire: o.OnExpire, done: make(chan struct{}), expired: make(chan struct{})}
	if w.d <= 0 {
		w.d = ControlDeadline(r)
	}
	w.d = ClampControl(w.d)
	if cmd.Stdout != nil {
		cmd.Stdout = &lifeWriter{w: w, dst: cmd.Stdout}
	}
	if _, isFile := cmd.Stdin.(*os.File); o.ArmAtEOF && cmd.Stdin != nil && !isFile {
		cmd.Stdin = &armingReader{w: w, src: cmd.Stdin}
	}
	if o.ArmAtEnd {
		cmd.Script = shell.WatchEndScript(cmd.Script)
		cmd.Stderr = &endWriter{w: w, end: shell.EndLineWriter{Dst: cmd.Stderr, OnEnd: w.Arm}}
	} else if cmd.Stderr != nil {
		cmd.Stderr = &lifeWriter{w: w, dst: cmd.Stderr}
	}
	go func() {
		err := r.Run(ctx, cmd)
		if o.After != nil {
			o.After(err)
		}
		w.err = err
		close(w.done)
	}()
	return w
}

// Arm starts the control deadline of the command's end (see Watch). Only
// the first call does anything.
func (w *Watched) Arm() {
	w.armOnce.Do(func() {
		w.alive()
		go w.timer()
	})
}

// ArmWhenRead arms the deadline once the command's reader has taken every
// byte from the pipe f (the read end of the command's stdin, whose write
// end the host has closed after the last byte): bytes still in the pipe
// are in flight, not yet the command's, and while their number falls the
// command is alive. Where the pipe's content cannot be measured, it arms
// at once.
func (w *Watched) ArmWhenRead(f *os.File) {
	go func() {
		last := -1
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			n, ok := pipeUnread(f)
			if !ok || n == 0 {
				w.Arm()
				return
			}
			if n != last {
				last = n
				w.alive()
			}
			select {
			case <-w.done:
				return
			case <-t.C:
			}
		}
	}()
}

func (w *Watched) alive() { w.last.Store(time.Now().UnixNano()) }

func (w *Watched) timer() {
	t := time.NewTimer(w.d)
	defer t.Stop()
	for {
		select {
		case <-w.done:
			return
		case <-t.C:
		}
		if left := w.d - time.Since(time.Unix(0, w.last.Load())); left > 0 {
			t.Reset(left)
			continue
		}
		select {
		case <-w.done: // it returned just now: not expired
			return
		default:
		}
		if w.onExpire != nil {
			w.onExpire(w.TimeoutErr())
		}
		close(w.expired)
		return
	}
}

// Done is closed once the Runner has returned (and After has run).
func (w *Watched) Done() <-chan struct{} { return w.done }

// Expired is closed when the armed deadline expired before the Runner
// returned.
func (w *Watched) Expired() <-chan struct{} { return w.expired }

// Err is the Runner's result; valid once Done is closed.
func (w *Watched) Err() error { return w.err }

// Wait waits for the Runner's result, or for the armed deadline: its
// error then wraps ErrTransport (TimeoutErr).
func (w *Watched) Wait() error {
	select {
	case <-w.done:
		return w.err
	case <-w.expired:
		return w.TimeoutErr()
	}
}

// TimeoutErr is the error of an expired deadline.
func (w *Watched) TimeoutErr() error {
	return fmt.Errorf("%w: %s: the sandbox command did not end within the %s control deadline after its work was done (the Runner never returned); it may still be running, is abandoned and is not retried; check the sandbox connection",
		ErrTransport, w.op, w.d)
}

// armingReader passes reads on, counts each as a sign of life and arms the
// deadline at the end of its source.
type armingReader struct {
	w   *Watched
	src io.Reader
}

func (e *armingReader) Read(p []byte) (int, error) {
	n, err := e.src.Read(p)
	e.w.alive()
	if errors.Is(err, io.EOF) {
		e.w.Arm()
	}
	return n, err
}

// lifeWriter passes writes on and counts each as a sign of life.
type lifeWriter struct {
	w   *Watched
	dst io.Writer
}

func (l *lifeWriter) Write(p []byte) (int, error) {
	l.w.alive()
	n, err := l.dst.Write(p)
	l.w.alive()
	return n, err
}

// endWriter is the stderr of an ArmAtEnd command: it counts each write as
// a sign of life and passes it to end (shell.EndLineWriter), which arms
// the deadline at the end line (shell.WatchEndLine) and passes every other
// line on.
type endWriter struct {
	w   *Watched
	end shell.EndLineWriter
}

func (e *endWriter) Write(p []byte) (int, error) {
	e.w.alive()
	n, err := e.end.Write(p)
	e.w.alive()
	return n, err
}
