package sandbox

import (
	"fmt"
	"io"
	"sync"
)

// outputWriter passes a command's output on to w and keeps w's first
// error; that write and every later one fail with it, so that the output
// stops there (as it would on a closed pipe). Run returns the kept error
// (Err) in place of what followed from it (a client or script killed by
// SIGPIPE, a client whose copy failed): a host that cannot take the output
// (a full disk) is the host's failure, neither the command's nor the
// transport's, and the error keeps its path and errno.
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

// Write implements io.Writer.
func (o *outputWriter) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return 0, o.err
	}
	n, err := o.w.Write(p)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	o.err = err
	return n, err
}

// Err returns the first write error, as an error saying what failed, or
// nil.
func (o *outputWriter) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err == nil {
		return nil
	}
	return fmt.Errorf("sandbox: writing the command's %s: %w; its %s is incomplete and the command may have been ended by the failed write; fix the destination (free space) and run it again", o.what, o.err, o.what)
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
