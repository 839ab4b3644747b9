package workspace

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/airlockdev/airlock/internal/gitexec"
	"github.com/airlockdev/airlock/internal/owner"
	"github.com/airlockdev/airlock/internal/shell"
	"github.com/airlockdev/airlock/internal/tree"
)

// Restoring again. A round may be restored any number of times while the
// agent works on. After a Restore, the host holds the sandbox's entry at
// each path where the sandbox's change arrived (or already was the
// host's), and its own at each path where a local edit was kept, an entry
// was refused or Spec.Exclude matched. The next Restore
// merges against that: the Restore moves the round's baseline, at each
// path where the host now holds the sandbox's entry, to that entry, and
// leaves it elsewhere. Merged against the prepare-time baseline instead,
// what the first Restore wrote would read as a local edit: the agent's
// next change of the file would be kept out (Kept), and in a git work
// tree git status would show the agent's newer commit reverted.
//
// The paths where the baseline stays keep merging against what the user
// had: a kept edit is kept (and listed) again, a refused entry is refused
// again. The same holds for the index of a git work tree (record.BaseIndex
// beside record.BaseTree; the sandbox still reports its index against the
// prepare-time one, record.Index, and an entry it no longer reports is
// the prepare-time entry again: withReverts). A plain round's baseline is
// its manifest and, for the links a Restore brought (which a manifest
// cannot list), record.Links.
//
// What is written is the sandbox's whether or not the Restore gets to its
// end: a Restore that fails after writing part of the work tree (a write
// error, the index lock, ErrRace, a cancellation: the writes go on) moves
// the baseline for what it wrote. Otherwise, once the agent changed those
// paths again, what the failed Restore wrote would read as the user's
// edit on the next one. The moved baseline is saved with the round before
// Restore returns, so Reopen has it; a save that fails fails the Restore
// (unless it already failed), and leaves the round moved in memory,
// marked unsaved, for its next Restore to save.

// baseEntry is a path of a git baseline that is to be the sandbox's entry:
// mode and id as git writes them, mode "" where the sandbox has none.
type baseEntry struct{ path, mode, id string }

// baseTree is the tree of the work tree that the next Restore merges
// against.
func (r *Round) baseTree() string {
	if r.rec.BaseTree != "" {
		return r.rec.BaseTree
	}
	return r.rec.Tree
}

// baseIndex is the tree of the index that the next Restore merges the
// sandbox's staged entries against.
func (r *Round) baseIndex() string {
	if r.rec.BaseIndex != "" {
		return r.rec.BaseIndex
	}
	return r.rec.Index
}

// baseMoved reports whether a Restore moved the baseline: the sandbox
// must then send its snapshot even when it is as Prepare left it (a
// revert of what arrived).
func (r *Round) baseMoved() bool { return r.rec.BaseTree != "" || r.rec.BaseIndex != "" }

// moveTree returns the tree base with set applied, written into the
// repository. The blobs set names need not be there: a baseline's blobs
// are only compared by id.
func (r *Round) moveTree(ctx context.Context, base string, set []baseEntry) (string, error) {
	if len(set) == 0 {
		return base, nil
	}
	idx := filepath.Join(r.state, "tmp-"+owner.Tag()+"-"+r.rec.ID+"-base.index")
	os.Remove(idx)
	defer os.Remove(idx)
	env := []string{"GIT_INDEX_FILE=" + idx}
	if err := r.git.Run(ctx, gitexec.Cmd{Args: []string{"read-tree", base}, Env: env}); err != nil {
		return "", fmt.Errorf("reading the baseline %s (a gc may have pruned it): %w", base, err)
	}
	// Removals first: a path the sandbox turned from a file into a
	// directory, or back, then has room.
	var in bytes.Buffer
	zero := strings.Repeat("0", len(base))
	for _, e := range set {
		if e.mode == "" {
			fmt.Fprintf(&in, "0 %s\t%s\x00", zero, e.path)
		}
	}
	for _, e := range set {
		if e.mode != "" {
			fmt.Fprintf(&in, "%s %s\t%s\x00", e.mode, e.id, e.path)
		}
	}
	if err := r.git.Run(ctx, gitexec.Cmd{Args: []string{"update-index", "-z", "--index-info"}, Env: env, Stdin: &in}); err != nil {
		return "", err
	}
	var out bytes.Buffer
	if err := r.git.Run(ctx, gitexec.Cmd{Args: []string{"write-tree", "--missing-ok"}, Env: env, Stdout: &out}); err != nil {
		return "", err
	}
	return strings.TrimSpace(out.String()), nil
}

// rebaseGit moves the baselines of the work tree (by files) and of the
// index (by staged), in memory, and saves the round. A save that fails
// leaves the round moved in memory, marked unsaved: the next Restore
// saves it.
func (r *Round) rebaseGit(ctx context.Context, files, staged []baseEntry) error {
	ctx = context.WithoutCancel(ctx) // the work arrived: its baseline follows
	rec := r.rec
	var err error
	if rec.BaseTree, err = r.moveTree(ctx, r.baseTree(), files); err == nil {
		rec.BaseIndex, err = r.moveTree(ctx, r.baseIndex(), staged)
	}
	if err != nil {
		return r.rebaseFailed(err)
	}
	if rec.BaseTree == rec.Tree {
		rec.BaseTree = ""
	}
	if rec.BaseIndex == rec.Index {
		rec.BaseIndex = ""
	}
	if rec.BaseTree == r.rec.BaseTree && rec.BaseIndex == r.rec.BaseIndex && !r.unsaved {
		return nil
	}
	r.rec, r.unsaved = rec, true
	if err := r.saveRecord(ctx, "workspace.Restore", rec, nil); err != nil {
		return r.rebaseFailed(err)
	}
	r.unsaved = false
	return nil
}

// rebaseFailed is the error of a Restore whose work arrived but whose
// baseline could not move.
func (r *Round) rebaseFailed(err error) error {
	return fmt.Errorf("workspace: the sandbox's work arrived in %s, but the round's new baseline could not be saved: %w; fix the cause and run Restore again (what arrived is then already equal, and the baseline moves)", r.spec.Local, err)
}

// withReverts adds to the sandbox's staged entries (reported against the
// prepare-time index) the paths where the moved baseline index differs
// from the prepare-time one and the sandbox reported nothing: there the
// sandbox's index holds the prepare-time entry again.
func withReverts(st shell.Staged, moved map[string]change) shell.Staged {
	if st.NoTree || len(moved) == 0 {
		return st
	}
	reported := map[string]bool{}
	for _, e := range st.Entries {
		reported[e.Path] = true
	}
	entries := slices.Clone(st.Entries)
	for _, c := range moved {
		if reported[c.path] {
			continue
		}
		e := shell.StagedEntry{Path: c.path}
		if strings.Trim(c.oldMode, "0") != "" {
			e.Mode, e.ID = c.oldMode, c.oldID
		}
		entries = append(entries, e)
	}
	slices.SortFunc(entries, func(a, b shell.StagedEntry) int { return strings.Compare(a.Path, b.Path) })
	return shell.Staged{Entries: entries}
}

// movedIndex returns the paths where the baseline index moved from the
// prepare-time one (none before a Restore moved it), with both entries.
// A Restore reads it once (install): the baseline moves only at its end.
func (r *Round) movedIndex(ctx context.Context) (map[string]change, error) {
	m := map[string]change{}
	if r.rec.BaseIndex == "" {
		return m, nil
	}
	out, err := r.git.Output(ctx, "diff-tree", "-r", "-z", "--no-renames", r.rec.Index, r.rec.BaseIndex)
	if err != nil {
		return nil, fmt.Errorf("workspace: comparing the round's index trees %s and %s (a gc may have pruned one): %w", r.rec.Index, r.rec.BaseIndex, err)
	}
	cs, err := parseDiffTree(out)
	if err != nil {
		return nil, err
	}
	for _, c := range cs {
		m[c.path] = c
	}
	return m, nil
}

// baseValue is what a baseline index holds for the sandbox's staged entry
// e (mode "" where it has none): an intent-to-add entry, which a tree
// cannot hold, as the empty blob, which is how git diff-index --cached
// shows it, so that the entry that arrived reads as the baseline's.
func (r *Round) baseValue(e shell.StagedEntry) (mode, id string) {
	switch {
	case e.Mode == "":
		return "", ""
	case e.IntentToAdd:
		return "100644", emptyBlob(len(r.rec.Index))
	}
	return e.Mode, e.ID
}

// baseHolds reports whether an index entry (c's new side, as git
// diff-index or diff-tree print it) is, for the baseline, the sandbox's
// staged entry e.
func (r *Round) baseHolds(c change, e shell.StagedEntry) bool {
	mode, id := r.baseValue(e)
	if c.status == "U" {
		return false
	}
	if strings.Trim(c.newMode, "0") == "" {
		return mode == ""
	}
	return c.newMode == mode && c.newID == id
}

// stagedHeld returns the sandbox's staged entries (from checkStaged) that
// the local index holds now (as baseValue has them), however they got
// there (this Restore staged them, they already were, or the index
// followed the sandbox's HEAD): the index's part of the next baseline.
func (r *Round) stagedHeld(ctx context.Context, staged []shell.StagedEntry, moved map[string]change) ([]baseEntry, error) {
	if len(staged) == 0 {
		return nil, nil
	}
	local, err := r.indexChanges(ctx, nil)
	if err != nil {
		return nil, err
	}
	var held []baseEntry
	for _, e := range staged {
		c, ok := local[e.Path]
		if !ok {
			// The local entry is the baseline's: a moved one, or else
			// the prepare-time one, which the sandbox's (reported, so
			// different) is not.
			if c, ok = moved[e.Path]; !ok {
				continue
			}
		}
		if r.baseHolds(c, e) {
			mode, id := r.baseValue(e)
			held = append(held, baseEntry{path: e.Path, mode: mode, id: id})
		}
	}
	return held, nil
}

// indexChanges returns the entries of the local index (env names another
// one, GIT_INDEX_FILE; nil: the index) that differ from the baseline
// index, by path.
func (r *Round) indexChanges(ctx context.Context, env []string) (map[string]change, error) {
	var out bytes.Buffer
	if err := r.git.Run(ctx, gitexec.Cmd{Args: []string{"diff-index", "--cached", "-z", "--no-renames", r.baseIndex()}, Env: env, Stdout: &out}); err != nil {
		return nil, fmt.Errorf("workspace: comparing the index of %s with the round's (a gc may have pruned %s): %w", r.spec.Local, r.baseIndex(), err)
	}
	cs, err := parseDiffTree(out.Bytes())
	if err != nil {
		return nil, err
	}
	m := make(map[string]change, len(cs))
	for _, c := range cs {
		m[c.path] = c
	}
	return m, nil
}

// remEntry is an entry of a plain directory's restore stream: its state
// as compared, and the bits of a directory and the size of a file.
type remEntry struct {
	st   state
	perm fs.FileMode // directories
	size int64       // files
}

// baseLinks returns the links of a plain round's baseline: path → the
// SHA-256 of the target.
func (r *Round) baseLinks() map[string]string {
	m := make(map[string]string, len(r.rec.Links))
	for _, l := range r.rec.Links {
		if p, id, err := parseLink(l); err == nil { // decodeRecord checked them
			m[p] = id
		}
	}
	return m
}

// rebasePlain moves a plain round's baseline (its manifest, and the links
// the record lists) once the restore's stream was whole, also when the
// writes then failed: each entry of the stream (rems) that differs from
// the baseline becomes the sandbox's where the local one now is the
// sandbox's; each entry of the baseline the stream did not list
// (listed(p) is false, nor does Spec.Exclude match it) leaves the
// baseline where the local one is gone too; a local directory the
// restore removed for an entry of another type leaves it as well, also
// when that entry then failed to arrive (the directory is the sandbox's
// no more; the next Restore brings the entry). A save that fails leaves
// the round moved in memory, marked unsaved: the next Restore saves it.
func (r *Round) rebasePlain(ctx context.Context, l *local, rems map[string]remEntry, listed func(string) bool, removed map[string]bool) error {
	ctx = context.WithoutCancel(ctx) // the work arrived: its baseline follows
	base := map[string]tree.Entry{}
	for _, e := range r.base.Entries {
		base[e.Path] = e
	}
	links := r.baseLinks()
	changed := r.unsaved
	set := func(p string, e *tree.Entry, link string) {
		changed = true
		delete(base, p)
		delete(links, p)
		switch {
		case e != nil:
			base[p] = *e
		case link != "":
			links[p] = link
		}
	}
	for _, p := range slices.Sorted(maps.Keys(rems)) {
		re, b := rems[p], base[p]
		switch {
		case re.st.kind == 'd' && b.Type == tree.Dir && b.Mode.Perm() == re.perm,
			re.st.kind == 'f' && b.Type == tree.File && b.Mode.Perm() == re.st.perm && b.SHA256 == re.st.id,
			re.st.kind == 'l' && links[p] == re.st.id:
			continue // the baseline's
		}
		loc, err := l.stat(p)
		if err != nil {
			return r.rebaseFailed(err)
		}
		switch re.st.kind {
		case 'd':
			if fi, err := l.root.Lstat(p); err == nil && fi.IsDir() && fi.Mode().Perm() == re.perm {
				set(p, &tree.Entry{Path: p, Type: tree.Dir, Mode: re.perm}, "")
			}
		case 'f':
			if loc.eq(re.st) {
				set(p, &tree.Entry{Path: p, Type: tree.File, Mode: re.st.perm, Size: re.size, SHA256: re.st.id}, "")
			}
		case 'l':
			if loc.eq(re.st) {
				set(p, nil, re.st.id)
			}
		}
	}
	for _, p := range slices.Sorted(maps.Keys(removed)) {
		if loc, err := l.stat(p); err != nil {
			return r.rebaseFailed(err)
		} else if loc.kind == 0 && base[p].Type == tree.Dir {
			set(p, nil, "")
		}
	}
	gone := func(p string) error {
		if listed(p) || excluded(r.rec.Exclude, p) {
			return nil
		}
		loc, _, err := l.statAt(p)
		if err != nil {
			return r.rebaseFailed(err)
		}
		if loc.kind == 0 {
			set(p, nil, "")
		}
		return nil
	}
	for _, e := range r.base.Entries {
		if err := gone(e.Path); err != nil {
			return err
		}
	}
	for _, p := range slices.Sorted(maps.Keys(r.baseLinks())) {
		if err := gone(p); err != nil {
			return err
		}
	}
	if !changed {
		return nil
	}
	m := tree.Manifest{Entries: make([]tree.Entry, 0, len(base))}
	for _, p := range slices.Sorted(maps.Keys(base)) {
		m.Entries = append(m.Entries, base[p])
	}
	rec := r.rec
	rec.Links = nil
	for _, p := range slices.Sorted(maps.Keys(links)) {
		rec.Links = append(rec.Links, formatLink(p, links[p]))
	}
	slices.Sort(rec.Links)
	r.base, r.rec, r.unsaved = m, rec, true
	if err := r.saveRecord(ctx, "workspace.Restore", rec, &m); err != nil {
		return r.rebaseFailed(err)
	}
	r.unsaved = false
	return nil
}
