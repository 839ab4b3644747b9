package workspace

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/airlockdev/airlock/internal/gitexec"
	"github.com/airlockdev/airlock/internal/shell"
)

// mergeFollow names, for a Restore that moves the local HEAD to the
// sandbox's commits, the local HEAD before the Restore, the sandbox's
// HEAD and what HEAD becomes: the tree of their merge (which integrate
// commits), or the sandbox's HEAD itself (a fast-forward: after an earlier
// Restore, a local reset to an older commit, as the ConflictError's advice
// has the user do, is no local edit of the files it changed). staged
// collects the sandbox's staged entries committedBoth found committed on
// both sides.
type mergeFollow struct {
	cur, remote, merged string
	staged              []shell.StagedEntry
}

// heldStaged is the index baseline index (stagedHeld's) with the staged
// entries both sides committed (fm.staged) at the sandbox's value, as the
// work tree's baseline holds the sandbox's file where the merge's was
// written: the sandbox still holds it, and a later Restore of an
// unchanged sandbox must not read the user's index, which now holds the
// merge's, as a local edit beating a sandbox change.
func (fm *mergeFollow) heldStaged(r *Round, index []baseEntry) []baseEntry {
	have := map[string]bool{}
	for _, e := range index {
		have[e.path] = true
	}
	for _, e := range fm.staged {
		if !have[e.Path] {
			have[e.Path] = true
			mode, id := r.baseValue(e)
			index = append(index, baseEntry{path: e.Path, mode: mode, id: id})
		}
	}
	return index
}

// followMerge picks, of the regular files the local work tree holds
// otherwise than the baseline and the sandbox changed (paths), those where
// both sides only committed: the local file is the local HEAD's (bytes
// and executable bit, loc) and the sandbox's file is the sandbox HEAD's.
// The user's change is then in the merge the Restore commits, and the
// work tree takes the merge's file, as git merge writes it; kept instead,
// the user's committed version would sit in the work tree against the
// merge commit as an edit that undoes the agent's change, which the
// user's next git commit -a commits (an outside tester's finding). It
// returns each picked path's merge entry; an uncommitted edit on either
// side keeps the local file (Kept), as before.
func (r *Round) followMerge(ctx context.Context, fm *mergeFollow, paths []string, rem func(string) baseEntry, loc func(string) state) (map[string]baseEntry, error) {
	if fm == nil || len(paths) == 0 {
		return nil, nil
	}
	trees := make([]map[string]baseEntry, 3)
	for i, t := range []string{fm.cur, fm.remote, fm.merged} {
		m, err := r.treeEntries(ctx, t, paths)
		if err != nil {
			return nil, err
		}
		trees[i] = m
	}
	cur, remote, merged := trees[0], trees[1], trees[2]
	var ask []string
	for _, p := range paths {
		c, s, m := cur[p], remote[p], merged[p]
		_, perm, _ := gitMode(c.mode)
		if isFile(c.mode) && isFile(m.mode) && s == rem(p) && loc(p).perm == perm {
			ask = append(ask, p)
		}
	}
	ids := cleanIDs(ctx, r.git, ask, r.o.log)
	follow := map[string]baseEntry{}
	for _, p := range ask {
		if id, ok := ids[p]; ok && id == cur[p].id {
			follow[p] = merged[p]
		}
	}
	return follow, nil
}

func isFile(mode string) bool { return mode == "100644" || mode == "100755" }

// treeEntries lists the entries of tree t at paths (literal), by path.
func (r *Round) treeEntries(ctx context.Context, t string, paths []string) (map[string]baseEntry, error) {
	out := map[string]baseEntry{}
	err := inChunks(paths, func(paths []string) error {
		var b bytes.Buffer
		args := append([]string{"ls-tree", "-r", "-z", "--full-tree", t, "--"}, paths...)
		if err := r.git.Run(ctx, gitexec.Cmd{Args: args, Env: []string{"GIT_LITERAL_PATHSPECS=1"}, Stdout: &b}); err != nil {
			return fmt.Errorf("workspace: listing %s in %s: %w", t, r.spec.Local, err)
		}
		for _, rec := range strings.Split(b.String(), "\x00") {
			meta, p, ok := strings.Cut(rec, "\t")
			f := strings.Fields(meta)
			if !ok || len(f) != 3 {
				continue
			}
			out[p] = baseEntry{path: p, mode: f[0], id: f[2]}
		}
		return nil
	})
	return out, err
}

// committedBoth is differ (the sandbox's staged entries whose local index
// entry the user changed, local) less those both sides only committed:
// the local index entry is the local HEAD's and the sandbox's is the
// sandbox HEAD's. The Restore's commit moves such an entry to the merge's
// (updateIndex), so it is no local change to keep (followMerge).
func (r *Round) committedBoth(ctx context.Context, fm *mergeFollow, differ []shell.StagedEntry, local map[string]change) ([]shell.StagedEntry, error) {
	if fm == nil || len(differ) == 0 {
		return differ, nil
	}
	paths := make([]string, len(differ))
	for i, e := range differ {
		paths[i] = e.Path
	}
	cur, err := r.treeEntries(ctx, fm.cur, paths)
	if err != nil {
		return nil, err
	}
	remote, err := r.treeEntries(ctx, fm.remote, paths)
	if err != nil {
		return nil, err
	}
	var keep []shell.StagedEntry
	for _, e := range differ {
		c, l, s := cur[e.Path], local[e.Path], remote[e.Path]
		if e.IntentToAdd || c.id == "" || s.id == "" || l.newMode != c.mode || l.newID != c.id || e.Mode != s.mode || e.ID != s.id {
			keep = append(keep, e)
		} else {
			fm.staged = append(fm.staged, e)
		}
	}
	return keep, nil
}
