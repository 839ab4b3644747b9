package deliverable

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
)

// Content is what Store.Put stores: a stream of bytes that checks itself
// against the size and SHA-256 it was declared with while it is read, so
// that each byte is hashed once, on its way to the store. Make one with
// NewContent; Registrar.Register makes its own.
//
// Read returns io.EOF only after it has returned exactly Size bytes whose
// SHA-256 is SHA256. A stream that turns out longer or shorter fails with
// an error wrapping ErrSizeMismatch, one with other bytes fails on its last
// read with an error wrapping ErrHashMismatch, and an error of the
// underlying reader is returned unchanged; every later Read returns the same
// error. A Store that keeps what Read returned only when Read ended with
// io.EOF therefore keeps verified bytes and has no need to hash or re-read
// them. A Content is read once, by one goroutine.
type Content struct {
	r    io.Reader
	size int64
	sum  string
	h    hash.Hash     // hashes what Read returns; nil when r hashes itself
	pre  func() string // with h nil: the hex SHA-256 of everything r returned, once r returned io.EOF
	n    int64
	done bool
	err  error
	got  string // the SHA-256 of a mismatching stream
}

// NewContent returns the Content of r, declared to be size bytes with
// SHA-256 sum (64 lowercase hex digits). It reads r no further than one byte
// past size, which is enough to tell a longer stream.
func NewContent(r io.Reader, size int64, sum string) *Content {
	return &Content{r: r, size: size, sum: sum, h: newHash()}
}

// newPrehashedContent returns the Content of r, a reader that hashes what it
// returns itself: once r has returned io.EOF, sum gives the hex SHA-256 of
// all of it ("" if unknown, which fails the read).
func newPrehashedContent(r io.Reader, size int64, want string, sum func() string) *Content {
	return &Content{r: r, size: size, sum: want, pre: sum}
}

// newHash returns the SHA-256 every Content without its own digest uses; a
// test hook counts what it hashes.
var newHash = sha256.New

// Size is the declared length in bytes.
func (c *Content) Size() int64 { return c.size }

// SHA256 is the declared SHA-256, as given to NewContent.
func (c *Content) SHA256() string { return c.sum }

// unread reports whether nothing has been read yet.
func (c *Content) unread() bool { return c.n == 0 && !c.done && c.err == nil }

func (c *Content) fail(err error) (int, error) {
	c.err = err
	return 0, err
}

// Read implements io.Reader; see Content.
func (c *Content) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if c.done {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	left := c.size - c.n
	if int64(len(p)) > left+1 {
		p = p[:left+1]
	}
	k, err := c.r.Read(p)
	if int64(k) > left {
		return c.fail(fmt.Errorf("%w: content has more than %d bytes", ErrSizeMismatch, c.size))
	}
	if c.h != nil {
		c.h.Write(p[:k])
	}
	c.n += int64(k)
	switch {
	case errors.Is(err, io.EOF):
		if c.n != c.size {
			return c.fail(fmt.Errorf("%w: content has %d bytes, expected %d", ErrSizeMismatch, c.n, c.size))
		}
		var got string
		if c.h != nil {
			got = hex.EncodeToString(c.h.Sum(nil))
		} else {
			got = c.pre()
		}
		if got != c.sum {
			c.got = got
			if got == "" {
				return c.fail(fmt.Errorf("%w: content ended without its SHA-256", ErrHashMismatch))
			}
			return c.fail(fmt.Errorf("%w: content has SHA-256 %s, expected %s", ErrHashMismatch, got, c.sum))
		}
		c.done = true
		return k, io.EOF
	case err != nil:
		return c.fail(err)
	}
	return k, nil
}
