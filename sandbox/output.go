package sandbox

import (
	"fmt"
	"io"
	"sync"
)

// outputWriter passes a command's output on to w until w fails: it keeps
// that first error and discards the rest (reporting it written), so that
// the command still runs to its end and its completion is known. Run
// returns the kept error (Err) in place of the command's own outcome: a
// host that cannot take the output (a full disk) is the host's failure,
// neither the command's nor the transport's.
type outputWriter struct {
	w    io.Writer
	what string // "stdout", "stderr"
	mu   sync.Mutex
	err  error
}

// newOutputWriter wraps w (nil: discard) for the stream named what.
func newOutputWriter(w io.Writer, what string) *outputWriter {
	if w == nil {
		w = io.Discard
	}
	return &outputWriter{w: w, what: what}
}

// Write implements io.Writer; it never fails.
func (o *outputWriter) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return len(p), nil
	}
	n, err := o.w.Write(p)
	switch {
	case err != nil:
		o.err = err
	case n < len(p):
		o.err = io.ErrShortWrite
	}
	return len(p), nil
}

// Err returns the first write error, as an error saying what failed, or
// nil.
func (o *outputWriter) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err == nil {
		return nil
	}
	return fmt.Errorf("sandbox: writing the command's %s: %w; the rest of its %s was discarded (the command ran to its end); free the destination and run it again", o.what, o.err, o.what)
}

// firstOutputErr returns the first write error of ws, or nil.
func firstOutputErr(ws ...*outputWriter) error {
	for _, w := range ws {
		if err := w.Err(); err != nil {
			return err
		}
	}
	return nil
}
