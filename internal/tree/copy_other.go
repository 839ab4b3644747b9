//go:build !linux

package tree

import "io/fs"

// creationMask: off Linux the umask is not known without changing it, so
// every created entry gets an explicit chmod.
func creationMask(int) (fs.FileMode, bool) { return 0, false }

// Umask: off Linux the umask is not known without changing it (umask(2)
// sets it for the whole process while it reads it): 022, the common one.
func Umask() fs.FileMode { return 0o022 }
