package deliverable

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"

	"github.com/airlockdev/airlock/internal/tree"
)

// DefaultMaxBytes is the size limit of a registered file when
// Registrar.MaxBytes is zero: 10 MiB.
const DefaultMaxBytes int64 = 10 << 20

// Registrar verifies workspace files and stores them as attachments. Its zero
// value is not usable: Store is required. It is safe for concurrent use when
// its Store is.
type Registrar struct {
	Store    Store
	MaxBytes int64 // largest file accepted; zero means DefaultMaxBytes
}

// Register verifies the workspace file req.ContentRef for task taskID in run
// runID and stores it, returning a receipt the agent can cite.
//
// The request is checked first: text fields are trimmed and must be
// non-empty, bounded and free of control characters; Filename must be a base
// name, and (checked once the file is open) the base name of ContentRef; SHA256 64 hex digits; ByteSize in 1..MaxBytes (ErrSizeDenied);
// ContentRef workspace-relative, without a scheme, "..", backslash or home
// prefix (ErrPathDenied). Then an idempotency key already used by this task
// and run returns its stored receipt unchanged (the file is not read and
// nothing is written), or ErrIdempotencyConflict when the request differs.
//
// Otherwise the file is opened beneath workspace without following any link
// (ErrSymlinkDenied for a link in any component, ErrPathDenied for anything
// but a regular file), must have one hard link (ErrHardlinkDenied) and
// exactly ByteSize bytes (ErrSizeMismatch), is read once while its SHA-256 is
// computed (ErrHashMismatch) and must keep its identity and size from open to
// the end of the read (ErrFileChanged). Path errors are *fs.PathError values
// with Path set to the ContentRef as given.
func (r *Registrar) Register(ctx context.Context, workspace string, taskID, runID string, req Request) (Receipt, error) {
	if r.Store == nil {
		return Receipt{}, fmt.Errorf("%w: Registrar.Store is nil; set it (for example to a FileStore)", ErrInvalidRequest)
	}
	maxBytes := r.MaxBytes
	if maxBytes == 0 {
		maxBytes = DefaultMaxBytes
	}
	if maxBytes < 0 {
		return Receipt{}, fmt.Errorf("%w: Registrar.MaxBytes is %d; use 0 for the default or a positive limit", ErrInvalidRequest, maxBytes)
	}
	for _, id := range []struct{ name, v string }{{"task id", taskID}, {"run id", runID}} {
		if err := checkID(id.name, id.v); err != nil {
			return Receipt{}, err
		}
	}
	n, rel, err := normalize(req, maxBytes)
	if err != nil {
		return Receipt{}, err
	}
	if err := ctx.Err(); err != nil {
		return Receipt{}, err
	}

	e := Entry{
		Key:         Key{TaskID: taskID, RunID: runID, IdempotencyKey: n.IdempotencyKey},
		Fingerprint: fingerprint(n),
		Filename:    n.Filename,
		ContentType: n.ContentType,
		SHA256:      n.SHA256,
		ByteSize:    n.ByteSize,
		Title:       n.Title,
	}
	if rc, err := replay(ctx, r.Store, e); err == nil || !errors.Is(err, ErrNotFound) {
		return rc, err
	}

	pathErr := func(err error) error { return &fs.PathError{Op: "register", Path: req.ContentRef, Err: err} }
	f, err := tree.OpenFile(workspace, rel)
	if err != nil {
		return Receipt{}, pathErr(openError(err))
	}
	defer func() { _ = f.Close() }() // read-only: nothing to flush
	before, err := f.Stat()
	if err != nil {
		return Receipt{}, pathErr(fmt.Errorf("stat: %w", err))
	}
	if !before.Mode().IsRegular() {
		return Receipt{}, pathErr(fmt.Errorf("%w: not a regular file; register a regular file", ErrPathDenied))
	}
	links, err := linkCount(before)
	if err != nil {
		return Receipt{}, pathErr(fmt.Errorf("%w: %w", ErrHardlinkDenied, err))
	}
	if links != 1 {
		return Receipt{}, pathErr(fmt.Errorf("%w: the file has %d hard links; copy it to a new file and register the copy", ErrHardlinkDenied, links))
	}
	// The name the agent declares is the file's own: a file the task names
	// cannot be satisfied by registering another file under that name.
	if base := path.Base(rel); n.Filename != base {
		return Receipt{}, fmt.Errorf("%w: Filename %q is not the base name of ContentRef %q; pass %q", ErrInvalidRequest, n.Filename, rel, base)
	}
	if before.Size() != n.ByteSize {
		return Receipt{}, pathErr(fmt.Errorf("%w: the file is %d bytes but ByteSize is %d; recompute the size of the final file", ErrSizeMismatch, before.Size(), n.ByteSize))
	}

	it, err := tree.NewReader(f, rel)
	if err != nil {
		return Receipt{}, pathErr(err)
	}
	v := &verifier{ctx: ctx, it: it, workspace: workspace, rel: rel, before: before, sum: n.SHA256}
	rc, err := r.Store.Put(ctx, e, v)
	if err != nil {
		if v.failed {
			return Receipt{}, pathErr(err)
		}
		return Receipt{}, err
	}
	return rc, nil
}

// replay returns the stored receipt for e.Key, ErrIdempotencyConflict, or an
// error wrapping ErrNotFound when the key is new.
func replay(ctx context.Context, s Store, e Entry) (Receipt, error) {
	rc, fp, err := s.Lookup(ctx, e.Key)
	if err != nil {
		return Receipt{}, err
	}
	if fp != e.Fingerprint {
		return Receipt{}, fmt.Errorf("%w: key %q was used by this task and run for attachment %s (%s); use a new idempotency key for a different file",
			ErrIdempotencyConflict, clip(e.Key.IdempotencyKey), rc.AttachmentID, rc.Filename)
	}
	return rc, nil
}

// openError maps internal/tree errors onto this package's sentinels.
func openError(err error) error {
	switch {
	case errors.Is(err, tree.ErrLink):
		return fmt.Errorf("%w: a component of the path is a symbolic link; register the file at its real location inside the workspace: %w", ErrSymlinkDenied, err)
	case errors.Is(err, tree.ErrEscape):
		return fmt.Errorf("%w: the path leaves the workspace; pass a path inside it: %w", ErrPathDenied, err)
	case errors.Is(err, tree.ErrNotRegular):
		return fmt.Errorf("%w: not a regular file (a directory, FIFO, socket or device); register a regular file: %w", ErrPathDenied, err)
	case errors.Is(err, tree.ErrChanged):
		return fmt.Errorf("%w: the path changed while it was opened; register the file once it is complete: %w", ErrFileChanged, err)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("the file does not exist in the workspace; write it first or fix ContentRef: %w", err)
	}
	return fmt.Errorf("open in the workspace: %w", err)
}

// verifier reads the opened file exactly once for the store through
// tree's reader (exactly the size it had at open, hashed, then checked
// unchanged: size, times, identity), and at the end also checks that the
// path still names the same file and that the hash is the declared one. Any
// failure is returned from Read, so the store aborts and writes nothing.
type verifier struct {
	ctx       context.Context
	it        *tree.Item
	workspace string
	rel       string
	before    fs.FileInfo
	sum       string
	done      bool
	failed    bool
}

func (v *verifier) fail(err error) (int, error) {
	v.failed = true
	return 0, err
}

func changed(what string) error {
	return fmt.Errorf("%w: %s while it was read; register it once it is complete", ErrFileChanged, what)
}

func (v *verifier) Read(p []byte) (int, error) {
	if v.done {
		return 0, io.EOF
	}
	if err := v.ctx.Err(); err != nil {
		return 0, err
	}
	k, err := v.it.Read(p)
	switch {
	case errors.Is(err, io.EOF):
		if err := v.finish(); err != nil {
			return v.fail(err)
		}
		v.done = true
		return k, io.EOF
	case errors.Is(err, tree.ErrChanged):
		return v.fail(changed(err.Error()))
	case err != nil:
		return v.fail(fmt.Errorf("read: %w", err))
	}
	return k, nil
}

// finish runs at end of file: unchanged by descriptor, same file by path,
// and the declared hash.
func (v *verifier) finish() error {
	if err := v.it.Verify(); err != nil {
		if errors.Is(err, tree.ErrChanged) {
			return changed(err.Error())
		}
		return err
	}
	g, err := tree.OpenFile(v.workspace, v.rel)
	if err != nil {
		return changed(fmt.Sprintf("the path no longer opens as the same file (%v)", err))
	}
	now, err := g.Stat()
	if cerr := g.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("stat path after read: %w", err)
	}
	if !os.SameFile(v.before, now) {
		return changed("the path was replaced by another file")
	}
	if got := v.it.SHA256; got != v.sum {
		return fmt.Errorf("%w: the file's SHA-256 is %s but the request declares %s; recompute the hash of the final file", ErrHashMismatch, got, v.sum)
	}
	return nil
}
