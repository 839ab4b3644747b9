package atomicfile

import (
	"context"
	"errors"
	"io/fs"
	"os"
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
	ctx := context.Background()
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
