package deliverable

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
)

// DefaultMaxBytes is the size limit of a registered file when
// Registrar.MaxBytes is zero: 10 MiB.
const DefaultMaxBytes int64 = 10 << 20

// Registrar verifies workspace files and stores them as attachments. Its zero
// value is not usable: Store is required. It is safe for concurrent use when
// its Store is.
type Registrar struct {
	// Store keeps the attachments; required.
	Store Store
	// MaxBytes is the largest file accepted; zero means DefaultMaxBytes.
	MaxBytes int64
	// ToolName is the name of the agent's registration tool, used in the
	// messages of rejections; "" means DefaultToolName.
	ToolName string
	// ContentTypes, when not empty, is the allow-list of contentTypes:
	// media types ("application/pdf") or whole top-level types ("image/*"),
	// matched without parameters and case-insensitively.
	// DeliverableContentTypes returns the usual kinds of deliverables. Empty
	// allows any media type.
	ContentTypes []string
}

// Register verifies the file req.ContentRef of workspace ws for task taskID
// in run runID and stores it, returning a receipt the agent can cite.
//
// The request is checked first: text fields are trimmed and must be
// non-empty, bounded and free of control characters and of invisible
// format and separator characters (Unicode Cf, Zl, Zp); Filename must be a
// base name, and (checked once the file is open) the base name of
// ContentRef; SHA256 64 hex digits; ByteSize in 1..MaxBytes (ErrSizeDenied);
// ContentRef workspace-relative, without a scheme, "..", backslash, home
// prefix, control or invisible character, white space around it or "/" at
// its end (ErrPathDenied; it is a path, so it is not trimmed; "./out/r.csv"
// and "out//r.csv" name out/r.csv). Then an idempotency key already used by
// this task and run returns its stored receipt unchanged (the file is not
// read and nothing is written), or ErrIdempotencyConflict when the request
// differs; its message says in which fields, and when the file is the same
// (only the title or contentType differ) that it is already delivered.
//
// Otherwise the file is opened with ws.Open, which follows no link in any
// component (ErrSymlinkDenied), and must be a regular file (ErrPathDenied)
// with one hard link (ErrHardlinkDenied; none left is a file replaced or
// removed while it was opened, ErrFileChanged) and exactly ByteSize bytes
// (ErrSizeMismatch; when the workspace can tell, and a remote one whose
// Runner is a sandbox.FileReader can, without reading any content, a file
// that changed while it was opened is ErrFileChanged instead: a race is
// the sandbox's doing, not the request's). It is read once, never more than its announced size,
// while the SHA-256 of the bytes received is computed here, on the host
// (ErrHashMismatch); the workspace must confirm that it did not change from
// open to the end of the read (ErrFileChanged). Nothing is stored unless
// every check passes.
//
// Every rejection is a *RequestError whose Message tells the agent, in the
// request's JSON field names and under Registrar.ToolName, what to do next;
// it wraps the sentinel, and for a problem with the file an *fs.PathError
// whose Path is req.ContentRef as given. Every other failure (the
// Registrar's configuration, taskID or runID, the Store, a workspace that
// cannot be read, ctx) is a *HostError.
func (r *Registrar) Register(ctx context.Context, ws Workspace, taskID, runID string, req Request) (Receipt, error) {
	return r.RegisterFor(ctx, ws, Binding{TaskID: taskID, RunID: runID}, req)
}

// RegisterFor is Register for the task and run of b, whose other ids (the
// host's command, revision and entity references) are kept with the
// receipt and echoed back in it, replays included; they take no part in
// the idempotency check. An invalid Binding is a *HostError. When
// Registrar.ContentTypes is set, a contentType it does not allow is a
// rejection (ErrContentTypeDenied) listing what is allowed.
func (r *Registrar) RegisterFor(ctx context.Context, ws Workspace, b Binding, req Request) (Receipt, error) {
	taskID, runID := b.TaskID, b.RunID
	host := func(op string, err error) (Receipt, error) { return Receipt{}, hostErr(op, err) }
	if r.Store == nil {
		return host("register", errors.New("Registrar.Store is nil; set it (for example to a FileStore)"))
	}
	if ws == nil {
		return host("register", errors.New("the workspace is nil; pass one from LocalWorkspace or RemoteWorkspace"))
	}
	maxBytes := r.MaxBytes
	if maxBytes == 0 {
		maxBytes = DefaultMaxBytes
	}
	if maxBytes < 0 {
		return host("register", fmt.Errorf("Registrar.MaxBytes is %d; use 0 for the default or a positive limit", maxBytes))
	}
	if err := b.check(); err != nil {
		return host("register", err)
	}
	rj := rejecter{tool: toolName(r.ToolName)}
	n, rel, err := normalize(rj, req, maxBytes)
	if err != nil {
		return Receipt{}, err
	}
	if err := checkContentType(rj, r.ContentTypes, n.ContentType); err != nil {
		return Receipt{}, err
	}
	if err := ctx.Err(); err != nil {
		return host("register", err)
	}

	e := Entry{
		Key:         Key{TaskID: taskID, RunID: runID, IdempotencyKey: n.IdempotencyKey},
		Fingerprint: fingerprint(n),
		Filename:    n.Filename,
		ContentType: n.ContentType,
		SHA256:      n.SHA256,
		ByteSize:    n.ByteSize,
		Title:       n.Title,
		ContentRef:  rel,
		Command:     b.Command,
		Revision:    b.Revision,
		Entities:    NewEntityRefs(b.Entities...),
	}
	if rc, err := replay(ctx, rj, r.Store, e); err == nil || !errors.Is(err, ErrNotFound) {
		if err != nil {
			return rc, err
		}
		return bindReceipt(rc), nil
	}

	ref := req.ContentRef
	f, err := ws.Open(ctx, rel)
	if err != nil {
		return Receipt{}, rj.openRejection(ref, err)
	}
	defer func() { _ = f.Close() }() // read-only: nothing to flush
	if err := rj.checkOpened(f, ref, rel, n); err != nil {
		return Receipt{}, err
	}
	return r.store(ctx, rj, e, f, ref)
}

// checkOpened checks the file f opened for contentRef ref (cleaned: rel)
// against the request n before any content is read: a regular file with
// one hard link, named n.Filename, of n.ByteSize bytes. It returns the
// agent's rejection, or a *HostError when the workspace failed.
func (rj rejecter) checkOpened(f File, ref, rel string, n Request) error {
	st := f.Stat()
	q := fmt.Sprintf("contentRef %q", clip(ref))
	if !st.Mode.IsRegular() {
		return rj.rejectPath("contentRef", ref, ErrPathDenied, q+" is not a regular file", "register a regular file", nil)
	}
	if st.Links == 0 {
		// Unlinked since it was opened: the agent replaced or removed it
		// meanwhile (a rename over it), not a hard link.
		return rj.rejectPath("contentRef", ref, ErrFileChanged, q+" was replaced or removed while it was opened", "register it once it is complete", nil)
	}
	if st.Links != 1 {
		return rj.rejectPath("contentRef", ref, ErrHardlinkDenied,
			fmt.Sprintf("%s has %d hard links", q, st.Links), "copy it to a new file and register the copy", nil)
	}
	// The name the agent declares is the file's own: a file the task names
	// cannot be satisfied by registering another file under that name.
	if base := path.Base(rel); n.Filename != base {
		return rj.reject("filename", ErrInvalidRequest,
			fmt.Sprintf("filename %q is not the base name of contentRef %q", n.Filename, clip(rel)),
			fmt.Sprintf("pass filename %q, or save the file under the name %q and register that", base, n.Filename))
	}
	if st.Size != n.ByteSize {
		// A file swapped while it was opened is the sandbox's doing, not
		// the request's: the size mismatch is only for a file that held
		// still.
		if rc, ok := f.(rechecker); ok {
			if err := rc.recheck(); errors.Is(err, ErrFileChanged) {
				return rj.rejectPath("contentRef", ref, ErrFileChanged, q+" changed while it was opened", "register it once it is complete", err)
			} else if err != nil {
				return hostErr("read workspace", err)
			}
		}
		return rj.rejectPath("byteSize", ref, ErrSizeMismatch,
			fmt.Sprintf("byteSize is %d but the file has %d bytes", n.ByteSize, st.Size), "recompute byteSize and sha256 from the final file", nil)
	}
	return nil
}

// store reads the checked file f into r.Store as e, and turns what fails
// into the agent's rejection or a *HostError.
func (r *Registrar) store(ctx context.Context, rj rejecter, e Entry, f File, ref string) (Receipt, error) {
	// Each byte is hashed once: by the file itself when it hashes what it
	// yields (a LocalWorkspace file), otherwise by the Content. The store
	// writes what the Content returned and hashes nothing again.
	size := f.Stat().Size
	v := &verifier{ctx: ctx, f: f, rj: rj, ref: ref, size: size}
	var c *Content
	if hf, ok := f.(hashingFile); ok {
		c = newPrehashedContent(v, size, e.SHA256, hf.sha256)
	} else {
		c = NewContent(v, size, e.SHA256)
	}
	rc, err := r.Store.Put(ctx, e, c)
	switch {
	case err == nil:
		return bindReceipt(rc), nil
	case v.err != nil:
		return Receipt{}, v.err
	case c.err != nil && errors.Is(c.err, ErrHashMismatch) && c.got != "":
		return Receipt{}, rj.rejectPath("sha256", ref, ErrHashMismatch,
			fmt.Sprintf("sha256 is %s but the file's bytes hash to %s", e.SHA256, c.got), "recompute sha256 from the final file", nil)
	case errors.Is(err, ErrIdempotencyConflict):
		// Another Put of the key won the race: say what differs from it.
		if prev, _, lerr := r.Store.Lookup(ctx, e.Key); lerr == nil {
			return Receipt{}, conflict(ctx, rj, r.Store, e, prev)
		}
		return Receipt{}, rj.reject("idempotencyKey", ErrIdempotencyConflict,
			fmt.Sprintf("idempotencyKey %q was already used in this run for a different request", clip(e.Key.IdempotencyKey)),
			"use a new idempotencyKey for a different file")
	}
	return Receipt{}, hostErr("store", err)
}

// replay returns the stored receipt for e.Key, a *RequestError wrapping
// ErrIdempotencyConflict, an error wrapping ErrNotFound when the key is new,
// or a *HostError.
func replay(ctx context.Context, rj rejecter, s Store, e Entry) (Receipt, error) {
	rc, fp, err := s.Lookup(ctx, e.Key)
	if errors.Is(err, ErrNotFound) {
		return Receipt{}, err
	}
	if err != nil {
		return Receipt{}, hostErr("store", err)
	}
	if fp != e.Fingerprint {
		return Receipt{}, conflict(ctx, rj, s, e, rc)
	}
	return rc, nil
}

// attachmentReader is a Store that also returns attachment records
// (FileStore), so that a conflict can name the title and contentRef the
// key was first used with.
type attachmentReader interface {
	Attachment(ctx context.Context, id string) (Attachment, error)
}

// conflict is the agent's rejection of e under a key whose receipt prev
// came from another request: what differs from that request, and what to
// do. The receipt tells the filename, contentType, byteSize and sha256;
// the title and contentRef come from the attachment record when the key
// created it (Applied) and the Store serves records.
func conflict(ctx context.Context, rj rejecter, s Store, e Entry, prev Receipt) *RequestError {
	var diffs []string
	fileDiffers := false
	differs := func(field, then, now string, ofFile bool) {
		if then != now {
			diffs = append(diffs, fmt.Sprintf("%s (%s then, %s now)", field, then, now))
			fileDiffers = fileDiffers || ofFile
		}
	}
	q := func(s string) string { return fmt.Sprintf("%q", clip(s)) }
	differs("filename", q(prev.Filename), q(e.Filename), true)
	differs("byteSize", fmt.Sprint(prev.ByteSize), fmt.Sprint(e.ByteSize), true)
	if prev.SHA256 != e.SHA256 { // 64 hex digits each say nothing more
		diffs, fileDiffers = append(diffs, "sha256"), true
	}
	differs("contentType", q(prev.ContentType), q(e.ContentType), false)
	known := false // whether title and contentRef were compared
	title := ""
	if ar, ok := s.(attachmentReader); ok && prev.Disposition == Applied {
		if a, err := ar.Attachment(ctx, prev.AttachmentID); err == nil && a.ContentRef != "" {
			known, title = true, a.Title
			differs("contentRef", q(a.ContentRef), q(e.ContentRef), true)
			differs("title", q(a.Title), q(e.Title), false)
		}
	}
	used := fmt.Sprintf("idempotencyKey %q was already used in this run for attachment %s (%s)", clip(e.Key.IdempotencyKey), prev.AttachmentID, prev.Filename)
	cite := citationScheme + prev.AttachmentID
	switch {
	case fileDiffers:
		return rj.reject("idempotencyKey", ErrIdempotencyConflict, used+"; this request differs in its "+strings.Join(diffs, ", "),
			"use a new idempotencyKey for a different file, or that request's arguments to get its receipt")
	case known:
		return rj.reject("idempotencyKey", ErrIdempotencyConflict, used+"; this request differs only in its "+strings.Join(diffs, ", ")+": the file is the same",
			fmt.Sprintf("it is already delivered: cite %s (it keeps its first title, %q, and contentType), or call again with that request's arguments to get its receipt", cite, clip(title)))
	}
	what := "its title or contentRef"
	if len(diffs) > 0 {
		what = "its " + strings.Join(diffs, ", ") + ", and perhaps in its title or contentRef"
	}
	return rj.reject("idempotencyKey", ErrIdempotencyConflict, used+"; this request has the same bytes and filename but differs in "+what,
		fmt.Sprintf("if it is the same file it is already delivered: cite %s; for another file use a new idempotencyKey", cite))
}

// openRejection turns a Workspace.Open error into the agent's rejection, or
// a *HostError when the workspace itself failed.
func (rj rejecter) openRejection(ref string, err error) error {
	q := fmt.Sprintf("contentRef %q", clip(ref))
	switch {
	case errors.Is(err, ErrSymlinkDenied):
		return rj.rejectPath("contentRef", ref, ErrSymlinkDenied, q+" goes through a symbolic link",
			"pass the path of the file's real location inside the workspace, with no link in any component", err)
	case errors.Is(err, ErrFileChanged):
		return rj.rejectPath("contentRef", ref, ErrFileChanged, q+" changed while it was opened", "register it once it is complete", err)
	case errors.Is(err, fs.ErrNotExist):
		return rj.rejectPath("contentRef", ref, fs.ErrNotExist, q+" does not exist in the workspace", "write the file first, or correct contentRef", err)
	case errors.Is(err, ErrHardlinkDenied):
		return hostErr("read workspace", err) // the platform cannot count links
	case errors.Is(err, ErrPathDenied):
		return rj.rejectPath("contentRef", ref, ErrPathDenied, q+" is not a readable regular file",
			"register a regular file, not a directory, device, FIFO or socket", err)
	}
	return hostErr("read workspace", err)
}

// rechecker is a File that can tell, without reading its content, whether
// the file changed since it was opened: recheck returns an error wrapping
// ErrFileChanged when it did, nil when it held still or cannot tell, and
// any other error when the workspace failed. Register asks before it
// blames the request's size.
type rechecker interface {
	File
	recheck() error
}

// hashingFile is a File that computes the SHA-256 of what it yields: sha256
// returns it in hex once Read has returned io.EOF ("" before). Register
// then hashes nothing itself.
type hashingFile interface {
	File
	sha256() string
}

// verifier stands between the opened file and the Content the store reads:
// it reads at most size bytes and turns the file's failures (and ctx's)
// into Register's errors. Any failure is returned from Read, so the store
// aborts and writes nothing; err keeps it for Register. The Content checks
// the size again and the hash.
type verifier struct {
	ctx  context.Context
	f    File
	rj   rejecter
	ref  string
	size int64
	n    int64
	done bool
	err  error
}

func (v *verifier) fail(err error) (int, error) {
	v.err = err
	return 0, err
}

func (v *verifier) changed(problem string, cause error) error {
	return v.rj.rejectPath("contentRef", v.ref, ErrFileChanged, fmt.Sprintf("contentRef %q %s", clip(v.ref), problem), "register it once it is complete", cause)
}

func (v *verifier) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	if v.done {
		return 0, io.EOF
	}
	if err := v.ctx.Err(); err != nil {
		return v.fail(hostErr("read workspace", err))
	}
	k, err := v.f.Read(p)
	if int64(k) > v.size-v.n {
		return v.fail(v.changed("grew while it was read", nil))
	}
	v.n += int64(k)
	switch {
	case errors.Is(err, io.EOF):
		if v.n != v.size {
			return v.fail(v.changed(fmt.Sprintf("ended after %d of its %d bytes while it was read", v.n, v.size), nil))
		}
		v.done = true
		return k, io.EOF
	case errors.Is(err, ErrFileChanged):
		return v.fail(v.changed("changed while it was read", err))
	case err != nil:
		return v.fail(hostErr("read workspace", err))
	}
	return k, nil
}
