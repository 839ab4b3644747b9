package workspace

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"

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
// match with Local, or of Remote with a directory above Local's physical
// path, is only a suspicion: two machines cloned
// from one image hold directories with the same numbers. It is confirmed
// by a marker: a file the host writes at the top of Local and removes at
// once, which the sandbox looks for at the path where Local would be.

// overlapCandidate is a sandbox path where Local would be if the two file
// systems are one, and how the probe suggested it.
type overlapCandidate struct {
	at  string // sandbox path of Local
	how string // "is", "holds" or "is inside"
}

// checkOverlap returns an ErrSpec error when Spec.Remote is Spec.Local, a
// directory above it or one below it, in one file system. Both sides are
// compared by their physical paths: the sandbox's probe gives Remote's
// (WorkspaceProbe.Real) and the identity of every directory above it; the
// host resolves Local's links.
func (r *Round) checkOverlap(ctx context.Context, pr probe) error {
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
	localID := shell.StatID(local)
	if !localID.OK {
		return nil
	}
	var cands []overlapCandidate
	for i, id := range pr.IDs {
		if id.OK && id == localID {
			how := "is"
			if i > 0 {
				how = "is inside"
			}
			cands = append(cands, overlapCandidate{at: remote[i], how: how})
		}
	}
	if rem := pr.IDs[0]; rem.OK {
		for _, a := range shell.Levels(filepath.Dir(local), filepath.Dir) {
			if id := shell.StatID(a); id.OK && id == rem {
				rel, err := filepath.Rel(a, local)
				if err == nil {
					cands = append(cands, overlapCandidate{at: path.Join(pr.Real, filepath.ToSlash(rel)), how: "holds"})
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

// markerPrefix starts the name of the marker confirmOverlap writes at the
// top of Local, for an instant.
const markerPrefix = ".airlock-overlap-"

// confirmOverlap writes a marker at the top of Local (an empty file of a
// random name, exclusively) and asks the sandbox whether it sees it at a
// candidate's path; the marker is removed before it returns.
func (r *Round) confirmOverlap(ctx context.Context, cands []overlapCandidate) (err error) {
	id, err := newID()
	if err != nil {
		return err
	}
	name := markerPrefix + id
	marker := filepath.Join(r.spec.Local, name)
	f, err := os.OpenFile(marker, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		return r.unconfirmed(cands[0], err)
	}
	defer func() {
		if rerr := os.Remove(marker); rerr != nil && err == nil {
			err = fmt.Errorf("workspace: removing the marker %s: %w; remove it by hand", marker, rerr)
		}
	}()
	for _, c := range cands {
		var out bytes.Buffer
		lw := &limitWriter{w: &out, n: 64}
		script := shell.WorkspaceMarkerScript(path.Join(c.at, name))
		if err := sandbox.Control(ctx, r.spec.Runner, sandbox.Command{Script: script, Stdout: lw}); err != nil {
			return fmt.Errorf("workspace: checking whether the sandbox's %s is %s on the host: %w", r.spec.Remote, r.spec.Local, err)
		}
		switch out.String() {
		case "same\nend\n":
			return fmt.Errorf("%w: Spec.Remote %s %s Spec.Local %s in one file system (the sandbox shares the host's): Prepare clears Remote, which would delete the local files; pass a Remote that is neither Local, nor above it, nor inside it", ErrSpec, r.spec.Remote, c.how, r.spec.Local)
		case "end\n":
		default:
			return fmt.Errorf("%w: checking whether the sandbox's %s is %s: unexpected output %.80q", ErrHostile, r.spec.Remote, r.spec.Local, out.String())
		}
	}
	return nil
}

// unconfirmed is the error of a suspected overlap that no marker could
// settle (Local is not writable).
func (r *Round) unconfirmed(c overlapCandidate, err error) error {
	return fmt.Errorf("%w: Spec.Remote %s may be the directory %s of Spec.Local %s (same device and inode in the sandbox), and no marker could be written to tell (%v); Prepare clears Remote: pass a Remote that is neither Local, nor above it, nor inside it", ErrSpec, r.spec.Remote, c.at, r.spec.Local, err)
}
