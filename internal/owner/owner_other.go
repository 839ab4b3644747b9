//go:build !unix

package owner

import (
	"os"
	"strconv"
	"strings"
)

// Tag names this process.
func Tag() string { return TagOf(os.Getpid()) }

// TagOf names process pid; its start time cannot be read here (0).
func TagOf(pid int) string { return strconv.Itoa(pid) + ".0" }

// Parse splits a tag; ok is false when tag is not one.
func Parse(tag string) (pid int, start uint64, ok bool) {
	p, s, found := strings.Cut(tag, ".")
	if !found {
		return 0, 0, false
	}
	pid, err := strconv.Atoi(p)
	if err != nil || pid <= 0 {
		return 0, 0, false
	}
	start, err = strconv.ParseUint(s, 10, 64)
	return pid, start, err == nil
}

// Alive: where liveness cannot be told, every tag's owner counts as alive
// (nothing is swept).
func Alive(tag string) bool { _, _, ok := Parse(tag); return ok }

// Gone: never, where it cannot be told.
func Gone(pid int) bool { return false }
