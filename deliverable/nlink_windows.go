//go:build windows

package deliverable

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// linkCount returns the number of hard links of the open file f.
func linkCount(f *os.File, _ fs.FileInfo) (uint64, error) {
	var d syscall.ByHandleFileInformation
	if err := syscall.GetFileInformationByHandle(syscall.Handle(f.Fd()), &d); err != nil {
		return 0, fmt.Errorf("the link count of the file cannot be read: %w", err)
	}
	return uint64(d.NumberOfLinks), nil
}
