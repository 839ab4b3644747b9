package workspace

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/airlockdev/airlock/internal/gitexec"
	"github.com/airlockdev/airlock/internal/owner"
)

// Leftovers. What a round creates in the host repository for the length of
// one call — the temporary ref a Prepare bundles from, the private ref that
// keeps a restore's snapshot from a gc, a quarantine object directory —
// is removed when the call returns, also on error. A host killed meanwhile
// cannot, so each name carries its owner: <pid>.<start>, the process id
// and its start time (clock ticks since boot, from /proc/<pid>/stat; 0
// where there is no /proc), and the next Prepare or Restore of the
// repository removes every leftover whose owner is gone: no such process,
// a zombie (it never runs again), or another process that got the same
// pid. A leftover whose owner runs is never touched.
//
//	refs/airlock/tmp/<owner>/<round>/snap       Prepare
//	refs/airlock/restore/<owner>/<round>-<rand> Restore
//	<objects>/airlock-quarantine-<owner>-<rand> Restore
//	<state>/tmp-<owner>-<round>.index[.lock]    Prepare
//	<state>/tmp-<owner>-<round>-held.index.lock Restore (the index lock's other name)
//	<state>/.airlock-tmp-<owner>-<rand>         Prepare (a state file being written)
//	<state>/restore-<owner>-<round>-<rand>.bundle Restore
//	<state>/prep-<owner>-<round>                Prepare (with <round>.json: a
//	                                            round whose Prepare never returned)
//
// Restore refs and quarantines (<state>/quarantine-*) in the layout of
// earlier versions (without an owner) are removed by a Restore, which
// holds the restore lock, under which they were made; temporary refs of an
// earlier version's Prepare are left alone.

// sweepLeftovers removes the temporary refs and quarantine directories in
// the repository whose owner is gone. locked says the caller holds the
// restore lock: then restore refs without an owner go too. A failure to
// remove one is logged and left for the next sweep.
func (r *Round) sweepLeftovers(ctx context.Context, locked bool) {
	g := r.git
	r.sweepRefLocks(ctx) // first: a ref's lock would fail its deletion
	out, err := g.Output(ctx, "for-each-ref", "--format=%(refname)", "refs/airlock/tmp/", "refs/airlock/restore/")
	if err != nil {
		r.o.log.Warn("listing leftover refs", "error", err)
		return
	}
	var del bytes.Buffer
	for _, ref := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		rest, isTmp := strings.CutPrefix(ref, "refs/airlock/tmp/")
		if !isTmp {
			rest, _ = strings.CutPrefix(ref, "refs/airlock/restore/")
		}
		if ref == "" || rest == "" {
			continue
		}
		tag, _, _ := strings.Cut(rest, "/")
		_, _, owned := owner.Parse(tag)
		switch {
		case owned && owner.Alive(tag):
			continue
		case !owned && (isTmp || !locked):
			continue // an earlier version's: its owner cannot be told
		}
		del.WriteString("delete " + ref + "\n")
	}
	if del.Len() > 0 {
		if err := g.Run(ctx, gitexec.Cmd{Args: []string{"update-ref", "--stdin"}, Stdin: &del}); err != nil {
			r.o.log.Warn("removing leftover refs", "error", err)
		}
	}
	r.sweepState(locked)
	objects, err := g.Line(ctx, "rev-parse", "--path-format=absolute", "--git-path", "objects")
	if err != nil {
		r.o.log.Warn("finding the object directory", "error", err)
		return
	}
	ents, err := os.ReadDir(objects)
	if err != nil {
		r.o.log.Warn("listing the object directory", "path", objects, "error", err)
		return
	}
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), quarantinePrefix)
		if !ok {
			continue
		}
		tag, _, _ := strings.Cut(rest, "-")
		if _, _, owned := owner.Parse(tag); !owned || owner.Alive(tag) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(objects, e.Name())); err != nil {
			r.o.log.Warn("removing a leftover quarantine", "path", filepath.Join(objects, e.Name()), "error", err)
		}
	}
}

// sweepRefLocks removes the lock files that a git killed while it updated
// a temporary ref left (<common dir>/refs/airlock/{tmp,restore}/<owner>/…
// .lock), whose owner is gone: git then lists no such ref, and the lock
// would stay for good.
func (r *Round) sweepRefLocks(ctx context.Context) {
	common, err := r.git.Line(ctx, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		r.o.log.Warn("finding the common git directory", "error", err)
		return
	}
	for _, kind := range []string{"tmp", "restore"} {
		top := filepath.Join(common, "refs", "airlock", kind)
		ents, err := os.ReadDir(top)
		if err != nil {
			continue // none
		}
		for _, e := range ents {
			if _, _, owned := owner.Parse(e.Name()); !owned || !e.IsDir() || owner.Alive(e.Name()) {
				continue
			}
			dir := filepath.Join(top, e.Name())
			var dirs []string
			werr := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				switch {
				case err != nil:
					return err
				case d.IsDir():
					dirs = append(dirs, p)
				case strings.HasSuffix(d.Name(), ".lock") && d.Type().IsRegular():
					if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
						return err
					}
				}
				return nil
			})
			if werr != nil {
				r.o.log.Warn("removing the ref locks of a killed host", "path", dir, "error", werr)
				continue
			}
			for i := len(dirs) - 1; i >= 0; i-- {
				os.Remove(dirs[i]) // only when empty: a ref git still lists stays
			}
		}
	}
}

// sweepState removes the scratch files in the round's state directory
// whose owner is gone (see sweepLeftovers).
func (r *Round) sweepState(locked bool) {
	r.clearDeadLock(filepath.Join(r.gitDir, "index.lock")) // before its held file goes
	ents, err := os.ReadDir(r.state)
	if err != nil {
		return // none yet
	}
	for _, e := range ents {
		name := e.Name()
		var rest string
		switch {
		case strings.HasPrefix(name, "tmp-") && (strings.HasSuffix(name, ".index") || strings.HasSuffix(name, ".index.lock")):
			// the index, or the lock a git killed while writing it left
			rest = strings.TrimPrefix(name, "tmp-")
		case strings.HasPrefix(name, "restore-") && strings.HasSuffix(name, ".bundle"):
			rest = strings.TrimPrefix(name, "restore-")
		case strings.HasPrefix(name, "prep-"):
			// prep-<owner>-<round>: a Prepare that did not return
			tag, id, _ := strings.Cut(strings.TrimPrefix(name, "prep-"), "-")
			if _, _, owned := owner.Parse(tag); !owned || !validID(id) || owner.Alive(tag) {
				continue
			}
			kept := false
			for _, f := range []string{id + ".json", id + ".manifest.json"} {
				if err := os.Remove(filepath.Join(r.state, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
					r.o.log.Warn("removing the state of a round whose Prepare was killed", "path", filepath.Join(r.state, f), "error", err)
					kept = true
				}
			}
			if kept {
				continue // the marker stays for the next sweep
			}
		case strings.HasPrefix(name, "quarantine-") && e.IsDir() && locked:
			// an earlier version's, made under the restore lock
		default:
			continue
		}
		if rest != "" {
			tag, _, _ := strings.Cut(rest, "-")
			_, _, owned := owner.Parse(tag)
			if owned && owner.Alive(tag) || !owned && !(locked && strings.HasPrefix(name, "restore-")) {
				continue
			}
		}
		if err := os.RemoveAll(filepath.Join(r.state, name)); err != nil {
			r.o.log.Warn("removing a leftover", "path", filepath.Join(r.state, name), "error", err)
		}
	}
}
