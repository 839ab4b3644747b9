package workspace

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/airlockdev/airlock/internal/shell"
	"github.com/airlockdev/airlock/sandbox"
)

// A sandbox may share the host's file system (sandbox.Local, a bind mount
// in a container or bwrap): Spec.Remote may then be Spec.Local, a
// directory above it, or one below it. Prepare clears Remote before it
// sends the tree, so any of the three would delete the user's files while
// they are read. checkOverlap refuses such a Spec before anything is
// written to Remote.
//
// The probe reports Remote's physical path (its links resolved) and the
// identity (device and inode) of it and of each directory above it. A
// match with any directory of Local's tree (Local itself, or one inside
// it: a bind mount may show a directory of Local elsewhere), or of Remote
// with a directory above Local's physical path, is only a suspicion: two
// machines cloned from one image hold directories with the same numbers.
// It is confirmed by a marker: a file the host writes in the matching
// directory and removes at once, which the sandbox looks for at the path
// where that directory would be.

// overlapCandidate is a host directory of Local's (or Local, under a
// Remote above it), the sandbox path where it would be if the two file
// systems are one, and how the probe suggested it.
type overlapCandidate struct {
	host string // host directory: Local or one inside it
	at   string // its sandbox path
	how  string // "is", "holds" or "is inside"
}

// checkOverlap returns an ErrSpec error when a file system is mounted
// inside Spec.Remote or on a part of it (WorkspaceProbe.Mounts, but in its
// RuntimeDir), or when Spec.Remote is Spec.Local, a directory above it or
// one below it, in one file system.
// Both sides are compared by their physical paths and directories: the
// sandbox's probe gives Remote's (WorkspaceProbe.Real) and the identity of
// every directory above it; the host resolves Local's links and lists the
// identity of every directory in Local's tree (treeDirs).
func (r *Round) checkOverlap(ctx context.Context, pr probe) error {
	if err := uncheckable(pr); err != nil {
		return err
	}
	if m, ok := mountToClear(pr); ok {
		return fmt.Errorf("%w: a file system is mounted at %s, inside Spec.Remote %s or on a part of it seen elsewhere (a bind mount, a volume): Prepare clears Remote, which would delete the files there; unmount it, or pass a Remote with nothing mounted inside or from it", ErrSpec, strconv.Quote(m), r.spec.Remote)
	}
	if len(pr.IDs) == 0 {
		return nil // a probe that names no directory: nothing to compare
	}
	remote := shell.Levels(pr.Real, path.Dir)
	if pr.Real == "" || len(pr.IDs) != len(remote) {
		return fmt.Errorf("%w: probing the sandbox at %s: %d directory identities for the physical path %q", ErrHostile, r.spec.Remote, len(pr.IDs), pr.Real)
	}
	local, err := filepath.EvalSymlinks(r.spec.Local)
	if err != nil {
		return nil // Prepare's own walk reports a Local it cannot read
	}
	dirs := treeDirs(local)
	var cands []overlapCandidate
	for i, id := range pr.IDs {
		for _, d := range sameDirs(dirs, id) {
			how := "is"
			if i > 0 || d != local {
				how = "is inside"
			}
			cands = append(cands, overlapCandidate{host: d, at: remote[i], how: how})
		}
	}
	if rem := pr.IDs[0]; rem.OK {
		for _, a := range shell.Levels(filepath.Dir(local), filepath.Dir) {
			if shell.StatID(a).Same(rem) {
				rel, err := filepath.Rel(a, local)
				if err == nil {
					cands = append(cands, overlapCandidate{host: local, at: path.Join(pr.Real, filepath.ToSlash(rel)), how: "holds"})
				}
				break
			}
		}
	}
	if len(cands) == 0 {
		return nil
	}
	return r.confirmOverlap(ctx, cands)
}

// uncheckable returns a *ToolError when the probe could not give what
// checkOverlap compares: a sandbox with /proc/self/mountinfo but no awk to
// read it (and a Remote the sh check cannot compare), or one with neither
// stat nor ls to identify a directory of Remote's path. Prepare clears
// Remote: unchecked, it might delete a mounted or shared host directory.
func uncheckable(pr probe) error {
	if pr.MountsUnchecked {
		return fmt.Errorf("%w: the sandbox has /proc/self/mountinfo but no awk that reads it, and its sh cannot compare Spec.Remote's path (a space, tab, newline or backslash in it), so Prepare cannot check for a file system mounted inside Remote, which it clears", &ToolError{Tool: "awk", Where: "sandbox"})
	}
	for _, id := range pr.IDs {
		if id.Unknown {
			return fmt.Errorf("%w: the sandbox has neither stat nor ls to identify the directories of Spec.Remote's path, so Prepare cannot check that Remote is not Spec.Local, a directory above it or one inside it (in a sandbox that shares the host's file system), which clearing Remote would delete", &ToolError{Tool: "stat", Where: "sandbox"})
		}
	}
	return nil
}

// sameDirs returns the directories of dirs (treeDirs) that id may name: the
// one with its device and inode, or, for an id of an inode alone (a
// sandbox without stat), every one of that inode. Each is only a
// candidate, which confirmOverlap confirms or not.
func sameDirs(dirs map[shell.FileID]string, id shell.FileID) []string {
	if !id.OK {
		return nil
	}
	if !id.NoDev {
		if d, ok := dirs[id]; ok {
			return []string{d}
		}
		return nil
	}
	var out []string
	for k, d := range dirs {
		if k.Ino == id.Ino {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}

// mountToClear returns the first mount point the probe reports that
// Prepare would reach: one in Remote's runtime directory (RuntimeDir, which
// Prepare leaves alone: a volume for the staged skills, say) is not.
func mountToClear(pr probe) (string, bool) {
	rt := path.Join(pr.Real, shell.RuntimeDir)
	for _, m := range pr.Mounts {
		if m != rt && !strings.HasPrefix(m, rt+"/") {
			return m, true
		}
	}
	return "", false
}

// treeDirs returns the identity of every directory of the tree under dir
// (dir included), with its host path; links are not followed, bind mounts
// are entered. A directory it cannot read is left out: Prepare's own walk
// reports it.
func treeDirs(dir string) map[shell.FileID]string {
	m := map[shell.FileID]string{}
	// The callback never fails (so neither does the walk): an unreadable
	// directory is Prepare's own walk's to report.
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			if id := shell.IDOf(fi); id.OK {
				m[id] = p
			}
		}
		return nil
	})
	return m
}

// markerPrefix starts the name of the marker confirmOverlap writes in a
// directory of Local, for an instant.
const markerPrefix = ".airlock-overlap-"

// confirmOverlap asks the sandbox, for each candidate, whether it sees at
// the candidate's sandbox path a marker the host writes in its host
// directory (an empty file of a random name, exclusively); each marker is
// removed before the next is written.
func (r *Round) confirmOverlap(ctx context.Context, cands []overlapCandidate) error {
	id, err := newID()
	if err != nil {
		return err
	}
	name := markerPrefix + id
	for _, c := range cands {
		if err := r.confirmOne(ctx, c, name); err != nil {
			return err
		}
	}
	return nil
}

// confirmOne writes the marker name in c.host, asks the sandbox whether it
// is at c.at, and removes it.
func (r *Round) confirmOne(ctx context.Context, c overlapCandidate, name string) (err error) {
	marker := filepath.Join(c.host, name)
	f, err := os.OpenFile(marker, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		return r.unconfirmed(c, err)
	}
	defer func() {
		if rerr := os.Remove(marker); rerr != nil && err == nil {
			err = fmt.Errorf("workspace: removing the marker %s: %w; remove it by hand", marker, rerr)
		}
	}()
	var out bytes.Buffer
	lw := &limitWriter{w: &out, n: 64}
	script := shell.WorkspaceMarkerScript(path.Join(c.at, name))
	if err := sandbox.Control(ctx, r.spec.Runner, sandbox.Command{Script: script, Stdout: lw}); err != nil {
		return fmt.Errorf("workspace: checking whether the sandbox's %s is %s on the host: %w", r.spec.Remote, r.spec.Local, err)
	}
	switch out.String() {
	case "same\nend\n":
		return fmt.Errorf("%w: Spec.Remote %s %s Spec.Local %s in one file system (the sandbox shares the host's: %s is the host's %s): Prepare clears Remote, which would delete the local files; pass a Remote that is neither Local, nor above it, nor inside it", ErrSpec, r.spec.Remote, c.how, r.spec.Local, c.at, c.host)
	case "end\n":
		return nil
	default:
		return fmt.Errorf("%w: checking whether the sandbox's %s is %s: unexpected output %.80q", ErrHostile, r.spec.Remote, r.spec.Local, out.String())
	}
}

// unconfirmed is the error of a suspected overlap that no marker could
// settle (Local is not writable).
func (r *Round) unconfirmed(c overlapCandidate, err error) error {
	return fmt.Errorf("%w: Spec.Remote %s may share the directory %s (the host's %s) with Spec.Local %s (same device and inode in the sandbox), and no marker could be written to tell (%v); Prepare clears Remote: pass a Remote that is neither Local, nor above it, nor inside it", ErrSpec, r.spec.Remote, c.at, c.host, r.spec.Local, err)
}
