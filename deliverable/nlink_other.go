//go:build !unix

package deliverable

import (
	"errors"
	"io/fs"
)

// linkCount fails closed where the link count cannot be read. airlock
// supports Linux and macOS only; this keeps the package itself honest on
// any other platform.
func linkCount(fs.FileInfo) (uint64, error) {
	return 0, errors.New("the link count of a file cannot be read on this platform, so hard links cannot be ruled out")
}
