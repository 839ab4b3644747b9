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
	"syscall"

	"github.com/spf13/afero"

	"github.com/airlockdev/airlock/internal/digest"
	"github.com/airlockdev/airlock/internal/flock"
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
//	locks/                 lock files (flock(2)): "store", and "task-<hash>" per task
//	tmp/                   files being written; renamed into place when complete
//
// Every file is written to tmp/, synced, and renamed into place, so a reader
// sees the old version or the new one. A Put writes, in this order, the blob
// (its Content checks size and hash as the bytes are written, and a blob
// that does not match is removed, never published; it is not read back),
// the attachment record, and the run file; the run file is the commit point.
// The verified blob is published over whatever is at its name, a copy
// written earlier included (it may have been damaged since; a Duplicate
// Put publishes its copy too). If a later step fails the
// earlier ones are undone in reverse order (record, then the blob if this Put
// created it). A rename that reports a failure after it took effect (NFS,
// a FUSE or network afero.Fs) is read back: a run file that holds the
// receipt is a Put that happened (it returns the receipt), and a record
// in place is removed before its blob. If an undo itself fails, what remains is never a record
// without its blob: it is a record no receipt names (whose id was never
// returned), or a blob no record names (verified when written; a later Put
// of the same content replaces it). Both are unreferenced garbage and may be
// deleted while no FileStore runs; the error returned says which file was
// left. Files are synced before they are renamed, directories are not: which
// renames survive a power loss is up to the file system. A record file
// that is not a regular file (a directory, a FIFO, a device) is a damaged
// store file: reading it fails at once with an error naming it, and never
// waits on a FIFO. A full file system fails the write with an error that
// names the file and the store and says to free space; the same call
// succeeds once there is room (sandbox.Retryable says false: the condition
// does not clear by itself).
//
// Temporary files: a writer holds flock(2) on its temporary file until the
// file is renamed into place or removed (it is locked under a name of its
// own, ".new-…", before it gets its working name). When a FileStore on the
// operating system's file system is made, it removes the working names in
// tmp/ whose lock is free: the files of writers that died (a process
// killed in the middle of a Put). A ".new-…" file, and a temporary file of
// an earlier version of this package (never locked), goes once it is a day
// old; any other name is left alone.
//
// Concurrency: Puts for one task and run are serialized within one
// FileStore value, and every read-modify-write of a run file (the commit
// of a Put, after its content was read; RecordWorkProduct) holds the store
// lock. On the operating system's file system (OpenFileStore, or
// NewFileStore with afero.NewOsFs), the store lock and FileTasks' locks
// are also flock(2) locks on files of locks/, so FileStores of several
// processes, or several in one process, may share a directory: each Put's
// receipt is kept, and concurrent Puts of one Key store one receipt. On
// another afero.Fs the locks hold within one FileStore value.
type FileStore struct {
	fs           afero.Fs
	dir          string
	crossProcess bool        // on the OS's file system: flock(2) too, and tmp/ is swept
	runs         keylock.Map // Put and RecordWorkProduct: by run file
	storeLk      keylock.Map // the store lock's in-process part: one key
	tasks        keylock.Map // FileTasks: by task id
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
	_, osFs := fsys.(*afero.OsFs)
	s := &FileStore{fs: fsys, dir: filepath.Clean(dir), crossProcess: osFs && flock.Supported}
	for _, d := range []string{"blobs", "attachments", "runs", "workproducts", "tasks", "tmp", "locks"} {
		p := filepath.Join(s.dir, d)
		if err := fsys.MkdirAll(p, 0o700); err != nil {
			return nil, s.ioError(err, "create store directory %s", p)
		}
	}
	if s.crossProcess {
		s.sweepTemp()
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
// content on their way to a temporary blob, which is synced and renamed
// into place only when content ended with io.EOF, and otherwise removed.
// The content is read before the store lock is taken, so that a slow
// workspace holds no other Put back; the run file is then read again under
// the lock, and a receipt another process committed meanwhile wins.
func (s *FileStore) Put(ctx context.Context, e Entry, content *Content) (Receipt, error) {
	if err := checkEntry(e, content); err != nil {
		return Receipt{}, err
	}
	unlock, err := s.runs.Lock(ctx, s.runPath(e.Key.TaskID, e.Key.RunID))
	if err != nil {
		return Receipt{}, err
	}
	defer unlock()

	if _, rc, done, err := s.stored(e); done {
		return rc, err
	}
	// Every Put verifies and keeps its content, a Duplicate too: a
	// Duplicate receipt still promises that the registered file is what
	// was declared, and its copy replaces a blob that may have been
	// damaged since it was written.
	tmp, err := s.writeBlobTemp(ctx, content, e)
	if err != nil {
		return Receipt{}, err
	}
	defer tmp.discard() // normally already published
	if err := ctx.Err(); err != nil {
		return Receipt{}, err
	}
	return s.commit(ctx, e, tmp)
}

// stored reads e's run file; done says Put's answer is already known: a
// failed read, or the receipt stored under e's key (or a conflict when the
// request differs).
func (s *FileStore) stored(e Entry) (run runFile, rc Receipt, done bool, err error) {
	if run, err = s.readRun(e.Key.TaskID, e.Key.RunID); err != nil {
		return run, Receipt{}, true, err
	}
	if re, ok := run.receipt(e.Key.IdempotencyKey); ok {
		rc, err = storedReceipt(re, e)
		return run, rc, true, err
	}
	return run, Receipt{}, false, nil
}

// storedReceipt is Put's answer for a key already stored: its receipt, or
// a conflict when the request differs.
func storedReceipt(re receiptEntry, e Entry) (Receipt, error) {
	if re.Fingerprint != e.Fingerprint {
		return Receipt{}, fmt.Errorf("%w: key %q was used by this task and run for attachment %s (%s); use a new idempotency key for a different file",
			ErrIdempotencyConflict, clip(e.Key.IdempotencyKey), re.Receipt.AttachmentID, re.Receipt.Filename)
	}
	return re.Receipt, nil
}

// commit publishes a verified temporary blob and records the Put under the
// store lock: the run file is read again (another process may have
// written it), then the blob replaces whatever is at its name (the
// verified bytes, never a copy written earlier and not checked since),
// then a Duplicate receipt, or a new attachment (commitNew).
func (s *FileStore) commit(ctx context.Context, e Entry, tmp *tempFile) (Receipt, error) {
	unlock, err := s.lockStore(ctx)
	if err != nil {
		return Receipt{}, err
	}
	defer unlock()
	run, rc, done, err := s.stored(e)
	if done {
		return rc, err
	}

	blob := s.blobPath(e.SHA256)
	_, err = s.fs.Stat(blob)
	// created: this Put made the blob, so no other record can name it and the
	// undo may remove it.
	created := errors.Is(err, fs.ErrNotExist)
	if err != nil && !created {
		return Receipt{}, fmt.Errorf("deliverable: check blob %s: %w", blob, err)
	}
	if err := tmp.publish(blob); err != nil {
		return Receipt{}, s.ioError(err, "store blob %s", blob)
	}

	if a, ok := run.duplicate(e); ok {
		// The blob stays whatever happens next: the attachment names it.
		rc := entryReceipt(a, Duplicate, e)
		run.Receipts = append(run.Receipts, receiptEntry{Key: e.Key.IdempotencyKey, Fingerprint: e.Fingerprint, Receipt: rc})
		if err := s.writeJSON(ctx, s.runPath(e.Key.TaskID, e.Key.RunID), run); err != nil {
			return Receipt{}, err
		}
		return rc, nil
	}
	return s.commitNew(ctx, e, run, blob, created)
}

// commitNew records a new attachment whose blob is in place: the
// attachment record, then the run file, undoing earlier steps if a later
// one fails (the blob only when created says this Put made it).
func (s *FileStore) commitNew(ctx context.Context, e Entry, run runFile, blob string, created bool) (Receipt, error) {
	id, err := s.newID()
	if err != nil {
		return Receipt{}, err
	}
	a := Attachment{
		ID: id, TaskID: e.Key.TaskID, RunID: e.Key.RunID, Filename: e.Filename,
		ContentType: e.ContentType, SHA256: e.SHA256, ByteSize: e.ByteSize, Title: e.Title, ContentRef: e.ContentRef,
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
// exactly the verified bytes and is not read back. The caller publishes or
// discards it.
func (s *FileStore) writeBlobTemp(ctx context.Context, content *Content, e Entry) (*tempFile, error) {
	t, err := s.createTemp("blob-")
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			t.discard()
		}
	}()
	n, err := io.CopyBuffer(onlyWriter{t.f}, ctxReader{ctx, content}, make([]byte, copyBufSize))
	if err != nil {
		return nil, s.ioError(err, "write temporary blob %s", t.name)
	}
	if n != e.ByteSize { // content guarantees it; a cheap belt to its braces
		return nil, fmt.Errorf("%w: wrote %d bytes of content declared as %d", ErrSizeMismatch, n, e.ByteSize)
	}
	if err := t.f.Sync(); err != nil {
		return nil, s.ioError(err, "sync temporary blob %s", t.name)
	}
	ok = true
	return t, nil
}

// writeJSON atomically replaces name with the JSON encoding of v: a
// temporary file of tmp/, written, synced and renamed over name.
func (s *FileStore) writeJSON(ctx context.Context, name string, v any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("deliverable: encode %s: %w", name, err)
	}
	t, err := s.createTemp("." + filepath.Base(name) + ".tmp-")
	if err != nil {
		return err
	}
	defer t.discard() // normally already published
	if _, err := t.f.Write(data); err != nil {
		return s.ioError(err, "replace %s: write temporary file %s", name, t.name)
	}
	if err := t.f.Sync(); err != nil {
		return s.ioError(err, "replace %s: sync temporary file %s", name, t.name)
	}
	if err := ctx.Err(); err != nil { // a cancelled write never publishes
		return err
	}
	if err := t.publish(name); err != nil {
		return s.ioError(err, "replace %s", name)
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
		// The filename and the path count: a task that names output.json
		// must be able to register it even when notes.txt already holds
		// the same bytes, and one that names en/report.pdf and
		// de/report.pdf each of them, whatever their bytes.
		if a.SHA256 == e.SHA256 && a.ByteSize == e.ByteSize && a.Filename == e.Filename && a.ContentRef == e.ContentRef {
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
