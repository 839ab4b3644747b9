//go:build !linux

package tree

import "io/fs"

// creationMask: off Linux the umask is not known without changing it, so
// every created entry gets an explicit chmod.
func creationMask(int) (fs.FileMode, bool) { return 0, false }
