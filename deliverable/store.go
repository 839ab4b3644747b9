package deliverable

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
)

// Key names one idempotent registration: an idempotency key is scoped to one
// task and one run.
type Key struct {
	TaskID, RunID, IdempotencyKey string // the host's task and run, the agent's key
}

// Entry is a registration handed to Store.Put. Register fills it from a
// validated, normalized Request.
type Entry struct {
	Key Key // where the registration is recorded
	// Fingerprint identifies the whole request. A stored Key with another
	// Fingerprint is an idempotency conflict.
	Fingerprint string
	Filename    string // base name
	ContentType string // canonical media type
	SHA256      string // lowercase hex
	ByteSize    int64  // exact size of the content
	Title       string // the agent's short description
}

// Store keeps attachments, their content and idempotency receipts. It is what
// Registrar and Handler consume; FileStore is the embedded default.
//
// Implementations must be safe for concurrent use and atomic: a Put either
// stores the receipt together with its attachment record and content, or leaves
// nothing a later Lookup, Put or Open can observe.
type Store interface {
	// Lookup returns the receipt stored under key and the fingerprint of the
	// request that created it, or an error wrapping ErrNotFound.
	Lookup(ctx context.Context, key Key) (rc Receipt, fingerprint string, err error)

	// Put stores e. When e.Key is already stored, Put returns the stored receipt
	// unchanged if the fingerprints are equal, and an error wrapping
	// ErrIdempotencyConflict otherwise; it reads nothing from content and writes
	// nothing. Otherwise Put reads content to io.EOF (an error from content
	// aborts the Put and is returned wrapped); content must yield exactly
	// e.ByteSize bytes whose SHA-256 is e.SHA256 (ErrSizeMismatch,
	// ErrHashMismatch). When the same task and run already hold an attachment
	// with the same SHA256, ByteSize and Filename, the receipt names it with
	// Disposition Duplicate; otherwise a new attachment is stored
	// (Applied). Concurrent Puts of one Key store one receipt.
	Put(ctx context.Context, e Entry, content io.Reader) (Receipt, error)

	// Open returns the attachment with id (a lowercase UUID) and its content,
	// or an error wrapping ErrNotFound. The caller closes the content.
	Open(ctx context.Context, id string) (Attachment, io.ReadSeekCloser, error)
}

// receiptFor builds the receipt that names a.
func receiptFor(a Attachment, d Disposition) Receipt {
	return Receipt{
		AttachmentID: a.ID,
		TaskID:       a.TaskID,
		RunID:        a.RunID,
		Filename:     a.Filename,
		ContentType:  a.ContentType,
		SHA256:       a.SHA256,
		ByteSize:     a.ByteSize,
		ContentPath:  ContentPath(a.ID),
		DownloadPath: DownloadPath(a.ID),
		Disposition:  d,
	}
}

// checkEntry validates what a Store is asked to keep.
func checkEntry(e Entry) error {
	for _, f := range []struct{ name, v string }{
		{"TaskID", e.Key.TaskID}, {"RunID", e.Key.RunID}, {"IdempotencyKey", e.Key.IdempotencyKey},
		{"Fingerprint", e.Fingerprint}, {"Filename", e.Filename}, {"ContentType", e.ContentType}, {"Title", e.Title},
	} {
		if f.v == "" {
			return fmt.Errorf("%w: entry %s is empty", ErrInvalidRequest, f.name)
		}
	}
	if !isLowerHex(e.SHA256, 64) {
		return fmt.Errorf("%w: entry SHA256 %q is not 64 lowercase hex digits", ErrInvalidRequest, clip(e.SHA256))
	}
	if e.ByteSize < 1 {
		return fmt.Errorf("%w: entry ByteSize %d is not positive", ErrSizeDenied, e.ByteSize)
	}
	return nil
}

func isLowerHex(s string, n int) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 'A' && s[i] <= 'F' {
			return false
		}
	}
	return isHex(s, n)
}

// ctxReader fails reads once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// verifyStream reads r to EOF (at most size+1 bytes) into w and checks the
// byte count and SHA-256 against size and sum. what names the stream in errors.
func verifyStream(ctx context.Context, w io.Writer, r io.Reader, size int64, sum, what string) error {
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(ctxReader{ctx, r}, size+1))
	if err != nil {
		return err
	}
	if n != size {
		return fmt.Errorf("%w: %s has %s bytes, expected %d", ErrSizeMismatch, what, atLeast(n, size), size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return fmt.Errorf("%w: %s has SHA-256 %s, expected %s", ErrHashMismatch, what, got, sum)
	}
	return nil
}

func atLeast(n, size int64) string {
	if n > size {
		return fmt.Sprintf("more than %d", size)
	}
	return fmt.Sprint(n)
}
