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
	head []byte // the first headMax bytes passed on, for Said
	n    int64  // the bytes passed on
}

// headMax bounds what outputWriter keeps for Said: an exec engine's own
// error (docker's OCI runtime errors are one line of 100 to 300 bytes).
const headMax = 1 << 10

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
	if len(o.head) < headMax {
		o.head = append(o.head, p[:min(n, headMax-len(o.head))]...)
	}
	o.n += int64(n)
	return n, err
}

// Said returns what was passed on when it is short (at most headMax
// bytes): what an exec client that failed before it reached the sandbox
// printed in place of the command's output (docker's "OCI runtime exec
// failed: …"); "" when nothing, or more, was.
func (o *outputWriter) Said() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n > headMax {
		return ""
	}
	return string(o.head)
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
