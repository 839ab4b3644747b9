package atomicfile

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFile replaces the file at path on the operating system's file system
// with data, mode perm (the process umask does not apply). The temporary
// file is ".<base of path>.tmp-<random>" in path's directory; it is
// written, synced and given its mode, then renamed over path, and then
// path's directory is synced so the rename survives a crash. ctx is checked
// once more right before the rename: a cancelled write never publishes.
//
// An error after the rename (only the directory sync can fail there) means
// the new content is visible but may not be durable.
func WriteFile(ctx context.Context, path string, data []byte, perm fs.FileMode) error {
	return write(ctx, osBackend{}, path, data, perm, "", "")
}

// WriteFileNamed is [WriteFile] with the temporary file named tmpBase (a
// base name, which the caller makes unique) in path's directory: a caller
// that sweeps the temporary files of killed writers names them so it can
// tell whose they are.
func WriteFileNamed(ctx context.Context, path, tmpBase string, data []byte, perm fs.FileMode) error {
	if tmpBase == "" || tmpBase != filepath.Base(tmpBase) || tmpBase == "." || tmpBase == ".." {
		return fmt.Errorf("atomicfile: temporary name %q is not a base name", tmpBase)
	}
	return write(ctx, osBackend{}, path, data, perm, "", tmpBase)
}

// File is what Write needs of a file its FS opens.
type File interface {
	io.Writer
	Sync() error
	Close() error
}

// FS is what Write needs of a file system. An afero.Fs is one (F is then
// afero.File), so callers that keep their state on afero pass it as it is,
// and this package needs no afero of its own.
type FS[F File] interface {
	OpenFile(name string, flag int, perm fs.FileMode) (F, error)
	Chmod(name string, mode fs.FileMode) error
	Rename(oldname, newname string) error
	Remove(name string) error
}

// Write replaces name on fsys with data, mode perm. The temporary file is
// ".<base of name>.tmp-<random>" in tmpDir, or in name's directory when
// tmpDir is "". ctx is checked once more right before the rename: a
// cancelled write never publishes. Unlike [WriteFile], Write does not sync
// the directory.
func Write[F File](ctx context.Context, fsys FS[F], name string, data []byte, perm fs.FileMode, tmpDir string) error {
	return write(ctx, fsBackend[F]{fsys}, name, data, perm, tmpDir, "")
}

// file is what write needs of an open temporary file.
type file interface {
	io.Writer
	Sync() error
	Close() error
}

// backend is the file system write works on.
type backend interface {
	createExcl(name string, perm fs.FileMode) (file, error)
	// chmod gives the open temporary file f, named name, its mode.
	chmod(f file, name string, perm fs.FileMode) error
	rename(oldname, newname string) error
	remove(name string) error
	// syncDir makes the entries of dir durable; a backend that cannot
	// returns nil.
	syncDir(dir string) error
}

// write is the one implementation behind [Write], [WriteFile] and
// [WriteFileNamed]; tmpBase "" names the temporary file after name.
func write(ctx context.Context, b backend, name string, data []byte, perm fs.FileMode, tmpDir, tmpBase string) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	if tmpDir == "" {
		tmpDir = filepath.Dir(name)
	}
	if tmpBase == "" {
		tmpBase = "." + filepath.Base(name) + ".tmp-" + rand.Text()
	}
	tmp := filepath.Join(tmpDir, tmpBase)
	f, err := b.createExcl(tmp, perm)
	if err != nil {
		return fmt.Errorf("create temporary file %q: %w", tmp, err)
	}
	published := false
	defer func() {
		if err == nil || published {
			return
		}
		if rmErr := b.remove(tmp); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
			err = errors.Join(err, fmt.Errorf("remove temporary file %q (delete it by hand): %w", tmp, rmErr))
		}
	}()
	n, err := f.Write(data)
	if err == nil && n < len(data) {
		err = io.ErrShortWrite
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		err = fmt.Errorf("write temporary file %q: %w", tmp, err)
	} else if err = b.chmod(f, tmp, perm); err != nil {
		err = fmt.Errorf("chmod temporary file %q: %w", tmp, err)
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close temporary file %q: %w", tmp, cerr)
	}
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := b.rename(tmp, name); err != nil {
		return fmt.Errorf("rename %q to %q: %w", tmp, name, err)
	}
	published = true
	if err := b.syncDir(filepath.Dir(name)); err != nil {
		return fmt.Errorf("sync directory of %q (the new content is in place but may not survive a crash): %w", name, err)
	}
	return nil
}

// osBackend is the operating system's file system.
type osBackend struct{}

func (osBackend) createExcl(name string, perm fs.FileMode) (file, error) {
	return os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
}

// chmod changes the open descriptor's mode, never whatever the name may
// have come to point at.
func (osBackend) chmod(f file, _ string, perm fs.FileMode) error {
	return f.(*os.File).Chmod(perm)
}

func (osBackend) rename(oldname, newname string) error { return os.Rename(oldname, newname) }
func (osBackend) remove(name string) error             { return os.Remove(name) }

func (osBackend) syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// fsBackend is an FS (an afero.Fs, say); it does not sync directories.
type fsBackend[F File] struct{ fs FS[F] }

func (a fsBackend[F]) createExcl(name string, perm fs.FileMode) (file, error) {
	return a.fs.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
}
func (a fsBackend[F]) chmod(_ file, name string, perm fs.FileMode) error {
	return a.fs.Chmod(name, perm)
}
func (a fsBackend[F]) rename(oldname, newname string) error { return a.fs.Rename(oldname, newname) }
func (a fsBackend[F]) remove(name string) error             { return a.fs.Remove(name) }
func (fsBackend[F]) syncDir(string) error                   { return nil }
