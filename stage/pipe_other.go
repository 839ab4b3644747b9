//go:build !linux

package stage

import "os"

func growPipe(*os.File) {}

func pipeUnread(*os.File) (int, bool) { return 0, false }
