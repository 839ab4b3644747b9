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

	"github.com/spf13/afero"
)

// Write replaces name with data, mode perm. The temporary file is
// ".<base of name>.tmp-<random>" in tmpDir, or in name's directory when
// tmpDir is "". ctx is checked once more right before the rename: a
// cancelled write never publishes.
func Write(ctx context.Context, fsys afero.Fs, name string, data []byte, perm fs.FileMode, tmpDir string) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	if tmpDir == "" {
		tmpDir = filepath.Dir(name)
	}
	tmp := filepath.Join(tmpDir, "."+filepath.Base(name)+".tmp-"+rand.Text())
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return fmt.Errorf("create temporary file %q: %w", tmp, err)
	}
	defer func() {
		if err == nil {
			return
		}
		if rmErr := fsys.Remove(tmp); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
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
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write temporary file %q: %w", tmp, err)
	}
	if err := fsys.Chmod(tmp, perm); err != nil {
		return fmt.Errorf("chmod temporary file %q: %w", tmp, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, name); err != nil {
		return fmt.Errorf("rename %q to %q: %w", tmp, name, err)
	}
	return nil
}
