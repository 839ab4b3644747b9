package stage

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// swapIn moves <tmp>/tree to name in rr atomically: it exchanges the two
// when name exists (whatever it is: the old copy, a planted link), so
// readers see the old copy or the new one, never neither. Both sides are
// single names relative to open directories, so no link is followed. The
// old entry ends up at <tmp>/tree.
func swapIn(rr, tr *os.Root, tmp, name string) error {
	rf, err := rr.Open(".")
	if err != nil {
		return err
	}
	defer rf.Close()
	tf, err := tr.Open(".")
	if err != nil {
		return err
	}
	defer tf.Close()
	for range 3 {
		err := unix.Renameat2(int(tf.Fd()), "tree", int(rf.Fd()), name, unix.RENAME_EXCHANGE)
		if err == unix.ENOENT {
			err = unix.Renameat2(int(tf.Fd()), "tree", int(rf.Fd()), name, unix.RENAME_NOREPLACE)
			if err == unix.EEXIST {
				continue // created meanwhile: exchange with it
			}
		}
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EOPNOTSUPP):
			return swapPortable(rr, tmp, name) // file system without renameat2 flags
		default:
			return &os.LinkError{Op: "rename", Old: tmp + "/tree", New: name, Err: err}
		}
	}
	return &os.LinkError{Op: "rename", Old: tmp + "/tree", New: name, Err: unix.EEXIST}
}

// renameBetween renames old in tr to new in rr (both single names).
func renameBetween(rr, tr *os.Root, tmp, old, new string) error {
	rf, err := rr.Open(".")
	if err != nil {
		return err
	}
	defer rf.Close()
	tf, err := tr.Open(".")
	if err != nil {
		return err
	}
	defer tf.Close()
	if err := unix.Renameat(int(tf.Fd()), old, int(rf.Fd()), new); err != nil {
		return &os.LinkError{Op: "rename", Old: tmp + "/" + old, New: new, Err: err}
	}
	return nil
}

// renameNoReplace renames old to new in rr, failing when new exists.
func renameNoReplace(rr *os.Root, old, new string) error {
	rf, err := rr.Open(".")
	if err != nil {
		return err
	}
	defer rf.Close()
	err = unix.Renameat2(int(rf.Fd()), old, int(rf.Fd()), new, unix.RENAME_NOREPLACE)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EOPNOTSUPP):
		return renamePortable(rr, old, new) // file system without renameat2 flags
	}
	return &os.LinkError{Op: "rename", Old: old, New: new, Err: err}
}
