package remotetest

import (
	"bytes"
	"crypto/rand"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/pkg/sftp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newSFTP(t *testing.T, srv *Server, opts ...sftp.ClientOption) *sftp.Client {
	t.Helper()
	c, err := sftp.NewClient(dial(t, srv), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { closeClient(t, c) })
	return c
}

func TestSFTP(t *testing.T) {
	srv := NewServer(t)
	fc := newSFTP(t, srv)

	wd, err := fc.Getwd()
	require.NoError(t, err)
	assert.Equal(t, srv.Dir(), wd)

	// Write with a relative path: it lands in Dir.
	f, err := fc.Create("a.txt")
	require.NoError(t, err)
	_, err = f.Write([]byte("hello"))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	b, err := os.ReadFile(filepath.Join(srv.Dir(), "a.txt"))
	require.NoError(t, err)
	assert.Equal(t, "hello", string(b))

	// Stat, rename, read back through an absolute path.
	fi, err := fc.Stat("a.txt")
	require.NoError(t, err)
	assert.Equal(t, int64(5), fi.Size())
	assert.True(t, fi.Mode().IsRegular())
	require.NoError(t, fc.Mkdir("d"))
	require.NoError(t, fc.PosixRename("a.txt", "d/b.txt"))
	_, err = fc.Stat("a.txt")
	assert.ErrorIs(t, err, fs.ErrNotExist)
	f, err = fc.Open(filepath.Join(srv.Dir(), "d", "b.txt"))
	require.NoError(t, err)
	got, err := io.ReadAll(f)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	assert.Equal(t, "hello", string(got))

	// A file written on disk is visible through SFTP.
	require.NoError(t, os.WriteFile(filepath.Join(srv.Dir(), "d", "c.txt"), []byte("disk"), 0o600))
	entries, err := fc.ReadDir("d")
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.ElementsMatch(t, []string{"b.txt", "c.txt"}, names)
	require.NoError(t, fc.Remove("d/c.txt"))
	_, err = os.Stat(filepath.Join(srv.Dir(), "d", "c.txt"))
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

func TestSFTPConcurrent(t *testing.T) {
	srv := NewServer(t)
	fc := newSFTP(t, srv, sftp.UseConcurrentWrites(true), sftp.UseConcurrentReads(true))
	data := make([]byte, 4<<20)
	_, err := rand.Read(data)
	require.NoError(t, err)

	// Several large files through one connection at once.
	const files = 4
	var wg sync.WaitGroup
	errs := make([]error, files)
	for i := range files {
		wg.Go(func() {
			name := "big" + string(rune('0'+i))
			f, err := fc.Create(name)
			if err != nil {
				errs[i] = err
				return
			}
			if _, err := f.ReadFrom(bytes.NewReader(data)); err != nil {
				errs[i] = err
				return
			}
			errs[i] = f.Close()
		})
	}
	wg.Wait()
	for i := range files {
		require.NoError(t, errs[i])
		name := "big" + string(rune('0'+i))
		b, err := os.ReadFile(filepath.Join(srv.Dir(), name))
		require.NoError(t, err)
		assert.True(t, bytes.Equal(data, b), "%s differs", name)

		f, err := fc.Open(name)
		require.NoError(t, err)
		var back bytes.Buffer
		_, err = f.WriteTo(&back)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		assert.True(t, bytes.Equal(data, back.Bytes()), "%s read back differs", name)
	}
}
