package workspace_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/shell"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

// withoutRuntime drops the lines of git output that name the runtime
// directory.
func withoutRuntime(out string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		if !strings.Contains(l, sandbox.RuntimeDir) {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// TestStagedRoundTrip: over every runner, what the agent staged comes
// back staged: a git add of a new file, git rm, git mv R R2 (a staged
// rename: R gone from the index, R2 in it), a staged hunk beside an
// unstaged one, git add -N, a mode change, a link, git rm --cached (the
// file stays, untracked); a change the user staged before Prepare stays
// staged. The local index ends up as the sandbox's (the runtime directory
// aside, which the agent forced in), and git status reads the same on
// both sides. A second Restore changes nothing.
func TestStagedRoundTrip(t *testing.T) {
	eachRunner(t, func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner) {
		e := newEnv(t, newRunner)
		initRepo(t, e.local, map[string]string{"R": "rename me\n", "gone": "remove me\n", "hunks": "1\n2\n3\n4\n5\n6\n7\n8\n9\n",
			"x": "#!/bin/sh\n", "keep": "untrack me\n", "pre": "v1\n"})
		write(t, e.local, "pre", "v2 staged by the user\n")
		git(t, e.local, "add", "pre")
		r, err := workspace.Prepare(ctx(t), e.spec)
		require.NoError(t, err)

		write(t, e.remote, "new", "added\n")
		git(t, e.remote, "add", "new")
		git(t, e.remote, "rm", "-q", "gone")
		git(t, e.remote, "mv", "R", "R2")
		write(t, e.remote, "hunks", "one\n2\n3\n4\n5\n6\n7\n8\n9\n")
		git(t, e.remote, "add", "hunks")
		write(t, e.remote, "hunks", "one\n2\n3\n4\n5\n6\n7\n8\nnine\n")
		write(t, e.remote, "ita", "intent\n")
		git(t, e.remote, "add", "-N", "ita")
		require.NoError(t, os.Chmod(filepath.Join(e.remote, "x"), 0o755))
		git(t, e.remote, "add", "x")
		require.NoError(t, os.Symlink("x", filepath.Join(e.remote, "link")))
		git(t, e.remote, "add", "link")
		git(t, e.remote, "rm", "-q", "--cached", "keep")
		write(t, e.remote, sandbox.RuntimeDir+"/forced", "forced in\n")
		git(t, e.remote, "add", "-f", sandbox.RuntimeDir+"/forced")

		res, err := r.Restore(ctx(t))
		require.NoError(t, err)
		assert.Empty(t, res.Kept)
		assert.Empty(t, res.StagedDropped)
		assert.Equal(t, []string{"R2", "hunks", "ita", "link", "new", "x"}, res.Updated)
		assert.Equal(t, []string{"R", "gone"}, res.Deleted)
		assert.Equal(t, withoutRuntime(git(t, e.remote, "ls-files", "-s")), git(t, e.local, "ls-files", "-s"))
		assert.Equal(t, withoutRuntime(git(t, e.remote, "status", "--porcelain")), git(t, e.local, "status", "--porcelain"))
		st := git(t, e.local, "status", "--porcelain")
		for _, l := range []string{"R  R -> R2", "MM hunks", " A ita", "A  link", "A  new", "D  gone", "M  x", "D  keep", "?? keep", "M  pre"} {
			assert.Contains(t, st, l+"\n")
		}
		assert.Equal(t, "one\n2\n3\n4\n5\n6\n7\n8\n9\n", git(t, e.local, "show", ":hunks"), "the staged hunk")
		assert.Equal(t, "one\n2\n3\n4\n5\n6\n7\n8\nnine\n", read(t, e.local, "hunks"), "the work tree holds both hunks")
		assert.Equal(t, "120000", strings.Fields(git(t, e.local, "ls-files", "-s", "link"))[0])
		assert.Equal(t, "100755", strings.Fields(git(t, e.local, "ls-files", "-s", "x"))[0])
		assert.Equal(t, "untrack me\n", read(t, e.local, "keep"))
		git(t, e.local, "fsck", "--strict", "--no-progress")

		idx := git(t, e.local, "ls-files", "-s", "--debug")
		again, err := r.Restore(ctx(t))
		require.NoError(t, err)
		assert.Empty(t, again.Kept)
		assert.Empty(t, again.Updated)
		assert.Equal(t, idx, git(t, e.local, "ls-files", "-s", "--debug"), "a second Restore changed the index")
	})
}

// TestStagedLocalIndexWins: the same 3-way rule as the work tree. A path
// the user staged (git add) between Prepare and Restore keeps the user's
// entry, and is in Kept, when the agent staged it otherwise; a change of
// the index alone (a mode, or git rm --cached) counts the same; an entry
// both staged alike is no conflict (git add -N on both sides too, where
// git add -N against git add is one); a path only the agent staged arrives,
// one only the user staged stays. An entry the local index leaves no room
// for (the agent made the file d a directory, the user's entry d stays)
// is refused.
func TestStagedLocalIndexWins(t *testing.T) {
	eachRunner(t, func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner) {
		e := newEnv(t, newRunner)
		initRepo(t, e.local, map[string]string{"both": "base\n", "mode": "m\n", "same": "base\n", "agent": "base\n", "user": "base\n", "d": "file\n"})
		r, err := workspace.Prepare(ctx(t), e.spec)
		require.NoError(t, err)

		write(t, e.remote, "both", "agent\n")
		git(t, e.remote, "add", "both")
		git(t, e.remote, "rm", "-q", "--cached", "mode")
		write(t, e.remote, "same", "alike\n")
		git(t, e.remote, "add", "same")
		write(t, e.remote, "agent", "agent\n")
		git(t, e.remote, "add", "agent")
		for _, p := range []string{"ita", "ita-add"} {
			write(t, e.remote, p, "new\n")
		}
		git(t, e.remote, "add", "-N", "ita")
		git(t, e.remote, "add", "ita-add")
		git(t, e.remote, "rm", "-q", "d")
		write(t, e.remote, "d/x", "in a directory\n")
		git(t, e.remote, "add", "d/x")

		write(t, e.local, "both", "user\n")
		git(t, e.local, "add", "both")
		git(t, e.local, "update-index", "--chmod=+x", "mode")
		write(t, e.local, "same", "alike\n")
		git(t, e.local, "add", "same")
		write(t, e.local, "user", "user\n")
		git(t, e.local, "add", "user")
		git(t, e.local, "update-index", "--chmod=+x", "d")
		for _, p := range []string{"ita", "ita-add"} {
			write(t, e.local, p, "new\n")
		}
		git(t, e.local, "add", "-N", "ita", "ita-add")

		res, err := r.Restore(ctx(t))
		require.NoError(t, err)
		assert.Equal(t, []string{"both", "d", "ita-add", "mode"}, res.Kept)
		assert.Equal(t, []string{"d/x"}, res.Refused)
		assert.Equal(t, "the local index holds d where this staged entry needs a directory or a file (a local change, which wins)", res.Reasons["d/x"])
		assert.Equal(t, "in a directory\n", read(t, e.local, "d/x"), "the work tree took the directory")
		assert.Equal(t, "100755", strings.Fields(git(t, e.local, "ls-files", "-s", "d"))[0], "the user's entry d stayed")
		assert.Equal(t, "user\n", git(t, e.local, "show", ":both"), "the user's staged entry won")
		assert.Equal(t, "user\n", read(t, e.local, "both"), "and the user's file")
		assert.Equal(t, "100755", strings.Fields(git(t, e.local, "ls-files", "-s", "mode"))[0], "the user's mode change won over git rm --cached")
		assert.Equal(t, "alike\n", git(t, e.local, "show", ":same"))
		assert.Equal(t, "agent\n", git(t, e.local, "show", ":agent"), "what only the agent staged arrived")
		assert.Equal(t, "user\n", git(t, e.local, "show", ":user"), "what only the user staged stayed")
		st := git(t, e.local, "status", "--porcelain")
		assert.Contains(t, st, "M  agent\n")
		assert.Contains(t, st, "M  user\n")
		assert.Contains(t, st, " A ita\n")
		assert.Contains(t, st, " A ita-add\n", "the user's git add -N won")
	})
}

// TestStagedIndexLocked: a lock on the local index that stays (another
// git, or a killed one) fails the Restore with ErrRace naming it, after
// the work tree arrived and before HEAD or the index moved; once the lock
// is gone, the next Restore brings the staged entries.
func TestStagedIndexLocked(t *testing.T) {
	e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
	r := prepareOneFile(t, e, "git")
	write(t, e.remote, "new", "added\n")
	git(t, e.remote, "add", "new")
	git(t, e.remote, "commit", "-q", "-m", "agent")
	write(t, e.remote, "staged", "staged\n")
	git(t, e.remote, "add", "staged")
	head := git(t, e.local, "rev-parse", "HEAD")
	lock := filepath.Join(e.local, ".git", "index.lock")
	write(t, filepath.Dir(lock), "index.lock", "")
	before, err := os.ReadFile(filepath.Join(e.local, ".git", "index"))
	require.NoError(t, err)

	_, err = r.Restore(ctx(t))
	require.ErrorIs(t, err, workspace.ErrRace)
	assert.True(t, sandbox.Retryable(err))
	assert.Contains(t, err.Error(), "the index lock "+lock+" stayed")
	assert.Contains(t, err.Error(), "remove "+lock+" and run Restore again")
	assert.Equal(t, "staged\n", read(t, e.local, "staged"), "the work tree arrived")
	assert.Equal(t, head, git(t, e.local, "rev-parse", "HEAD"), "HEAD moved")
	after, err := os.ReadFile(filepath.Join(e.local, ".git", "index"))
	require.NoError(t, err)
	assert.Equal(t, before, after, "the index changed")
	assert.True(t, exists(e.local, ".git/index.lock"), "the user's lock was removed")

	require.NoError(t, os.Remove(lock))
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, 1, res.Commits)
	assert.Equal(t, "A  staged\n", git(t, e.local, "status", "--porcelain"))
	assert.False(t, exists(e.local, ".git/index.lock"))
}

// TestStagedIndexLockOfKilledHost: a host killed while it held the index
// lock left the lock and the state file it was made as a link of, naming
// the host: the next Restore removes that lock and installs everything.
// A lock that is another file (a git's), beside the same dead host's held
// file, a live host's, or one that only shares the dead host's name, stays
// and fails the Restore with ErrRace, as before.
func TestStagedIndexLockOfKilledHost(t *testing.T) {
	requireProc(t)
	dead, zombie, live, reused := owners(t)
	for _, c := range []struct {
		name   string
		owner  string
		linked bool
		clears bool
	}{
		{"dead", dead, true, true},
		{"zombie", zombie, true, true},
		{"reused pid", reused, true, true},
		{"live", live, true, false},
		{"dead, not the lock", dead, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
			r := prepareOneFile(t, e, "git")
			write(t, e.remote, "staged", "staged\n")
			git(t, e.remote, "add", "staged")
			lock := filepath.Join(e.local, ".git", "index.lock")
			state := filepath.Join(e.local, ".git", "airlock", "rounds")
			held := filepath.Join(state, "tmp-"+c.owner+"-"+r.ID()+"-held.index.lock")
			write(t, state, filepath.Base(held), "")
			if c.linked {
				require.NoError(t, os.Link(held, lock))
			} else {
				write(t, filepath.Dir(lock), "index.lock", "")
			}
			res, err := r.Restore(ctx(t))
			if !c.clears {
				require.ErrorIs(t, err, workspace.ErrRace)
				assert.Contains(t, err.Error(), "the index lock "+lock+" stayed")
				assert.True(t, exists(e.local, ".git/index.lock"), "a lock that is not a dead host's stays")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, 0, res.Commits)
			assert.Equal(t, "A  staged\n", git(t, e.local, "status", "--porcelain"))
			assert.False(t, exists(e.local, ".git/index.lock"))
			ents, err := os.ReadDir(state)
			require.NoError(t, err)
			for _, de := range ents {
				assert.NotContains(t, de.Name(), "held", "the held file is swept")
			}
		})
	}
}

// TestStagedOnlyWhatArrived: an entry the work tree refused is not staged
// either (a link that leaves the work tree, a file with two links), a
// staged link that is
// not the link the work tree got is refused, and an excluded path's
// staged entry stays out, silently, as its file does.
func TestStagedOnlyWhatArrived(t *testing.T) {
	e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
	e.spec.Exclude = []string{"*.log"}
	r := prepareOneFile(t, e, "git")
	require.NoError(t, os.Symlink("../../outside", filepath.Join(e.remote, "evil")))
	git(t, e.remote, "add", "evil")
	require.NoError(t, os.Symlink("a", filepath.Join(e.remote, "moved")))
	git(t, e.remote, "add", "moved")
	require.NoError(t, os.Remove(filepath.Join(e.remote, "moved")))
	require.NoError(t, os.Symlink("b", filepath.Join(e.remote, "moved")))
	write(t, e.remote, "hl", "linked\n")
	require.NoError(t, os.Link(filepath.Join(e.remote, "hl"), filepath.Join(e.remote, "hl2")))
	git(t, e.remote, "add", "hl", "hl2")
	write(t, e.remote, "x.log", "log\n")
	git(t, e.remote, "add", "-f", "x.log")
	write(t, e.remote, "fine", "fine\n")
	git(t, e.remote, "add", "fine")

	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, []string{"evil", "hl", "hl2", "moved"}, res.Refused)
	assert.Contains(t, res.Reasons["moved"], "a staged symbolic link that the work tree does not hold")
	assert.Equal(t, []string{"fine", "moved"}, res.Updated)
	target, err := os.Readlink(filepath.Join(e.local, "moved"))
	require.NoError(t, err)
	assert.Equal(t, "b", target)
	assert.Equal(t, "100644 "+strings.TrimSpace(git(t, e.local, "rev-parse", ":a"))+" 0\ta\n100644 "+strings.TrimSpace(git(t, e.local, "hash-object", "fine"))+" 0\tfine\n",
		git(t, e.local, "ls-files", "-s"), "only fine was staged")
	assert.False(t, exists(e.local, "x.log"))
}

// TestStagedHostile feeds crafted staged sections through a fake Runner.
// An entry under .git or the runtime directory, or a submodule, is
// refused and listed, and the rest arrives; an entry that escapes, a
// malformed record, an object the bundle lacks or that is not a blob, an
// index commit that is not the snapshot's parent, and entries without
// one, fail the whole Restore as a protocol error with nothing written.
func TestStagedHostile(t *testing.T) {
	const missing = "0123456789abcdef0123456789abcdef01234567"
	type crafted struct{ staged, tail string }
	for _, tc := range []struct {
		name    string
		craft   func(c *crafter, snap, idx string) crafted
		err     string // a part of the error; "" for a result
		refused []string
	}{
		{name: "a good entry", craft: func(c *crafter, snap, idx string) crafted {
			return crafted{records(stagedFile("ok", c.x)), tail(c, snap, idx)}
		}},
		{name: "dotgit", refused: []string{".git/config"}, craft: func(c *crafter, snap, idx string) crafted {
			return crafted{records(stagedFile(".git/config", c.x), stagedFile("ok", c.x)), tail(c, snap, idx)}
		}},
		{name: "dotgit spelled otherwise", refused: []string{".GIT./config", "sub/git~1/hooks/x"}, craft: func(c *crafter, snap, idx string) crafted {
			return crafted{records(stagedFile(".GIT./config", c.x), stagedFile("ok", c.x), stagedFile("sub/git~1/hooks/x", c.x)), tail(c, snap, idx)}
		}},
		{name: "runtime directory", refused: []string{sandbox.RuntimeDir + "/x"}, craft: func(c *crafter, snap, idx string) crafted {
			return crafted{records(stagedFile(sandbox.RuntimeDir+"/x", c.x), stagedFile("ok", c.x)), tail(c, snap, idx)}
		}},
		{name: "submodule", refused: []string{"sub"}, craft: func(c *crafter, snap, idx string) crafted {
			return crafted{records(stagedFile("ok", c.x), shell.StagedEntry{Path: "sub", Mode: "160000", ID: c.head}), tail(c, snap, idx)}
		}},
		{name: "escaping path", err: `"../x", not a clean relative path`, craft: func(c *crafter, snap, idx string) crafted {
			return crafted{records(stagedFile("../x", c.x), stagedFile("ok", c.x)), tail(c, snap, idx)}
		}},
		{name: "malformed record", err: "bad staged record", craft: func(c *crafter, snap, idx string) crafted {
			return crafted{":000000 100644 nonsense A\x00ok\x00", tail(c, snap, idx)}
		}},
		{name: "object not in the bundle", err: "object " + missing, craft: func(c *crafter, snap, idx string) crafted {
			return crafted{records(stagedFile("ok", c.x), stagedFile("zz", missing)), tail(c, snap, idx)}
		}},
		{name: "a tree as a file", err: "not a blob", craft: func(c *crafter, snap, idx string) crafted {
			return crafted{records(stagedFile("ok", strings.TrimSpace(git(c.t, c.dir, "rev-parse", snap+"^{tree}")))), tail(c, snap, idx)}
		}},
		{name: "index commit not the snapshot's parent", err: "want commit", craft: func(c *crafter, snap, idx string) crafted {
			return crafted{records(stagedFile("ok", c.x)), "bundle " + c.head + " " + snap + " " + c.head}
		}},
		{name: "entries without an index commit", err: "does not name the index commit", craft: func(c *crafter, snap, idx string) crafted {
			return crafted{records(stagedFile("ok", c.x)), "bundle " + c.head + " " + snap}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
			fr := &fakeRunner{real: e.spec.Runner}
			e.spec.Runner = fr
			initRepo(t, e.local, map[string]string{"a": "1\n"})
			r, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			c := newCrafter(t, e.local, "refs/airlock/out/"+r.ID()+"/snap")
			wt := c.tree(entry{"100644", "a", c.one}, entry{"100644", "ok", c.x})
			idx := c.commit(wt, c.head)
			snap := strings.TrimSpace(git(t, c.dir, "commit-tree", wt, "-p", c.head, "-p", idx, "-m", "snapshot"))
			cr := tc.craft(c, snap, idx)
			payload := c.bundle(snap, c.head)
			fr.inject = func(cmd sandbox.Command) (bool, error) {
				if !strings.Contains(cmd.Script, "airlock-restore") {
					return false, nil
				}
				_, err := fmt.Fprintf(cmd.Stdout, "airlock-restore 1\nreport 0\nstaged %d\n%s%s\n%s", len(cr.staged), cr.staged, cr.tail, asRun(t, cmd.Script, c.out, payload))
				return true, err
			}
			index, err := os.ReadFile(filepath.Join(e.local, ".git", "index"))
			require.NoError(t, err)
			res, err := r.Restore(ctx(t))
			if tc.err != "" {
				require.ErrorIs(t, err, workspace.ErrHostile)
				require.ErrorIs(t, err, sandbox.ErrProtocol)
				assert.Contains(t, err.Error(), tc.err)
				after, rerr := os.ReadFile(filepath.Join(e.local, ".git", "index"))
				require.NoError(t, rerr)
				assert.Equal(t, index, after, "the index changed")
				assert.Equal(t, "", git(t, e.local, "status", "--porcelain"), "something was written")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.refused, res.Refused)
			for _, p := range tc.refused {
				assert.NotEmpty(t, res.Reasons[p])
			}
			assert.Equal(t, []string{"ok"}, res.Updated)
			assert.Equal(t, "A  ok\n", git(t, e.local, "status", "--porcelain"), "only ok was staged")
			assert.False(t, exists(e.local, ".git/config.lock"))
			git(t, e.local, "fsck", "--strict", "--no-progress")
		})
	}
}

// stagedFile is a staged entry of a file: path p, blob id.
func stagedFile(p, id string) shell.StagedEntry {
	return shell.StagedEntry{Path: p, Mode: "100644", ID: id}
}

// records is the staged section of the entries.
func records(es ...shell.StagedEntry) string {
	slices.SortFunc(es, func(a, b shell.StagedEntry) int { return strings.Compare(a.Path, b.Path) })
	return string(shell.StagedRecords(shell.Staged{Entries: es}))
}

// tail is the tail line of a bundle of snap whose index commit is idx.
func tail(c *crafter, snap, idx string) string { return "bundle " + c.head + " " + snap + " " + idx }

// TestStagedFromQuarantine: when the sandbox's bundle cannot move into
// the repository whole (a commit forced the runtime directory in, so it
// is rewritten), the staged blobs still arrive: a staged hunk that only
// the sandbox's index holds is in the local repository, and the index
// names it.
func TestStagedFromQuarantine(t *testing.T) {
	e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
	r := prepareOneFile(t, e, "git")
	write(t, e.remote, sandbox.RuntimeDir+"/forced", "forced in\n")
	git(t, e.remote, "add", "-f", sandbox.RuntimeDir+"/forced")
	git(t, e.remote, "commit", "-q", "-m", "agent")
	write(t, e.remote, "s", "staged only\n")
	git(t, e.remote, "add", "s")
	write(t, e.remote, "s", "staged only, then edited\n")
	blob := strings.TrimSpace(git(t, e.remote, "rev-parse", ":s"))

	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	require.Len(t, res.Rewritten, 1, "the bundle did not take the rewrite path")
	assert.Equal(t, "blob\n", git(t, e.local, "cat-file", "-t", blob))
	assert.Equal(t, "100644 "+blob+" 0\ts\n", git(t, e.local, "ls-files", "-s", "s"))
	assert.Equal(t, "AM s\n", withoutRuntime(git(t, e.local, "status", "--porcelain", "--untracked-files=no")))
	assert.Equal(t, "staged only, then edited\n", read(t, e.local, "s"))
	git(t, e.local, "fsck", "--strict", "--no-progress")
}

// TestStagedDropped: a sandbox index that cannot be written as a tree
// (unmerged entries, a path that is both a file and a directory, an
// entry whose object is missing) brings
// nothing of the agent's staged state back, and Result.StagedDropped says
// so; the work tree arrives, no entry of that index reaches the local
// index, and the restore is no error. Once the agent's index is whole
// again, a second Restore brings it back and StagedDropped is "".
func TestStagedDropped(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(t *testing.T, dir string)
	}{
		{"unmerged", func(t *testing.T, dir string) { // what a conflicted git merge leaves
			base, ours, theirs := a23Blob(t, dir, "base\n"), a23Blob(t, dir, "ours\n"), a23Blob(t, dir, "theirs\n")
			git(t, dir, "rm", "-q", "--cached", "conf")
			gitStdin(t, dir, "100644 "+base+" 1\tconf\n100644 "+ours+" 2\tconf\n100644 "+theirs+" 3\tconf\n", "update-index", "--index-info")
			write(t, dir, "conf", "<<<<<<< ours\nours\n=======\ntheirs\n>>>>>>> theirs\n")
		}},
		{"file and directory", func(t *testing.T, dir string) {
			ents := a23Entries(t, dir)
			id := a23Blob(t, dir, "clash\n")
			a23WriteIndex(t, filepath.Join(dir, ".git", "index"), append(ents, a23Entry{"d", 0o100644, id, 0}, a23Entry{"d/x", 0o100644, id, 0}))
		}},
		{"missing object", func(t *testing.T, dir string) {
			gitStdin(t, dir, "100644 "+strings.Repeat("1", 40)+"\tmissing\n", "update-index", "--index-info")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
			initRepo(t, e.local, map[string]string{"a": "1\n", "conf": "base\n"})
			r, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			write(t, e.remote, "ok", "staged\n")
			write(t, e.remote, "a", "changed\n")
			git(t, e.remote, "add", "ok", "a")
			tc.spoil(t, e.remote)
			before := git(t, e.local, "ls-files", "-s")

			res, err := r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Contains(t, res.StagedDropped, "the sandbox's index could not be written as a tree")
			assert.Contains(t, res.StagedDropped, "nothing the agent staged came back")
			assert.Equal(t, "staged\n", read(t, e.local, "ok"))
			assert.Equal(t, "changed\n", read(t, e.local, "a"))
			assert.Equal(t, before, git(t, e.local, "ls-files", "-s"), "an entry of the sandbox's index reached the local index")
			assert.Empty(t, res.Refused)

			git(t, e.remote, "reset", "-q")
			git(t, e.remote, "add", "ok", "a")
			again, err := r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Empty(t, again.StagedDropped)
			assert.Equal(t, "M  a\nA  ok\n", git(t, e.local, "status", "--porcelain", "ok", "a"))
		})
	}
}

// TestStagedUncleanPath: an entry the agent wrote into its index itself,
// at a path that is not clean (absolute, an empty or "." component,
// climbing out): some git writes into the index's tree as entries it
// cannot read back. Every one fails the restore with ErrHostile naming
// the path and saying nothing was written, and nothing was: not the
// local index, not the work tree, not the path itself.
func TestStagedUncleanPath(t *testing.T) {
	abs := filepath.Join(t.TempDir(), "abs")
	for _, p := range []string{abs, abs + "/x", "e//x", "e/./x", "e/../../x"} {
		t.Run(p, func(t *testing.T) {
			e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
			initRepo(t, e.local, map[string]string{"a": "1\n"})
			r, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			write(t, e.remote, "ok", "staged\n")
			write(t, e.remote, "a", "changed\n")
			git(t, e.remote, "add", "ok", "a")
			ents := a23Entries(t, e.remote)
			a23WriteIndex(t, filepath.Join(e.remote, ".git", "index"), append(ents, a23Entry{p, 0o100644, a23Blob(t, e.remote, "evil\n"), 0}))
			index, err := os.ReadFile(filepath.Join(e.local, ".git", "index"))
			require.NoError(t, err)

			_, err = r.Restore(ctx(t))
			require.ErrorIs(t, err, workspace.ErrHostile)
			assert.ErrorIs(t, err, sandbox.ErrProtocol)
			assert.NotErrorIs(t, err, sandbox.ErrTransport)
			assert.ErrorContains(t, err, fmt.Sprintf("%q, not a clean relative path", p))
			assert.ErrorContains(t, err, "nothing was written")
			after, err := os.ReadFile(filepath.Join(e.local, ".git", "index"))
			require.NoError(t, err)
			assert.Equal(t, index, after, "the local index changed")
			assert.Equal(t, "1\n", read(t, e.local, "a"))
			assert.False(t, exists(e.local, "ok"))
			assert.NoFileExists(t, abs)
			assert.NoDirExists(t, abs)
		})
	}
}
