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
