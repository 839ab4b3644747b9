// Package sentinel makes sentinel errors that answer sandbox.Retryable for
// themselves: errors.New's, plus a Retryable method. sandbox.Retryable
// believes the first Retryable method it finds in an error's chain before
// it looks for ErrTransport or ErrProtocol, so a sentinel made here decides
// for every error that wraps it ahead of what it wraps.
package sentinel

// Temporary returns a sentinel whose message is msg and whose Retryable
// method answers true: the condition clears by itself (another process
// finishes), and the same call may then succeed unchanged.
func Temporary(msg string) error { return &sentinel{msg: msg, retry: true} }

// Permanent returns a sentinel whose message is msg and whose Retryable
// method answers false, whatever the error that wraps it also wraps: the
// call fails the same way until someone changes something.
func Permanent(msg string) error { return &sentinel{msg: msg} }

// sentinel is errors.New's error with a Retryable answer.
type sentinel struct {
	msg   string
	retry bool
}

func (e *sentinel) Error() string   { return e.msg }
func (e *sentinel) Retryable() bool { return e.retry }
