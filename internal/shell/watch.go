package shell

import (
	"bytes"
	"io"
	"sync"
)

// WatchEndLine is the line a command wrapped by WatchEndScript writes on
// stderr once its script has ended (sandbox.Watch's ArmAtEnd).
const WatchEndLine = "airlock-command-end"

// WatchEndScript wraps script so that, once it has ended, the command
// writes WatchEndLine on stderr (on a line of its own) and exits with the
// script's status.
func WatchEndScript(script string) string {
	return "(\n" + script + "\n)\n__airlock_w=$?\nprintf '\\n" + WatchEndLine + "\\n' >&2\nexit $__airlock_w\n"
}

// EndLineWriter is the stderr of a command wrapped by WatchEndScript: it
// passes every line on to Dst (nil: discarded) except WatchEndLine, at
// which it calls OnEnd. A partial line is held back only while it may
// still become the end line. It is safe for concurrent use.
type EndLineWriter struct {
	Dst     io.Writer
	OnEnd   func()
	mu      sync.Mutex
	pending []byte // the start of a line that may be the end line
	mid     bool   // inside a line that is not the end line
}

// Write implements io.Writer. It fails only when Dst does.
func (e *EndLineWriter) Write(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := len(p)
	var out []byte
	for len(p) > 0 {
		if e.mid {
			// Inside a line: pass on up to and including its newline.
			i := bytes.IndexByte(p, '\n')
			if i < 0 {
				out = append(out, p...)
				break
			}
			out = append(out, p[:i+1]...)
			p = p[i+1:]
			e.mid = false
			continue
		}
		out, p = e.lineStart(out, p)
	}
	if e.Dst != nil && len(out) > 0 {
		if _, err := e.Dst.Write(out); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// lineStart handles p at the beginning of a line (or after the held
// start of one): it returns out with what is to be passed on, and the
// rest of p.
func (e *EndLineWriter) lineStart(out, p []byte) ([]byte, []byte) {
	i := bytes.IndexByte(p, '\n')
	chunk := p
	if i >= 0 {
		chunk = p[:i]
	}
	cand := append(e.pending, chunk...)
	switch {
	case i >= 0 && string(cand) == WatchEndLine:
		e.pending = nil
		if e.OnEnd != nil {
			e.OnEnd()
		}
		return out, p[i+1:]
	case len(cand) <= len(WatchEndLine) && WatchEndLine[:len(cand)] == string(cand) && i < 0:
		e.pending = cand // may still be the end line
		return out, nil
	}
	out = append(out, cand...)
	e.pending = nil
	if i < 0 {
		e.mid = true
		return out, nil
	}
	return append(out, '\n'), p[i+1:]
}
