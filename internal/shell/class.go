package shell

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
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
