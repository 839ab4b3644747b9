package deliverable

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/spf13/afero"

	"github.com/airlockdev/airlock/internal/atomicfile"
	"github.com/airlockdev/airlock/internal/digest"
	"github.com/airlockdev/airlock/internal/keylock"
)

// FileStore is the embedded default Store: plain files on an afero.Fs
// (OpenFileStore for a directory of the host's disk). Its Tasks method
// gives a task table kept beside the attachments (FileTasks).
//
// Layout under its directory:
//
//	blobs/<sha256>         content, addressed by its SHA-256
//	attachments/<id>.json  one attachment record
//	runs/<hash>.json       per task and run: its attachments, receipts by key and work products
//	workproducts/<id>.json one work product record: which run file holds it
//	tasks/<hash>.json      one task recorded through FileTasks (see FileStore.Tasks)
//	tmp/                   files being written; renamed into place when complete
//
// Every file is written to tmp/, synced, and renamed into place, so a reader
// sees the old version or the new one. A Put writes, in this order, the blob
// (its Content checks size and hash as the bytes are written, and a blob
// that does not match is removed, never published; it is not read back),
// the attachment record, and the run file; the run file is the commit point. If a later step fails the
// earlier ones are undone in reverse order (record, then the blob if this Put
// created it). A rename that reports a failure after it took effect (NFS,
// a FUSE or network afero.Fs) is read back: a run file that holds the
// receipt is a Put that happened (it returns the receipt), and a record
// in place is removed before its blob. If an undo itself fails, what remains is never a record
// without its blob: it is a record no receipt names (whose id was never
// returned), or a blob no record names (verified when written; a later Put of
// the same content reuses it). Both are unreferenced garbage and may be
// deleted while no FileStore runs; the error returned says which file was
// left. So may files left in tmp/ by a process that died while writing.
// Files are synced before they are renamed, directories are not: which
// renames survive a power loss is up to the file system. A record file
// that is not a regular file (a directory, a FIFO, a device) is a damaged
// store file: reading it fails at once with an error naming it, and never
// waits on a FIFO.
//
// Concurrency: Puts for one task and run are serialized, and the commit step
// is serialized store-wide, within one FileStore value. Use one FileStore per
// directory per process; FileStores in other processes sharing the directory
// are not serialized against each other.
type FileStore struct {
	fs     afero.Fs
	dir    string
	runs   keylock.Map
	commit sync.Mutex
	tasks  keylock.Map // FileTasks: by task id
}

var _ Store = (*FileStore)(nil)

const fileStoreVersion = 1

// NewFileStore returns a FileStore keeping its files under dir on fsys,
// creating the directories it needs (with their missing parents, mode
// 0700). A host keeping its files on its own disk calls OpenFileStore.
func NewFileStore(fsys afero.Fs, dir string) (*FileStore, error) {
	if fsys == nil {
		return nil, fmt.Errorf("%w: deliverable.NewFileStore: fs is nil; pass an afero.Fs such as afero.NewOsFs()", ErrInvalidRequest)
	}
	if dir == "" {
		return nil, fmt.Errorf("%w: deliverable.NewFileStore: dir is empty; pass the store's directory", ErrInvalidRequest)
	}
	s := &FileStore{fs: fsys, dir: filepath.Clean(dir)}
	for _, d := range []string{"blobs", "attachments", "runs", "workproducts", "tasks", "tmp"} {
		p := filepath.Join(s.dir, d)
		if err := fsys.MkdirAll(p, 0o700); err != nil {
			return nil, fmt.Errorf("deliverable: create store directory %s: %w", p, err)
		}
	}
	return s, nil
}

// runFile is the commit point of a task and run: its attachments and receipts.
type runFile struct {
	Version     int            `json:"version"`
	TaskID      string         `json:"taskId"`
	RunID       string         `json:"runId"`
	Attachments []Attachment   `json:"attachments"`
	Receipts    []receiptEntry `json:"receipts"`
	// WorkProducts: each attachment's artifact and the recorded
	// workspace_file work products, in the order stored.
	WorkProducts []WorkProduct `json:"workProducts,omitempty"`
}

type receiptEntry struct {
	Key         string  `json:"key"`
	Fingerprint string  `json:"fingerprint"`
	Receipt     Receipt `json:"receipt"`
}

type attachmentRecord struct {
	Version    int        `json:"version"`
	Attachment Attachment `json:"attachment"`
}

func (s *FileStore) blobPath(sum string) string { return filepath.Join(s.dir, "blobs", sum) }
func (s *FileStore) recordPath(id string) string {
	return filepath.Join(s.dir, "attachments", id+".json")
}

// runPath names the run file of a task and run by a hash of both ids, so that
// no id is ever used as a path component.
func (s *FileStore) runPath(taskID, runID string) string {
	return filepath.Join(s.dir, "runs", digest.Fields("airlock.deliverable.run.v1", taskID, runID)+".json")
}

// Lookup implements Store.
func (s *FileStore) Lookup(ctx context.Context, key Key) (Receipt, string, error) {
	if err := ctx.Err(); err != nil {
		return Receipt{}, "", err
	}
	run, err := s.readRun(key.TaskID, key.RunID)
	if err != nil {
		return Receipt{}, "", err
	}
	if re, ok := run.receipt(key.IdempotencyKey); ok {
		return re.Receipt, re.Fingerprint, nil
	}
	return Receipt{}, "", fmt.Errorf("%w: no receipt for idempotency key %q of task %q run %q", ErrNotFound, clip(key.IdempotencyKey), clip(key.TaskID), clip(key.RunID))
}

// Put implements Store. It hashes nothing itself: the bytes are checked by
// content on their way to the temporary blob, which is synced and renamed
// into place only when content ended with io.EOF, and otherwise removed.
func (s *FileStore) Put(ctx context.Context, e Entry, content *Content) (Receipt, error) {
	if err := checkEntry(e, content); err != nil {
		return Receipt{}, err
	}
	unlock, err := s.runs.Lock(ctx, s.runPath(e.Key.TaskID, e.Key.RunID))
	if err != nil {
		return Receipt{}, err
	}
	defer unlock()

	run, err := s.readRun(e.Key.TaskID, e.Key.RunID)
	if err != nil {
		return Receipt{}, err
	}
	if re, ok := run.receipt(e.Key.IdempotencyKey); ok {
		if re.Fingerprint != e.Fingerprint {
			return Receipt{}, fmt.Errorf("%w: key %q was used by this task and run for attachment %s (%s); use a new idempotency key for a different file",
				ErrIdempotencyConflict, clip(e.Key.IdempotencyKey), re.Receipt.AttachmentID, re.Receipt.Filename)
		}
		return re.Receipt, nil
	}

	if a, ok := run.duplicate(e); ok {
		// Verify the content anyway: a Duplicate receipt still promises that
		// the registered file is what was declared.
		if _, err := io.CopyBuffer(io.Discard, ctxReader{ctx, content}, make([]byte, copyBufSize)); err != nil {
			return Receipt{}, fmt.Errorf("deliverable: read content: %w", err)
		}
		rc := entryReceipt(a, Duplicate, e)
		run.Receipts = append(run.Receipts, receiptEntry{Key: e.Key.IdempotencyKey, Fingerprint: e.Fingerprint, Receipt: rc})
		if err := s.writeJSON(ctx, s.runPath(e.Key.TaskID, e.Key.RunID), run); err != nil {
			return Receipt{}, err
		}
		return rc, nil
	}

	tmp, err := s.writeBlobTemp(ctx, content, e)
	if err != nil {
		return Receipt{}, err
	}
	defer func() { _ = s.fs.Remove(tmp) }() // normally already renamed away; a missing file is fine
	if err := ctx.Err(); err != nil {
		return Receipt{}, err
	}
	return s.commitNew(ctx, e, run, tmp)
}

// commitNew publishes a verified temporary blob, then the attachment record,
// then the run file, undoing earlier steps if a later one fails.
func (s *FileStore) commitNew(ctx context.Context, e Entry, run runFile, tmp string) (Receipt, error) {
	s.commit.Lock()
	defer s.commit.Unlock()

	id, err := s.newID()
	if err != nil {
		return Receipt{}, err
	}
	a := Attachment{
		ID: id, TaskID: e.Key.TaskID, RunID: e.Key.RunID, Filename: e.Filename,
		ContentType: e.ContentType, SHA256: e.SHA256, ByteSize: e.ByteSize, Title: e.Title,
	}

	blob := s.blobPath(e.SHA256)
	st, err := s.fs.Stat(blob)
	// created: this Put made the blob, so no other record can name it and the
	// undo may remove it.
	created := errors.Is(err, fs.ErrNotExist)
	switch {
	case err == nil && st.Mode().IsRegular() && st.Size() == e.ByteSize:
		// Content-addressed and verified when it was written: reuse it.
	case err == nil || created:
		// Missing, or damaged (then replaced by the verified copy).
		if err := s.fs.Rename(tmp, blob); err != nil {
			return Receipt{}, fmt.Errorf("deliverable: store blob %s: %w", blob, err)
		}
	default:
		return Receipt{}, fmt.Errorf("deliverable: check blob %s: %w", blob, err)
	}

	undoBlob := func(cause error) error {
		if !created {
			return cause
		}
		if err := s.fs.Remove(blob); err != nil {
			return errors.Join(cause, fmt.Errorf("deliverable: undo: remove blob %s: %w (no record names it; it is garbage and may be deleted)", blob, err))
		}
		return cause
	}

	record := s.recordPath(id)
	if err := s.writeJSON(ctx, record, attachmentRecord{Version: fileStoreVersion, Attachment: a}); err != nil {
		// The record may be in place all the same (a rename that reports
		// a failure after it took effect): it goes before its blob does.
		if _, serr := s.fs.Stat(record); !errors.Is(serr, fs.ErrNotExist) {
			if rerr := s.fs.Remove(record); rerr != nil {
				return Receipt{}, errors.Join(err, fmt.Errorf("deliverable: undo: remove attachment record %s: %w (no receipt names it; it and its blob are garbage and may be deleted)", record, rerr))
			}
		}
		return Receipt{}, undoBlob(err)
	}

	rc := entryReceipt(a, Applied, e)
	run.Attachments = append(run.Attachments, a)
	run.WorkProducts = append(run.WorkProducts, ArtifactWorkProduct(a))
	run.Receipts = append(run.Receipts, receiptEntry{Key: e.Key.IdempotencyKey, Fingerprint: e.Fingerprint, Receipt: rc})
	runPath := s.runPath(e.Key.TaskID, e.Key.RunID)
	if err := s.writeJSON(ctx, runPath, run); err != nil {
		// A rename that reports a failure after it took effect (NFS, a
		// FUSE or network afero.Fs) leaves the run file naming the
		// record: then the Put happened, and undoing it would leave a
		// receipt without its attachment. Undo only what the run file
		// is known not to name.
		now, herr := s.readRun(e.Key.TaskID, e.Key.RunID)
		if herr != nil {
			return Receipt{}, errors.Join(err, fmt.Errorf("deliverable: undo: could not read %s to tell whether it took the receipt (%w); the attachment record %s and its blob are kept (if no receipt names them they are garbage and may be deleted)", runPath, herr, record))
		}
		if re, ok := now.receipt(e.Key.IdempotencyKey); ok && re.Receipt.AttachmentID == id {
			return rc, nil
		}
		if rerr := s.fs.Remove(record); rerr != nil {
			// Keep the blob: a record must never lose its blob.
			return Receipt{}, errors.Join(err, fmt.Errorf("deliverable: undo: remove attachment record %s: %w (no receipt names it; it and its blob are garbage and may be deleted)", record, rerr))
		}
		return Receipt{}, undoBlob(err)
	}
	return rc, nil
}

// copyBufSize is the buffer through which content goes to a blob: large
// enough to keep system calls rare, small enough to keep memory flat.
const copyBufSize = 256 << 10

// onlyWriter hides an io.ReaderFrom, so that io.CopyBuffer uses its buffer.
type onlyWriter struct{ io.Writer }

// writeBlobTemp streams content into a temporary file and syncs it. content
// checks the bytes against e as they pass (see Content), so the file holds
// exactly the verified bytes and is not read back.
func (s *FileStore) writeBlobTemp(ctx context.Context, content *Content, e Entry) (string, error) {
	f, err := afero.TempFile(s.fs, filepath.Join(s.dir, "tmp"), "blob-*")
	if err != nil {
		return "", fmt.Errorf("deliverable: create temporary blob in %s: %w", filepath.Join(s.dir, "tmp"), err)
	}
	name := f.Name()
	ok := false
	defer func() {
		if !ok {
			_ = f.Close() // already failing; the close error adds nothing
			_ = s.fs.Remove(name)
		}
	}()
	n, err := io.CopyBuffer(onlyWriter{f}, ctxReader{ctx, content}, make([]byte, copyBufSize))
	if err != nil {
		return "", fmt.Errorf("deliverable: write temporary blob %s: %w", name, err)
	}
	if n != e.ByteSize { // content guarantees it; a cheap belt to its braces
		return "", fmt.Errorf("%w: wrote %d bytes of content declared as %d", ErrSizeMismatch, n, e.ByteSize)
	}
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("deliverable: sync temporary blob %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("deliverable: close temporary blob %s: %w", name, err)
	}
	ok = true
	return name, nil
}

// writeJSON atomically replaces name with the JSON encoding of v.
func (s *FileStore) writeJSON(ctx context.Context, name string, v any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("deliverable: encode %s: %w", name, err)
	}
	if err := atomicfile.Write(ctx, s.fs, name, data, 0o600, filepath.Join(s.dir, "tmp")); err != nil {
		return fmt.Errorf("deliverable: replace %s: %w", name, err)
	}
	return nil
}

// readJSON strictly decodes name into v; a missing file wraps ErrNotFound.
func (s *FileStore) readJSON(name string, v any) error {
	data, err := s.readRegular(name)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s does not exist", ErrNotFound, name)
	}
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("deliverable: decode %s: %w; the store file is damaged", name, err)
	}
	if dec.More() {
		return fmt.Errorf("deliverable: decode %s: trailing data; the store file is damaged", name)
	}
	return nil
}

// readRegular reads the store file name, which must be a regular file: a
// directory, FIFO, socket or device in its place is refused without
// reading it, and a FIFO without waiting for a writer (checked before the
// open, which does not block, and again on the file opened).
func (s *FileStore) readRegular(name string) ([]byte, error) {
	damaged := func(m fs.FileMode) error {
		return fmt.Errorf("deliverable: read %s: not a regular file (mode %s); the store file is damaged: remove it, then write the record again", name, m)
	}
	st, err := s.fs.Stat(name)
	if err != nil {
		return nil, fmt.Errorf("deliverable: read %s: %w", name, err)
	}
	if !st.Mode().IsRegular() {
		return nil, damaged(st.Mode())
	}
	f, err := s.fs.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("deliverable: read %s: %w", name, err)
	}
	defer f.Close()
	if st, err = f.Stat(); err == nil && !st.Mode().IsRegular() {
		return nil, damaged(st.Mode())
	}
	var data []byte
	if err == nil {
		data, err = io.ReadAll(f)
	}
	if err != nil {
		return nil, fmt.Errorf("deliverable: read %s: %w", name, err)
	}
	return data, nil
}

func (s *FileStore) readRun(taskID, runID string) (runFile, error) {
	name := s.runPath(taskID, runID)
	var run runFile
	err := s.readJSON(name, &run)
	switch {
	case errors.Is(err, ErrNotFound):
		return runFile{Version: fileStoreVersion, TaskID: taskID, RunID: runID}, nil
	case err != nil:
		return runFile{}, err
	case run.Version != fileStoreVersion || run.TaskID != taskID || run.RunID != runID:
		return runFile{}, fmt.Errorf("deliverable: run file %s has version %d for task %q run %q, expected version %d for task %q run %q; the store file is damaged",
			name, run.Version, clip(run.TaskID), clip(run.RunID), fileStoreVersion, clip(taskID), clip(runID))
	}
	return run, nil
}

func (r runFile) receipt(key string) (receiptEntry, bool) {
	for _, re := range r.Receipts {
		if re.Key == key {
			return re, true
		}
	}
	return receiptEntry{}, false
}

func (r runFile) duplicate(e Entry) (Attachment, bool) {
	for _, a := range r.Attachments {
		// The filename counts: a task that names output.json must be able to
		// register it even when notes.txt already holds the same bytes.
		if a.SHA256 == e.SHA256 && a.ByteSize == e.ByteSize && a.Filename == e.Filename {
			return a, true
		}
	}
	return Attachment{}, false
}

// Attachment returns the attachment record with id, or an error wrapping
// ErrNotFound. Its signature matches Tasks.Attachment, so a host may delegate to it.
func (s *FileStore) Attachment(ctx context.Context, id string) (Attachment, error) {
	if err := ctx.Err(); err != nil {
		return Attachment{}, err
	}
	canon, ok := parseUUID(id)
	if !ok {
		return Attachment{}, fmt.Errorf("%w: %q is not an attachment id", ErrNotFound, clip(id))
	}
	var rec attachmentRecord
	if err := s.readJSON(s.recordPath(canon), &rec); err != nil {
		if errors.Is(err, ErrNotFound) {
			return Attachment{}, fmt.Errorf("%w: attachment %s", ErrNotFound, canon)
		}
		return Attachment{}, err
	}
	if rec.Version != fileStoreVersion || rec.Attachment.ID != canon {
		return Attachment{}, fmt.Errorf("deliverable: attachment record %s has version %d and id %q; the store file is damaged", s.recordPath(canon), rec.Version, clip(rec.Attachment.ID))
	}
	return rec.Attachment, nil
}

// Open implements Store.
func (s *FileStore) Open(ctx context.Context, id string) (Attachment, io.ReadSeekCloser, error) {
	a, err := s.Attachment(ctx, id)
	if err != nil {
		return Attachment{}, nil, err
	}
	blob := s.blobPath(a.SHA256)
	f, err := s.fs.Open(blob)
	if err != nil {
		return Attachment{}, nil, fmt.Errorf("deliverable: open content of attachment %s (%s): %w; the store is damaged", a.ID, blob, err)
	}
	st, err := f.Stat()
	if err == nil && (!st.Mode().IsRegular() || st.Size() != a.ByteSize) {
		err = fmt.Errorf("%w: blob is %d bytes, record says %d", ErrSizeMismatch, st.Size(), a.ByteSize)
	}
	if err != nil {
		_ = f.Close() // reporting the stat failure
		return Attachment{}, nil, fmt.Errorf("deliverable: content of attachment %s (%s): %w; the store is damaged", a.ID, blob, err)
	}
	return a, f, nil
}

// newID returns a fresh random (version 4) UUID, lowercase, not yet used.
func (s *FileStore) newID() (string, error) {
	for range 4 {
		id := newUUID()
		if _, err := s.fs.Stat(s.recordPath(id)); errors.Is(err, fs.ErrNotExist) {
			return id, nil
		} else if err != nil {
			return "", fmt.Errorf("deliverable: check attachment id %s: %w", id, err)
		}
	}
	return "", fmt.Errorf("deliverable: could not pick an unused attachment id under %s", s.dir)
}

// newUUID returns a random version 4 UUID in lowercase.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error (Go 1.24+)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var out [36]byte
	hex.Encode(out[0:8], b[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], b[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], b[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], b[8:10])
	out[23] = '-'
	hex.Encode(out[24:36], b[10:16])
	return string(out[:])
}
