package stage

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"

	"github.com/airlockdev/airlock/internal/shell"
	"github.com/airlockdev/airlock/sandbox"
)

// A sandbox may share the host's file system (sandbox.Local, a container
// or bwrap with a bind mount). A publish replaces what is at root/name,
// and deletes it: were that the Source, or a directory above it, Stage
// would delete the user's files (the links and excluded files the copy
// leaves out, or all of a directory above). The publish refuses when the
// copy's place is, through links, one of the directories sourceIDs names
// (shell.SourceExit); Dir compares them itself.

// sourceIDs returns the device and inode of src (first) and of every
// directory above it, by its path as given and by its physical path; nil
// when src itself cannot be stat'ed (its walk then fails the stage).
func sourceIDs(src string) []shell.FileID {
	if _, err := os.Stat(src); err != nil {
		return nil
	}
	var ids []shell.FileID
	add := func(p string) {
		for _, a := range shell.Levels(p, filepath.Dir) {
			if id := shell.StatID(a); id.OK {
				ids = append(ids, id)
			}
		}
	}
	add(src)
	if phys, err := filepath.EvalSymlinks(src); err == nil && phys != src {
		add(phys)
	}
	return ids
}

// checkPlace (Dir) fails with mountErr when a file system is mounted on
// root/name (in rr), inside it or on a part of it seen elsewhere, and
// with overlapErr when root/name is the
// directory src or one above it, or when rr's directory (the stage root)
// is src or inside it.
func checkPlace(rr *os.Root, root, name, src string) error {
	if fi, err := rr.Lstat(name); err == nil && fi.IsDir() {
		if m := mountInside(hostMounts(), filepath.Join(rr.Name(), name)); m != "" {
			return mountErr(path.Join(root, name), m)
		}
	}
	ids := sourceIDs(src)
	if len(ids) == 0 {
		return nil
	}
	if fi, err := rr.Lstat(name); err == nil && fi.IsDir() && isSource(fi, ids) {
		return overlapErr(path.Join(root, name), src)
	}
	if d, err := filepath.EvalSymlinks(rr.Name()); err == nil {
		for _, a := range shell.Levels(d, filepath.Dir) {
			if fi, err := os.Stat(a); err == nil && isSource(fi, ids[:1]) {
				return overlapErr(path.Join(root, name), src)
			}
		}
	}
	return nil
}

// isSource reports whether fi is one of ids.
func isSource(fi os.FileInfo, ids []shell.FileID) bool {
	id := shell.IDOf(fi)
	return id.OK && slices.Contains(ids, id)
}

// overlapped returns err as an ErrBadRoot error when the publish refused
// to replace the Source (shell.SourceExit) or a copy with a file system
// mounted inside (shell.MountExit), else err.
func overlapped(err error, dst, src string) error {
	return refusal(err, dst, func() error { return overlapErr(dst, src) })
}

// refusal returns the error of a command that refused to move dst (a
// copy, or an asset directory a removal names): source() for
// shell.SourceExit, mountErr for shell.MountExit (ErrBadRoot), an ErrTool
// error for a sandbox that could not check either (shell.UncheckedIDsExit,
// shell.UncheckedMountsExit); any other err as it is.
func refusal(err error, dst string, source func() error) error {
	if ee := (*sandbox.ExitError)(nil); errors.As(err, &ee) {
		switch ee.Status {
		case shell.SourceExit:
			return source()
		case shell.MountExit:
			return mountErr(dst, "")
		case shell.UncheckedIDsExit:
			return fmt.Errorf("%w: the sandbox has neither stat nor ls to identify directories: it cannot check that %s and the stage root above it are not the host's Source or inside it (a sandbox that shares the host's file system); nothing was moved: install stat (coreutils or BusyBox) in the sandbox", ErrTool, dst)
		case shell.UncheckedMountsExit:
			return fmt.Errorf("%w: the sandbox has /proc/self/mountinfo but no awk that reads it: it cannot check for a file system mounted on %s or inside it, whose files moving and deleting %s would delete; nothing was moved: install awk in the sandbox", ErrTool, dst, dst)
		}
	}
	return err
}

// mountErr is the error of a publish or removal that found a file system
// mounted on dst, inside it, or on a part of it seen elsewhere (at mount,
// when known), which deleting dst would have reached.
func mountErr(dst, mount string) error {
	at := ""
	if mount != "" {
		at = " at " + mount
	}
	return fmt.Errorf("%w: a file system is mounted%s on %s, inside it, or on a part of it seen elsewhere (a bind mount of a host directory, a volume): moving and deleting %s would delete the files there; nothing was moved: unmount it, or stage under another name", ErrBadRoot, at, dst, dst)
}

// hostMounts returns this process's /proc/self/mountinfo, nil where there
// is none (not Linux): what mountInside reads.
func hostMounts() []byte {
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	return info
}

// mountInside returns a mount point of info (hostMounts) on the host
// directory dir (its links resolved), inside it or on a part of it seen
// elsewhere, or "" (none, or no mountinfo).
func mountInside(info []byte, dir string) string {
	if info == nil {
		return ""
	}
	phys, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return ""
	}
	if m := shell.MountsInside(info, phys, true); len(m) > 0 {
		return m[0]
	}
	return ""
}

// overlapErr is the error of a publish whose copy's place dst is the
// Source src, a directory above it, or inside it.
func overlapErr(dst, src string) error {
	return fmt.Errorf("%w: the copy's place %s and the Source %s overlap (the sandbox shares the host's file system): it is the Source, a directory above it, or inside it, and publishing would delete the Source or copy the copy into itself; nothing was moved: stage into another root or under another name", ErrBadRoot, dst, src)
}

// guardIDs returns the sourceIDs of every source.
func guardIDs(sources []string) []shell.FileID {
	var ids []shell.FileID
	for _, src := range sources {
		ids = append(ids, sourceIDs(src)...)
	}
	return ids
}

// keptSourceErr is the error of a removal refused because an asset
// directory it names (what) is the Source of an asset being kept, or
// above one.
func keptSourceErr(what string) error {
	return fmt.Errorf("%w: %s is the Source of an asset being staged, or a directory above one (the sandbox shares the host's file system): removing it would delete that Source; nothing was removed: give that asset a Source outside the stage root, or stage without WithPrune", ErrBadRoot, what)
}
