package deliverable_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable"
)

var errInjected = errors.New("injected fault")

// faultFs wraps an afero.Fs and fails chosen operations.
type faultFs struct {
	afero.Fs
	mu   sync.Mutex
	fail func(op, name string) bool // op: rename (target name), remove, write, sync
}

func (f *faultFs) hit(op, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil && f.fail(op, filepath.ToSlash(name)) {
		return &os.PathError{Op: op, Path: name, Err: errInjected}
	}
	return nil
}

func (f *faultFs) set(fail func(op, name string) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = fail
}

func (f *faultFs) Rename(oldname, newname string) error {
	if err := f.hit("rename", newname); err != nil {
		return err
	}
	if err := f.hit("rename-done", newname); err != nil {
		// A rename that reports a failure after it took effect (NFS's
		// retransmitted RENAME, a FUSE or network file system).
		return errors.Join(f.Fs.Rename(oldname, newname), err)
	}
	return f.Fs.Rename(oldname, newname)
}

func (f *faultFs) Remove(name string) error {
	if err := f.hit("remove", name); err != nil {
		return err
	}
	return f.Fs.Remove(name)
}

func (f *faultFs) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	file, err := f.Fs.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f}, nil
}

type faultFile struct {
	afero.File
	fs *faultFs
}

func (f *faultFile) Write(p []byte) (int, error) {
	if err := f.fs.hit("write", f.Name()); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}

func (f *faultFile) Sync() error {
	if err := f.fs.hit("sync", f.Name()); err != nil {
		return err
	}
	return f.File.Sync()
}

// contentOf returns data as the Content of entryFor(..., data).
func contentOf(data []byte) *deliverable.Content {
	return deliverable.NewContent(bytes.NewReader(data), int64(len(data)), sum(data))
}

func entryFor(task, run, key string, data []byte) deliverable.Entry {
	return deliverable.Entry{
		Key:         deliverable.Key{TaskID: task, RunID: run, IdempotencyKey: key},
		Fingerprint: "fp-" + key + "-" + sum(data)[:8],
		Filename:    "f.bin", ContentType: "application/octet-stream",
		SHA256: sum(data), ByteSize: int64(len(data)), Title: "F",
	}
}

// checkInvariants asserts that no record lacks its blob and that every run
// file names only existing records.
func checkInvariants(t *testing.T, fsys afero.Fs, dir string) {
	t.Helper()
	files := storeFiles(t, fsys, dir)
	for name, data := range files {
		switch {
		case strings.HasPrefix(name, "attachments/"):
			var rec struct {
				Attachment deliverable.Attachment `json:"attachment"`
			}
			require.NoError(t, json.Unmarshal([]byte(data), &rec))
			assert.Contains(t, files, "blobs/"+rec.Attachment.SHA256, "record %s has its blob", name)
		case strings.HasPrefix(name, "runs/"):
			var run struct {
				Attachments []deliverable.Attachment `json:"attachments"`
				Receipts    []struct {
					Receipt deliverable.Receipt `json:"receipt"`
				} `json:"receipts"`
			}
			require.NoError(t, json.Unmarshal([]byte(data), &run))
			for _, a := range run.Attachments {
				assert.Contains(t, files, "attachments/"+a.ID+".json", "run %s names an existing record", name)
			}
			for _, r := range run.Receipts {
				assert.Contains(t, files, "attachments/"+r.Receipt.AttachmentID+".json", "receipt in %s names an existing record", name)
			}
		}
	}
}

func TestFileStoreFailureLeavesNothingHalfDone(t *testing.T) {
	data := []byte("payload bytes")
	blob := "blobs/" + sum(data)
	cases := []struct {
		name string
		fail func(op, name string) bool
		// leftover lists the store subdirectories that keep one file after the
		// failure: garbage no receipt or record names.
		leftover []string
	}{
		{"writing the blob", func(op, n string) bool { return op == "write" && strings.Contains(n, "/tmp/blob-") }, nil},
		{"syncing the blob", func(op, n string) bool { return op == "sync" && strings.Contains(n, "/tmp/blob-") }, nil},
		{"publishing the blob", func(op, n string) bool { return op == "rename" && strings.Contains(n, "/blobs/") }, nil},
		{"writing the record", func(op, n string) bool { return op == "write" && strings.Contains(n, ".json.tmp-") }, nil},
		{"publishing the record", func(op, n string) bool { return op == "rename" && strings.Contains(n, "/attachments/") }, nil},
		{"publishing the run file", func(op, n string) bool { return op == "rename" && strings.Contains(n, "/runs/") }, nil},
		{"publishing the record, then removing the blob", func(op, n string) bool {
			return (op == "rename" && strings.Contains(n, "/attachments/")) || (op == "remove" && strings.Contains(n, "/blobs/"))
		}, []string{"blobs"}},
		{"publishing the run file, then removing the record", func(op, n string) bool {
			return (op == "rename" && strings.Contains(n, "/runs/")) || (op == "remove" && strings.Contains(n, "/attachments/"))
		}, []string{"attachments", "blobs"}},
		{"publishing the run file, then removing record and blob", func(op, n string) bool {
			return (op == "rename" && strings.Contains(n, "/runs/")) || op == "remove" && !strings.Contains(n, "/tmp/")
		}, []string{"attachments", "blobs"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ffs := &faultFs{Fs: afero.NewMemMapFs()}
			store, err := deliverable.NewFileStore(ffs, "/s")
			require.NoError(t, err)
			ctx := t.Context()
			e := entryFor("t", "r", "k", data)

			ffs.set(tc.fail)
			_, putErr := store.Put(ctx, e, contentOf(data))
			require.ErrorIs(t, putErr, errInjected)
			ffs.set(nil)

			checkInvariants(t, ffs, "/s")
			_, _, err = store.Lookup(ctx, e.Key)
			assert.ErrorIs(t, err, deliverable.ErrNotFound, "no receipt after a failed Put")
			assert.Empty(t, filesUnder(t, ffs, "/s", "runs"))
			assert.Empty(t, filesUnder(t, ffs, "/s", "tmp"))
			for _, sub := range []string{"blobs", "attachments"} {
				if contains(tc.leftover, sub) {
					assert.Len(t, filesUnder(t, ffs, "/s", sub), 1, sub)
					assert.ErrorContains(t, putErr, "garbage")
				} else {
					assert.Empty(t, filesUnder(t, ffs, "/s", sub), sub)
				}
			}

			// With the fault gone the same Put succeeds and is consistent.
			rc, err := store.Put(ctx, e, contentOf(data))
			require.NoError(t, err)
			assert.Equal(t, deliverable.Applied, rc.Disposition)
			checkInvariants(t, ffs, "/s")
			assert.Contains(t, storeFiles(t, ffs, "/s"), blob)
			assertHolds(t, store, rc.AttachmentID, data)
		})
	}
}

// TestFileStoreRenameFailsAfterItTookEffect: a rename into place that
// reports a failure although it happened (the blob's, the record's, the
// run file's) never leaves a receipt without its attachment nor a record
// without its blob: a run file that took the receipt is a Put that
// happened (success, the receipt it holds); a record that took effect is
// removed before its blob. A replay, and a new key for the same bytes,
// then name an attachment that opens. (An outside attack found the run
// file's case leaving a receipt whose attachment was undone.)
func TestFileStoreRenameFailsAfterItTookEffect(t *testing.T) {
	data := []byte("payload bytes")
	for _, tc := range []struct {
		name, dir string
		committed bool
	}{
		{"the blob", "/blobs/", false},
		{"the record", "/attachments/", false},
		{"the run file", "/runs/", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ffs := &faultFs{Fs: afero.NewMemMapFs()}
			store, err := deliverable.NewFileStore(ffs, "/s")
			require.NoError(t, err)
			ctx := t.Context()
			e := entryFor("t", "r", "k", data)
			once := false
			ffs.set(func(op, n string) bool {
				if op == "rename-done" && strings.Contains(n, tc.dir) && !once {
					once = true
					return true
				}
				return false
			})
			rc, putErr := store.Put(ctx, e, contentOf(data))
			require.True(t, once, "the fault never hit")
			ffs.set(nil)
			checkInvariants(t, ffs, "/s")
			if tc.committed {
				require.NoError(t, putErr, "the run file holds the receipt: the Put happened")
				assert.Equal(t, deliverable.Applied, rc.Disposition)
			} else {
				require.ErrorIs(t, putErr, errInjected)
				_, _, err := store.Lookup(ctx, e.Key)
				require.ErrorIs(t, err, deliverable.ErrNotFound, "no receipt after a failed Put")
				rc, err = store.Put(ctx, e, contentOf(data))
				require.NoError(t, err, "the same Put again")
			}
			again, err := store.Put(ctx, e, contentOf(data))
			require.NoError(t, err, "a replay")
			assert.Equal(t, rc.AttachmentID, again.AttachmentID)
			other, err := store.Put(ctx, entryFor("t", "r", "k2", data), contentOf(data))
			require.NoError(t, err, "a new key for the same bytes")
			assert.Equal(t, rc.AttachmentID, other.AttachmentID)
			assertHolds(t, store, rc.AttachmentID, data)
			checkInvariants(t, ffs, "/s")
		})
	}
}

// assertHolds asserts that the attachment id opens and holds data.
func assertHolds(t *testing.T, store *deliverable.FileStore, id string, data []byte) {
	t.Helper()
	_, content, err := store.Open(t.Context(), id)
	require.NoError(t, err, "attachment %s opens", id)
	got, err := io.ReadAll(content)
	require.NoError(t, errors.Join(err, content.Close()))
	assert.Equal(t, data, got)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func TestFileStoreUndoKeepsSharedBlob(t *testing.T) {
	ffs := &faultFs{Fs: afero.NewMemMapFs()}
	store, err := deliverable.NewFileStore(ffs, "/s")
	require.NoError(t, err)
	ctx := t.Context()
	data := []byte("shared")

	a, err := store.Put(ctx, entryFor("t", "run-a", "k", data), contentOf(data))
	require.NoError(t, err)

	ffs.set(func(op, n string) bool { return op == "rename" && strings.Contains(n, "/runs/") })
	_, err = store.Put(ctx, entryFor("t", "run-b", "k", data), contentOf(data))
	require.ErrorIs(t, err, errInjected)
	ffs.set(nil)

	checkInvariants(t, ffs, "/s")
	_, content, err := store.Open(ctx, a.AttachmentID)
	require.NoError(t, err, "run a's blob survives run b's undo")
	require.NoError(t, content.Close())
}

// readCountFs counts the opens of temporary blobs that are not for writing.
type readCountFs struct {
	afero.Fs
	mu    sync.Mutex
	reads int
}

func (f *readCountFs) Open(name string) (afero.File, error) {
	f.count(name, os.O_RDONLY)
	return f.Fs.Open(name)
}

func (f *readCountFs) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	f.count(name, flag)
	return f.Fs.OpenFile(name, flag, perm)
}

func (f *readCountFs) count(name string, flag int) {
	if strings.Contains(filepath.ToSlash(name), "/tmp/blob-") && flag&(os.O_WRONLY|os.O_RDWR) == 0 {
		f.mu.Lock()
		f.reads++
		f.mu.Unlock()
	}
}

// The content checks the bytes on their way into the temporary blob; the
// store does not read its copy back.
func TestFileStoreDoesNotRereadBlob(t *testing.T) {
	fsys := &readCountFs{Fs: afero.NewMemMapFs()}
	store, err := deliverable.NewFileStore(fsys, "/s")
	require.NoError(t, err)
	data := []byte("written once, hashed once")
	rc, err := store.Put(t.Context(), entryFor("t", "r", "k", data), contentOf(data))
	require.NoError(t, err)
	assert.Equal(t, deliverable.Applied, rc.Disposition)
	assert.Zero(t, fsys.reads, "temporary blob opened for reading")
	got, err := afero.ReadFile(fsys, "/s/blobs/"+sum(data))
	require.NoError(t, err)
	assert.Equal(t, data, got)
}

func TestFileStorePutChecksItsContent(t *testing.T) {
	fsys := afero.NewMemMapFs()
	store, err := deliverable.NewFileStore(fsys, "/s")
	require.NoError(t, err)
	data := []byte("declared")
	e := entryFor("t", "r", "k", data)
	for name, c := range map[string]*deliverable.Content{
		"nil":          nil,
		"other size":   deliverable.NewContent(bytes.NewReader(data), e.ByteSize+1, e.SHA256),
		"other hash":   deliverable.NewContent(bytes.NewReader(data), e.ByteSize, sum([]byte("other"))),
		"already read": func() *deliverable.Content { c := contentOf(data); _, _ = c.Read(make([]byte, 1)); return c }(),
	} {
		_, err := store.Put(t.Context(), e, c)
		assert.ErrorIs(t, err, deliverable.ErrInvalidRequest, name)
	}
	assert.Empty(t, filesUnder(t, fsys, "/s", "blobs"))
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func TestFileStorePutChecksContent(t *testing.T) {
	data := []byte("twelve bytes")
	cases := []struct {
		name    string
		content io.Reader
		want    error
	}{
		{"short", strings.NewReader("twelve"), deliverable.ErrSizeMismatch},
		{"long", strings.NewReader("twelve bytes and more"), deliverable.ErrSizeMismatch},
		{"other bytes", strings.NewReader("TWELVE BYTES"), deliverable.ErrHashMismatch},
		{"read error", errReader{errInjected}, errInjected},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fsys := afero.NewMemMapFs()
			store, err := deliverable.NewFileStore(fsys, "/s")
			require.NoError(t, err)
			_, err = store.Put(t.Context(), entryFor("t", "r", "k", data), deliverable.NewContent(tc.content, int64(len(data)), sum(data)))
			assert.ErrorIs(t, err, tc.want)
			assert.Empty(t, filesUnder(t, fsys, "/s", "blobs"))
			assert.Empty(t, filesUnder(t, fsys, "/s", "runs"))
			assert.Empty(t, filesUnder(t, fsys, "/s", "tmp"))
		})
	}
}

func TestFileStoreLookups(t *testing.T) {
	fsys := afero.NewMemMapFs()
	store, err := deliverable.NewFileStore(fsys, "/s")
	require.NoError(t, err)
	ctx := t.Context()
	data := []byte("content")
	rc, err := store.Put(ctx, entryFor("t", "r", "k", data), contentOf(data))
	require.NoError(t, err)

	_, _, err = store.Lookup(ctx, deliverable.Key{TaskID: "t", RunID: "r", IdempotencyKey: "other"})
	assert.ErrorIs(t, err, deliverable.ErrNotFound)
	got, fp, err := store.Lookup(ctx, deliverable.Key{TaskID: "t", RunID: "r", IdempotencyKey: "k"})
	require.NoError(t, err)
	assert.Equal(t, rc, got)
	assert.Equal(t, entryFor("t", "r", "k", data).Fingerprint, fp)

	a, err := store.Attachment(ctx, strings.ToUpper(rc.AttachmentID))
	require.NoError(t, err, "ids are case-insensitive")
	assert.Equal(t, rc.AttachmentID, a.ID)

	for _, id := range []string{"", "../../etc/passwd", "00000000-0000-4000-8000-000000000000", rc.AttachmentID + "x"} {
		_, _, err := store.Open(ctx, id)
		assert.ErrorIs(t, err, deliverable.ErrNotFound, "id %q", id)
	}

	// A damaged record is an error, not "not found".
	require.NoError(t, afero.WriteFile(fsys, "/s/attachments/"+rc.AttachmentID+".json", []byte(`{"version":1,"attachment":{},"extra":1}`), 0o600))
	_, err = store.Attachment(ctx, rc.AttachmentID)
	require.Error(t, err)
	assert.NotErrorIs(t, err, deliverable.ErrNotFound)
	assert.ErrorContains(t, err, "damaged")

	// A missing blob is an error, not "not found".
	rc2, err := store.Put(ctx, entryFor("t", "r", "k2", []byte("x")), contentOf([]byte("x")))
	require.NoError(t, err)
	require.NoError(t, fsys.Remove("/s/blobs/"+rc2.SHA256))
	_, _, err = store.Open(ctx, rc2.AttachmentID)
	require.Error(t, err)
	assert.NotErrorIs(t, err, deliverable.ErrNotFound)
}

func TestFileStoreRejectsBadInput(t *testing.T) {
	_, err := deliverable.NewFileStore(nil, "/s")
	assert.ErrorIs(t, err, deliverable.ErrInvalidRequest)
	_, err = deliverable.NewFileStore(afero.NewMemMapFs(), "")
	assert.ErrorIs(t, err, deliverable.ErrInvalidRequest)

	store, err := deliverable.NewFileStore(afero.NewMemMapFs(), "/s")
	require.NoError(t, err)
	data := []byte("d")
	for name, mutate := range map[string]func(*deliverable.Entry){
		"no task":          func(e *deliverable.Entry) { e.Key.TaskID = "" },
		"no fingerprint":   func(e *deliverable.Entry) { e.Fingerprint = "" },
		"upper-case hash":  func(e *deliverable.Entry) { e.SHA256 = strings.ToUpper(e.SHA256) },
		"size zero":        func(e *deliverable.Entry) { e.ByteSize = 0 },
		"no content type":  func(e *deliverable.Entry) { e.ContentType = "" },
		"no filename":      func(e *deliverable.Entry) { e.Filename = "" },
		"no idempotencKey": func(e *deliverable.Entry) { e.Key.IdempotencyKey = "" },
	} {
		e := entryFor("t", "r", "k", data)
		mutate(&e)
		_, err := store.Put(t.Context(), e, contentOf(data))
		assert.Error(t, err, name)
	}
}

// blockingReader blocks until released, to hold a key's lock.
type blockingReader struct {
	started chan struct{}
	release chan struct{}
	r       io.Reader
	once    sync.Once
}

func (b *blockingReader) Read(p []byte) (int, error) {
	b.once.Do(func() { close(b.started) })
	<-b.release
	return b.r.Read(p)
}

func TestFileStoreWaitForKeyHonoursContext(t *testing.T) {
	store, err := deliverable.NewFileStore(afero.NewMemMapFs(), "/s")
	require.NoError(t, err)
	data := []byte("slow")
	e := entryFor("t", "r", "k", data)
	br := &blockingReader{started: make(chan struct{}), release: make(chan struct{}), r: bytes.NewReader(data)}

	first := make(chan error, 1)
	go func() {
		_, err := store.Put(t.Context(), e, deliverable.NewContent(br, e.ByteSize, e.SHA256))
		first <- err
	}()
	<-br.started

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err = store.Put(ctx, e, contentOf(data))
	assert.ErrorIs(t, err, context.DeadlineExceeded, "waiting for the key gives up with the context")

	close(br.release)
	require.NoError(t, <-first)

	cancelled, cancelNow := context.WithCancel(t.Context())
	cancelNow()
	_, err = store.Put(cancelled, entryFor("t", "r", "k2", data), contentOf(data))
	assert.ErrorIs(t, err, context.Canceled)
}
