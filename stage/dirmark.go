package stage

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/airlockdev/airlock/internal/owner"
	"github.com/airlockdev/airlock/internal/shell"
)

// Dir keeps the Bridge's sweep markers (shell.SweepMarkerName) around the
// renames that move an asset's manifest and copy: a publish between
// removing the old manifest and storing the new one, a removal between
// moving the manifest and moving the copy. A host killed in between (or a
// rename that fails) leaves a copy without a manifest beside the marker,
// its record: Assets lists it, so a prune removes it, and the next
// publish of the asset replaces it whole. The marker names this process
// as a Bridge's names its shell (the process id, then the PID
// namespace), so that a Bridge and a Dir on one root read each other's.

// sweepPrefix starts every marker's name.
const sweepPrefix = shell.SweepPrefix

// markerOwner is what a marker of this process holds.
func markerOwner() []byte {
	ns, _ := os.Readlink("/proc/self/ns/pid")
	return []byte(strconv.Itoa(os.Getpid()) + "\n" + ns + "\n")
}

// mark puts the asset name's marker in place, naming this process. Best
// effort: without it, a killed host's copy without a manifest is not
// listed.
func (d *Dir) mark(rr *os.Root, tmp, name string) { placeMarker(rr, tmp, name, markerOwner()) }

// disown replaces the asset name's marker, after a rename failed between
// mark and unmark, by one that names no process: the copy it may have left
// without its manifest is then no live process's, so Assets lists it (and
// a prune removes it) while this process goes on; a marker naming this
// process would read as a publish at work until it ends. Best effort.
func (d *Dir) disown(rr *os.Root, tmp, name string) { placeMarker(rr, tmp, name, nil) }

// placeMarker puts the asset name's marker holding owner in place: it is
// written in the temporary directory tmp and renamed over whatever is at
// the marker's name (a rename never opens what it replaces).
func placeMarker(rr *os.Root, tmp, name string, owner []byte) {
	p := tmp + "/sweep"
	if err := rr.WriteFile(p, owner, 0o644); err != nil {
		return
	}
	if err := rr.Rename(p, shell.SweepMarkerName(name)); err != nil {
		_ = rr.Remove(p)
	}
}

// unmark deletes the asset name's marker once its manifest and copy agree
// again (both in place, or both gone).
func (d *Dir) unmark(rr *os.Root, name string) {
	_ = rr.Remove(shell.SweepMarkerName(name))
}

// hookMoved calls the test hook moved, if set.
func (d *Dir) hookMoved(name string) {
	if d.moved != nil {
		d.moved(name)
	}
}

// readOwner reads the owner record name in rr (a temporary directory's
// owner file, a sweep marker): a process id, then, on a line of its own,
// the PID namespace when known. It reads a regular file only, at most
// shell.MaxSweepMarker bytes, never through a link nor waiting on a fifo;
// ok is false when there is no such file or it names no process.
func readOwner(rr *os.Root, name string) (pid int, ns string, ok bool) {
	f, err := rr.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return 0, "", false
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return 0, "", false
	}
	b, err := io.ReadAll(io.LimitReader(f, shell.MaxSweepMarker))
	if err != nil {
		return 0, "", false
	}
	first, rest, _ := strings.Cut(string(b), "\n")
	pid, err = strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return 0, "", false
	}
	ns, _, _ = strings.Cut(rest, "\n")
	return pid, ns, true
}

// markerGone reports whether the marker m in rr is no live process's:
// anything but a regular file, one that names no process, a process of
// another PID namespace, or a process that is gone; this process's own
// is live (a publish or removal of another goroutine at work). A missing
// marker is no one's either way: false.
func markerGone(rr *os.Root, m string) bool {
	if _, err := rr.Lstat(m); errors.Is(err, fs.ErrNotExist) {
		return false
	}
	p, ns, ok := readOwner(rr, m)
	if !ok {
		return true
	}
	if self, err := os.Readlink("/proc/self/ns/pid"); err == nil && ns != "" && ns != self {
		return true
	}
	return p != os.Getpid() && owner.Gone(p)
}

// orphan reports whether the asset name under rr is a copy without its
// manifest.
func orphan(rr *os.Root, name string) bool {
	if _, err := rr.Lstat(name); err != nil {
		return false
	}
	_, err := rr.Lstat(manifestName(name))
	return errors.Is(err, fs.ErrNotExist)
}

// sweepMarker deletes the marker m (of the asset name) when no live
// process owns it and it is no orphan copy's record.
func (d *Dir) sweepMarker(rr *os.Root, m, name string) {
	if orphan(rr, name) || !markerGone(rr, m) {
		return
	}
	if fi, err := rr.Lstat(m); err == nil && fi.IsDir() {
		_ = d.removeTree(rr, m)
		return
	}
	_ = rr.Remove(m)
}
