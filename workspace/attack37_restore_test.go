package workspace_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/workspace"
)

// Attack 37: a Restore that fails part-way moves the baseline for what it
// wrote (b0c5062), and only for that. These tests fail restores at a
// chosen path (the temporary file removed just before its rename: a write
// error; or the context cancelled there), on a full tmpfs, and with the
// index lock held; then the agent and the user go on, and the next
// Restore must bring the agent's change, keep the user's, and report
// every path.

// a37Hook fails a restore at the rename of the path at: mode "remove"
// removes the temporary file (a write error), "cancel" cancels the
// restore's context. It records every path placed.
type a37Hook struct {
	mu     sync.Mutex
	local  string
	at     string
	mode   string
	cancel context.CancelFunc
	fired  int
	placed []string
}

func (h *a37Hook) fn(tmp, rel string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.placed = append(h.placed, rel)
	if h.at == "" || rel != h.at {
		return
	}
	h.fired++
	switch h.mode {
	case "remove":
		p := filepath.Join(h.local, tmp)
		if _, err := os.Lstat(p); err != nil {
			p = filepath.Join(h.local, filepath.Dir(rel), tmp)
		}
		if err := os.Remove(p); err != nil {
			panic(err)
		}
	case "cancel":
		h.cancel()
	}
}

func (h *a37Hook) arm(at, mode string, cancel context.CancelFunc) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.at, h.mode, h.cancel, h.fired, h.placed = at, mode, cancel, 0, nil
}

func (h *a37Hook) Placed() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.placed...)
}

// a37Diff is what a correct Restore must report when the host holds
// before and the sandbox holds after: files and links that differ
// (Updated) and those the sandbox no longer has (Deleted), paths in
// keep (the user's) left out. Directories are left out.
func a37Diff(before, after map[string]string, keep ...string) (updated, deleted []string) {
	return a37DiffKind(before, after, false, keep...)
}

// a37DiffKind is a37Diff; with dirs, a directory that goes is Deleted
// too (a plain round lists them).
func a37DiffKind(before, after map[string]string, dirs bool, keep ...string) (updated, deleted []string) {
	skip := func(p string) bool {
		for _, k := range keep {
			if p == k {
				return true
			}
		}
		return false
	}
	for p, v := range after {
		if strings.HasPrefix(v, "d ") || skip(p) {
			continue
		}
		if before[p] != v {
			updated = append(updated, p)
		}
	}
	for p, v := range before {
		if skip(p) {
			continue
		}
		if strings.HasPrefix(v, "d ") {
			if _, ok := after[p]; dirs && !ok {
				deleted = append(deleted, p)
			}
			continue
		}
		if a, ok := after[p]; !ok || strings.HasPrefix(a, "d ") {
			deleted = append(deleted, p)
		}
	}
	sort.Strings(updated)
	sort.Strings(deleted)
	return updated, deleted
}

// TestA37MidwayFailureThenBothGoOn: a Restore fails at c (a write error or
// a cancellation, in that path's rename) after it wrote a and b (git:
// also after its deletions). Then the user edits b (which only the failed
// Restore wrote) and u; the agent reverts a to the prepare-time content,
// changes b and c again, re-creates what it deleted, turns its new
// directory back into a file and its new file back into a directory,
// retargets its link and deletes n; e it leaves as it was. The retry (on
// the same Round, or on a Reopen) must report exactly what it changes,
// keep only b (the user's edit), bring e (which no Restore wrote: its
// baseline must not have moved), and leave u.
func TestA37MidwayFailureThenBothGoOn(t *testing.T) {
	type tc struct {
		kind, format, mode string
		reopen             bool
	}
	var cases []tc
	for _, kind := range []string{"git", "plain"} {
		for _, mode := range []string{"remove", "cancel"} {
			for _, reopen := range []bool{false, true} {
				cases = append(cases, tc{kind, "sha1", mode, reopen})
			}
		}
	}
	cases = append(cases, tc{"git", "sha256", "remove", false}, tc{"git", "sha256", "cancel", true})
	for _, c := range cases {
		name := c.kind + "/" + c.format + "/" + c.mode
		if c.reopen {
			name += "/reopen"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, localRunner)
			state := t.TempDir()
			L, R := e.local, e.remote
			a36Files(t, L, c.kind, c.format, map[string]string{"a": "1\n", "b": "1\n", "c": "1\n", "d": "1\n",
				"dd/k": "k\n", "e": "1\n", "f": "f\n", "u": "1\n"})
			h := &a37Hook{local: L}
			opts := []workspace.Option{workspace.WithStateDir(state), workspace.WithBeforePlace(h.fn)}
			r, err := workspace.Prepare(ctx(t), e.spec, opts...)
			require.NoError(t, err)
			for _, p := range []string{"a", "b", "c", "e", "n"} {
				write(t, R, p, "x\n")
			}
			a36Rm(t, R, "d")
			a36Rm(t, R, "dd")
			write(t, R, "dd", "file\n")
			a36Rm(t, R, "f")
			write(t, R, "f/x", "fx\n")
			a36Link(t, R, "l", "a")
			cctx, cancel := context.WithCancel(ctx(t))
			defer cancel()
			h.arm("c", c.mode, cancel)
			_, err = r.Restore(cctx)
			t.Logf("failed restore: %v (placed %v)", err, h.Placed())
			tree := a36Tree(t, L)
			assert.Equal(t, "f 644 x\n", tree["a"], "a was written before c")
			if c.mode == "cancel" {
				// A cancellation is noticed after the work tree (git), or
				// not at all once the stream is in (plain).
				if c.kind == "git" {
					assert.ErrorIs(t, err, context.Canceled)
				} else {
					assert.NoError(t, err)
				}
			} else {
				require.Error(t, err)
				assert.ErrorIs(t, err, syscall.ENOENT)
				assert.Equal(t, "f 644 1\n", tree["e"], "e comes after c")
			}
			assert.NotErrorIs(t, err, workspace.ErrHostile)
			h.arm("", "", nil)
			// The user and the agent go on.
			write(t, L, "b", "user b\n")
			write(t, L, "u", "user u\n")
			write(t, R, "a", "1\n")
			write(t, R, "b", "y\n")
			write(t, R, "c", "y\n")
			write(t, R, "d", "1\n")
			a36Rm(t, R, "dd")
			write(t, R, "dd/k", "k\n")
			a36Rm(t, R, "f")
			write(t, R, "f", "f\n")
			a36Rm(t, R, "l")
			a36Link(t, R, "l", "b")
			a36Rm(t, R, "n")
			before := a36Tree(t, L)
			if c.reopen {
				r, err = workspace.Reopen(ctx(t), e.spec, r.ID(), opts...)
				require.NoError(t, err)
			}
			res, err := r.Restore(ctx(t))
			require.NoError(t, err)
			after := a36Tree(t, R)
			wantU, wantD := a37Diff(before, after, "b", "u")
			assert.Equal(t, wantU, res.Updated, "Updated")
			assert.Equal(t, wantD, res.Deleted, "Deleted")
			assert.Equal(t, []string{"b"}, res.Kept, "Kept: only the user's edit of b")
			assert.Empty(t, res.Refused, "reasons %v", res.Reasons)
			after["b"] = "f 644 user b\n"
			after["u"] = "f 644 user u\n"
			assert.Equal(t, after, a36Tree(t, L), "work tree")
			if c.kind == "git" {
				assert.Equal(t, a36Index(t, R), a36Index(t, L), "index")
				assert.Equal(t, " M b\n M c\n M e\n?? l\n", a36Status(t, R), "sandbox status")
				assert.Equal(t, " M b\n M c\n M e\n M u\n?? l\n", a36Status(t, L), "status")
			}
			// Once more: nothing changes; b is kept again.
			res, err = r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Empty(t, res.Updated)
			assert.Empty(t, res.Deleted)
			assert.Equal(t, []string{"b"}, res.Kept)
		})
	}
}

// TestA37AtEachPath: the Restore fails (a write error) at each path
// it writes in turn; then the agent either changes nothing, reverts
// everything to the prepare-time state, or changes everything again; the
// user only edits u (the agent never touches it) and adds a file. The
// retry must leave the host holding exactly the sandbox's tree (u and
// the user's new file aside), report exactly what it changed, and keep
// nothing. Failed at b0c5062 in three cases, fixed since: git/f_x/revert
// (the failed Restore removed file f and made the directory f, f/x
// failed; the agent puts f back as a file: f was Kept, never arrived, the
// host kept an empty directory and git status said " D f");
// git/f_y_z/again (an empty directory f/y the failed Restore made stayed
// after the agent removed it); plain/dd/nothing and plain/w/nothing (see
// TestA37PlainDirToFileRenameFails).
func TestA37AtEachPath(t *testing.T) {
	prep := map[string]string{"a": "1\n", "b": "1\n", "d": "1\n", "dd/k": "k\n", "dd/sub/z": "z\n", "f": "f\n", "u": "1\n", "w/k": "k\n"}
	for _, kind := range []string{"git", "plain"} {
		for _, at := range []string{"a", "b", "dd", "f/x", "f/y/z", "l", "ld", "n", "w", "w/k2"} {
			for _, then := range []string{"nothing", "revert", "again"} {
				t.Run(kind+"/"+strings.ReplaceAll(at, "/", "_")+"/"+then, func(t *testing.T) {
					e := newEnv(t, localRunner)
					state := t.TempDir()
					L, R := e.local, e.remote
					a36Files(t, L, kind, "sha1", prep)
					h := &a37Hook{local: L}
					opts := []workspace.Option{workspace.WithStateDir(state), workspace.WithBeforePlace(h.fn)}
					r, err := workspace.Prepare(ctx(t), e.spec, opts...)
					require.NoError(t, err)
					prepTree := a36Tree(t, R)
					write(t, R, "a", "x\n")
					write(t, R, "b", "x\n")
					write(t, R, "n", "x\n")
					a36Rm(t, R, "d")
					a36Rm(t, R, "dd")
					write(t, R, "dd", "file\n")
					a36Rm(t, R, "f")
					write(t, R, "f/x", "fx\n")
					write(t, R, "f/y/z", "fyz\n")
					a36Link(t, R, "l", "a")
					a36Link(t, R, "ld", "f/y")
					a36Rm(t, R, "w")
					a36Link(t, R, "w", "f")
					write(t, R, "w2/k2", "k2\n")
					h.arm(at, "remove", nil)
					_, err = r.Restore(ctx(t))
					placed := h.Placed()
					h.arm("", "", nil)
					fired := false
					for _, p := range placed {
						fired = fired || p == at
					}
					if !fired {
						t.Logf("%s is never placed (placed %v): restore %v", at, placed, err)
						require.NoError(t, err)
					} else {
						require.Error(t, err)
						assert.ErrorIs(t, err, syscall.ENOENT)
						assert.Contains(t, err.Error(), at)
					}
					t.Logf("after the failed restore: %v", a36Tree(t, L))
					write(t, L, "u", "user\n")
					write(t, L, "mine/x", "mine\n")
					switch then {
					case "revert":
						for _, p := range []string{"a", "b", "n", "dd", "f", "l", "ld", "w", "w2"} {
							a36Rm(t, R, p)
						}
						for p, v := range prep {
							write(t, R, p, v)
						}
						require.Equal(t, prepTree, a36Tree(t, R))
					case "again":
						write(t, R, "a", "x2\n")
						write(t, R, "b", "x2\n")
						write(t, R, "n", "x2\n")
						write(t, R, "d", "d2\n")
						a36Rm(t, R, "dd")
						write(t, R, "dd/k", "k2\n")
						write(t, R, "f/x", "fx2\n")
						a36Rm(t, R, "f/y")
						a36Rm(t, R, "l")
						a36Link(t, R, "l", "b")
						a36Rm(t, R, "ld")
						write(t, R, "ld", "ld2\n")
						a36Rm(t, R, "w")
						write(t, R, "w/k", "k2\n")
					}
					before := a36Tree(t, L)
					r2, err := workspace.Reopen(ctx(t), e.spec, r.ID(), opts...)
					require.NoError(t, err)
					res, err := r2.Restore(ctx(t))
					require.NoError(t, err)
					after := a36Tree(t, R)
					wantU, wantD := a37DiffKind(before, after, kind == "plain", "u", "mine", "mine/x")
					assert.Equal(t, wantU, res.Updated, "Updated")
					assert.Equal(t, wantD, res.Deleted, "Deleted")
					assert.Empty(t, res.Kept, "the user edited only u, which the agent never touched")
					assert.Empty(t, res.Refused, "reasons %v", res.Reasons)
					after["u"] = "f 644 user\n"
					after["mine"] = "d 755"
					after["mine/x"] = "f 644 mine\n"
					assert.Equal(t, after, a36Tree(t, L), "work tree")
					if kind == "git" {
						assert.Equal(t, a36Index(t, R), a36Index(t, L), "index")
					}
				})
			}
		}
	}
}

// TestA37FullDiskFileToDirThenRevert (git, a real full disk): the
// agent turns file f into a directory holding one large file f/x. The
// work tree is on a small tmpfs (the repository is not), so the Restore
// removes f, makes the directory f, and fails writing f/x with ENOSPC.
// Space is freed; meanwhile the agent changes its mind and puts f back
// as the file Prepare sent. The user touched nothing. Expected: the
// retry writes f (Updated [f]) and keeps nothing; the empty directory
// the failed Restore itself made is not the user's (at b0c5062 it was:
// f was Kept and never arrived).
func TestA37FullDiskFileToDirThenRevert(t *testing.T) {
	for _, then := range []string{"nothing", "revert"} {
		t.Run(then, func(t *testing.T) {
			e := newEnv(t, localRunner)
			mnt := localOnTmpfs(t, e, "4m")
			L, R := e.local, e.remote
			git(t, L, "init", "-q", "-b", "main", "--separate-git-dir", filepath.Join(filepath.Dir(mnt), "gitdir"))
			write(t, L, "a", "1\n")
			write(t, L, "f", "f\n")
			git(t, L, "add", "-A")
			git(t, L, "commit", "-q", "-m", "initial")
			r, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			a36Rm(t, R, "f")
			big := randomBytes(t, 1<<20)
			write(t, R, "f/x", big)
			filler := fill(t, mnt, 256<<10)
			_, err = r.Restore(ctx(t))
			require.Error(t, err)
			assert.ErrorIs(t, err, syscall.ENOSPC)
			assert.Contains(t, err.Error(), "f/x")
			t.Logf("after the failed restore: %v", a36Tree(t, L))
			require.NoError(t, os.Remove(filler))
			if then == "revert" {
				a36Rm(t, R, "f")
				write(t, R, "f", "f\n")
			}
			res, err := r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Empty(t, res.Kept, "the user touched nothing")
			assert.Empty(t, res.Refused, "reasons %v", res.Reasons)
			if then == "revert" {
				assert.Equal(t, []string{"f"}, res.Updated)
			} else {
				assert.Equal(t, []string{"f/x"}, res.Updated)
			}
			assert.Equal(t, a36Tree(t, R), a36Tree(t, L), "work tree")
			assert.Equal(t, a36Index(t, R), a36Index(t, L), "index")
			assert.Equal(t, a36Status(t, R), a36Status(t, L), "status")
		})
	}
}

// TestA37PlainDirToFileRenameFails (plain): the agent replaces the
// directory dd (dd/k) by a file dd. The Restore makes the file beside dd,
// removes the directory, and its rename into place fails (the temporary
// file vanished: a write error at the last step). The user touches
// nothing; the agent changes nothing. Expected: the retry writes dd
// (Updated [dd]), keeps nothing. The directory the failed Restore itself
// removed must not read as the user's deletion (it did at b0c5062).
func TestA37PlainDirToFileRenameFails(t *testing.T) {
	for _, to := range []string{"file", "link"} {
		t.Run(to, func(t *testing.T) {
			e := newEnv(t, localRunner)
			state := t.TempDir()
			L, R := e.local, e.remote
			write(t, L, "a", "1\n")
			write(t, L, "dd/k", "k\n")
			h := &a37Hook{local: L}
			opts := []workspace.Option{workspace.WithStateDir(state), workspace.WithBeforePlace(h.fn)}
			r, err := workspace.Prepare(ctx(t), e.spec, opts...)
			require.NoError(t, err)
			a36Rm(t, R, "dd")
			if to == "file" {
				write(t, R, "dd", "file\n")
			} else {
				a36Link(t, R, "dd", "a")
			}
			h.arm("dd", "remove", nil)
			_, err = r.Restore(ctx(t))
			h.arm("", "", nil)
			require.Error(t, err)
			assert.ErrorIs(t, err, syscall.ENOENT)
			t.Logf("after the failed restore: %v", a36Tree(t, L))
			res, err := r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Empty(t, res.Kept, "the user touched nothing")
			assert.Equal(t, []string{"dd"}, res.Updated)
			assert.Equal(t, a36Tree(t, R), a36Tree(t, L))
		})
	}
}

// TestA37GitIndexLockedIntentToAdd: the agent's git add -N n2 and git add
// s meet a held index lock (ErrRace after the work tree). The user then
// stages its own change of u and edits n2; the agent stages n2 whole.
// The retry: n2's work-tree file is the user's (nothing Kept there: the
// agent's file did not change), the local index entry of n2 is still the
// baseline's (absent: the failed Restore staged nothing), so the agent's
// staged n2 arrives; s arrives staged; the user's staged u stays.
func TestA37GitIndexLockedIntentToAdd(t *testing.T) {
	e := newEnv(t, localRunner)
	L, R := e.local, e.remote
	initRepo(t, L, map[string]string{"a": "1\n", "u": "1\n"})
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	write(t, R, "n2", "n2\n")
	git(t, R, "add", "-N", "n2")
	write(t, R, "s", "s\n")
	git(t, R, "add", "s")
	lock := filepath.Join(L, ".git", "index.lock")
	require.NoError(t, os.WriteFile(lock, nil, 0o644))
	_, err = r.Restore(ctx(t))
	require.ErrorIs(t, err, workspace.ErrRace)
	require.NoError(t, os.Remove(lock))
	assert.Equal(t, "n2\n", read(t, L, "n2"))
	assert.Equal(t, "?? n2\n?? s\n", a36Status(t, L))
	write(t, L, "u", "user\n")
	git(t, L, "add", "u")
	write(t, L, "n2", "user n2\n")
	git(t, R, "add", "n2")
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Empty(t, res.Kept)
	assert.Empty(t, res.Refused)
	assert.Empty(t, res.Updated, "the files already arrived (n2's is the user's now)")
	assert.Equal(t, "user n2\n", read(t, L, "n2"))
	assert.Equal(t, "AM n2\nA  s\nM  u\n", a36Status(t, L))
	// The agent undoes both (rm --cached): arrives.
	git(t, R, "rm", "-q", "--cached", "n2", "s")
	res, err = r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Empty(t, res.Kept)
	assert.Equal(t, "M  u\n?? n2\n?? s\n", a36Status(t, L))
}

// TestA37GitUserUnmergedBetweenRestores: the user's local merge leaves b
// unmerged between restores. A Restore then changes nothing and says to
// end the merge (a Restore into it would stage the agent's entries, which
// the user's git merge --abort resets away); once the user resolves and
// commits, the agent's changes of a (work tree, then staged) arrive and b
// stays the user's.
func TestA37GitUserUnmergedBetweenRestores(t *testing.T) {
	e := newEnv(t, localRunner)
	L, R := e.local, e.remote
	initRepo(t, L, map[string]string{"a": "1\n", "b": "1\n"})
	git(t, L, "checkout", "-q", "-b", "other")
	write(t, L, "b", "other\n")
	git(t, L, "commit", "-q", "-am", "other")
	git(t, L, "checkout", "-q", "main")
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	write(t, R, "a", "x\n")
	_, err = r.Restore(ctx(t))
	require.NoError(t, err)
	write(t, L, "b", "main\n")
	git(t, L, "commit", "-q", "-m", "main b", "b")
	cmd := exec.Command("git", "merge", "-q", "other")
	cmd.Dir = L
	cmd.Env = append(os.Environ(), gitEnv...)
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "the merge must conflict: %s", out)
	unmerged := git(t, L, "ls-files", "-u")
	require.NotEmpty(t, unmerged)
	conflicted := read(t, L, "b")
	write(t, R, "a", "y\n")
	write(t, R, "b", "agent\n")
	git(t, R, "add", "b")
	_, err = r.Restore(ctx(t))
	require.ErrorIs(t, err, workspace.ErrRepo)
	assert.Contains(t, err.Error(), "a merge is in progress in "+L)
	assert.Equal(t, unmerged, git(t, L, "ls-files", "-u"), "the unmerged entries stay")
	assert.Equal(t, conflicted, read(t, L, "b"))
	assert.Equal(t, "x\n", read(t, L, "a"), "nothing changed")
	write(t, L, "b", "resolved\n")
	git(t, L, "add", "b")
	git(t, L, "commit", "-q", "--no-edit")
	git(t, R, "add", "a")
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, res.Updated)
	assert.Equal(t, []string{"b"}, res.Kept)
	assert.Equal(t, "resolved\n", read(t, L, "b"))
	assert.Equal(t, "y\n", read(t, L, "a"))
	assert.Equal(t, "M  a\n", a36Status(t, L))
}

// TestA37GitFailThenUserCommitsThenAgentResets: a Restore of two agent
// commits fails writing b (a written, HEAD not moved, c not written).
// The user commits a by hand (the agent's content). The agent resets
// --hard to its first commit (only c changed). The retry merges the
// histories; a comes back to the sandbox's "1" (the failed Restore wrote
// "y": the baseline moved there), c arrives, nothing is Kept.
func TestA37GitFailThenUserCommitsThenAgentResets(t *testing.T) {
	e := newEnv(t, localRunner)
	L, R := e.local, e.remote
	initRepo(t, L, map[string]string{"a": "1\n", "b": "1\n", "c": "1\n"})
	h := &a37Hook{local: L}
	r, err := workspace.Prepare(ctx(t), e.spec, workspace.WithBeforePlace(h.fn))
	require.NoError(t, err)
	write(t, R, "c", "c\n")
	git(t, R, "commit", "-q", "-am", "agent 1")
	first := a36Head(t, R)
	write(t, R, "a", "y\n")
	write(t, R, "b", "y\n")
	git(t, R, "commit", "-q", "-am", "agent 2")
	h.arm("b", "remove", nil)
	_, err = r.Restore(ctx(t))
	h.arm("", "", nil)
	require.Error(t, err)
	assert.Equal(t, "y\n", read(t, L, "a"))
	assert.Equal(t, "1\n", read(t, L, "b"))
	git(t, L, "commit", "-q", "-m", "user takes a", "a")
	git(t, R, "reset", "-q", "--hard", first)
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Empty(t, res.Kept, "the user's commit holds what the failed Restore wrote")
	assert.Equal(t, []string{"a", "c"}, res.Updated, "the agent's reset of a arrives as a revert; c was never written")
	assert.True(t, res.Merged)
	assert.Equal(t, "1\n", read(t, L, "a"))
	assert.Equal(t, "1\n", read(t, L, "b"))
	assert.Equal(t, "c\n", read(t, L, "c"))
	assert.Equal(t, a36Tree(t, R), a36Tree(t, L))
}

// TestA37PlainLinksUserTouches: a plain round's link that arrived, then
// changed by both sides: the user's retarget, deletion, or replacement by
// a file wins (Kept) over the agent's retarget, deletion or change of
// type; untouched, the agent's link changes (to a file, a directory, a
// link again) arrive; a link matching Spec.Exclude never arrives and the
// user's own excluded file stays.
func TestA37PlainLinksUserTouches(t *testing.T) {
	e := newEnv(t, localRunner)
	e.spec.Exclude = []string{"*.log"}
	L, R := e.local, e.remote
	write(t, L, "a", "1\n")
	write(t, L, "b", "2\n")
	write(t, L, "x.log", "user log\n")
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	restore := func(step string) *workspace.Result {
		t.Helper()
		res, err := r.Restore(ctx(t))
		require.NoError(t, err, step)
		assert.Empty(t, res.Refused, "%s: reasons %v", step, res.Reasons)
		return res
	}
	a36Link(t, R, "l", "a")
	a36Link(t, R, "m", "a")
	a36Link(t, R, "k", "a")
	a36Link(t, R, "x.log", "a") // excluded: never arrives
	a36Link(t, R, "y.log", "a")
	res := restore("1")
	assert.Equal(t, []string{"k", "l", "m"}, res.Updated)
	assert.Equal(t, "f 644 user log\n", a36Tree(t, L)["x.log"])
	assert.False(t, exists(L, "y.log"))
	// The user retargets l, deletes m, replaces k by a file; the agent
	// retargets all three.
	a36Rm(t, L, "l")
	a36Link(t, L, "l", "b")
	a36Rm(t, L, "m")
	a36Rm(t, L, "k")
	write(t, L, "k", "user k\n")
	for _, p := range []string{"l", "m", "k"} {
		a36Rm(t, R, p)
		a36Link(t, R, p, "x.log")
	}
	res = restore("2")
	assert.Equal(t, []string{"k", "l", "m"}, res.Kept)
	assert.Empty(t, res.Updated)
	tree := a36Tree(t, L)
	assert.Equal(t, "l b", tree["l"])
	assert.Equal(t, "f 644 user k\n", tree["k"])
	assert.False(t, exists(L, "m"))
	// The agent deletes all three: still the user's.
	for _, p := range []string{"l", "m", "k"} {
		a36Rm(t, R, p)
	}
	res = restore("3")
	assert.Equal(t, []string{"k", "l"}, res.Kept)
	assert.Empty(t, res.Deleted)
	assert.Equal(t, "l b", a36Tree(t, L)["l"])
	// A fresh link n: arrives; then to a file; then to a directory; then
	// a link again; then deleted. The user touches nothing of it.
	a36Link(t, R, "n", "a")
	res = restore("n link")
	assert.Equal(t, []string{"n"}, res.Updated)
	a36Rm(t, R, "n")
	write(t, R, "n", "file\n")
	res = restore("n file")
	assert.Equal(t, []string{"n"}, res.Updated)
	a36Rm(t, R, "n")
	write(t, R, "n/z", "z\n")
	res = restore("n dir")
	assert.Equal(t, []string{"n/z"}, res.Updated)
	assert.Equal(t, []string{"n"}, res.Deleted)
	a36Rm(t, R, "n")
	a36Link(t, R, "n", "b")
	res = restore("n link again")
	assert.Equal(t, []string{"n"}, res.Updated)
	assert.Equal(t, []string{"n/z"}, res.Deleted, "n itself is Updated")
	assert.Equal(t, "l b", a36Tree(t, L)["n"])
	a36Rm(t, R, "n")
	a36Rm(t, R, "x.log")
	res = restore("n gone")
	assert.Equal(t, []string{"n"}, res.Deleted)
	assert.Equal(t, "f 644 user log\n", a36Tree(t, L)["x.log"])
	assert.False(t, exists(L, "n"))
}

// TestA37PlainDirToLinkAndBack: a directory the agent turns into a link
// and back, and one holding the user's excluded file (the link is then
// refused whole, the user's file stays, and the agent's later edit below
// the directory still arrives).
func TestA37PlainDirToLinkAndBack(t *testing.T) {
	e := newEnv(t, localRunner)
	e.spec.Exclude = []string{"*.log", "e/*.log"} // a pattern without a slash matches at the top only
	L, R := e.local, e.remote
	write(t, L, "a", "1\n")
	write(t, L, "d/k", "k\n")
	write(t, L, "e/k", "k\n")
	write(t, L, "e/x.log", "user log\n")
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	for _, p := range []string{"d", "e"} {
		a36Rm(t, R, p)
		a36Link(t, R, p, "a")
	}
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, []string{"d"}, res.Updated)
	assert.Equal(t, []string{"d/k"}, res.Deleted)
	assert.Equal(t, []string{"e", "e/k"}, res.Refused, "reasons %v", res.Reasons)
	assert.Equal(t, "f 644 user log\n", a36Tree(t, L)["e/x.log"])
	assert.Equal(t, "f 644 k\n", a36Tree(t, L)["e/k"])
	for _, p := range []string{"d", "e"} {
		a36Rm(t, R, p)
		write(t, R, p+"/k", "k2\n")
	}
	res, err = r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Empty(t, res.Kept)
	assert.Empty(t, res.Refused, "reasons %v", res.Reasons)
	assert.Equal(t, []string{"d/k", "e/k"}, res.Updated)
	assert.Equal(t, []string{"d"}, res.Deleted, "the link d the first Restore brought")
	want := a36Tree(t, R)
	want["e/x.log"] = "f 644 user log\n"
	assert.Equal(t, want, a36Tree(t, L))
}

// TestA37PlainSetuidUnchanged: a setuid file that arrived without its bit
// is refused again on every Restore while the sandbox keeps it, never
// Updated again nor Kept; the user's chmod of it then wins over the
// agent's next change (Kept).
func TestA37PlainSetuidUnchanged(t *testing.T) {
	e := newEnv(t, localRunner)
	L, R := e.local, e.remote
	write(t, L, "a", "1\n")
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	write(t, R, "a", "x\n")
	a36Chmod(t, R, "a", 0o755|os.ModeSetuid)
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, res.Updated)
	for i := range 2 {
		res, err = r.Restore(ctx(t))
		require.NoError(t, err)
		assert.Empty(t, res.Updated, "restore %d", i)
		assert.Empty(t, res.Kept, "restore %d", i)
		assert.Equal(t, []string{"a"}, res.Refused, "restore %d", i)
	}
	a36Chmod(t, L, "a", 0o700)
	write(t, R, "a", "y\n")
	a36Chmod(t, R, "a", 0o755|os.ModeSetuid)
	res, err = r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, res.Kept)
	assert.Equal(t, "f 700 x\n", a36Tree(t, L)["a"])
}
