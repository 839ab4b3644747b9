//go:build unix

package deliverable

import (
	"fmt"
	"io/fs"
	"syscall"
)

// linkCount returns the number of hard links of the file st describes.
func linkCount(st fs.FileInfo) (uint64, error) {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fmt.Errorf("the link count of the file cannot be read (%T)", st.Sys())
	}
	return uint64(sys.Nlink), nil //nolint:unconvert // Nlink's type differs between platforms
}
