package deliverable_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable"
)

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestRegisterStoresVerifiedFile(t *testing.T) {
	f := newFixture(t)
	data := []byte("a,b\n1,2\n")
	writeFile(t, f.ws, "out/results.csv", data)

	rc, err := f.reg.Register(t.Context(), local(t, f.ws), "task-1", "run-1", requestFor("out/results.csv", "k1", data))
	require.NoError(t, err)

	assert.Regexp(t, uuidV4, rc.AttachmentID)
	assert.Equal(t, deliverable.Receipt{
		AttachmentID: rc.AttachmentID, TaskID: "task-1", RunID: "run-1", Filename: "results.csv",
		ContentType: "text/csv", SHA256: sum(data), ByteSize: int64(len(data)),
		ContentPath:   "/api/attachments/" + rc.AttachmentID + "/content",
		DownloadPath:  "/api/attachments/" + rc.AttachmentID + "/content?download=1",
		Disposition:   deliverable.Applied,
		WorkProductID: rc.AttachmentID,
	}, rc)

	a, content, err := f.store.Open(t.Context(), rc.AttachmentID)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, content.Close()) })
	got, err := io.ReadAll(content)
	require.NoError(t, err)
	assert.Equal(t, data, got)
	assert.Equal(t, "Results", a.Title)
	assert.Equal(t, []string{sum(data)}, filesUnder(t, f.fs, f.dir, "blobs"))
	assert.Empty(t, filesUnder(t, f.fs, f.dir, "tmp"))
}

func TestRegisterNormalizesFields(t *testing.T) {
	f := newFixture(t)
	data := []byte("hello")
	writeFile(t, f.ws, "r.txt", data)
	req := deliverable.Request{
		// A path is not trimmed (white space around it would be part of the
		// name), but "./" is the same file.
		ContentRef: "./r.txt", Filename: " r.txt\u00a0", ContentType: "Text/Plain; Charset=UTF-8",
		ByteSize: 5, SHA256: " " + strings.ToUpper(sum(data)) + " ", Title: "  Greeting ", IdempotencyKey: " k ",
	}
	rc, err := f.reg.Register(t.Context(), local(t, f.ws), "t", "r", req)
	require.NoError(t, err)
	assert.Equal(t, "r.txt", rc.Filename)
	assert.Equal(t, "text/plain; charset=UTF-8", rc.ContentType)
	assert.Equal(t, sum(data), rc.SHA256)

	// The trimmed key is the key: the same request replays.
	again, err := f.reg.Register(t.Context(), local(t, f.ws), "t", "r", req)
	require.NoError(t, err)
	assert.Equal(t, rc, again)
}

// pathCase builds a workspace (and an outside directory) and names the
// ContentRef to register. Cases marked plain would succeed without the
// check under test, so they cannot pass for the wrong reason.
type pathCase struct {
	name  string
	setup func(t *testing.T, ws, outside string) (ref string, data []byte)
	want  error
}

func TestRegisterRefusesPaths(t *testing.T) {
	good := []byte("col\n1\n")
	secret := []byte("secret\n")
	cases := []pathCase{
		{"symlink leaf to a workspace file (fails even without confinement)", func(t *testing.T, ws, _ string) (string, []byte) {
			writeFile(t, ws, "real.csv", good)
			require.NoError(t, os.Symlink("real.csv", filepath.Join(ws, "link.csv")))
			return "link.csv", good
		}, deliverable.ErrSymlinkDenied},
		{"symlink leaf to an outside file", func(t *testing.T, ws, out string) (string, []byte) {
			require.NoError(t, os.Symlink(writeFile(t, out, "secret.csv", secret), filepath.Join(ws, "link.csv")))
			return "link.csv", secret
		}, deliverable.ErrSymlinkDenied},
		{"symlink in a middle component to a workspace dir (fails even without confinement)", func(t *testing.T, ws, _ string) (string, []byte) {
			writeFile(t, ws, "real/r.csv", good)
			require.NoError(t, os.Symlink("real", filepath.Join(ws, "d")))
			return "d/r.csv", good
		}, deliverable.ErrSymlinkDenied},
		{"symlink in a middle component to an outside dir", func(t *testing.T, ws, out string) (string, []byte) {
			writeFile(t, out, "secret.csv", secret)
			require.NoError(t, os.Symlink(out, filepath.Join(ws, "d")))
			return "d/secret.csv", secret
		}, deliverable.ErrSymlinkDenied},
		{"dot-dot out of the workspace", func(t *testing.T, ws, out string) (string, []byte) {
			writeFile(t, filepath.Dir(ws), "secret.csv", secret)
			return "../secret.csv", secret
		}, deliverable.ErrPathDenied},
		{"dot-dot that stays inside (fails even without confinement)", func(t *testing.T, ws, _ string) (string, []byte) {
			writeFile(t, ws, "a/r.csv", good)
			return "a/../a/r.csv", good
		}, deliverable.ErrPathDenied},
		{"absolute path of a workspace file (fails even without confinement)", func(t *testing.T, ws, _ string) (string, []byte) {
			return writeFile(t, ws, "r.csv", good), good
		}, deliverable.ErrPathDenied},
		{"absolute path outside", func(t *testing.T, _, out string) (string, []byte) {
			return writeFile(t, out, "secret.csv", secret), secret
		}, deliverable.ErrPathDenied},
		{"URL", func(t *testing.T, ws, _ string) (string, []byte) {
			writeFile(t, ws, "r.csv", good)
			return "https://example.com/r.csv", good
		}, deliverable.ErrPathDenied},
		{"file URL", func(t *testing.T, ws, _ string) (string, []byte) {
			writeFile(t, ws, "r.csv", good)
			return "file:r.csv", good
		}, deliverable.ErrPathDenied},
		{"home path", func(t *testing.T, ws, _ string) (string, []byte) {
			writeFile(t, ws, "r.csv", good)
			return "~/r.csv", good
		}, deliverable.ErrPathDenied},
		{"backslash", func(t *testing.T, ws, _ string) (string, []byte) {
			writeFile(t, ws, "a/r.csv", good)
			return `a\r.csv`, good
		}, deliverable.ErrPathDenied},
		{"NUL", func(t *testing.T, ws, _ string) (string, []byte) {
			writeFile(t, ws, "r.csv", good)
			return "r.csv\x00", good
		}, deliverable.ErrPathDenied},
		{"workspace root", func(t *testing.T, ws, _ string) (string, []byte) {
			return ".", good
		}, deliverable.ErrPathDenied},
		{"directory", func(t *testing.T, ws, _ string) (string, []byte) {
			writeFile(t, ws, "dir/r.csv", good)
			return "dir", good
		}, deliverable.ErrPathDenied},
		{"hard link to a workspace file (fails even without confinement)", func(t *testing.T, ws, _ string) (string, []byte) {
			require.NoError(t, os.Link(writeFile(t, ws, "r.csv", good), filepath.Join(ws, "h.csv")))
			return "h.csv", good
		}, deliverable.ErrHardlinkDenied},
		{"hard link to an outside file", func(t *testing.T, ws, out string) (string, []byte) {
			require.NoError(t, os.Link(writeFile(t, out, "secret.csv", secret), filepath.Join(ws, "h.csv")))
			return "h.csv", secret
		}, deliverable.ErrHardlinkDenied},
		{"the other name of a hard link", func(t *testing.T, ws, _ string) (string, []byte) {
			require.NoError(t, os.Link(writeFile(t, ws, "r.csv", good), filepath.Join(ws, "h.csv")))
			return "r.csv", good
		}, deliverable.ErrHardlinkDenied},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			base := t.TempDir()
			f.ws = filepath.Join(base, "ws")
			outside := filepath.Join(base, "outside")
			require.NoError(t, os.Mkdir(f.ws, 0o755))
			require.NoError(t, os.Mkdir(outside, 0o755))
			ref, data := tc.setup(t, f.ws, outside)
			req := requestFor(ref, "k", data)
			req.Filename = "r.csv"

			_, err := f.reg.Register(t.Context(), local(t, f.ws), "t", "r", req)
			require.Error(t, err)
			assert.ErrorIs(t, err, tc.want)
			var pe *fs.PathError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, ref, pe.Path)
			assert.Empty(t, filesUnder(t, f.fs, f.dir, "blobs"), "nothing stored")
			assert.Empty(t, filesUnder(t, f.fs, f.dir, "runs"), "nothing stored")
		})
	}
}

func TestRegisterMissingFile(t *testing.T) {
	f := newFixture(t)
	_, err := f.reg.Register(t.Context(), local(t, f.ws), "t", "r", requestFor("nope.csv", "k", []byte("x")))
	assert.ErrorIs(t, err, fs.ErrNotExist)
	var pe *fs.PathError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "nope.csv", pe.Path)
}

func TestRegisterVerifiesContent(t *testing.T) {
	data := []byte("0123456789")
	cases := []struct {
		name   string
		mutate func(*deliverable.Request)
		want   error
	}{
		{"size larger than the file", func(r *deliverable.Request) { r.ByteSize++ }, deliverable.ErrSizeMismatch},
		{"size smaller than the file", func(r *deliverable.Request) { r.ByteSize-- }, deliverable.ErrSizeMismatch},
		{"wrong hash", func(r *deliverable.Request) { r.SHA256 = sum([]byte("other")) }, deliverable.ErrHashMismatch},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			writeFile(t, f.ws, "d.bin", data)
			req := requestFor("d.bin", "k", data)
			tc.mutate(&req)
			_, err := f.reg.Register(t.Context(), local(t, f.ws), "t", "r", req)
			assert.ErrorIs(t, err, tc.want)
			var pe *fs.PathError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, "d.bin", pe.Path)
			assert.Empty(t, filesUnder(t, f.fs, f.dir, "blobs"))
			assert.Empty(t, filesUnder(t, f.fs, f.dir, "attachments"))
			assert.Empty(t, filesUnder(t, f.fs, f.dir, "runs"))
			assert.Empty(t, filesUnder(t, f.fs, f.dir, "tmp"))
		})
	}
}

func TestRegisterRejectsInvalidRequests(t *testing.T) {
	data := []byte("x,y\n")
	cases := []struct {
		name   string
		mutate func(*deliverable.Request)
		want   error
	}{
		{"filename with slash", func(r *deliverable.Request) { r.Filename = "a/r.csv" }, deliverable.ErrInvalidRequest},
		{"filename with backslash", func(r *deliverable.Request) { r.Filename = `a\r.csv` }, deliverable.ErrInvalidRequest},
		{"filename dot-dot", func(r *deliverable.Request) { r.Filename = ".." }, deliverable.ErrInvalidRequest},
		{"filename with newline", func(r *deliverable.Request) { r.Filename = "r\n.csv" }, deliverable.ErrInvalidRequest},
		{"filename with bidi override", func(r *deliverable.Request) { r.Filename = "r\u202Evsc.exe" }, deliverable.ErrInvalidRequest},
		{"filename too long", func(r *deliverable.Request) { r.Filename = strings.Repeat("a", 256) }, deliverable.ErrInvalidRequest},
		{"filename blank", func(r *deliverable.Request) { r.Filename = "   " }, deliverable.ErrInvalidRequest},
		{"filename not UTF-8", func(r *deliverable.Request) { r.Filename = "r\xff.csv" }, deliverable.ErrInvalidRequest},
		{"title empty", func(r *deliverable.Request) { r.Title = "" }, deliverable.ErrInvalidRequest},
		{"title too long", func(r *deliverable.Request) { r.Title = strings.Repeat("t", 513) }, deliverable.ErrInvalidRequest},
		{"title with control", func(r *deliverable.Request) { r.Title = "a\x1bb" }, deliverable.ErrInvalidRequest},
		{"key empty", func(r *deliverable.Request) { r.IdempotencyKey = " " }, deliverable.ErrInvalidRequest},
		{"content type empty", func(r *deliverable.Request) { r.ContentType = "" }, deliverable.ErrInvalidRequest},
		{"content type not a media type", func(r *deliverable.Request) { r.ContentType = "csv please" }, deliverable.ErrInvalidRequest},
		{"sha256 short", func(r *deliverable.Request) { r.SHA256 = r.SHA256[:63] }, deliverable.ErrInvalidRequest},
		{"sha256 not hex", func(r *deliverable.Request) { r.SHA256 = strings.Repeat("g", 64) }, deliverable.ErrInvalidRequest},
		{"size zero", func(r *deliverable.Request) { r.ByteSize = 0 }, deliverable.ErrSizeDenied},
		{"size negative", func(r *deliverable.Request) { r.ByteSize = -1 }, deliverable.ErrSizeDenied},
		{"size over the default limit", func(r *deliverable.Request) { r.ByteSize = deliverable.DefaultMaxBytes + 1 }, deliverable.ErrSizeDenied},
		{"content ref empty", func(r *deliverable.Request) { r.ContentRef = "" }, deliverable.ErrPathDenied},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			writeFile(t, f.ws, "r.csv", data)
			req := requestFor("r.csv", "k", data)
			tc.mutate(&req)
			_, err := f.reg.Register(t.Context(), local(t, f.ws), "t", "r", req)
			assert.ErrorIs(t, err, tc.want)
			assert.Empty(t, filesUnder(t, f.fs, f.dir, "runs"))
		})
	}
}

func TestRegisterIDsAndConfig(t *testing.T) {
	f := newFixture(t)
	data := []byte("abc")
	writeFile(t, f.ws, "r.csv", data)
	ctx := t.Context()

	ws := local(t, f.ws)
	for _, tc := range []struct {
		name, task, run string
		reg             *deliverable.Registrar
		ws              deliverable.Workspace
		want            string
	}{
		{"empty task id", "", "r", f.reg, ws, "deliverable: register: task id is empty"},
		{"control character in run id", "t", "r\x01x", f.reg, ws, `deliverable: register: run id "r\x01x" contains the control character U+0001`},
		{"host ids are not trimmed, so spaces are refused", " t", "r", f.reg, ws, `deliverable: register: task id " t" has surrounding white space`},
		{"no store", "t", "r", &deliverable.Registrar{}, ws, "deliverable: register: Registrar.Store is nil; set it (for example to a FileStore)"},
		{"negative MaxBytes", "t", "r", &deliverable.Registrar{Store: f.store, MaxBytes: -1}, ws, "deliverable: register: Registrar.MaxBytes is -1; use 0 for the default or a positive limit"},
		{"no workspace", "t", "r", f.reg, nil, "deliverable: register: the workspace is nil; pass one from LocalWorkspace or RemoteWorkspace"},
	} {
		_, err := tc.reg.Register(ctx, tc.ws, tc.task, tc.run, requestFor("r.csv", "k", data))
		requireHostError(t, err)
		assert.EqualError(t, err, tc.want, tc.name)
	}

	// MaxBytes changes the limit.
	_, err := (&deliverable.Registrar{Store: f.store, MaxBytes: 2}).Register(ctx, local(t, f.ws), "t", "r", requestFor("r.csv", "k", data))
	assert.ErrorIs(t, err, deliverable.ErrSizeDenied, "3 bytes over MaxBytes 2")
	_, err = (&deliverable.Registrar{Store: f.store, MaxBytes: 3}).Register(ctx, local(t, f.ws), "t", "r", requestFor("r.csv", "k", data))
	assert.NoError(t, err, "3 bytes within MaxBytes 3")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = f.reg.Register(cancelled, local(t, f.ws), "t", "r", requestFor("r.csv", "k2", data))
	assert.ErrorIs(t, err, context.Canceled)
	requireHostError(t, err)
}

func TestRegisterReplayWritesNothing(t *testing.T) {
	f := newFixture(t)
	data := []byte("report body")
	p := writeFile(t, f.ws, "report.txt", data)
	req := requestFor("report.txt", "key-1", data)
	ctx := t.Context()

	first, err := f.reg.Register(ctx, local(t, f.ws), "t", "r", req)
	require.NoError(t, err)
	before := storeFiles(t, f.fs, f.dir)

	// The file is gone: a replay must not need it.
	require.NoError(t, os.Remove(p))
	again, err := f.reg.Register(ctx, local(t, f.ws), "t", "r", req)
	require.NoError(t, err)
	assert.Equal(t, first, again)
	assert.Equal(t, before, storeFiles(t, f.fs, f.dir), "a replay writes nothing")

	// A new FileStore on the same directory replays too.
	reopened, err := deliverable.NewFileStore(f.fs, f.dir)
	require.NoError(t, err)
	again, err = (&deliverable.Registrar{Store: reopened}).Register(ctx, local(t, f.ws), "t", "r", req)
	require.NoError(t, err)
	assert.Equal(t, first, again)

	// The key is scoped to task and run.
	_, err = f.reg.Register(ctx, local(t, f.ws), "t", "other-run", req)
	assert.ErrorIs(t, err, fs.ErrNotExist, "a new run reads the (missing) file")
}

func TestRegisterConflict(t *testing.T) {
	ctx := t.Context()
	data := []byte("version 1")
	cases := []struct {
		name   string
		mutate func(t *testing.T, ws string, r *deliverable.Request)
	}{
		{"different content", func(t *testing.T, ws string, r *deliverable.Request) {
			v2 := []byte("version 2!")
			writeFile(t, ws, "v.txt", v2)
			r.ByteSize, r.SHA256 = int64(len(v2)), sum(v2)
		}},
		{"different title", func(t *testing.T, _ string, r *deliverable.Request) { r.Title = "Other" }},
		{"different filename", func(t *testing.T, _ string, r *deliverable.Request) { r.Filename = "w.txt" }},
		{"different content type", func(t *testing.T, _ string, r *deliverable.Request) { r.ContentType = "text/plain" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			writeFile(t, f.ws, "v.txt", data)
			req := requestFor("v.txt", "same-key", data)
			first, err := f.reg.Register(ctx, local(t, f.ws), "t", "r", req)
			require.NoError(t, err)
			before := storeFiles(t, f.fs, f.dir)

			tc.mutate(t, f.ws, &req)
			_, err = f.reg.Register(ctx, local(t, f.ws), "t", "r", req)
			assert.ErrorIs(t, err, deliverable.ErrIdempotencyConflict)
			assert.ErrorContains(t, err, first.AttachmentID)
			assert.Equal(t, before, storeFiles(t, f.fs, f.dir))
		})
	}
}

func TestRegisterDuplicate(t *testing.T) {
	ctx := t.Context()
	f := newFixture(t)
	data := []byte("same bytes")
	writeFile(t, f.ws, "a.txt", data)
	writeFile(t, f.ws, "copy/a.txt", data)
	writeFile(t, f.ws, "b.txt", data)

	first, err := f.reg.Register(ctx, local(t, f.ws), "t", "r", requestFor("a.txt", "k1", data))
	require.NoError(t, err)

	dup, err := f.reg.Register(ctx, local(t, f.ws), "t", "r", requestFor("a.txt", "k2", data))
	require.NoError(t, err)
	assert.Equal(t, deliverable.Duplicate, dup.Disposition)
	assert.Equal(t, first.AttachmentID, dup.AttachmentID)

	// Replaying the duplicate's key returns it unchanged.
	again, err := f.reg.Register(ctx, local(t, f.ws), "t", "r", requestFor("a.txt", "k2", data))
	require.NoError(t, err)
	assert.Equal(t, dup, again)

	// The same bytes and filename from another path are another file (a
	// task may name en/a.txt and de/a.txt): its own attachment, one blob.
	copied, err := f.reg.Register(ctx, local(t, f.ws), "t", "r", requestFor("copy/a.txt", "k5", data))
	require.NoError(t, err)
	assert.Equal(t, deliverable.Applied, copied.Disposition)
	assert.NotEqual(t, first.AttachmentID, copied.AttachmentID)

	// Same bytes under another filename: its own attachment sharing one
	// blob, so a task that names b.txt can be satisfied.
	other, err := f.reg.Register(ctx, local(t, f.ws), "t", "r", requestFor("b.txt", "k3", data))
	require.NoError(t, err)
	assert.Equal(t, deliverable.Applied, other.Disposition)
	assert.NotEqual(t, first.AttachmentID, other.AttachmentID)

	// Same content in another run is that run's own attachment.
	otherRun, err := f.reg.Register(ctx, local(t, f.ws), "t", "r2", requestFor("a.txt", "k1", data))
	require.NoError(t, err)
	assert.Equal(t, deliverable.Applied, otherRun.Disposition)

	assert.Len(t, filesUnder(t, f.fs, f.dir, "attachments"), 4)
	assert.Equal(t, []string{sum(data)}, filesUnder(t, f.fs, f.dir, "blobs"))

	// A duplicate claim is still verified against the file: same size,
	// different bytes.
	writeFile(t, f.ws, "a.txt", []byte("SAME BYTES"))
	_, err = f.reg.Register(ctx, local(t, f.ws), "t", "r", requestFor("a.txt", "k4", data))
	assert.ErrorIs(t, err, deliverable.ErrHashMismatch)
}

func TestRegisterConcurrentSameKey(t *testing.T) {
	f := newFixture(t)
	data := bytes.Repeat([]byte("row\n"), 4096)
	writeFile(t, f.ws, "rows.csv", data)
	req := requestFor("rows.csv", "one-key", data)

	const n = 16
	ws := local(t, f.ws)
	var (
		wg       sync.WaitGroup
		start    = make(chan struct{})
		receipts [n]deliverable.Receipt
		errs     [n]error
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			receipts[i], errs[i] = f.reg.Register(t.Context(), ws, "t", "r", req)
		}()
	}
	close(start)
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i], "registration %d", i)
		assert.Equal(t, receipts[0], receipts[i], "registration %d", i)
	}
	assert.Equal(t, deliverable.Applied, receipts[0].Disposition)
	assert.Len(t, filesUnder(t, f.fs, f.dir, "attachments"), 1)
	assert.Len(t, filesUnder(t, f.fs, f.dir, "blobs"), 1)
	assert.Empty(t, filesUnder(t, f.fs, f.dir, "tmp"))
}

// TestRegisterFileGrownDuringRead appends to the file while Register reads
// it. Depending on timing the append lands before the open (size mismatch),
// during the read (the case under test), or after (the declared bytes are
// stored); the loop runs until the middle case was seen.
func TestRegisterFileGrownDuringRead(t *testing.T) {
	f := newFixture(t)
	f.reg.MaxBytes = 16 << 20
	data := bytes.Repeat([]byte("0123456789abcdef"), (6<<20)/16) // 6 MiB
	p := filepath.Join(f.ws, "grow.bin")
	ctx := t.Context()

	detected := false
	attempt := 0
	outcomes := map[string]int{}
	for ; attempt < 80 && !detected; attempt++ {
		require.NoError(t, os.WriteFile(p, data, 0o644))
		req := requestFor("grow.bin", fmt.Sprint("k", attempt), data)
		delay := time.Duration(attempt%25+1) * 200 * time.Microsecond
		appended := make(chan error, 1)
		go func() {
			time.Sleep(delay)
			w, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			if err == nil {
				_, err = w.Write(bytes.Repeat([]byte("x"), 64<<10))
				err = errors.Join(err, w.Close())
			}
			appended <- err
		}()
		rc, err := f.reg.Register(ctx, local(t, f.ws), "t", "r", req)
		require.NoError(t, <-appended)
		switch {
		case errors.Is(err, deliverable.ErrFileChanged):
			outcomes["changed"]++
			detected = true
			var pe *fs.PathError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, "grow.bin", pe.Path)
		case errors.Is(err, deliverable.ErrSizeMismatch):
			outcomes["before open"]++ // the append came before the open
		case err == nil:
			outcomes["after read"]++
			// The append came after the read: what was stored is the declared content.
			_, content, err := f.store.Open(ctx, rc.AttachmentID)
			require.NoError(t, err)
			h := sha256.New()
			_, err = io.Copy(h, content)
			require.NoError(t, errors.Join(err, content.Close()))
			require.Equal(t, sum(data), hex.EncodeToString(h.Sum(nil)))
		default:
			require.NoError(t, err, "attempt %d", attempt)
		}
	}
	t.Logf("%d attempts: %v", attempt, outcomes)
	assert.True(t, detected, "an append during the read was never detected")
	assert.Empty(t, filesUnder(t, f.fs, f.dir, "tmp"))
}

func TestRegisterFilenameIsTheFilesOwnName(t *testing.T) {
	f := newFixture(t)
	data := []byte("{}")
	writeFile(t, f.ws, "notes.txt", data)
	req := requestFor("notes.txt", "k", data)
	req.Filename = "output.json" // the name a task asked for, on another file
	_, err := f.reg.Register(t.Context(), local(t, f.ws), "t", "r", req)
	require.ErrorIs(t, err, deliverable.ErrInvalidRequest)
	assert.ErrorContains(t, err, `pass filename "notes.txt"`)
	assert.Empty(t, filesUnder(t, f.fs, f.dir, "blobs"), "nothing stored")
}

// midReadStore rewrites the file in place (same size, modification time
// restored) after the store has read half of it.
type midReadStore struct {
	deliverable.Store
	path string
}

func (m midReadStore) Put(ctx context.Context, e deliverable.Entry, content *deliverable.Content) (deliverable.Receipt, error) {
	half := make([]byte, e.ByteSize/2)
	if _, err := io.ReadFull(content, half); err != nil {
		return deliverable.Receipt{}, err
	}
	fi, err := os.Stat(m.path)
	if err != nil {
		return deliverable.Receipt{}, err
	}
	if err := os.WriteFile(m.path, bytes.Repeat([]byte("B"), int(e.ByteSize)), 0o644); err != nil {
		return deliverable.Receipt{}, err
	}
	if err := os.Chtimes(m.path, fi.ModTime(), fi.ModTime()); err != nil {
		return deliverable.Receipt{}, err
	}
	return m.Store.Put(ctx, e, deliverable.NewContent(io.MultiReader(bytes.NewReader(half), content), e.ByteSize, e.SHA256))
}

func TestRegisterDetectsRewriteInPlace(t *testing.T) {
	f := newFixture(t)
	data := bytes.Repeat([]byte("A"), 1<<20)
	p := writeFile(t, f.ws, "big.bin", data)
	reg := &deliverable.Registrar{Store: midReadStore{Store: f.store, path: p}}
	_, err := reg.Register(t.Context(), local(t, f.ws), "t", "r", requestFor("big.bin", "k", data))
	require.ErrorIs(t, err, deliverable.ErrFileChanged)
	assert.Empty(t, filesUnder(t, f.fs, f.dir, "blobs"), "nothing stored")
}
