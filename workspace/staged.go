package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/airlockdev/airlock/internal/gitexec"
	"github.com/airlockdev/airlock/internal/owner"
	"github.com/airlockdev/airlock/internal/shell"
)

// What the agent staged comes back staged. The sandbox reports its index
// where it differs from the index the round's prepare gave it (the
// baseline index, record.Index): shell's staged section, whose objects
// travel in the restore's bundle. checkStaged judges it before anything
// is written; applyStaged merges it into the local index by the 3-way
// rule of the work tree, after the work tree and before HEAD moves.

// Reasons a staged entry is refused.
const (
	whyStagedGitlink  = "a staged submodule (gitlink), which is never restored"
	whyStagedLink     = "a staged symbolic link that the work tree does not hold as restored (a link is staged only as it arrived)"
	whyStagedIntent   = "an intent-to-add entry (git add -N) whose file the work tree does not hold"
	whyStagedInTheWay = "the local index holds %s where this staged entry needs a directory or a file (a local change, which wins)"
)

// whyStagedDropped is Result.StagedDropped when the sandbox's index
// cannot be written as a tree.
const whyStagedDropped = "the sandbox's index could not be written as a tree (unmerged entries, a path that is both a file and a directory, or an object it names is missing): nothing the agent staged came back (no entry of its index reached the local index); the work tree came back unstaged: stage it locally, or fix the index in the sandbox (git status there) and run Restore again"

// checkStaged judges the sandbox's staged section st (its objects read
// through g) before anything is written. An index the sandbox could not
// write as a tree brings nothing back: res.StagedDropped says so. An entry at a path the sandbox
// may never write (.git, the runtime directory, a temporary file's name)
// or a submodule is listed in res.Refused, one under Spec.Exclude is left
// out, and the rest is returned. Every object a returned entry names must
// be a blob that g reads (the bundle's or the repository's): otherwise
// the restore fails with ErrHostile before anything is written.
func (r *Round) checkStaged(ctx context.Context, g *gitexec.Git, st shell.Staged, res *Result) ([]shell.StagedEntry, error) {
	if st.NoTree {
		res.StagedDropped = whyStagedDropped
		r.o.log.Warn("the sandbox's index could not be written as a tree (unmerged entries, a path that is both a file and a directory, or an object it names is missing): what it staged does not come back", "round", r.rec.ID)
		return nil, nil
	}
	gitlinks, err := r.baseGitlinks(ctx, st.Entries)
	if err != nil {
		return nil, err
	}
	var keep []shell.StagedEntry
	ids := map[string]string{}
	var blobs []string
	for _, e := range st.Entries {
		switch {
		case reserved(e.Path):
			r.refuse(res, e.Path, whyReserved(e.Path)) // staged or committed, the same place
			continue
		case hasTmpName(e.Path):
			r.refuse(res, e.Path, whyTmpName)
			continue
		case excluded(r.rec.Exclude, e.Path):
			continue
		case e.Mode == "160000" || gitlinks[e.Path]:
			r.refuse(res, e.Path, whyStagedGitlink)
			continue
		case e.Mode != "" && !e.IntentToAdd:
			ids[e.Path] = e.ID
			blobs = append(blobs, e.Path)
		}
		keep = append(keep, e)
	}
	if _, err := blobSizes(ctx, g, blobs, func(p string) string { return ids[p] }); err != nil {
		return nil, fmt.Errorf("workspace: the sandbox's staged entries (nothing was written): %w", err)
	}
	return keep, nil
}

// baseGitlinks returns the paths the staged entries remove (git rm) that
// are submodules (gitlinks) in the baseline index: their removal is a
// submodule change too.
func (r *Round) baseGitlinks(ctx context.Context, entries []shell.StagedEntry) (map[string]bool, error) {
	links := map[string]bool{}
	var removed []string
	for _, e := range entries {
		if e.Mode == "" {
			removed = append(removed, e.Path)
		}
	}
	if r.rec.Index == "" {
		return links, nil
	}
	ents, err := r.treeEntries(ctx, r.rec.Index, removed)
	if err != nil {
		return nil, fmt.Errorf("%w (reading the baseline index; nothing was written)", err)
	}
	for p, e := range ents {
		if e.mode == "160000" {
			links[p] = true
		}
	}
	return links, nil
}

// applyStaged merges the staged entries (from checkStaged; their objects
// read through g) into the local index. An entry at a path the work tree
// refused is not staged either; a staged link must be the link the work
// tree holds after the restore (its target was checked as it arrived, or
// it is the user's own), and an intent-to-add entry needs its file there.
// Under the index's lock, on a copy: each path whose local entry still is
// the baseline's (rebase.go) gets the sandbox's; one the user changed
// keeps the user's and is listed in res.Kept, unless it already is the
// sandbox's. An entry the local index leaves no room for (a local file
// where it needs a directory, or the reverse) is refused. The objects move
// into the repository first.
func (r *Round) applyStaged(ctx context.Context, g *gitexec.Git, hk hashKind, staged []shell.StagedEntry, moved map[string]change, fm *mergeFollow, res *Result) error {
	if len(staged) == 0 {
		return nil
	}
	refused := map[string]bool{}
	for _, p := range res.Refused {
		refused[p] = true
	}
	l, err := openLocal(r.spec.Local, hk, r.journalDir())
	if err != nil {
		return err
	}
	defer l.close()
	var want []shell.StagedEntry
	for _, e := range staged {
		if refusedAt(refused, e.Path) {
			continue
		}
		if e.IntentToAdd || e.Mode == "120000" {
			st, err := l.stat(e.Path)
			if err != nil {
				return fmt.Errorf("workspace: reading local %s: %w", e.Path, err)
			}
			if e.IntentToAdd && st.kind != 'f' && st.kind != 'l' {
				r.refuse(res, e.Path, whyStagedIntent)
				continue
			}
			if !e.IntentToAdd && (st.kind != 'l' || st.id != e.ID) {
				r.refuse(res, e.Path, whyStagedLink)
				continue
			}
		}
		want = append(want, e)
	}
	if len(want) == 0 {
		return nil
	}
	if err := r.adoptBlobs(ctx, g, want); err != nil {
		return err
	}
	return r.withIndex(ctx, func(env []string) (bool, error) { return r.stageInto(ctx, env, want, moved, fm, res) })
}

// refusedAt reports whether p or a directory above it is refused.
func refusedAt(refused map[string]bool, p string) bool {
	for ; p != "."; p = path.Dir(p) {
		if refused[p] {
			return true
		}
	}
	return false
}

// stageInto applies want to the index env names (GIT_INDEX_FILE), by the
// 3-way rule against the baseline index (moved: where it is not the
// prepare-time index, movedIndex); it reports whether it changed anything.
func (r *Round) stageInto(ctx context.Context, env []string, want []shell.StagedEntry, moved map[string]change, fm *mergeFollow, res *Result) (bool, error) {
	g := r.git
	local, err := r.indexChanges(ctx, env)
	if err != nil {
		return false, err
	}
	var intent map[string]bool // the local intent-to-add entries, read when needed
	var apply, differ []shell.StagedEntry
	for _, e := range want {
		c, changed := local[e.Path]
		if !changed {
			if b, ok := moved[e.Path]; !ok || !r.baseHolds(b, e) {
				apply = append(apply, e) // else the local entry already is the sandbox's
			}
			continue
		}
		if b, ok := moved[e.Path]; ok && r.baseHolds(b, e) {
			continue // the sandbox's entry is the baseline's: no change of its own to weigh against the local one
		}
		if intent == nil && c.newID == emptyBlob(len(c.newID)) {
			intent = r.localIntents(ctx, env)
		}
		if !sameEntry(c, intent[e.Path], e) {
			differ = append(differ, e)
		}
	}
	differ, err = r.committedBoth(ctx, fm, differ, local)
	if err != nil {
		return false, err
	}
	for _, e := range differ {
		res.Kept = append(res.Kept, e.Path)
	}
	if len(apply) == 0 {
		return false, nil
	}
	var paths bytes.Buffer
	if err := g.Run(ctx, gitexec.Cmd{Args: []string{"ls-files", "-z"}, Env: env, Stdout: &paths}); err != nil {
		return false, err
	}
	apply = r.roomFor(strings.Split(paths.String(), "\x00"), apply, res)
	return r.writeStaged(ctx, env, apply, strings.Repeat("0", len(r.rec.Index)))
}

// sameEntry reports whether the local index's entry (c's new side; intent:
// an intent-to-add entry) is the sandbox's e.
func sameEntry(c change, intent bool, e shell.StagedEntry) bool {
	switch {
	case c.status == "U":
		return false
	case e.Mode == "":
		return c.newMode == "000000"
	case e.IntentToAdd || intent:
		return e.IntentToAdd && intent
	}
	return c.newMode == e.Mode && c.newID == e.ID
}

// localIntents returns the paths of the index env names that are
// intent-to-add entries: those its own tree leaves out. An index that
// cannot be written as a tree (unmerged entries) gives none.
func (r *Round) localIntents(ctx context.Context, env []string) map[string]bool {
	set := map[string]bool{}
	var t, out bytes.Buffer
	if err := r.git.Run(ctx, gitexec.Cmd{Args: []string{"write-tree"}, Env: env, Stdout: &t}); err != nil {
		return set
	}
	if err := r.git.Run(ctx, gitexec.Cmd{Args: []string{"diff-index", "--cached", "-z", "--no-renames", "--name-only", strings.TrimSpace(t.String())}, Env: env, Stdout: &out}); err != nil {
		return set
	}
	for _, p := range strings.Split(out.String(), "\x00") {
		if p != "" {
			set[p] = true
		}
	}
	return set
}

// roomFor returns the entries of apply that the local index (its paths
// as listed) leaves room for once apply is applied: an entry whose
// directory the index holds as a file, or whose path it holds as a
// directory, is refused.
func (r *Round) roomFor(paths []string, apply []shell.StagedEntry, res *Result) []shell.StagedEntry {
	final := map[string]bool{}
	for _, p := range paths {
		if p != "" {
			final[p] = true
		}
	}
	for _, e := range apply {
		final[e.Path] = e.Mode != ""
	}
	dirs := map[string]string{} // a directory -> an entry below it
	for p, in := range final {
		for d := path.Dir(p); in && d != "."; d = path.Dir(d) {
			dirs[d] = p
		}
	}
	var ok []shell.StagedEntry
	for _, e := range apply {
		in := ""
		if e.Mode != "" {
			in = dirs[e.Path]
			for d := path.Dir(e.Path); in == "" && d != "."; d = path.Dir(d) {
				if final[d] {
					in = d
				}
			}
		}
		if in != "" {
			r.refuse(res, e.Path, fmt.Sprintf(whyStagedInTheWay, in))
			continue
		}
		ok = append(ok, e)
	}
	return ok
}

// writeStaged writes apply into the index env names: entries and
// removals through update-index --index-info, then the intent-to-add
// entries through git add -N (their files are in the work tree).
func (r *Round) writeStaged(ctx context.Context, env []string, apply []shell.StagedEntry, zero string) (bool, error) {
	var in, intent bytes.Buffer
	for _, e := range apply {
		switch {
		case e.Mode == "" || e.IntentToAdd:
			fmt.Fprintf(&in, "0 %s\t%s\x00", zero, e.Path)
			if e.IntentToAdd {
				intent.WriteString(e.Path + "\x00")
			}
		default:
			fmt.Fprintf(&in, "%s %s\t%s\x00", e.Mode, e.ID, e.Path)
		}
	}
	if in.Len() == 0 {
		return false, nil
	}
	if err := r.git.Run(ctx, gitexec.Cmd{Args: []string{"update-index", "-z", "--index-info"}, Env: env, Stdin: &in}); err != nil {
		return false, fmt.Errorf("workspace: staging the sandbox's index entries in %s: %w", r.spec.Local, err)
	}
	if intent.Len() > 0 {
		args := []string{"add", "--intent-to-add", "--force", "--pathspec-from-file=-", "--pathspec-file-nul"}
		if err := r.git.Run(ctx, gitexec.Cmd{Args: args, Env: append(env, "GIT_LITERAL_PATHSPECS=1"), Stdin: &intent}); err != nil {
			return false, fmt.Errorf("workspace: adding the sandbox's intent-to-add entries to the index of %s: %w", r.spec.Local, err)
		}
	}
	return true, nil
}

// emptyBlob is the id of the empty blob of a repository whose ids are n
// hex digits long.
func emptyBlob(n int) string {
	if n == 64 {
		return "473a0f4c3be8a93681a267e3b1e9a7dcda1185436fe141f7749120a303721813"
	}
	return "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
}

// adoptBlobs moves the blobs the entries name that the repository lacks
// from g (the quarantine the restore read them from) into the
// repository, checked by the strict fsck.
func (r *Round) adoptBlobs(ctx context.Context, g *gitexec.Git, entries []shell.StagedEntry) error {
	var in strings.Builder
	for _, e := range entries {
		if e.Mode != "" && !e.IntentToAdd {
			in.WriteString(e.ID + "\n")
		}
	}
	if in.Len() == 0 {
		return nil
	}
	var out bytes.Buffer
	if err := r.git.Run(ctx, gitexec.Cmd{Args: []string{"cat-file", "--batch-check=%(objectname)"}, Stdin: strings.NewReader(in.String()), Stdout: &out}); err != nil {
		return err
	}
	var missing bytes.Buffer
	for _, l := range strings.Split(out.String(), "\n") {
		if id, ok := strings.CutSuffix(l, " missing"); ok {
			missing.WriteString(id + "\n")
		}
	}
	if missing.Len() == 0 {
		return nil
	}
	if err := r.packInto(ctx, g, &missing); err != nil {
		return r.storeFailed(r.gitDir, fmt.Errorf("moving the sandbox's staged blobs into the repository: %w", err))
	}
	return nil
}

// Waiting for the index lock of another git.
const (
	indexLockWait = 2 * time.Second
	indexLockPoll = 20 * time.Millisecond
)

// withIndex runs fn on a copy of the local index (the environment it gets
// names it) while it holds the index's lock, <git dir>/index.lock, as git
// does; when fn changed the copy, the copy's content is written into the
// lock file, which is renamed over the index: no git writes the index in
// between, and a reader sees the old index or the new one. A lock that
// stays (another git, or a killed one) fails with ErrRace naming it; one
// this package's killed host left is recognized and removed (lockIndex).
func (r *Round) withIndex(ctx context.Context, fn func(env []string) (bool, error)) error {
	index := filepath.Join(r.gitDir, "index")
	lock := index + ".lock"
	f, held, err := r.lockIndex(ctx, lock)
	if err != nil {
		return err
	}
	defer func() {
		if f != nil {
			f.Close()
			os.Remove(lock)
		}
		if held != "" {
			os.Remove(held)
		}
	}()
	scratch := filepath.Join(r.state, "tmp-"+owner.Tag()+"-"+r.rec.ID+"-staged.index")
	os.Remove(scratch)
	defer os.Remove(scratch)
	if err := copyIndex(r.gitDir, scratch); err != nil {
		return fmt.Errorf("workspace: copying the index of %s: %w", r.spec.Local, err)
	}
	changed, err := fn([]string{"GIT_INDEX_FILE=" + scratch})
	if err != nil || !changed {
		return err
	}
	src, err := os.Open(scratch)
	if err != nil {
		return fmt.Errorf("workspace: reading the new index of %s: %w", r.spec.Local, err)
	}
	_, err = io.Copy(f, src)
	src.Close()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(lock, index)
	}
	if err != nil {
		os.Remove(lock)
		f = nil
		return fmt.Errorf("workspace: writing the index of %s (it is as it was; the work tree already holds the sandbox's files and HEAD has not moved: fix the cause and run Restore again): %w", r.spec.Local, err)
	}
	f = nil
	return nil
}

// heldSuffix ends the name of the state file that shares its inode with
// the index lock this process holds: <state>/tmp-<owner>-<round>-held.index.lock.
const heldSuffix = "-held.index.lock"

// lockIndex creates the index lock file lock, waiting a while for a git
// that holds it. The lock is made as a hard link to a file in the state
// directory whose name holds this process (held, returned; the caller
// removes it): a host killed while it holds the lock leaves both, and the
// next lockIndex or sweep, finding that owner gone and the lock the same
// file, removes the lock (clearDeadLock), which no git could have made.
// Where the link cannot be made (a state directory on another file
// system), the lock is created directly, and one a killed host left stays
// until the user removes it, as a killed git's does.
func (r *Round) lockIndex(ctx context.Context, lock string) (f *os.File, held string, err error) {
	held = filepath.Join(r.state, "tmp-"+owner.Tag()+"-"+r.rec.ID+heldSuffix)
	os.Remove(held) // this process's own, of a call that failed to remove it
	if err = os.MkdirAll(r.state, 0o700); err == nil {
		f, err = os.OpenFile(held, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o666)
	}
	if err != nil {
		f, held = nil, "" // no held file: lock directly
	}
	deadline := time.Now().Add(indexLockWait)
	for {
		if held != "" {
			err = os.Link(held, lock)
			if err != nil && !errors.Is(err, fs.ErrExist) {
				f.Close() // no links here: lock directly
				os.Remove(held)
				f, held = nil, ""
				continue
			}
			if err == nil {
				return f, held, nil
			}
		} else {
			lf, err := os.OpenFile(lock, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o666)
			if err == nil {
				return lf, "", nil
			}
			if !errors.Is(err, fs.ErrExist) {
				return nil, "", &fs.PathError{Op: "lock", Path: lock, Err: err}
			}
		}
		if r.clearDeadLock(lock) {
			continue
		}
		if time.Now().After(deadline) {
			if f != nil {
				f.Close()
				os.Remove(held)
			}
			work := r.spec.Local
			return nil, "", fmt.Errorf("%w: the index lock %s stayed for %s (the work tree already holds the sandbox's files; the index and HEAD have not moved): another git is writing the index, or one was killed while it did; when no git runs in %s, remove %s and run Restore again", ErrRace, lock, indexLockWait, work, lock)
		}
		select {
		case <-ctx.Done():
			if f != nil {
				f.Close()
				os.Remove(held)
			}
			return nil, "", ctx.Err()
		case <-time.After(indexLockPoll):
		}
	}
}

// clearDeadLock removes the index lock lock when it is the same file as a
// held file (see lockIndex) in the state directory whose owner is gone: a
// host killed while it held the lock left it, and no git writes it. It
// reports whether it removed the lock.
func (r *Round) clearDeadLock(lock string) bool {
	fi, err := os.Lstat(lock)
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	ents, err := os.ReadDir(r.state)
	if err != nil {
		return false
	}
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), "tmp-")
		if !ok || !strings.HasSuffix(rest, heldSuffix) {
			continue
		}
		tag, _, _ := strings.Cut(rest, "-")
		if _, _, owned := owner.Parse(tag); !owned || owner.Alive(tag) {
			continue
		}
		hi, err := os.Lstat(filepath.Join(r.state, e.Name()))
		if err != nil || !os.SameFile(fi, hi) {
			continue
		}
		if err := os.Remove(lock); err != nil && !errors.Is(err, fs.ErrNotExist) {
			r.o.log.Warn("removing the index lock a killed host left", "path", lock, "error", err)
			return false
		}
		r.o.log.Warn("removed the index lock a killed host left", "path", lock, "owner", tag)
		return true
	}
	return false
}
