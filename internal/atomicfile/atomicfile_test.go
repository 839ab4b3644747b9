package atomicfile

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var errInjected = errors.New("injected fault")

// failingFs fails one operation: "rename", "chmod" or "remove".
type failingFs struct {
	afero.Fs
	fail map[string]bool
}

func (f failingFs) Rename(o, n string) error {
	if f.fail["rename"] {
		return &os.LinkError{Op: "rename", Old: o, New: n, Err: errInjected}
	}
	return f.Fs.Rename(o, n)
}

func (f failingFs) Chmod(n string, m os.FileMode) error {
	if f.fail["chmod"] {
		return &fs.PathError{Op: "chmod", Path: n, Err: errInjected}
	}
	return f.Fs.Chmod(n, m)
}

func (f failingFs) Remove(n string) error {
	if f.fail["remove"] {
		return &fs.PathError{Op: "remove", Path: n, Err: errInjected}
	}
	return f.Fs.Remove(n)
}

func names(t *testing.T, fsys afero.Fs, dir string) []string {
	t.Helper()
	ents, err := afero.ReadDir(fsys, dir)
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func TestWrite(t *testing.T) {
	ctx := t.Context()
	mem := afero.NewMemMapFs()
	require.NoError(t, mem.MkdirAll("/d/tmp", 0o700))
	require.NoError(t, Write(ctx, mem, "/d/f.json", []byte("old"), 0o600, ""))
	require.NoError(t, Write(ctx, mem, "/d/f.json", []byte("new"), 0o640, "/d/tmp"))
	got, err := afero.ReadFile(mem, "/d/f.json")
	require.NoError(t, err)
	assert.Equal(t, "new", string(got))
	fi, err := mem.Stat("/d/f.json")
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o640), fi.Mode().Perm())
	assert.Empty(t, names(t, mem, "/d/tmp"))

	for _, op := range []string{"rename", "chmod"} {
		t.Run(op+" fails", func(t *testing.T) {
			err := Write(ctx, failingFs{mem, map[string]bool{op: true}}, "/d/f.json", []byte("lost"), 0o600, "")
			require.ErrorIs(t, err, errInjected)
			got, err := afero.ReadFile(mem, "/d/f.json")
			require.NoError(t, err)
			assert.Equal(t, "new", string(got), "the old content stays")
			assert.Equal(t, []string{"f.json", "tmp"}, names(t, mem, "/d"), "no temporary file left")
		})
	}
	t.Run("the temporary file cannot be removed", func(t *testing.T) {
		fsys := failingFs{mem, map[string]bool{"rename": true, "remove": true}}
		err := Write(ctx, fsys, "/d/f.json", []byte("lost"), 0o600, "/d/tmp")
		require.ErrorIs(t, err, errInjected)
		left := names(t, mem, "/d/tmp")
		require.Len(t, left, 1)
		assert.ErrorContains(t, err, left[0], "the error names the file to delete")
	})
	t.Run("cancelled", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		require.ErrorIs(t, Write(cctx, mem, "/d/g.json", []byte("x"), 0o600, ""), context.Canceled)
		_, err := mem.Stat("/d/g.json")
		require.ErrorIs(t, err, fs.ErrNotExist)
	})
}

// cancelOnChmod cancels the write's context once the temporary file is
// complete, just before the rename.
type cancelOnChmod struct {
	afero.Fs
	cancel context.CancelFunc
}

func (c cancelOnChmod) Chmod(n string, m os.FileMode) error {
	c.cancel()
	return c.Fs.Chmod(n, m)
}

func TestWriteCancelledBeforeRename(t *testing.T) {
	mem := afero.NewMemMapFs()
	require.NoError(t, Write(t.Context(), mem, "/d/f.json", []byte("old"), 0o600, ""))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	err := Write(ctx, cancelOnChmod{mem, cancel}, "/d/f.json", []byte("new"), 0o600, "")
	require.ErrorIs(t, err, context.Canceled)
	got, err := afero.ReadFile(mem, "/d/f.json")
	require.NoError(t, err)
	assert.Equal(t, "old", string(got), "a cancelled write never publishes")
	assert.Equal(t, []string{"f.json"}, names(t, mem, "/d"), "no temporary file left")
}

func osNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func TestWriteFile(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	path := filepath.Join(dir, "f.json")

	require.NoError(t, WriteFile(ctx, path, []byte("old"), 0o600))
	// 0o666 would come out 0o644 under the usual umask 022 if the mode
	// were left to open(2).
	require.NoError(t, WriteFile(ctx, path, []byte("new"), 0o666))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "new", string(got))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o666), fi.Mode().Perm(), "the mode is exactly perm")
	assert.Equal(t, []string{"f.json"}, osNames(t, dir), "no temporary file left")

	t.Run("the rename fails", func(t *testing.T) {
		target := filepath.Join(dir, "sub")
		require.NoError(t, os.MkdirAll(filepath.Join(target, "keep"), 0o700))
		err := WriteFile(ctx, target, []byte("lost"), 0o600)
		var linkErr *os.LinkError
		require.ErrorAs(t, err, &linkErr)
		assert.Equal(t, "rename", linkErr.Op)
		assert.Equal(t, target, linkErr.New)
		assert.Equal(t, []string{"f.json", "sub"}, osNames(t, dir), "no temporary file left")
		assert.Equal(t, []string{"keep"}, osNames(t, target), "the directory is untouched")
	})
	t.Run("the directory is missing", func(t *testing.T) {
		err := WriteFile(ctx, filepath.Join(dir, "nope", "f.json"), []byte("x"), 0o600)
		require.ErrorIs(t, err, fs.ErrNotExist)
	})
	t.Run("cancelled", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		require.ErrorIs(t, WriteFile(cctx, filepath.Join(dir, "g.json"), []byte("x"), 0o600), context.Canceled)
		assert.Equal(t, []string{"f.json", "sub"}, osNames(t, dir), "nothing published, nothing left")
	})
}

// failingDirSync is the OS backend with a directory sync that fails.
type failingDirSync struct{ osBackend }

func (failingDirSync) syncDir(string) error { return errInjected }

func TestWriteFileDirSyncFails(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.json")
	err := write(t.Context(), failingDirSync{}, path, []byte("new"), 0o600, "", "")
	require.ErrorIs(t, err, errInjected)
	assert.ErrorContains(t, err, "sync directory of "+strconv.Quote(path))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "new", string(got), "the content was published before the sync")
	assert.Equal(t, []string{"f.json"}, osNames(t, dir), "the published file is not removed")
}

// TestWriteFileNamed: the temporary file has the caller's name, in the
// target's directory, and is gone after the write; a name that is not a
// base name is refused before anything is written.
func TestWriteFileNamed(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.json")
	var seen []string
	err := write(t.Context(), watchCreate{osBackend{}, &seen}, path, []byte("new"), 0o600, "", ".mine-1")
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(dir, ".mine-1")}, seen)
	require.NoError(t, WriteFileNamed(t.Context(), path, ".mine-2", []byte("newer"), 0o600))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "newer", string(got))
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, ents, 1)
	for _, bad := range []string{"", ".", "..", "a/b"} {
		assert.ErrorContains(t, WriteFileNamed(t.Context(), path, bad, []byte("x"), 0o600), "is not a base name", bad)
	}
}

// watchCreate records the temporary files it creates.
type watchCreate struct {
	osBackend
	seen *[]string
}

func (w watchCreate) createExcl(name string, perm fs.FileMode) (file, error) {
	*w.seen = append(*w.seen, name)
	return w.osBackend.createExcl(name, perm)
}
