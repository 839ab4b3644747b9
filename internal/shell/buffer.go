package shell

import (
	"bytes"
	"fmt"
	"sync"
)

// ErrOutputTooLarge is wrapped by the error of a LimitedBuffer that does
// not truncate once its limit is reached: a sandbox whose reply is longer
// than the protocol allows is hostile or broken, so errors.Is matches it
// to ErrProtocol too (never to ErrTransport): not retryable.
var ErrOutputTooLarge = ProtocolSentinel("sandbox output exceeds its limit")

// LimitedBuffer collects output up to Max bytes. Beyond that it either drops
// the rest (Truncate) or fails the write (and every later one) with an
// error wrapping ErrOutputTooLarge. It is safe
// for concurrent use: a Runner abandoned after a timeout may still write.
type LimitedBuffer struct {
	mu       sync.Mutex
	buf      bytes.Buffer
	Max      int
	Truncate bool
}

// Write implements io.Writer.
func (b *LimitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	room := b.Max - b.buf.Len()
	if len(p) > room {
		if !b.Truncate {
			return 0, fmt.Errorf("%w: more than %d bytes (a hostile or broken sandbox)", ErrOutputTooLarge, b.Max)
		}
		b.buf.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return b.buf.Write(p)
}

// Bytes returns a copy of what was kept.
func (b *LimitedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

// String returns what was kept.
func (b *LimitedBuffer) String() string { return string(b.Bytes()) }

// Len returns the number of bytes kept.
func (b *LimitedBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}
