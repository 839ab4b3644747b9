package deliverable

import (
	"context"
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
	// ContentRef is the clean workspace-relative path of the file
	// ("en/report.pdf"), kept in the Attachment; "" when the caller has no
	// path. It is part of what makes a Duplicate.
	ContentRef string
	// The host's ids (Binding), which the Store keeps in the receipt it
	// returns and replays; they take no part in the Fingerprint.
	Command  string
	Revision string
	Entities EntityRefs
}

// Store keeps attachments (the files an agent delivers for a task), their
// content and idempotency receipts. It is what Registrar and Handler
// consume; FileStore is the embedded default.
//
// It is not session.Store, which persists session records (the binding a
// provider session was made under, and the ids to resume it). The two keep
// the same short name because each is the store of its own package and is
// always written package-qualified (deliverable.Store, session.Store) at
// the call site, where the package says which one it is; a host that uses
// both reads them apart without a longer name.
//
// Implementations must be safe for concurrent use and atomic: a Put either
// stores the receipt together with its attachment record and content, or leaves
// nothing a later Lookup, Put or Open can observe.
type Store interface {
	// Lookup returns the receipt stored under key and the fingerprint of the
	// request that created it, or an error wrapping ErrNotFound.
	Lookup(ctx context.Context, key Key) (rc Receipt, fingerprint string, err error)

	// Put stores e with content, which must have been declared with
	// e.ByteSize and e.SHA256 and not read yet (ErrInvalidRequest). When
	// e.Key is already stored, Put returns the stored receipt unchanged if
	// the fingerprints are equal, and an error wrapping
	// ErrIdempotencyConflict otherwise; it reads nothing from content and
	// writes nothing. Otherwise Put reads content to io.EOF, which proves
	// the bytes it returned are e.ByteSize bytes with SHA-256 e.SHA256 (see
	// Content: a Store need not hash them again); any error from content
	// (ErrSizeMismatch, ErrHashMismatch, or its reader's) aborts the Put and
	// is returned wrapped. When the same task and run already hold an
	// attachment with the same SHA256, ByteSize, Filename and ContentRef,
	// the receipt names it with Disposition Duplicate; otherwise a new
	// attachment is stored (Applied). Concurrent Puts of one Key store one
	// receipt.
	Put(ctx context.Context, e Entry, content *Content) (Receipt, error)

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

// checkEntry validates what a Store is asked to keep: e, and content
// declared with e's size and hash and not read yet.
func checkEntry(e Entry, content *Content) error {
	for _, f := range []struct{ name, v string }{
		{"TaskID", e.Key.TaskID}, {"RunID", e.Key.RunID}, {"IdempotencyKey", e.Key.IdempotencyKey},
		{"Fingerprint", e.Fingerprint}, {"Filename", e.Filename}, {"ContentType", e.ContentType}, {"Title", e.Title},
	} {
		if f.v == "" {
			return fmt.Errorf("%w: entry %s is empty", ErrInvalidRequest, f.name)
		}
	}
	if e.ContentRef != "" {
		if clean, why := cleanRef(e.ContentRef); why != "" || clean != e.ContentRef {
			return fmt.Errorf("%w: entry ContentRef %q is not a clean workspace-relative path", ErrInvalidRequest, clip(e.ContentRef))
		}
	}
	if !isLowerHex(e.SHA256, 64) {
		return fmt.Errorf("%w: entry SHA256 %q is not 64 lowercase hex digits", ErrInvalidRequest, clip(e.SHA256))
	}
	if e.ByteSize < 1 {
		return fmt.Errorf("%w: entry ByteSize %d is not positive", ErrSizeDenied, e.ByteSize)
	}
	switch {
	case content == nil:
		return fmt.Errorf("%w: content is nil; pass deliverable.NewContent", ErrInvalidRequest)
	case content.Size() != e.ByteSize || content.SHA256() != e.SHA256:
		return fmt.Errorf("%w: content is declared as %d bytes with SHA-256 %q, the entry as %d bytes with SHA-256 %s",
			ErrInvalidRequest, content.Size(), clip(content.SHA256()), e.ByteSize, e.SHA256)
	case !content.unread():
		return fmt.Errorf("%w: content was already read; pass a new Content", ErrInvalidRequest)
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
