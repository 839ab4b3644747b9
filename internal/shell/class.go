package shell

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// ProtocolSentinel returns a package's own sentinel for a sandbox that
// broke the protocol (workspace.ErrHostile, deliverable.ErrProtocol): an
// error whose text is msg and which errors.Is matches both to itself and
// to ErrProtocol, so that a caller may branch on either.
func ProtocolSentinel(msg string) error { return &protocolSentinel{msg} }

type protocolSentinel struct{ msg string }

func (e *protocolSentinel) Error() string { return e.msg }

// Is matches ErrProtocol.
func (e *protocolSentinel) Is(target error) bool { return target == ErrProtocol }

// protocolError is what the parsers of this package return for a reply
// that breaks the protocol: its text says what is wrong (without the
// class, which the caller's sentinel adds when it wraps it) and errors.Is
// matches it to ErrProtocol.
type protocolError struct{ msg string }

func (e *protocolError) Error() string { return e.msg }

// Is matches ErrProtocol.
func (e *protocolError) Is(target error) bool { return target == ErrProtocol }

// protocolf formats a protocol error (see protocolError).
func protocolf(format string, args ...any) error {
	return &protocolError{fmt.Sprintf(format, args...)}
}

// Cut is the error of a sandbox's reply that ended early, what saying
// where: a transport failure when the command's run failed so (the pipe
// carries its error, which wraps ErrTransport, or the context's), else
// the sandbox's broken protocol (ErrProtocol). Never both.
func Cut(what string, err error) error {
	if transportCut(err) {
		return fmt.Errorf("%s: %w", what, err)
	}
	return protocolf("%s: %v", what, err)
}

// transportCut reports whether err, the error a reader of a sandbox's
// reply met, is the transport's or the context's rather than the reply's.
func transportCut(err error) bool {
	return errors.Is(err, ErrTransport) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// EndReader passes R's reads on and records that R returned an error (the
// end of the stream, or the failure that closed it). A caller whose parser
// refused a reply asks Ended to tell the two cases apart: when the stream
// ended before the parser gave up and the command's run failed, the reply
// was cut short by that failure (a transport failure, not the sandbox's
// broken protocol); when it had not ended, the parser refused what the
// sandbox sent.
type EndReader struct {
	R     io.Reader
	ended atomic.Bool
}

// Read implements io.Reader.
func (e *EndReader) Read(p []byte) (int, error) {
	n, err := e.R.Read(p)
	if err != nil {
		e.ended.Store(true)
	}
	return n, err
}

// Ended reports whether a read of R returned an error.
func (e *EndReader) Ended() bool { return e.ended.Load() }

// KeepsClass reports whether a Runner's error err already says what it is,
// so that a caller passes it on instead of marking it ErrTransport: a
// transport failure, a protocol break, a command refused before it ran
// (ErrBadCommand), or the host's own failure (HostFault, with writeErrs).
// Every package that runs commands through a Runner sorts its errors by
// this one rule.
func KeepsClass(err error, writeErrs ...error) bool {
	return errors.Is(err, ErrTransport) || errors.Is(err, ErrProtocol) || errors.Is(err, ErrBadCommand) || HostFault(err, writeErrs...)
}

// Unjudged reports whether runErr, the Runner's error for a command whose
// output the host parses, makes the command's error runErr itself rather
// than a protocol error (ErrProtocol, ErrHostile) found in that output:
// the run failed on the transport (ErrTransport) and reported no broken
// protocol of its own (ErrProtocol: a garbled completion record, a write
// the host refused). The output of such a run is not judged: it may be cut
// short, or not the sandbox's at all, since an exec engine that fails
// before it reaches the sandbox prints its own error where the host
// expects the command's reply (docker prints "OCI runtime exec failed:
// …" on the client's stdout and exits 126). Only the output of a command
// that ended normally (or whose run's error says what it is: an exit
// status, the host's own failure) is judged. Every package that parses a
// command's output follows this one rule.
//
// It holds only for a run that ended by itself: a host that stopped the
// command because its parser refused the output caused the transport
// failure that follows, and its verdict stands. A parser that refuses the
// output while the command runs therefore lets it end by itself first
// (Settle), and stops it only when it does not.
func Unjudged(runErr error) bool {
	return errors.Is(runErr, ErrTransport) && !errors.Is(runErr, ErrProtocol)
}

// SettleGrace is how long a command whose output the host refused while it
// ran is left to end by itself before the host stops it (Settle). An exec
// client that failed before it reached the sandbox exits right after it
// printed its error.
const SettleGrace = 500 * time.Millisecond

// Settle lets a command whose output the host refused end by itself, so
// that its run's own error can be judged by Unjudged: it waits up to
// SettleGrace for ended (closed once the Runner returned), reading out,
// the rest of the command's output when not nil, and discarding it, so
// that the command is not blocked writing it. It reports whether ended was
// closed in time; when it was not, the caller stops the command, and its
// verdict stands. The caller closes out once the command is over (out's
// reader, started here, then returns).
func Settle(ended <-chan struct{}, out io.Reader) bool {
	if out != nil {
		go func() { _, _ = io.Copy(io.Discard, out) }()
	}
	t := time.NewTimer(SettleGrace)
	defer t.Stop()
	select {
	case <-ended:
		return true
	case <-t.C:
		return false
	}
}

// HostFault reports whether err, a Runner's failure that wraps neither
// ErrTransport, ErrProtocol nor an exit status, is the host's own rather
// than the transport's, so that a caller which marks the rest as
// ErrTransport passes it on unchanged (and Retryable follows what it
// wraps: a full disk is not retryable, EAGAIN is). The host's own is
//   - an error wrapping an *fs.PathError: a file named by its path, which
//     the Runner failed to create or write on the host (Local's temporary
//     file for a large script on a full disk, a Command.Stdout file), or
//     the command's working directory that is missing (the Runner
//     contract's fs.ErrNotExist: nothing ran);
//   - an error wrapping one of writeErrs, the errors the caller's own
//     Command.Stdout and Stderr returned (WriteTracker.Err; nil ones are
//     ignored): a writer that failed (a full disk, a limit of its own)
//     is the host's failure, whatever the Runner made of it.
//
// A connection's failure (a *net.OpError, an SSH error, an exec client
// that died) is none of these: it stays a transport failure.
func HostFault(err error, writeErrs ...error) bool {
	if err == nil {
		return false
	}
	if _, ok := errors.AsType[*fs.PathError](err); ok {
		return true
	}
	for _, w := range writeErrs {
		if w != nil && errors.Is(err, w) {
			return true
		}
	}
	return false
}

// WriteTracker passes writes on to W and keeps W's first error, so that a
// caller can tell (HostFault) a Runner's failure that its own writer
// caused. It is safe for concurrent use if W is.
type WriteTracker struct {
	W   io.Writer
	mu  sync.Mutex
	err error
}

// Write implements io.Writer.
func (w *WriteTracker) Write(p []byte) (int, error) {
	n, err := w.W.Write(p)
	if err != nil {
		w.mu.Lock()
		if w.err == nil {
			w.err = err
		}
		w.mu.Unlock()
	}
	return n, err
}

// Err returns W's first error, or nil (also for a nil WriteTracker).
func (w *WriteTracker) Err() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// ReadTracker passes on R's reads, Read only (it hides an *os.File's
// WriteTo, so that io.CopyBuffer uses the buffer it is given), and keeps
// R's last error other than io.EOF in Err: a copy that failed for it
// failed to read, not to write. Not for concurrent use.
type ReadTracker struct {
	R   io.Reader
	Err error
}

// Read implements io.Reader.
func (t *ReadTracker) Read(p []byte) (int, error) {
	n, err := t.R.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Err = err
	}
	return n, err
}

// TrackWriter returns what a Runner should be given in place of the
// caller's writer w, and the tracker of w's errors: w itself when it is nil
// or an *os.File (a Runner may hand a file to the command directly; its
// write errors are *fs.PathError, which HostFault knows), else a
// WriteTracker of w.
func TrackWriter(w io.Writer) (io.Writer, *WriteTracker) {
	if _, ok := w.(*os.File); ok || w == nil {
		return w, nil
	}
	t := &WriteTracker{W: w}
	return t, t
}
