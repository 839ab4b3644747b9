//go:build !linux

package remotetest

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// procAttr makes a command lead its own process group. (There is no
// parent-death signal here: a command outlives a server that crashes.)
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// waitExited returns once the process pid has exited, without reaping it:
// kqueue reports the exit (NOTE_EXIT) and leaves the zombie to Wait. A
// process that has already exited makes the registration fail (ESRCH) or
// fire at once. When kqueue is not available, it returns at once, and the
// caller's Wait (under its lock) holds up signals until the exit.
func waitExited(pid int) {
	kq, err := unix.Kqueue()
	if err != nil {
		return
	}
	defer unix.Close(kq)
	var ev unix.Kevent_t
	unix.SetKevent(&ev, pid, unix.EVFILT_PROC, unix.EV_ADD|unix.EV_ONESHOT)
	ev.Fflags = unix.NOTE_EXIT
	for {
		// Registering again after EINTR is harmless: EV_ADD updates.
		out := make([]unix.Kevent_t, 1)
		_, err := unix.Kevent(kq, []unix.Kevent_t{ev}, out, nil)
		if !errors.Is(err, unix.EINTR) {
			return // the exit, or an error (ESRCH: already exited)
		}
	}
}
