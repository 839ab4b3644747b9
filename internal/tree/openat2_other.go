//go:build !linux

package tree

import (
	"errors"
	"io/fs"
	"os"
)

var errNoOpenat2 = errors.New("openat2 unavailable")

func openat2Root(string, fs.FileInfo) (node, error) { return nil, errNoOpenat2 }

func openat2File(string, string) (*os.File, error) { return nil, errNoOpenat2 }

// statInfo converts an lstat result of the os package. Off Linux the
// identity and change time are not recorded, so fingerprints are unusable.
func statInfo(fi fs.FileInfo) stat {
	return stat{mode: fi.Mode(), size: fi.Size(), mtime: fi.ModTime(), fi: fi}
}

// fstatFD is never reached off Linux: every source file there is an
// *os.File of the os.Root reader.
func fstatFD(int) (stat, error) { return stat{}, errNoOpenat2 }
