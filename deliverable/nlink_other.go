//go:build !unix && !windows

package deliverable

import (
	"errors"
	"io/fs"
	"os"
)

// linkCount fails closed where the link count cannot be read.
func linkCount(*os.File, fs.FileInfo) (uint64, error) {
	return 0, errors.New("the link count of a file cannot be read on this platform, so hard links cannot be ruled out")
}
