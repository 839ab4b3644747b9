package remote

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/airlockdev/airlock/internal/tree"
)

// errNotRegular is the cause of a *fs.PathError for a configuration,
// key or known_hosts file that is a named pipe, a device, a socket or a
// directory: LoadSSHConfig reads only regular files (and /dev/null), so a
// FIFO no one writes cannot make it wait forever.
var errNotRegular = errors.New("not a regular file")

// notRegular returns the *fs.PathError for path, which is of mode m.
func notRegular(op, path string, m fs.FileMode) error {
	return &fs.PathError{Op: op, Path: path, Err: fmt.Errorf("is a %s, %w", tree.Kind(m), errNotRegular)}
}

// statRegular stats path (following links) and refuses anything but a
// regular file or /dev/null (ssh -F /dev/null, UserKnownHostsFile
// /dev/null: read as empty); null reports the latter. The error of a
// missing file wraps fs.ErrNotExist. Its errors are those of opening path,
// as the caller is about to.
func statRegular(path string) (null bool, err error) {
	fi, err := os.Stat(path)
	if pe, ok := err.(*fs.PathError); ok {
		pe.Op = "open"
	}
	switch {
	case err != nil:
		return false, err
	case fi.Mode().IsRegular():
		return false, nil
	case isDevNull(fi):
		return true, nil
	}
	return false, notRegular("open", path, fi.Mode())
}

// checkRegular is statRegular without its report.
func checkRegular(path string) error {
	_, err := statRegular(path)
	return err
}

// isDevNull reports whether fi is the null device.
func isDevNull(fi fs.FileInfo) bool {
	if fi.Mode()&fs.ModeCharDevice == 0 {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err == nil && os.SameFile(fi, null)
}

// readRegular reads a regular file (/dev/null reads as empty). It stats
// path first, so that a device is never opened, then opens it without
// blocking (O_NONBLOCK: a FIFO swapped in meanwhile does not wait for a
// writer) and checks the open file again, so that what it reads is the
// regular file it checked.
func readRegular(path string) ([]byte, error) {
	if null, err := statRegular(path); null || err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, notRegular("open", path, fi.Mode())
	}
	return io.ReadAll(f)
}
