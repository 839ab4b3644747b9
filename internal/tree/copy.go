package tree

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
)

// Copy copies the tree at src into dst, hashing in the same pass, and
// returns what it copied. dst must not exist (its parent must): it is created
// exclusively, every regular file is created with O_EXCL|O_NOFOLLOW, and each
// entry keeps its permission bits. Links and special files are handled by
// opts like Walk does; a copy never contains a link. On error dst is removed.
func Copy(ctx context.Context, src, dst string, opts Options) (res *Result, err error) {
	if err := os.Mkdir(dst, 0o700); err != nil {
		return nil, fmt.Errorf("creating copy destination: %w", err)
	}
	defer func() {
		if err != nil {
			RemoveAll(dst)
		}
	}()
	type dirMode struct {
		path string
		perm fs.FileMode
	}
	var dirs []dirMode
	buf := make([]byte, 256<<10)
	res, err = Walk(ctx, src, opts, func(it *Item) error {
		target := filepath.Join(dst, filepath.FromSlash(it.Path))
		if it.Type == Dir {
			dirs = append(dirs, dirMode{target, it.Mode})
			return os.Mkdir(target, 0o700)
		}
		f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			return err
		}
		_, err = io.CopyBuffer(onlyWriter{f}, onlyReader{it}, buf)
		if err == nil {
			err = f.Chmod(it.Mode)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	// Directory modes last, deepest first, so a read-only directory does
	// not stop its own contents from being written.
	slices.Reverse(dirs)
	for _, d := range dirs {
		if err := os.Chmod(d.path, d.perm); err != nil {
			return nil, err
		}
	}
	if err := os.Chmod(dst, res.RootMode); err != nil {
		return nil, err
	}
	return res, nil
}

// RemoveAll removes the tree at p like os.RemoveAll, also when a directory in
// it lacks write permission (a copy keeps the source's modes, and a
// read-only skill makes a read-only copy). It never follows a link.
func RemoveAll(p string) error {
	err := os.RemoveAll(p)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(q, 0o700)
		}
		return nil
	})
	return os.RemoveAll(p)
}
