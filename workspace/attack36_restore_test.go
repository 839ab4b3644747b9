package workspace_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

// Attack 36: a Restore moves the round's baseline to what arrived (commit
// 71414d0). These tests restore one round many times and check, after
// each Restore, that the host holds what the sandbox holds (work tree,
// index, status) except where the user's own change must win.
// The tests whose comment says "Failed at 71414d0" showed a defect of
// that commit, fixed since (each says what).

// a36Tree describes every entry of dir (the top .git and .airlock left
// out, and any path in skip): "f <perm> <content>" (content longer than
// 256 bytes as "sha256 <hex>"), "l <target>", "d <perm>".
func a36Tree(t *testing.T, dir string, skip ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if rel == ".git" || rel == ".airlock" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil // a .git file: SkipDir would skip the rest of the top
		}
		for _, s := range skip {
			if rel == s || strings.HasPrefix(rel, s+"/") {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "l " + target
		case fi.IsDir():
			out[rel] = fmt.Sprintf("d %o", fi.Mode()&(fs.ModePerm|fs.ModeSticky|fs.ModeSetgid|fs.ModeSetuid))
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			c := string(b)
			if len(b) > 256 {
				c = fmt.Sprintf("sha256 %x", sha256.Sum256(b))
			}
			out[rel] = fmt.Sprintf("f %o %s", fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky), c)
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

func a36Files(t *testing.T, dir, kind, format string, files map[string]string) {
	t.Helper()
	if kind == "git" {
		git(t, dir, "init", "-q", "-b", "main", "--object-format="+format)
		for k, v := range files {
			write(t, dir, k, v)
		}
		git(t, dir, "add", "-A")
		git(t, dir, "commit", "-q", "-m", "initial")
		return
	}
	for k, v := range files {
		write(t, dir, k, v)
	}
}

// a36Index is git ls-files -s (intent-to-add entries show there as the
// empty blob; git status tells them apart).
func a36Index(t *testing.T, dir string) string {
	t.Helper()
	return git(t, dir, "ls-files", "-s")
}

func a36Status(t *testing.T, dir string) string {
	t.Helper()
	return git(t, dir, "status", "--porcelain", "--untracked-files=all")
}

func a36Head(t *testing.T, dir string) string {
	t.Helper()
	return strings.TrimSpace(git(t, dir, "rev-parse", "HEAD"))
}

// a36Same asserts that the host holds what the sandbox holds: the work
// tree, and for git the index, status and HEAD.
func a36Same(t *testing.T, e *env, isGit bool, step string) {
	t.Helper()
	assert.Equal(t, a36Tree(t, e.remote), a36Tree(t, e.local), "%s: work tree", step)
	if isGit {
		assert.Equal(t, a36Head(t, e.remote), a36Head(t, e.local), "%s: HEAD", step)
		assert.Equal(t, a36Index(t, e.remote), a36Index(t, e.local), "%s: index", step)
		assert.Equal(t, a36Status(t, e.remote), a36Status(t, e.local), "%s: status", step)
	}
}

func a36Rm(t *testing.T, dir, rel string) {
	t.Helper()
	require.NoError(t, os.RemoveAll(filepath.Join(dir, filepath.FromSlash(rel))))
}

func a36Chmod(t *testing.T, dir, rel string, m os.FileMode) {
	t.Helper()
	require.NoError(t, os.Chmod(filepath.Join(dir, filepath.FromSlash(rel)), m))
}

func a36Link(t *testing.T, dir, rel, target string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.Symlink(target, p))
}

// TestA36GitLongSequence: one git round (SHA-1 and SHA-256) restored
// after each of many agent steps: commits, uncommitted edits, staged-only
// changes, mode changes, renames, git rm --cached, intent-to-add, a file
// that becomes a directory and back, in-tree links, deletions and
// re-creations, and finally a reset to the prepared commit. After each
// Restore the host's work tree, index, status and HEAD equal the
// sandbox's; nothing is Kept or Refused; restoring again changes nothing.
func TestA36GitLongSequence(t *testing.T) {
	for _, tc := range []struct{ format, runner string }{{"sha256", "local"}, {"sha1", "remotetest"}} {
		format := tc.format
		t.Run(tc.format+"/"+tc.runner, func(t *testing.T) {
			newRunner := localRunner
			for _, rc := range runners {
				if rc.name == tc.runner {
					newRunner = rc.new
				}
			}
			e := newEnv(t, newRunner)
			git(t, e.local, "init", "-q", "-b", "main", "--object-format="+format)
			write(t, e.local, "a", "1\n")
			write(t, e.local, "dir/k", "k\n")
			write(t, e.local, "dir/sub/deep", "deep\n")
			git(t, e.local, "add", "-A")
			git(t, e.local, "commit", "-q", "-m", "initial")
			prepared := a36Head(t, e.local)
			r, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			a36Same(t, e, true, "after prepare")
			R := e.remote
			steps := []struct {
				name string
				do   func()
			}{
				{"commit", func() {
					write(t, R, "a", "x\n")
					write(t, R, "b", "b\n")
					git(t, R, "add", "-A")
					git(t, R, "commit", "-q", "-m", "agent 1")
				}},
				{"uncommitted", func() { write(t, R, "a", "y\n"); write(t, R, "u", "u\n") }},
				{"staged only", func() { write(t, R, "c", "c1\n"); git(t, R, "add", "c"); write(t, R, "c", "c2\n") }},
				{"staged mode", func() { a36Chmod(t, R, "a", 0o755); git(t, R, "add", "a"); a36Chmod(t, R, "b", 0o755) }},
				{"rename", func() { git(t, R, "mv", "b", "b2") }},
				{"add u", func() { git(t, R, "add", "u") }},
				{"rm --cached u", func() { git(t, R, "rm", "-q", "--cached", "u") }},
				{"add n", func() { write(t, R, "n", "n\n"); git(t, R, "add", "n") }},
				{"unstage n", func() { git(t, R, "rm", "-q", "--cached", "n") }},
				{"file to dir", func() { a36Rm(t, R, "u"); write(t, R, "u/x", "ux\n") }},
				{"dir to file", func() { a36Rm(t, R, "dir"); write(t, R, "dir", "now a file\n") }},
				{"in-tree link", func() { a36Link(t, R, "l", "b2"); a36Link(t, R, "ld", "u") }},
				{"link retarget", func() { a36Rm(t, R, "l"); a36Link(t, R, "l", "c") }},
				{"link to file", func() { a36Rm(t, R, "l"); write(t, R, "l", "was a link\n") }},
				{"dir back", func() { a36Rm(t, R, "dir"); write(t, R, "dir/k", "k\n"); write(t, R, "dir/sub/deep", "deep2\n") }},
				{"commit all", func() { git(t, R, "add", "-A"); git(t, R, "commit", "-q", "-m", "agent 2") }},
				{"committed delete, recreate uncommitted", func() {
					git(t, R, "rm", "-q", "b2")
					git(t, R, "commit", "-q", "-m", "agent 3")
					write(t, R, "b2", "b\n")
				}},
				{"delete a everywhere", func() { git(t, R, "rm", "-q", "a") }},
				{"recreate a as at prepare", func() { write(t, R, "a", "1\n") }},
				{"stage a as at prepare", func() { git(t, R, "add", "a") }},
				{"mode only", func() { a36Chmod(t, R, "c", 0o755) }},
				{"mode back", func() { a36Chmod(t, R, "c", 0o644) }},
			}
			for i, s := range steps {
				step := fmt.Sprintf("step %d (%s)", i, s.name)
				s.do()
				res, err := r.Restore(ctx(t))
				require.NoError(t, err, step)
				assert.Empty(t, res.Kept, step)
				assert.Empty(t, res.Refused, step)
				assert.Empty(t, res.StagedDropped, step)
				a36Same(t, e, true, step)
				again, err := r.Restore(ctx(t))
				require.NoError(t, err, step+" again")
				assert.Empty(t, again.Updated, step+" again")
				assert.Empty(t, again.Deleted, step+" again")
				assert.Empty(t, again.Kept, step+" again")
				a36Same(t, e, true, step+" again")
			}
			// The agent puts everything back as Prepare left it.
			agentHead := a36Head(t, e.local)
			git(t, R, "reset", "-q", "--hard", prepared)
			git(t, R, "clean", "-q", "-fd")
			res, err := r.Restore(ctx(t))
			require.NoError(t, err, "reset")
			assert.Empty(t, res.Kept)
			assert.Empty(t, res.Refused)
			assert.Equal(t, a36Tree(t, R), a36Tree(t, e.local), "reset: work tree")
			assert.Equal(t, a36Index(t, R), a36Index(t, e.local), "reset: index")
			assert.Equal(t, agentHead, a36Head(t, e.local), "the local HEAD does not move back")
		})
	}
}

// TestA36IntentToAddUndone: the agent's git add -N n arrives as an
// intent-to-add entry; the agent then undoes it (git rm --cached n). Restoring
// again must bring the undo: the baseline index moved to the intent-to-add
// entry that arrived, the sandbox no longer has it, and the local entry is
// still the one that arrived. Failed at 71414d0: the local index keeps the
// intent-to-add entry (git status " A n" locally, "?? n" in the sandbox), on
// every later Restore.
func TestA36IntentToAddUndone(t *testing.T) {
	e := newEnv(t, localRunner)
	r := prepareOneFile(t, e, "git")
	write(t, e.remote, "n", "n\n")
	git(t, e.remote, "add", "-N", "n")
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	require.Empty(t, res.Kept)
	require.Equal(t, " A n\n", a36Status(t, e.local), "the intent-to-add entry arrived")
	git(t, e.remote, "rm", "-q", "--cached", "n")
	require.Equal(t, "?? n\n", a36Status(t, e.remote))
	res, err = r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Empty(t, res.Kept)
	assert.Equal(t, "?? n\n", a36Status(t, e.local), "the agent's undo of git add -N arrives")
}

// TestA36IntentToAddThenStaged: after the agent's intent-to-add
// entry arrived, the agent stages the file whole (git add n). Nobody but
// the agent touched n, so the staged entry must arrive. Failed at 71414d0: n is
// listed in Kept, as if the intent-to-add entry that the previous Restore
// itself wrote were the user's change, and the local index keeps the
// intent-to-add entry.
func TestA36IntentToAddThenStaged(t *testing.T) {
	e := newEnv(t, localRunner)
	r := prepareOneFile(t, e, "git")
	write(t, e.remote, "n", "n\n")
	git(t, e.remote, "add", "-N", "n")
	_, err := r.Restore(ctx(t))
	require.NoError(t, err)
	require.Equal(t, " A n\n", a36Status(t, e.local))
	git(t, e.remote, "add", "n")
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Empty(t, res.Kept, "Kept means only that a local edit won; the user made none")
	assert.Equal(t, a36Index(t, e.remote), a36Index(t, e.local))
	assert.Equal(t, "A  n\n", a36Status(t, e.local))
}

// TestA36UserEditsAcrossRestores: the user's own edits, deletions and
// reverts between restores, over both kinds. A kept edit stays the
// user's (and the baseline stays), a convergent edit moves the baseline,
// a path both sides deleted is absent in the baseline (so the agent
// re-creating it with the prepare-time content arrives).
func TestA36UserEditsAcrossRestores(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, localRunner)
			files := map[string]string{"a": "1\n", "b": "1\n", "c": "1\n", "d": "1\n"}
			seed(t, e.local, kind, files)
			r, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			L, R := e.local, e.remote
			// Restore 1: a both edited (kept), b deleted locally and
			// changed remotely (kept: a local deletion is a local edit),
			// c edited the same on both sides, d deleted on both sides.
			write(t, L, "a", "user\n")
			write(t, R, "a", "agent\n")
			a36Rm(t, L, "b")
			write(t, R, "b", "agent\n")
			write(t, L, "c", "same\n")
			write(t, R, "c", "same\n")
			a36Rm(t, L, "d")
			a36Rm(t, R, "d")
			res, err := r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, []string{"a", "b"}, res.Kept)
			assert.Empty(t, res.Updated)
			assert.Empty(t, res.Refused)
			assert.Equal(t, "user\n", read(t, L, "a"))
			assert.False(t, exists(L, "b"))
			assert.Equal(t, "same\n", read(t, L, "c"))
			assert.False(t, exists(L, "d"))
			// Restore 2: nothing changed anywhere: the same edits are kept
			// (and listed) again, nothing is written.
			res, err = r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, []string{"a", "b"}, res.Kept)
			assert.Empty(t, res.Updated)
			assert.Empty(t, res.Deleted)
			// Restore 3: the user reverts a (to the baseline, which stayed
			// at "1"), the agent changes c (baseline moved to "same") and
			// re-creates d as Prepare sent it (baseline moved to absent).
			write(t, L, "a", "1\n")
			write(t, R, "c", "agent c\n")
			write(t, R, "d", "1\n")
			res, err = r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, []string{"a", "c", "d"}, res.Updated)
			assert.Equal(t, []string{"b"}, res.Kept)
			assert.Equal(t, "agent\n", read(t, L, "a"))
			assert.Equal(t, "agent c\n", read(t, L, "c"))
			assert.Equal(t, "1\n", read(t, L, "d"))
			// Restore 4: the agent deletes b too (the user's deletion and
			// the agent's now agree: the baseline moves to absent) and
			// edits a; the user edits c.
			a36Rm(t, R, "b")
			write(t, R, "a", "agent 2\n")
			write(t, L, "c", "user c\n")
			write(t, R, "c", "agent c2\n")
			res, err = r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, []string{"a"}, res.Updated)
			assert.Equal(t, []string{"c"}, res.Kept)
			assert.Empty(t, res.Deleted)
			assert.Equal(t, "agent 2\n", read(t, L, "a"))
			assert.Equal(t, "user c\n", read(t, L, "c"))
			// Restore 5: the agent re-creates b as Prepare had it: it
			// arrives. The agent deletes a: it goes (still the baseline).
			write(t, R, "b", "1\n")
			a36Rm(t, R, "a")
			res, err = r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, []string{"b"}, res.Updated)
			assert.Equal(t, []string{"a"}, res.Deleted)
			assert.Equal(t, []string{"c"}, res.Kept)
			assert.Equal(t, "1\n", read(t, L, "b"))
			assert.False(t, exists(L, "a"))
			assert.Equal(t, "user c\n", read(t, L, "c"))
			// Restore 6: the user deletes c (a local edit still: the
			// baseline of c is "same"); the agent deletes c too: both
			// agree, nothing kept, c absent.
			a36Rm(t, L, "c")
			a36Rm(t, R, "c")
			res, err = r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Empty(t, res.Kept)
			assert.Empty(t, res.Updated)
			assert.False(t, exists(L, "c"))
			// Restore 7: the agent re-creates c as "same" (its old
			// baseline): it arrives, since the baseline moved to absent.
			write(t, R, "c", "same\n")
			res, err = r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, []string{"c"}, res.Updated)
			assert.Equal(t, "same\n", read(t, L, "c"))
			assert.Equal(t, a36Tree(t, R), a36Tree(t, L))
		})
	}
}

// TestA36UserStagesBetweenRestores: the user's staged change beats the
// agent's; when the user puts the index entry and the file back to what
// the previous Restore brought, the agent's next staged change arrives.
func TestA36UserStagesBetweenRestores(t *testing.T) {
	e := newEnv(t, localRunner)
	r := prepareOneFile(t, e, "git")
	L, R := e.local, e.remote
	write(t, R, "a", "x\n")
	git(t, R, "add", "a")
	_, err := r.Restore(ctx(t))
	require.NoError(t, err)
	require.Equal(t, a36Index(t, R), a36Index(t, L))
	// The user stages their own version; the agent stages another.
	write(t, L, "a", "u\n")
	git(t, L, "add", "a")
	userIndex := a36Index(t, L)
	write(t, R, "a", "y\n")
	git(t, R, "add", "a")
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, res.Kept)
	assert.Equal(t, userIndex, a36Index(t, L), "the user's staged entry stays")
	assert.Equal(t, "u\n", read(t, L, "a"))
	// The user unstages (index back to HEAD's "1", not the baseline's
	// "x"): still a change of the user's, kept.
	git(t, L, "reset", "-q", "--", "a")
	headIndex := a36Index(t, L)
	write(t, R, "a", "z\n")
	git(t, R, "add", "a")
	res, err = r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, res.Kept)
	assert.Equal(t, headIndex, a36Index(t, L))
	assert.Equal(t, "u\n", read(t, L, "a"))
	// The user puts back exactly what the first Restore brought (file
	// and index "x"): the agent's staged "z" arrives.
	write(t, L, "a", "x\n")
	git(t, L, "add", "a")
	res, err = r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Empty(t, res.Kept)
	assert.Equal(t, []string{"a"}, res.Updated)
	a36Same(t, e, true, "after the user's undo")
	// The user takes the agent's next version by hand (file and index):
	// the host already holds the sandbox's entry, the baseline moves, and
	// the agent's version after that arrives.
	write(t, R, "a", "w\n")
	git(t, R, "add", "a")
	write(t, L, "a", "w\n")
	git(t, L, "add", "a")
	res, err = r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Empty(t, res.Kept)
	a36Same(t, e, true, "convergent")
	write(t, R, "a", "v\n")
	git(t, R, "add", "a")
	res, err = r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Empty(t, res.Kept)
	assert.Equal(t, []string{"a"}, res.Updated)
	a36Same(t, e, true, "after convergent")
}

// TestA36PlainLongSequence: a plain round restored after each of many
// agent steps (edits, new files, deletions, mode changes, a file that
// becomes a directory and back, a revert to the prepare state; links:
// see TestA36PlainLinkArrivedThenChanged): after each Restore the host's
// tree equals the sandbox's.
func TestA36PlainLongSequence(t *testing.T) {
	e := newEnv(t, localRunner)
	L, R := e.local, e.remote
	write(t, L, "a", "1\n")
	write(t, L, "dir/k", "k\n")
	write(t, L, "dir/sub/deep", "deep\n")
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	prepared := a36Tree(t, R)
	require.Equal(t, prepared, a36Tree(t, L))
	steps := []struct {
		name string
		do   func()
	}{
		{"edit and new", func() { write(t, R, "a", "x\n"); write(t, R, "b", "b\n") }},
		{"mode", func() { a36Chmod(t, R, "a", 0o755); a36Chmod(t, R, "b", 0o600) }},
		{"mode back", func() { a36Chmod(t, R, "a", 0o644) }},
		{"dir mode", func() { a36Chmod(t, R, "dir/sub", 0o700) }},
		{"file to dir", func() { a36Rm(t, R, "b"); write(t, R, "b/x", "bx\n") }},
		{"dir to file", func() { a36Rm(t, R, "dir"); write(t, R, "dir", "a file\n") }},
		{"new files", func() { write(t, R, "l", "l\n"); write(t, R, "ld/x", "x\n") }},
		{"delete all", func() {
			for _, p := range []string{"a", "b", "dir", "l", "ld"} {
				a36Rm(t, R, p)
			}
		}},
		{"prepare state", func() {
			write(t, R, "a", "1\n")
			write(t, R, "dir/k", "k\n")
			write(t, R, "dir/sub/deep", "deep\n")
		}},
	}
	for i, s := range steps {
		step := fmt.Sprintf("step %d (%s)", i, s.name)
		s.do()
		res, err := r.Restore(ctx(t))
		require.NoError(t, err, step)
		assert.Empty(t, res.Kept, step)
		assert.Empty(t, res.Refused, step)
		a36Same(t, e, false, step)
		again, err := r.Restore(ctx(t))
		require.NoError(t, err, step+" again")
		assert.Empty(t, again.Updated, step+" again")
		assert.Empty(t, again.Deleted, step+" again")
		assert.Empty(t, again.Kept, step+" again")
		a36Same(t, e, false, step+" again")
	}
	assert.Equal(t, prepared, a36Tree(t, L))
}

// TestA36ExcludeAcrossRestores: paths matching Spec.Exclude never travel,
// in either direction, over several restores, whatever the agent does
// with them (writes, commits with git add -f, deletes), and the user's
// own excluded files stay the user's.
func TestA36ExcludeAcrossRestores(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, localRunner)
			e.spec.Exclude = []string{"secret", "*.log", "priv"}
			L, R := e.local, e.remote
			a36Files(t, L, kind, "sha1", map[string]string{"a": "1\n"})
			write(t, L, "secret", "local secret\n")
			write(t, L, "x.log", "local log\n")
			write(t, L, "priv/key", "k\n")
			r, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			for _, p := range []string{"secret", "x.log", "priv"} {
				assert.False(t, exists(R, p), p+" travelled")
			}
			check := func(step string, wantSecret string) {
				t.Helper()
				assert.Equal(t, wantSecret, read(t, L, "secret"), step)
				assert.Equal(t, "local log\n", read(t, L, "x.log"), step)
				assert.Equal(t, "k\n", read(t, L, "priv/key"), step)
				assert.False(t, exists(L, "y.log"), step)
				assert.False(t, exists(L, "priv/agent"), step)
			}
			// 1: the agent writes excluded paths.
			write(t, R, "secret", "agent secret\n")
			write(t, R, "x.log", "agent log\n")
			write(t, R, "y.log", "agent log\n")
			write(t, R, "priv/agent", "a\n")
			write(t, R, "a", "x\n")
			res, err := r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, []string{"a"}, res.Updated)
			assert.Empty(t, res.Kept)
			check("restore 1", "local secret\n")
			// 2: the user edits the secret; the agent commits its
			// excluded files (git) or deletes them (plain).
			write(t, L, "secret", "user secret\n")
			if kind == "git" {
				git(t, R, "add", "-f", "-A")
				git(t, R, "commit", "-q", "-m", "agent commits everything")
			} else {
				a36Rm(t, R, "secret")
				a36Rm(t, R, "x.log")
			}
			write(t, R, "a", "y\n")
			res, err = r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, []string{"a"}, res.Updated)
			assert.Empty(t, res.Kept)
			assert.Empty(t, res.Deleted)
			check("restore 2", "user secret\n")
			if kind == "git" {
				assert.Len(t, res.Rewritten, 1)
				tree := git(t, L, "ls-tree", "-r", "--name-only", "HEAD")
				assert.Equal(t, "a\n", tree, "the local history holds no excluded path")
				assert.Equal(t, "a\n", git(t, L, "ls-files"))
			}
			// 3: the agent deletes its excluded files (and commits that).
			if kind == "git" {
				git(t, R, "rm", "-q", "-r", "secret", "x.log", "y.log", "priv")
				git(t, R, "commit", "-q", "-m", "agent removes")
			} else {
				a36Rm(t, R, "y.log")
				a36Rm(t, R, "priv")
			}
			write(t, R, "a", "z\n")
			res, err = r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, []string{"a"}, res.Updated)
			assert.Empty(t, res.Deleted)
			assert.Empty(t, res.Kept)
			check("restore 3", "user secret\n")
			if kind == "git" {
				assert.Equal(t, "a\n", git(t, L, "ls-tree", "-r", "--name-only", "HEAD"))
				assert.Equal(t, " M a\n?? priv/key\n?? secret\n?? x.log\n", a36Status(t, L))
			}
			// 4: the agent writes the excluded paths once more.
			write(t, R, "secret", "agent again\n")
			write(t, R, "priv/key", "agent key\n")
			res, err = r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Empty(t, res.Updated)
			assert.Empty(t, res.Kept)
			check("restore 4", "user secret\n")
		})
	}
}

// TestA36PlainLinkArrivedThenChanged: in a plain round the agent makes an
// in-tree link l -> a; it arrives (Updated [l]). The baseline must then be
// that link ("at each path where the host now holds the sandbox's entry ...
// the baseline becomes that entry"). Failed at 71414d0: the baseline does not
// hold it, so the next Restore reads the link that Restore itself wrote as "a
// local symbolic link or special file stands there, which a plain directory's
// round does not send": the agent's retarget is Refused, and the agent's later
// deletion of l is silently skipped (not Deleted, not Refused, not Kept): the
// host keeps a link the sandbox no longer has and Result says nothing.
func TestA36PlainLinkArrivedThenChanged(t *testing.T) {
	e := newEnv(t, localRunner)
	L, R := e.local, e.remote
	write(t, L, "a", "1\n")
	write(t, L, "b", "2\n")
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	a36Link(t, R, "l", "a")
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	require.Equal(t, []string{"l"}, res.Updated)
	require.Equal(t, a36Tree(t, R), a36Tree(t, L))
	// The agent retargets its own link.
	a36Rm(t, R, "l")
	a36Link(t, R, "l", "b")
	res, err = r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Empty(t, res.Refused, "reasons: %v", res.Reasons)
	assert.Equal(t, []string{"l"}, res.Updated)
	assert.Equal(t, a36Tree(t, R), a36Tree(t, L))
	// The agent deletes its link.
	a36Rm(t, R, "l")
	res, err = r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, []string{"l"}, res.Deleted, "the agent's deletion of its own link arrives (or is at least reported)")
	assert.False(t, exists(L, "l"))
}

// TestA36MaxBytesRefusedThenBack: a git sandbox file over WithMaxBytes is
// refused on every Restore and the baseline stays; the user's edit made
// meanwhile is never lost; when the agent puts a small file there, it
// arrives once the user's edit is undone.
func TestA36MaxBytesRefusedThenBack(t *testing.T) {
	e := newEnv(t, localRunner)
	L, R := e.local, e.remote
	initRepo(t, L, map[string]string{"a": "1\n"})
	r, err := workspace.Prepare(ctx(t), e.spec, workspace.WithMaxBytes(16<<10))
	require.NoError(t, err)
	big := strings.Repeat("0", 64<<10)
	write(t, R, "a", big)
	write(t, R, "n", big)
	for i := range 2 {
		res, err := r.Restore(ctx(t))
		require.NoError(t, err, "restore %d", i)
		assert.Equal(t, []string{"a", "n"}, res.Refused, "restore %d", i)
		assert.Empty(t, res.Updated, "restore %d", i)
		assert.Equal(t, "1\n", read(t, L, "a"), "restore %d", i)
		assert.False(t, exists(L, "n"), "restore %d", i)
		assert.Empty(t, a36Status(t, L), "restore %d", i)
	}
	// The agent puts a back as Prepare sent it: nothing to do; n goes.
	write(t, R, "a", "1\n")
	a36Rm(t, R, "n")
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Empty(t, res.Refused)
	assert.Empty(t, res.Updated)
	assert.Empty(t, res.Deleted)
	// Big again, and the user edits a meanwhile: refused, the user's
	// edit stays; then the agent writes a small a: kept (the user's edit).
	write(t, R, "a", big)
	write(t, L, "a", "user\n")
	res, err = r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, "user\n", read(t, L, "a"))
	assert.Equal(t, []string{"a"}, res.Kept, "the local edit wins before any size check")
	assert.Empty(t, res.Refused)
	write(t, R, "a", "small\n")
	res, err = r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, res.Kept)
	assert.Equal(t, "user\n", read(t, L, "a"))
	// The user undoes the edit: the small file arrives.
	write(t, L, "a", "1\n")
	res, err = r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, res.Updated)
	assert.Empty(t, res.Kept)
	assert.Equal(t, "small\n", read(t, L, "a"))
	a36Same(t, e, true, "end")
}

// TestA36CommittedOverLimitThenSmallKept: the agent commits a
// file over WithMaxBytes (the bundle compresses within the limit): the
// commit arrives, the work-tree file is refused (the local file stays
// "1", the local index entry follows HEAD to the big blob, so git status
// shows " M a"). The agent then commits a small version. It arrives
// (Updated [a], work tree, index and status equal the sandbox's), yet the
// Result also lists a in Kept, though the user made no edit and nothing
// was kept ("Kept means only that a local edit won"). An adapter showing
// Kept tells the user their edit of a beat the agent's: it did not.
func TestA36CommittedOverLimitThenSmallKept(t *testing.T) {
	e := newEnv(t, localRunner)
	L, R := e.local, e.remote
	initRepo(t, L, map[string]string{"a": "1\n"})
	r, err := workspace.Prepare(ctx(t), e.spec, workspace.WithMaxBytes(16<<10))
	require.NoError(t, err)
	write(t, R, "a", strings.Repeat("0", 64<<10))
	git(t, R, "commit", "-q", "-am", "big")
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, res.Refused)
	assert.Equal(t, 1, res.Commits)
	assert.Equal(t, "1\n", read(t, L, "a"), "the refused file was not written")
	assert.Equal(t, " M a\n", a36Status(t, L))
	res, err = r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, res.Refused, "refused again")
	assert.Equal(t, " M a\n", a36Status(t, L), "nothing moved")
	write(t, R, "a", "small\n")
	git(t, R, "commit", "-q", "-am", "small")
	res, err = r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Empty(t, res.Refused)
	assert.Equal(t, []string{"a"}, res.Updated)
	assert.Equal(t, "small\n", read(t, L, "a"))
	a36Same(t, e, true, "after the small commit")
	assert.Empty(t, res.Kept, "nothing was kept: the host holds the sandbox's a in the work tree and the index")
}

// TestA36PlainSetuidThenChanged: in a plain round the agent leaves a
// setuid file a: it is written without the bit, listed in Updated and
// Refused (documented). What Restore itself wrote is not read as the
// user's edit later: the agent's next change (setuid kept) arrives the
// same way, and then one without the bit arrives plainly, never Kept.
func TestA36PlainSetuidThenChanged(t *testing.T) {
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
	require.Equal(t, []string{"a"}, res.Refused)
	require.Equal(t, "f 755 x\n", a36Tree(t, L)["a"])
	write(t, R, "a", "w\n")
	a36Chmod(t, R, "a", 0o755|os.ModeSetuid)
	res, err = r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Empty(t, res.Kept)
	assert.Equal(t, []string{"a"}, res.Updated)
	assert.Equal(t, []string{"a"}, res.Refused)
	assert.Equal(t, "f 755 w\n", a36Tree(t, L)["a"])
	// The agent drops the bit and changes the file.
	a36Chmod(t, R, "a", 0o755)
	write(t, R, "a", "y\n")
	res, err = r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Empty(t, res.Kept, "the user made no edit")
	assert.Equal(t, []string{"a"}, res.Updated)
	assert.Equal(t, "y\n", read(t, L, "a"))
}

// TestA36PlainStickyDirThenChmod: a sandbox directory with the sticky bit
// arrives without it (silently, documented), and without the bits the
// umask withholds (the user's directory was 0755); the agent's later
// change of the directory's bits must still arrive, and not read as a
// local change.
func TestA36PlainStickyDirThenChmod(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	e := newEnv(t, localRunner)
	L, R := e.local, e.remote
	write(t, L, "d/f", "1\n")
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	a36Chmod(t, R, "d", 0o777|os.ModeSticky)
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, "d 755", a36Tree(t, L)["d"])
	assert.Empty(t, res.Kept)
	a36Chmod(t, R, "d", 0o700)
	res, err = r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Empty(t, res.Kept)
	assert.Equal(t, "d 700", a36Tree(t, L)["d"])
	assert.Equal(t, []string{"d"}, res.Updated)
}

// TestA36LinkOutThenIn: the agent replaces a file by a link out of the
// tree (refused, the file stays, and so does the baseline), then by an
// in-tree link (arrives: the local file is still the baseline), then by a
// file with the prepare-time content (arrives), then deletes it (goes).
func TestA36LinkOutThenIn(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, localRunner)
			L, R := e.local, e.remote
			files := map[string]string{"a": "1\n", "b": "2\n"}
			a36Files(t, L, kind, "sha1", files)
			r, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			a36Rm(t, R, "a")
			a36Link(t, R, "a", "/etc/passwd")
			for i := range 2 {
				res, err := r.Restore(ctx(t))
				require.NoError(t, err)
				assert.Equal(t, []string{"a"}, res.Refused, "restore %d", i)
				assert.Equal(t, "f 644 1\n", a36Tree(t, L)["a"], "restore %d", i)
			}
			a36Rm(t, R, "a")
			a36Link(t, R, "a", "../sandbox/work/b") // leaves the tree: refused too
			res, err := r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, []string{"a"}, res.Refused)
			assert.Equal(t, "f 644 1\n", a36Tree(t, L)["a"])
			a36Rm(t, R, "a")
			a36Link(t, R, "a", "b")
			res, err = r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Empty(t, res.Refused)
			assert.Equal(t, []string{"a"}, res.Updated)
			assert.Equal(t, "l b", a36Tree(t, L)["a"])
			a36Rm(t, R, "a")
			write(t, R, "a", "1\n")
			res, err = r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Empty(t, res.Refused)
			assert.Equal(t, []string{"a"}, res.Updated)
			assert.Equal(t, "f 644 1\n", a36Tree(t, L)["a"])
			a36Rm(t, R, "a")
			res, err = r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, []string{"a"}, res.Deleted)
			assert.False(t, exists(L, "a"))
			a36Same(t, e, kind == "git", "end")
		})
	}
}

// TestA36DotGitPathAcrossRestores: a sandbox file under a .git component
// (sub/.git/config, SUB/.GIT./hooks) is refused on every Restore and
// never written; when the agent removes it nothing happens locally; the
// user's own file at such a path (untracked in a plain tree) is never
// touched.
func TestA36DotGitPathAcrossRestores(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, localRunner)
			L, R := e.local, e.remote
			r := prepareOneFile(t, e, kind)
			write(t, R, "sub/.git/config", "[core]\n\thooksPath = /tmp\n")
			write(t, R, "x/.GIT./hooks/post-checkout", "#!/bin/sh\n")
			want := []string{"sub/.git", "x/.GIT./hooks/post-checkout"}
			if kind == "plain" {
				want = []string{"sub/.git", "x/.GIT."}
			}
			for i := range 2 {
				res, err := r.Restore(ctx(t))
				require.NoError(t, err)
				assert.Equal(t, want, res.Refused, "restore %d", i)
				assert.False(t, exists(L, "sub/.git"), "restore %d", i)
				assert.False(t, exists(L, "x/.GIT."), "restore %d", i)
			}
			if kind == "plain" {
				// The directories above arrived, empty.
				assert.Equal(t, "d 755", a36Tree(t, L)["sub"])
				assert.Equal(t, "d 755", a36Tree(t, L)["x"])
			}
			a36Rm(t, R, "sub")
			a36Rm(t, R, "x")
			write(t, R, "a", "x\n")
			res, err := r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Empty(t, res.Refused)
			if kind == "plain" {
				assert.Equal(t, []string{"sub", "x"}, res.Deleted)
			} else {
				assert.Empty(t, res.Deleted)
			}
			assert.Equal(t, []string{"a"}, res.Updated)
			assert.Equal(t, a36Tree(t, R), a36Tree(t, L))
		})
	}
}

// TestA36SandboxMovesItsBaseRefs: the sandbox holds the round's base refs
// (refs/airlock/base/<id>/...). A hostile agent points them at its own
// commits, at the prepare-time commits, or deletes them, between
// restores. The host's baseline is the host's: a restore fails closed or
// measures the agent's changes against the baseline the host saved.
func TestA36SandboxMovesItsBaseRefs(t *testing.T) {
	e := newEnv(t, localRunner)
	L, R := e.local, e.remote
	initRepo(t, L, map[string]string{"a": "1\n", "b": "1\n", "c": "1\n"})
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	baseRefs := func() map[string]string {
		m := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(git(t, R, "for-each-ref", "--format=%(refname) %(objectname)", "refs/airlock/base/")), "\n") {
			k, v, ok := strings.Cut(l, " ")
			require.True(t, ok, l)
			m[k] = v
		}
		return m
	}
	prepared := baseRefs()
	require.Len(t, prepared, 2)
	write(t, R, "a", "x\n")
	write(t, R, "n", "n\n")
	_, err = r.Restore(ctx(t))
	require.NoError(t, err)
	moved := baseRefs()
	// 1: base refs at a commit of the agent's that the host lacks: the
	// bundle does not verify, ErrHostile, nothing written.
	write(t, L, "b", "user b\n")
	write(t, R, "c", "evil\n")
	git(t, R, "add", "-A")
	git(t, R, "commit", "-q", "-m", "evil")
	for ref := range moved {
		git(t, R, "update-ref", ref, "HEAD")
	}
	before := a36Tree(t, L)
	_, err = r.Restore(ctx(t))
	require.ErrorIs(t, err, workspace.ErrHostile)
	assert.Equal(t, before, a36Tree(t, L))
	// 2: base refs back at the prepare-time commits (which the host
	// holds): the agent deletes n and changes a. The host's baseline has
	// n and a as the first Restore brought them, so n goes and a arrives.
	git(t, R, "reset", "-q", "--hard", "HEAD~1")
	for ref, id := range prepared {
		git(t, R, "update-ref", ref, id)
	}
	a36Rm(t, R, "n")
	write(t, R, "a", "y\n")
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, res.Updated)
	assert.Equal(t, []string{"n"}, res.Deleted)
	assert.Empty(t, res.Kept)
	assert.Equal(t, "user b\n", read(t, L, "b"), "the user's edit stays")
	assert.Equal(t, "y\n", read(t, L, "a"))
	assert.False(t, exists(L, "n"))
	// 3: base refs deleted: the restore fails closed, naming the ref.
	for ref := range prepared {
		git(t, R, "update-ref", "-d", ref)
	}
	write(t, R, "a", "z\n")
	before = a36Tree(t, L)
	_, err = r.Restore(ctx(t))
	require.ErrorContains(t, err, "/snap is missing in the sandbox: prepare the round again")
	assert.Equal(t, before, a36Tree(t, L))
}

// a36Cancel is a Runner that cancels the Restore's context at a chosen
// point: before its call number beforeCall (1-based), after call
// afterCall returned, or once afterBytes bytes of stdout arrived.
type a36Cancel struct {
	r                     sandbox.Runner
	mu                    sync.Mutex
	cancel                context.CancelFunc
	calls                 int
	beforeCall, afterCall int
	afterBytes            int64
	seen                  int64
}

func (c *a36Cancel) arm(cancel context.CancelFunc, beforeCall, afterCall int, afterBytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cancel, c.calls, c.beforeCall, c.afterCall, c.afterBytes, c.seen = cancel, 0, beforeCall, afterCall, afterBytes, 0
}

func (c *a36Cancel) Run(ctx context.Context, cmd sandbox.Command) error {
	c.mu.Lock()
	c.calls++
	n := c.calls
	if c.cancel != nil && n == c.beforeCall {
		c.cancel()
	}
	c.mu.Unlock()
	if cmd.Stdout != nil && c.afterBytes > 0 {
		cmd.Stdout = a36CountWriter{c, cmd.Stdout}
	}
	err := c.r.Run(ctx, cmd)
	c.mu.Lock()
	if c.cancel != nil && n == c.afterCall {
		c.cancel()
	}
	c.mu.Unlock()
	return err
}

type a36CountWriter struct {
	c *a36Cancel
	w io.Writer
}

func (w a36CountWriter) Write(p []byte) (int, error) {
	w.c.mu.Lock()
	w.c.seen += int64(len(p))
	if w.c.cancel != nil && w.c.seen >= w.c.afterBytes {
		w.c.cancel()
	}
	w.c.mu.Unlock()
	return w.w.Write(p)
}

func (c *a36Cancel) Calls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// TestA36CancelThenRestoreAgain: a Restore whose context is cancelled at
// various points (before the sandbox command, as its output streams,
// right after it returned, while the host then merges) either completes
// or fails moving nothing; the agent then changes its work again and a
// Restore brings the agent's latest work whole, leaves the user's edit,
// and lists nothing in Kept.
func TestA36CancelThenRestoreAgain(t *testing.T) {
	type point struct {
		name                  string
		beforeCall, afterCall int
		afterBytes            int64
	}
	points := []point{{"before the command", 1, 0, 0}, {"after the command", 0, 1, 0}}
	for _, n := range []int64{1, 64, 512, 4096, 16384, 65536} {
		points = append(points, point{fmt.Sprintf("after %d bytes", n), 0, 0, n})
	}
	for _, kind := range []string{"git", "plain"} {
		for _, p := range points {
			t.Run(kind+"/"+p.name, func(t *testing.T) {
				e := newEnv(t, localRunner)
				cr := &a36Cancel{r: e.spec.Runner}
				e.spec.Runner = cr
				L, R := e.local, e.remote
				files := map[string]string{"a": "1\n", "b": "1\n", "u": "1\n"}
				for i := range 40 {
					files[fmt.Sprintf("bulk/%02d", i)] = strings.Repeat(fmt.Sprintf("%d ", i), 500)
				}
				a36Files(t, L, kind, "sha1", files)
				r, err := workspace.Prepare(ctx(t), e.spec)
				require.NoError(t, err)
				// A first, whole Restore moves the baseline.
				write(t, R, "a", "x\n")
				_, err = r.Restore(ctx(t))
				require.NoError(t, err)
				// The user edits u; the agent edits a, adds n, deletes b,
				// rewrites the bulk.
				write(t, L, "u", "user\n")
				write(t, R, "a", "y\n")
				write(t, R, "n", "n\n")
				a36Rm(t, R, "b")
				for i := range 40 {
					write(t, R, fmt.Sprintf("bulk/%02d", i), strings.Repeat(fmt.Sprintf("agent %d ", i), 500))
				}
				if kind == "git" {
					git(t, R, "add", "-A")
					git(t, R, "commit", "-q", "-m", "agent")
				}
				cctx, cancel := context.WithCancel(ctx(t))
				cr.arm(cancel, p.beforeCall, p.afterCall, p.afterBytes)
				_, cerr := r.Restore(cctx)
				cancel()
				cr.arm(nil, 0, 0, 0)
				t.Logf("cancelled restore: %v", cerr)
				if cerr != nil {
					assert.True(t, errors.Is(cerr, context.Canceled) || errors.Is(cerr, sandbox.ErrTransport), "error class: %v", cerr)
					assert.False(t, errors.Is(cerr, workspace.ErrHostile), "a cancel is not the sandbox's fault: %v", cerr)
				}
				assert.Equal(t, "user\n", read(t, L, "u"), "the user's edit survives the cancel")
				// The agent goes on.
				write(t, R, "a", "z\n")
				write(t, R, "n", "n2\n")
				write(t, R, "bulk/00", "agent again\n")
				res, err := r.Restore(ctx(t))
				require.NoError(t, err)
				assert.Empty(t, res.Kept, "the agent never touched u")
				assert.Empty(t, res.Refused)
				assert.Equal(t, "user\n", read(t, L, "u"))
				want := a36Tree(t, R)
				want["u"] = "f 644 user\n"
				assert.Equal(t, want, a36Tree(t, L))
				if kind == "git" {
					assert.Equal(t, a36Head(t, R), a36Head(t, L))
				}
			})
		}
	}
}

// TestA36BaselineNotSavedThenAgentMoves (both kinds): a Restore's work arrives
// (a = "x", new file n) but its new baseline cannot be saved (a directory
// stands where the state file is renamed to), so it fails, as documented,
// saying "fix the cause and run Restore again (what arrived is then already
// equal, and the baseline moves)". Before the retry the agent goes on: a =
// "y", and it deletes n. The retry on the same Round (and a Reopen) measures
// against the old baseline, so the content the failed Restore itself wrote
// reads as the user's edit: expected a = "y" Updated and n Deleted, nothing
// Kept; Failed at 71414d0: a stays "x" and is listed in Kept (the user edited
// nothing), and n, which the agent created and deleted, stays on the host,
// listed nowhere (not Deleted, Kept or Refused). Every later Restore of the
// round repeats it.
func TestA36BaselineNotSavedThenAgentMoves(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, localRunner)
			state := t.TempDir()
			L, R := e.local, e.remote
			a36Files(t, L, kind, "sha1", map[string]string{"a": "1\n", "b": "1\n"})
			r, err := workspace.Prepare(ctx(t), e.spec, workspace.WithStateDir(state))
			require.NoError(t, err)
			name := r.ID() + ".json"
			if kind == "plain" {
				name = r.ID() + ".manifest.json"
			}
			file := filepath.Join(state, name)
			saved, err := os.ReadFile(file)
			require.NoError(t, err)
			require.NoError(t, os.Remove(file))
			write(t, file, "x", "")
			write(t, R, "a", "x\n")
			write(t, R, "n", "n\n")
			_, err = r.Restore(ctx(t))
			require.ErrorContains(t, err, "the round's new baseline could not be saved")
			assert.Equal(t, "x\n", read(t, L, "a"), "the work arrived")
			require.NoError(t, os.RemoveAll(file))
			require.NoError(t, os.WriteFile(file, saved, 0o600))
			// The agent goes on before the retry.
			write(t, R, "a", "y\n")
			a36Rm(t, R, "n")
			res, err := r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Empty(t, res.Kept, "the user edited nothing")
			assert.Equal(t, []string{"a"}, res.Updated)
			assert.Equal(t, []string{"n"}, res.Deleted)
			assert.Equal(t, a36Tree(t, R), a36Tree(t, L))
			r2, err := workspace.Reopen(ctx(t), e.spec, r.ID(), workspace.WithStateDir(state))
			require.NoError(t, err)
			write(t, R, "a", "z\n")
			res, err = r2.Restore(ctx(t))
			require.NoError(t, err)
			assert.Empty(t, res.Kept)
			assert.Equal(t, []string{"a"}, res.Updated)
			assert.Equal(t, a36Tree(t, R), a36Tree(t, L))
		})
	}
}

// TestA36ReopenBetweenEveryRestore: a round reopened (a new process)
// before every Restore, over both kinds, with the user editing between
// restores: each Reopen has the baseline the last Restore moved to.
func TestA36ReopenBetweenEveryRestore(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, localRunner)
			state := t.TempDir()
			L, R := e.local, e.remote
			a36Files(t, L, kind, "sha1", map[string]string{"a": "1\n", "b": "1\n"})
			r, err := workspace.Prepare(ctx(t), e.spec, workspace.WithStateDir(state))
			require.NoError(t, err)
			id := r.ID()
			restore := func() *workspace.Result {
				t.Helper()
				r, err := workspace.Reopen(ctx(t), e.spec, id, workspace.WithStateDir(state))
				require.NoError(t, err)
				res, err := r.Restore(ctx(t))
				require.NoError(t, err)
				return res
			}
			write(t, R, "a", "x\n")
			write(t, R, "n", "n\n")
			res := restore()
			assert.Equal(t, []string{"a", "n"}, res.Updated)
			write(t, L, "b", "user\n")
			write(t, R, "b", "agent\n")
			write(t, R, "a", "y\n")
			a36Rm(t, R, "n")
			res = restore()
			assert.Equal(t, []string{"a"}, res.Updated)
			assert.Equal(t, []string{"n"}, res.Deleted)
			assert.Equal(t, []string{"b"}, res.Kept)
			write(t, L, "b", "1\n") // the user undoes
			write(t, R, "n", "n\n") // the agent re-creates n as the first Restore brought it
			write(t, R, "a", "1\n") // and reverts a to the prepare state
			res = restore()
			assert.Equal(t, []string{"a", "b", "n"}, res.Updated)
			assert.Empty(t, res.Kept)
			assert.Equal(t, a36Tree(t, R), a36Tree(t, L))
			res = restore()
			assert.Empty(t, res.Updated)
			assert.Empty(t, res.Deleted)
			assert.Empty(t, res.Kept)
			if kind == "git" {
				a36Same(t, e, true, "end")
			}
		})
	}
}

// TestA36TamperedState: the round's state files changed between restores
// (truncated, not JSON, a baseline tree that is not in the repository, a
// manifest with a bad entry). Reopen or Restore fails with an error, and
// the work tree is left as it was; with the file put back, the round
// restores again. (The record's "tree", "head" and "snapshot" fields are
// not consulted by Restore: a missing object there restores as usual,
// checked elsewhere.)
func TestA36TamperedState(t *testing.T) {
	type tamper struct {
		kind, file string // file: "json" or "manifest"
		name       string
		edit       func(b []byte) []byte
	}
	tampers := []tamper{
		{"git", "json", "truncated", func(b []byte) []byte { return b[:len(b)/2] }},
		{"git", "json", "empty", func([]byte) []byte { return nil }},
		{"git", "json", "missing base tree", func(b []byte) []byte {
			return a36ReplaceField(t, b, "base_tree", "0123456789012345678901234567890123456789")
		}},
		{"git", "json", "missing index tree", func(b []byte) []byte {
			return a36ReplaceField(t, b, "index", "0123456789012345678901234567890123456789")
		}},
		{"git", "json", "tree not hex", func(b []byte) []byte { return a36ReplaceField(t, b, "tree", "HEAD~1") }},
		{"git", "json", "index a blob", func(b []byte) []byte {
			return a36ReplaceField(t, b, "index", "d00491fd7e5bb6fa28c517a0bb32b8b506539d4d") // the blob "1\n"
		}},
		{"plain", "manifest", "truncated", func(b []byte) []byte { return b[:len(b)/2] }},
		{"plain", "manifest", "escaping path", func(b []byte) []byte {
			return []byte(strings.Replace(string(b), `"path":"a"`, `"path":"../a"`, 1))
		}},
		{"plain", "manifest", "bad type", func(b []byte) []byte {
			return []byte(strings.Replace(string(b), `"type":"file"`, `"type":"fifo"`, 1))
		}},
		{"plain", "json", "not json", func([]byte) []byte { return []byte("{{{") }},
	}
	for _, tc := range tampers {
		t.Run(tc.kind+"/"+tc.file+"/"+tc.name, func(t *testing.T) {
			e := newEnv(t, localRunner)
			state := t.TempDir()
			L, R := e.local, e.remote
			a36Files(t, L, tc.kind, "sha1", map[string]string{"a": "1\n", "b": "1\n"})
			r, err := workspace.Prepare(ctx(t), e.spec, workspace.WithStateDir(state))
			require.NoError(t, err)
			write(t, R, "a", "x\n")
			_, err = r.Restore(ctx(t))
			require.NoError(t, err)
			file := filepath.Join(state, r.ID()+".json")
			if tc.file == "manifest" {
				file = filepath.Join(state, r.ID()+".manifest.json")
			}
			saved, err := os.ReadFile(file)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(file, tc.edit(saved), 0o600))
			write(t, L, "b", "user\n")
			write(t, R, "b", "agent\n")
			write(t, R, "a", "y\n")
			a36Rm(t, R, "a")
			before := a36Tree(t, L)
			r2, err := workspace.Reopen(ctx(t), e.spec, r.ID(), workspace.WithStateDir(state))
			if err == nil {
				_, err = r2.Restore(ctx(t))
			}
			require.Error(t, err)
			t.Logf("error: %v", err)
			assert.Equal(t, before, a36Tree(t, L), "nothing written")
			require.NoError(t, os.WriteFile(file, saved, 0o600))
			r3, err := workspace.Reopen(ctx(t), e.spec, r.ID(), workspace.WithStateDir(state))
			require.NoError(t, err)
			res, err := r3.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, []string{"b"}, res.Kept)
			assert.Equal(t, []string{"a"}, res.Deleted)
			assert.Equal(t, "user\n", read(t, L, "b"))
		})
	}
}

// a36ReplaceField sets the string field k of the JSON object b to v.
func a36ReplaceField(t *testing.T, b []byte, k, v string) []byte {
	t.Helper()
	s := string(b)
	i := strings.Index(s, `"`+k+`":"`)
	require.GreaterOrEqual(t, i, 0, "no field %s in %s", k, s)
	i += len(k) + 4
	j := strings.Index(s[i:], `"`)
	require.GreaterOrEqual(t, j, 0)
	return []byte(s[:i] + v + s[i+j:])
}

// TestA36TypeChangeUnderKeptEdit: the agent turns file a into a directory
// while the user edited a: a is Kept and what lies below is Refused, on
// every Restore; once the user undoes the edit, the directory arrives
// whole, and the agent's later change below it arrives too.
func TestA36TypeChangeUnderKeptEdit(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, localRunner)
			L, R := e.local, e.remote
			r := prepareOneFile(t, e, kind)
			write(t, L, "a", "user\n")
			a36Rm(t, R, "a")
			write(t, R, "a/x", "x\n")
			for i := range 2 {
				res, err := r.Restore(ctx(t))
				require.NoError(t, err)
				assert.Equal(t, []string{"a"}, res.Kept, "restore %d", i)
				assert.Equal(t, []string{"a/x"}, res.Refused, "restore %d", i)
				assert.Equal(t, "user\n", read(t, L, "a"), "restore %d", i)
			}
			write(t, L, "a", "1\n")
			res, err := r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Empty(t, res.Kept)
			assert.Empty(t, res.Refused)
			assert.Equal(t, "x\n", read(t, L, "a/x"))
			write(t, R, "a/x", "x2\n")
			write(t, R, "a/y", "y\n")
			res, err = r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, []string{"a/x", "a/y"}, res.Updated)
			assert.Empty(t, res.Kept)
			// The agent turns it back into a file: the directory holds
			// only what the restores brought, so it goes.
			a36Rm(t, R, "a")
			write(t, R, "a", "file again\n")
			res, err = r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Empty(t, res.Kept)
			assert.Empty(t, res.Refused)
			assert.Equal(t, a36Tree(t, R), a36Tree(t, L))
		})
	}
}

// TestA36UserCommitsBetweenRestores: the user commits between restores
// (the histories diverge: a merge commit each time); the agent's later
// commits and edits still arrive, and the user's commits stay.
func TestA36UserCommitsBetweenRestores(t *testing.T) {
	e := newEnv(t, localRunner)
	L, R := e.local, e.remote
	initRepo(t, L, map[string]string{"a": "1\n", "b": "1\n"})
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	write(t, R, "a", "x\n")
	git(t, R, "commit", "-q", "-am", "agent 1")
	_, err = r.Restore(ctx(t))
	require.NoError(t, err)
	write(t, L, "b", "user\n")
	git(t, L, "commit", "-q", "-am", "user 1")
	userCommit := a36Head(t, L)
	write(t, R, "a", "y\n")
	git(t, R, "commit", "-q", "-am", "agent 2")
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.True(t, res.Merged)
	assert.Empty(t, res.Kept)
	assert.Equal(t, "y\n", read(t, L, "a"))
	assert.Equal(t, "user\n", read(t, L, "b"))
	assert.Empty(t, a36Status(t, L))
	git(t, L, "merge-base", "--is-ancestor", userCommit, "HEAD")
	// The agent edits again, uncommitted, and deletes b (which it still
	// has as "1"): b's local content is the user's committed edit, so
	// it is kept.
	write(t, R, "a", "z\n")
	a36Rm(t, R, "b")
	res, err = r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, res.Updated)
	assert.Equal(t, []string{"b"}, res.Kept)
	assert.Equal(t, "z\n", read(t, L, "a"))
	assert.Equal(t, "user\n", read(t, L, "b"))
	assert.Equal(t, " M a\n", a36Status(t, L))
}

// TestA36SandboxStashAndPop: the agent stashes its edits (a revert of the
// work tree and index, and a refs/stash the host never takes), then pops
// them: each Restore brings the sandbox's state.
func TestA36SandboxStashAndPop(t *testing.T) {
	e := newEnv(t, localRunner)
	L, R := e.local, e.remote
	r := prepareOneFile(t, e, "git")
	write(t, R, "a", "x\n")
	write(t, R, "s", "staged\n")
	git(t, R, "add", "s")
	_, err := r.Restore(ctx(t))
	require.NoError(t, err)
	a36Same(t, e, true, "edits")
	git(t, R, "stash", "-q")
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Empty(t, res.Refused)
	assert.Empty(t, res.Kept)
	assert.Equal(t, []string{"a"}, res.Updated)
	assert.Equal(t, []string{"s"}, res.Deleted)
	a36Same(t, e, true, "stashed")
	assert.Empty(t, strings.TrimSpace(git(t, L, "for-each-ref", "refs/stash")))
	git(t, R, "stash", "pop", "-q", "--index")
	res, err = r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Empty(t, res.Refused)
	assert.Empty(t, res.Kept)
	a36Same(t, e, true, "popped")
}

// TestA36DeleteDirWithUserFile: the agent deletes a directory in which the
// user put an untracked file: the agent's files go, the user's stays (a
// non-empty directory is never deleted); the agent re-creating its file
// later arrives (the baseline moved to absent).
func TestA36DeleteDirWithUserFile(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, localRunner)
			L, R := e.local, e.remote
			a36Files(t, L, kind, "sha1", map[string]string{"a": "1\n", "d/x": "x\n"})
			r, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			write(t, L, "d/mine", "mine\n")
			a36Rm(t, R, "d")
			res, err := r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, []string{"d/x"}, res.Deleted)
			assert.Equal(t, "mine\n", read(t, L, "d/mine"))
			assert.False(t, exists(L, "d/x"))
			write(t, R, "d/x", "x\n")
			res, err = r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, []string{"d/x"}, res.Updated)
			assert.Equal(t, "x\n", read(t, L, "d/x"))
			assert.Equal(t, "mine\n", read(t, L, "d/mine"))
		})
	}
}

// TestA36StagedEvilLinkThenFile: the agent stages (index only) a link out
// of the tree; it is never staged locally, on every Restore; then the
// agent stages a regular file at that path, with the file in the work
// tree: it arrives, staged.
func TestA36StagedEvilLinkThenFile(t *testing.T) {
	e := newEnv(t, localRunner)
	L, R := e.local, e.remote
	r := prepareOneFile(t, e, "git")
	target := filepath.Join(t.TempDir(), "tgt")
	write(t, filepath.Dir(target), "tgt", "/etc/passwd")
	linkBlob := strings.TrimSpace(git(t, R, "hash-object", "-w", target))
	git(t, R, "update-index", "--add", "--cacheinfo", "120000,"+linkBlob+",evil")
	for i := range 2 {
		res, err := r.Restore(ctx(t))
		require.NoError(t, err, "restore %d", i)
		assert.Equal(t, []string{"evil"}, res.Refused, "restore %d", i)
		assert.Empty(t, git(t, L, "ls-files", "evil"), "restore %d", i)
		assert.False(t, exists(L, "evil"), "restore %d", i)
	}
	git(t, R, "rm", "-q", "--cached", "evil")
	write(t, R, "evil", "benign\n")
	git(t, R, "add", "evil")
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Empty(t, res.Refused)
	assert.Equal(t, []string{"evil"}, res.Updated)
	a36Same(t, e, true, "benign")
}

// TestA36IndexLockedThenAgentMoves: the user's git holds <git dir>/index.lock
// during a Restore: the Restore fails with ErrRace after the work tree was
// written (documented: "Restore again once it is gone"). The agent goes on
// before the retry (a = "y", deletes n). The retry measures against the old
// baseline: expected a = "y" Updated and n Deleted, nothing Kept; failed at
// 71414d0: the "x" the failed Restore wrote is Kept as if the user had edited
// it, and n stays, reported nowhere.
func TestA36IndexLockedThenAgentMoves(t *testing.T) {
	e := newEnv(t, localRunner)
	L, R := e.local, e.remote
	r := prepareOneFile(t, e, "git")
	write(t, R, "a", "x\n")
	write(t, R, "n", "n\n")
	git(t, R, "add", "n") // the local index must change
	lock := filepath.Join(L, ".git", "index.lock")
	require.NoError(t, os.WriteFile(lock, nil, 0o644))
	_, err := r.Restore(ctx(t))
	require.ErrorIs(t, err, workspace.ErrRace)
	assert.Equal(t, "x\n", read(t, L, "a"), "the work tree was written")
	require.NoError(t, os.Remove(lock))
	write(t, R, "a", "y\n")
	git(t, R, "rm", "-q", "-f", "n")
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Empty(t, res.Kept, "the user edited nothing")
	assert.Equal(t, []string{"a"}, res.Updated)
	assert.Equal(t, []string{"n"}, res.Deleted)
	a36Same(t, e, true, "after the retry")
}
