package deliverable_test

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"sync/atomic"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable"
)

// memWorkspace serves files from memory through Files that do not hash, as
// a RemoteWorkspace's do.
type memWorkspace map[string][]byte

func (m memWorkspace) Open(_ context.Context, name string) (deliverable.File, error) {
	data, ok := m[name]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return memFile{Reader: bytes.NewReader(data), size: int64(len(data))}, nil
}

type memFile struct {
	*bytes.Reader
	size int64
}

func (f memFile) Close() error { return nil }
func (f memFile) Stat() deliverable.FileStat {
	return deliverable.FileStat{Mode: 0o644, Size: f.size, Links: 1}
}

// Each byte registered passes through SHA-256 exactly once: in the Content
// when the file does not hash itself, never in the store, and never in
// this package when a LocalWorkspace file (which hashes as it is read) is
// registered. The store never reads its copy back.
func TestRegisterHashesEachByteOnce(t *testing.T) {
	var hashed atomic.Int64
	defer deliverable.CountHashed(&hashed)()

	data := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	size := int64(len(data))
	fsys := &readCountFs{Fs: afero.NewMemMapFs()}
	store, err := deliverable.NewFileStore(fsys, "/s")
	require.NoError(t, err)
	reg := &deliverable.Registrar{Store: store}
	ctx := t.Context()

	t.Run("file that does not hash", func(t *testing.T) {
		hashed.Store(0)
		rc, err := reg.Register(ctx, memWorkspace{"out.bin": data}, "t", "mem", requestFor("out.bin", "k", data))
		require.NoError(t, err)
		assert.Equal(t, deliverable.Applied, rc.Disposition)
		assert.Equal(t, size, hashed.Load(), "bytes hashed")
	})
	t.Run("duplicate", func(t *testing.T) {
		hashed.Store(0)
		rc, err := reg.Register(ctx, memWorkspace{"out.bin": data}, "t", "mem", requestFor("out.bin", "k2", data))
		require.NoError(t, err)
		assert.Equal(t, deliverable.Duplicate, rc.Disposition)
		assert.Equal(t, size, hashed.Load(), "bytes hashed")
	})
	t.Run("wrong hash", func(t *testing.T) {
		hashed.Store(0)
		req := requestFor("out.bin", "k3", data)
		req.SHA256 = sum([]byte("other"))
		_, err := reg.Register(ctx, memWorkspace{"out.bin": data}, "t", "other", req)
		require.ErrorIs(t, err, deliverable.ErrHashMismatch)
		assert.ErrorContains(t, err, "hash to "+sum(data))
		assert.Equal(t, size, hashed.Load(), "bytes hashed")
	})
	t.Run("local file", func(t *testing.T) {
		hashed.Store(0)
		dir := t.TempDir()
		writeFile(t, dir, "out.bin", data)
		rc, err := reg.Register(ctx, local(t, dir), "t", "local", requestFor("out.bin", "k", data))
		require.NoError(t, err)
		assert.Equal(t, deliverable.Applied, rc.Disposition)
		assert.Zero(t, hashed.Load(), "hashed again after the workspace's reader")
	})
	t.Run("store alone", func(t *testing.T) {
		hashed.Store(0)
		_, err := store.Put(ctx, entryFor("t", "put", "k", data), contentOf(data))
		require.NoError(t, err)
		assert.Equal(t, size, hashed.Load(), "bytes hashed")
	})
	assert.Zero(t, fsys.reads, "a temporary blob was read back")
	assert.Empty(t, filesUnder(t, fsys, "/s", "tmp"))

	_, blob, err := store.Open(ctx, mustLookup(t, store, "local").AttachmentID)
	require.NoError(t, err)
	got, err := io.ReadAll(blob)
	require.NoError(t, err)
	require.NoError(t, blob.Close())
	assert.Equal(t, data, got)
}

func mustLookup(t *testing.T, s deliverable.Store, run string) deliverable.Receipt {
	t.Helper()
	rc, _, err := s.Lookup(t.Context(), deliverable.Key{TaskID: "t", RunID: run, IdempotencyKey: "k"})
	require.NoError(t, err)
	return rc
}

// linksWorkspace serves one file whose link count is links.
type linksWorkspace struct {
	data  []byte
	links uint64
}

func (w linksWorkspace) Open(context.Context, string) (deliverable.File, error) {
	return linksFile{memFile{Reader: bytes.NewReader(w.data), size: int64(len(w.data))}, w.links}, nil
}

type linksFile struct {
	memFile
	links uint64
}

func (f linksFile) Stat() deliverable.FileStat {
	return deliverable.FileStat{Mode: 0o644, Size: f.size, Links: f.links}
}

// TestRegisterUnlinkedFileIsChanged: a file that has no link left once
// opened was replaced (a rename over it) or removed meanwhile: that is
// ErrFileChanged (register it once it is complete), not a hard link
// (which the agent would "fix" by copying a file that is not there); two
// links are a hard link. (An outside attack saw "has 0 hard links".)
func TestRegisterUnlinkedFileIsChanged(t *testing.T) {
	data := []byte("report")
	store, err := deliverable.NewFileStore(afero.NewMemMapFs(), "/s")
	require.NoError(t, err)
	reg := &deliverable.Registrar{Store: store}

	_, err = reg.Register(t.Context(), linksWorkspace{data, 0}, "t", "r", requestFor("out.bin", "k", data))
	require.ErrorIs(t, err, deliverable.ErrFileChanged)
	assert.NotErrorIs(t, err, deliverable.ErrHardlinkDenied)
	var re *deliverable.RequestError
	require.ErrorAs(t, err, &re)
	assert.Contains(t, re.Message, `contentRef "out.bin" was replaced or removed while it was opened`)

	_, err = reg.Register(t.Context(), linksWorkspace{data, 2}, "t", "r", requestFor("out.bin", "k2", data))
	require.ErrorIs(t, err, deliverable.ErrHardlinkDenied)
	assert.ErrorContains(t, err, "has 2 hard links")
}
