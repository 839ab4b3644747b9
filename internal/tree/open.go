package tree

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"
)

// OpenFile opens the regular file at the slash-separated relative path
// unsafePath strictly beneath root without following a link in any
// component. root itself is trusted. The caller uses the returned file's
// Stat as its identity baseline.
//
// Errors wrap ErrEscape (absolute, unclean or ".." paths), ErrLink (a
// symbolic link in any component), ErrNotRegular (a directory, FIFO, device
// or socket; a FIFO is opened non-blocking and never waited on) or
// fs.ErrNotExist, inside an *fs.PathError naming unsafePath.
func OpenFile(root, unsafePath string) (*os.File, error) {
	if strings.Contains(unsafePath, "\\") {
		return nil, &fs.PathError{Op: "open", Path: unsafePath, Err: fmt.Errorf("%w: use a clean relative path inside the workspace", ErrEscape)}
	}
	return openFile(root, unsafePath, false)
}

// OpenWorkTreeFile is OpenFile for a file of a work tree on this system,
// whose name may hold a backslash: one character of a name here, as git
// has it, which OpenFile refuses as another system's separator.
func OpenWorkTreeFile(root, unsafePath string) (*os.File, error) {
	return openFile(root, unsafePath, false)
}

func openFile(root, unsafePath string, forceFallback bool) (*os.File, error) {
	if !ValidPath(unsafePath) {
		return nil, &fs.PathError{Op: "open", Path: unsafePath, Err: fmt.Errorf("%w: use a clean relative path inside the workspace", ErrEscape)}
	}
	var f *os.File
	err := errNoOpenat2
	if !forceFallback {
		f, err = openat2File(root, unsafePath)
	}
	if errors.Is(err, errNoOpenat2) {
		f, err = rootOpenFile(root, unsafePath)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: unsafePath, Err: err}
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: unsafePath, Err: err}
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: unsafePath, Err: fmt.Errorf("%w: it is a %s", ErrNotRegular, Kind(fi.Mode()))}
	}
	return f, nil
}

// verifyOpened is the one tail of every open, under both readers: f was
// just opened by descriptor for the entry name, and want is what the walk
// (or OpenFile) lstat'ed there. It fstat's f and requires the same file
// (device and inode) of the same type; on any failure it closes f. The
// FileInfo it returns is the descriptor's.
func verifyOpened(f *os.File, name string, want stat) (fs.FileInfo, error) {
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("fstat %q: %w", name, err)
	}
	if err := checkSame(fi, name, want); err != nil {
		f.Close()
		return nil, err
	}
	return fi, nil
}

// checkSame requires fi, a stat of what was opened, to be the file want
// describes: same identity, same type.
func checkSame(fi fs.FileInfo, name string, want stat) error {
	if !want.same(fi) || fi.Mode().Type() != want.mode.Type() {
		return fmt.Errorf("%w: %s was replaced during the walk", ErrChanged, name)
	}
	return nil
}

// rootOpenFile is OpenFile's os.Root reader: it lstat's every component,
// refuses links, and checks that what it opened is what it lstat'ed.
func rootOpenFile(root, rel string) (*os.File, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, err
	}
	defer func() { r.Close() }()
	parts := strings.Split(rel, "/")
	for _, name := range parts[:len(parts)-1] {
		fi, err := r.Lstat(name)
		if err != nil {
			return nil, err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return nil, fmt.Errorf("%w: a component is a symbolic link", ErrLink)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("%w: a component is not a directory", ErrNotRegular)
		}
		sub, err := r.OpenRoot(name)
		if err != nil {
			return nil, err
		}
		got, err := sub.Stat(".")
		if err == nil {
			err = checkSame(got, name, statInfo(fi))
		}
		if err != nil {
			sub.Close()
			return nil, fmt.Errorf("%w: a component was replaced while opened", ErrChanged)
		}
		r.Close()
		r = sub
	}
	name := parts[len(parts)-1]
	fi, err := r.Lstat(name)
	if err != nil {
		return nil, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, fmt.Errorf("%w: the file is a symbolic link", ErrLink)
	}
	f, err := r.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	if _, err := verifyOpened(f, name, statInfo(fi)); err != nil {
		return nil, fmt.Errorf("%w: the file was replaced while opened", ErrChanged)
	}
	return f, nil
}
