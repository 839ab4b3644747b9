//go:build unix

package stage

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// processGone reports whether pid names no live process on this machine:
// none at all, or a zombie (which kill(2) still finds: a parent that never
// reaps keeps it forever; without procfs a zombie counts as alive). It errs
// towards alive when it cannot tell.
func processGone(pid int) bool {
	if pid <= 0 {
		return false
	}
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil {
		// "pid (comm) S ...": the state follows the last ')'.
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i >= 0 {
			s = strings.TrimLeft(s[i+1:], " ")
			return strings.HasPrefix(s, "Z") || strings.HasPrefix(s, "X")
		}
		return false
	}
	// No procfs (or the process is hidden from it): kill(2) tells whether
	// it exists, though not whether it is a zombie.
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
