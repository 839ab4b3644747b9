//go:build unix

// Package owner names the process that owns a leftover (a temporary file,
// directory or ref that a killed process could not remove) and tells
// whether that owner still runs, so that a sweep removes exactly the
// leftovers whose owner is gone.
//
// A tag is <pid>.<start>: the process id and its start time (clock ticks
// since boot, from /proc/<pid>/stat; 0 where there is no /proc). An owner
// is gone when no such process exists, when it is a zombie (it never runs
// again: kill(2) still finds it, and a parent that never reaps keeps it
// forever), or when another process got the same pid (another start
// time). Where procfs is missing, kill(2) decides and a zombie counts as
// alive: every check errs towards alive, so a sweep never removes a live
// owner's work.
package owner

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

var self = sync.OnceValue(func() string { return TagOf(os.Getpid()) })

// Tag names this process.
func Tag() string { return self() }

// TagOf names process pid (its start time 0 when it cannot be read).
func TagOf(pid int) string {
	start, _, _ := stat(pid)
	return strconv.Itoa(pid) + "." + strconv.FormatUint(start, 10)
}

// stat reads the start time and state letter of pid from /proc/<pid>/stat;
// ok is false when it cannot be read.
func stat(pid int) (start uint64, state byte, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// pid (comm) state ppid …; comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 || len(f[0]) != 1 {
		return 0, 0, false
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return start, f[0][0], true
}

// Parse splits a tag; ok is false when tag is not one (in its canonical
// spelling).
func Parse(tag string) (pid int, start uint64, ok bool) {
	p, s, found := strings.Cut(tag, ".")
	if !found {
		return 0, 0, false
	}
	pid, err := strconv.Atoi(p)
	if err != nil || pid <= 0 || strconv.Itoa(pid) != p {
		return 0, 0, false
	}
	start, err = strconv.ParseUint(s, 10, 64)
	if err != nil || strconv.FormatUint(start, 10) != s {
		return 0, 0, false
	}
	return pid, start, true
}

// Alive reports whether the owner named by tag still runs; a string that
// is not a tag names no owner (false).
func Alive(tag string) bool {
	pid, start, ok := Parse(tag)
	if !ok {
		return false
	}
	if tag == Tag() {
		return true
	}
	if st, state, ok := stat(pid); ok {
		return state != 'Z' && state != 'X' && (start == 0 || st == start)
	}
	if _, err := os.Stat("/proc/self/stat"); err == nil {
		return false // /proc works, and pid is not in it
	}
	return exists(pid)
}

// Gone reports whether pid (an owner recorded without its start time)
// names no live process: none at all, or a zombie. It errs towards alive
// when it cannot tell; pid <= 0 is never gone.
func Gone(pid int) bool {
	if pid <= 0 {
		return false
	}
	if _, state, ok := stat(pid); ok {
		return state == 'Z' || state == 'X'
	}
	return !exists(pid)
}

// exists asks kill(2) whether pid exists (EPERM: it does, as another user).
func exists(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
