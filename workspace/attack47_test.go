package workspace_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/shell"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

// controlNames are untracked file names the user holds: with a newline,
// with \x01 (the byte the restore script once used in place of a
// newline), both, and a directory whose name holds \x01.
var controlNames = []string{"y.log", "x\x01.log", "n\nl.log", "both\x01\n.log", "\x01", "d\x01/in.log", "t\tab.log", "g*[?]\\.log"}

// TestIgnoredNamesWithControlBytesComeBack: files Prepare sent that the
// agent's .gitignore now hides come back whatever bytes their names hold
// (an outside attack: a name holding \x01 read back as a deletion, and the
// user's file deleted with success reported). The agent never touched
// them, so each must be there, unchanged, and none listed as deleted. The
// same holds for a sandbox git without --pathspec-from-file (before 2.25).
func TestIgnoredNamesWithControlBytesComeBack(t *testing.T) {
	cases := []struct {
		name string
		new  func(t *testing.T, dir string) sandbox.Runner
	}{
		runners[0], runners[1],
		{"old-git", func(t *testing.T, dir string) sandbox.Runner { return gitWithoutPathspecFile(t, sandbox.Local(dir)) }},
	}
	for _, rc := range cases {
		t.Run(rc.name, func(t *testing.T) {
			e := newEnv(t, rc.new)
			initRepo(t, e.local, map[string]string{"a": "1\n"})
			for _, n := range controlNames {
				write(t, e.local, n, "user's "+n+"\n")
			}
			r, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			for _, n := range controlNames {
				require.True(t, exists(e.remote, n), "%q not sent", n)
			}
			write(t, e.remote, ".gitignore", "*.log\n\x01\n")
			res, err := r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Empty(t, res.Deleted)
			for _, n := range controlNames {
				if assert.True(t, exists(e.local, n), "%q deleted locally", n) {
					assert.Equal(t, "user's "+n+"\n", read(t, e.local, n))
				}
			}
			assert.Equal(t, "*.log\n\x01\n", read(t, e.local, ".gitignore"))
		})
	}
}

// TestIgnoredSentFilesAgentChanges: what the agent does to a file Prepare
// sent and its .gitignore now hides arrives as the agent left it: an edit,
// a deletion, a file replaced by a directory holding a file the agent
// added with git add -f, and an untouched neighbour kept.
func TestIgnoredSentFilesAgentChanges(t *testing.T) {
	for _, rc := range runners[:2] {
		t.Run(rc.name, func(t *testing.T) {
			e := newEnv(t, rc.new)
			initRepo(t, e.local, map[string]string{"a": "1\n"})
			for _, n := range []string{"edit.log", "gone.log", "f.log", "keep.log", "x\x01gone.log"} {
				write(t, e.local, n, "user's "+n+"\n")
			}
			r, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			write(t, e.remote, ".gitignore", "*.log\n")
			write(t, e.remote, "edit.log", "the agent's edit\n")
			require.NoError(t, os.Remove(filepath.Join(e.remote, "gone.log")))
			require.NoError(t, os.Remove(filepath.Join(e.remote, "x\x01gone.log")))
			require.NoError(t, os.Remove(filepath.Join(e.remote, "f.log")))
			write(t, e.remote, "f.log/inner.log", "forced\n")
			git(t, e.remote, "add", "-f", "f.log/inner.log")
			res, err := r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, "the agent's edit\n", read(t, e.local, "edit.log"))
			assert.False(t, exists(e.local, "gone.log"))
			assert.False(t, exists(e.local, "x\x01gone.log"))
			assert.Equal(t, "forced\n", read(t, e.local, "f.log/inner.log"))
			assert.Equal(t, "user's keep.log\n", read(t, e.local, "keep.log"))
			assert.ElementsMatch(t, []string{"gone.log", "x\x01gone.log", "f.log"}, res.Deleted)
		})
	}
}

// gitWithoutPathspecFile runs r's commands with a git that refuses
// --pathspec-from-file, as git before 2.25 does.
func gitWithoutPathspecFile(t *testing.T, r sandbox.Runner) sandbox.Runner {
	t.Helper()
	real, err := exec.LookPath("git")
	require.NoError(t, err)
	bin := t.TempDir()
	wrapper := "#!/bin/sh\nfor a in \"$@\"; do case $a in --pathspec-from-file*) echo \"error: unknown option '${a#--}'\" >&2; exit 129;; esac; done\nexec " + shell.Quote(real) + " \"$@\"\n"
	require.NoError(t, os.WriteFile(filepath.Join(bin, "git"), []byte(wrapper), 0o755))
	return prefixed{r, "PATH=" + shell.Quote(bin) + ":$PATH; export PATH\n"}
}

// prefixed runs every script after a prefix.
type prefixed struct {
	r      sandbox.Runner
	prefix string
}

func (p prefixed) Run(ctx context.Context, cmd sandbox.Command) error {
	cmd.Script = p.prefix + cmd.Script
	return p.r.Run(ctx, cmd)
}

// TestExcludedStagedNeverTravels: a file matching Spec.Exclude that the
// user staged (never committed) reaches neither the sandbox's objects,
// index nor work tree, nor does a staged edit of a committed excluded file
// (the sandbox sees the committed one, as for an unstaged edit); after the
// round the user's index still holds what the user staged (an outside
// attack: the staged bytes were sent).
func TestExcludedStagedNeverTravels(t *testing.T) {
	for _, rc := range runners[:2] {
		t.Run(rc.name, func(t *testing.T) {
			e := newEnv(t, rc.new)
			e.spec.Exclude = []string{"secret.txt", "priv", "conf/*.key"}
			initRepo(t, e.local, map[string]string{"a": "1\n", "conf/c.key": "COMMITTED-KEY\n"})
			write(t, e.local, "secret.txt", "TOPSECRET-1\n")
			write(t, e.local, "priv/key", "TOPSECRET-2\n")
			write(t, e.local, "conf/c.key", "TOPSECRET-3\n")
			write(t, e.local, "conf/new.key", "TOPSECRET-4\n")
			write(t, e.local, "kept.txt", "staged, not excluded\n")
			write(t, e.local, ".airlock/own", "TOPSECRET-5\n")
			git(t, e.local, "add", "-f", "secret.txt", "priv/key", "conf/c.key", "conf/new.key", "kept.txt", ".airlock/own")
			before := git(t, e.local, "ls-files", "-s")
			r, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)

			objects := git(t, e.remote, "cat-file", "--batch-all-objects", "--batch")
			assert.NotContains(t, objects, "TOPSECRET", "an excluded file's staged bytes reached the sandbox's objects")
			idx := git(t, e.remote, "ls-files")
			assert.NotContains(t, idx, "secret.txt")
			assert.NotContains(t, idx, "priv/key")
			assert.NotContains(t, idx, "conf/new.key")
			assert.NotContains(t, idx, ".airlock")
			assert.Contains(t, idx, "kept.txt")
			assert.False(t, exists(e.remote, "secret.txt"))
			assert.False(t, exists(e.remote, "priv/key"))
			assert.False(t, exists(e.remote, "conf/new.key"))
			assert.Equal(t, "COMMITTED-KEY\n", read(t, e.remote, "conf/c.key"))
			assert.Equal(t, "staged, not excluded\n", read(t, e.remote, "kept.txt"))

			write(t, e.remote, "agent.txt", "agent\n")
			git(t, e.remote, "add", "agent.txt")
			_, err = r.Restore(ctx(t))
			require.NoError(t, err)
			after := git(t, e.local, "ls-files", "-s")
			assert.Contains(t, after, "agent.txt")
			for _, line := range []string{"secret.txt", "priv/key", "conf/c.key", "conf/new.key", "kept.txt", ".airlock/own"} {
				assert.Equal(t, lineOf(before, line), lineOf(after, line), "the user's staged %s", line)
			}
			assert.Equal(t, "TOPSECRET-1\n", read(t, e.local, "secret.txt"))
			assert.Equal(t, "TOPSECRET-3\n", read(t, e.local, "conf/c.key"))
		})
	}
}

// lineOf returns the line of git ls-files -s output naming path.
func lineOf(out, path string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasSuffix(l, "\t"+path) {
			return l
		}
	}
	return ""
}

// TestGitRestoreHonoursUmask: a git round writes the files it brings back
// as git checks files out, under the user's umask (an outside attack: a
// user with umask 077 got 0644 files, readable by every local user); an
// executable file gets its executable bits within the umask too. A plain
// round keeps the sandbox's bits.
func TestGitRestoreHonoursUmask(t *testing.T) {
	for _, mask := range []int{0o077, 0o022, 0o027} {
		for _, rc := range runners[:2] {
			t.Run(fmt.Sprintf("%s/%04o", rc.name, mask), func(t *testing.T) {
				old := syscall.Umask(mask)
				defer syscall.Umask(old)
				e := newEnv(t, rc.new)
				initRepo(t, e.local, map[string]string{"creds.yml": "v1\n", "run.sh": "#!/bin/sh\n"})
				require.NoError(t, os.Chmod(filepath.Join(e.local, "run.sh"), 0o755&^fs.FileMode(mask)))
				git(t, e.local, "add", "run.sh")
				git(t, e.local, "commit", "-qm", "exec")
				write(t, e.local, "local.env", "TOKEN=1\n")
				r, err := workspace.Prepare(ctx(t), e.spec)
				require.NoError(t, err)
				write(t, e.remote, "creds.yml", "v2\n")
				write(t, e.remote, "local.env", "TOKEN=2\n")
				write(t, e.remote, "new.txt", "new\n")
				write(t, e.remote, "run.sh", "#!/bin/sh\necho hi\n")
				require.NoError(t, os.Chmod(filepath.Join(e.remote, "run.sh"), 0o755))
				res, err := r.Restore(ctx(t))
				require.NoError(t, err)
				assert.ElementsMatch(t, []string{"creds.yml", "local.env", "new.txt", "run.sh"}, res.Updated)
				want := map[string]fs.FileMode{"creds.yml": 0o666, "local.env": 0o666, "new.txt": 0o666, "run.sh": 0o777}
				for f, m := range want {
					fi, err := os.Stat(filepath.Join(e.local, f))
					require.NoError(t, err)
					assert.Equal(t, m&^fs.FileMode(mask), fi.Mode().Perm(), "%s", f)
				}
			})
		}
	}
}

// TestSubmoduleContentListed: what the agent writes inside a submodule's
// directory never comes back (a round carries neither a submodule's files
// nor its commits), and the Restore says so: the directory is listed in
// Refused with the reason (an outside attack: it vanished with nothing
// listed). An empty submodule directory, as Prepare leaves it, is not
// listed.
func TestSubmoduleContentListed(t *testing.T) {
	for _, rc := range runners[:2] {
		t.Run(rc.name, func(t *testing.T) {
			e := newEnv(t, rc.new)
			up := filepath.Join(filepath.Dir(e.local), "upstream")
			require.NoError(t, os.MkdirAll(up, 0o755))
			initRepo(t, up, map[string]string{"x.go": "package x\n"})
			initRepo(t, e.local, map[string]string{"a": "1\n"})
			git(t, e.local, "-c", "protocol.file.allow=always", "submodule", "add", "-q", up, "sub")
			git(t, e.local, "-c", "protocol.file.allow=always", "submodule", "add", "-q", up, "other")
			git(t, e.local, "commit", "-qm", "add submodules")

			r, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			write(t, e.remote, "sub/new.go", "package x // the agent's work\n")
			write(t, e.remote, "top.txt", "agent\n")
			res, err := r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, []string{"top.txt"}, res.Updated)
			assert.Equal(t, []string{"sub"}, res.Refused)
			assert.Contains(t, res.Reasons["sub"], "submodule")
			assert.Equal(t, "package x\n", read(t, e.local, "sub/x.go"), "the user's submodule checkout")
			assert.False(t, exists(e.local, "sub/new.go"))
		})
	}
}

// TestSparseCheckoutNotKept: the agent's change of a path the user's
// sparse checkout leaves out is not a local edit that won (an outside
// attack: it was listed in Kept, though the user edited nothing): it is
// refused, with the reason, and nothing is written there; a change inside
// the sparse set arrives.
func TestSparseCheckoutNotKept(t *testing.T) {
	for _, rc := range runners[:2] {
		t.Run(rc.name, func(t *testing.T) {
			e := newEnv(t, rc.new)
			initRepo(t, e.local, map[string]string{"in/a": "1\n", "out/x": "x\n", "out/y": "y\n"})
			git(t, e.local, "sparse-checkout", "set", "in")
			require.False(t, exists(e.local, "out/x"))
			r, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			write(t, e.remote, "out/x", "AGENT\n")
			write(t, e.remote, "in/a", "2\n")
			res, err := r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Empty(t, res.Kept)
			assert.Equal(t, []string{"out/x"}, res.Refused)
			assert.Contains(t, res.Reasons["out/x"], "sparse checkout")
			assert.Equal(t, []string{"in/a"}, res.Updated)
			assert.Equal(t, "2\n", read(t, e.local, "in/a"))
			assert.False(t, exists(e.local, "out/x"))
			assert.False(t, exists(e.local, "out/y"))
		})
	}
}

// TestRestoreSaysWhichBranchMoved: Result.Branch names the ref the
// agent's commits moved; when the user switched branches during the round
// it is the branch checked out at Restore (the prepared one is untouched),
// and a warning says so; a detached HEAD is "".
func TestRestoreSaysWhichBranchMoved(t *testing.T) {
	e := newEnv(t, runners[0].new)
	initRepo(t, e.local, map[string]string{"a": "1\n"})
	git(t, e.local, "checkout", "-q", "-b", "work")
	var logs bytes.Buffer
	r, err := workspace.Prepare(ctx(t), e.spec, workspace.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	require.NoError(t, err)
	first := sandboxCommit(t, e.remote, "b", "agent\n", "agent 1")
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, "refs/heads/work", res.Branch)
	assert.Equal(t, first, res.Head)
	assert.NotContains(t, logs.String(), "other than the branch")

	git(t, e.local, "checkout", "-q", "-b", "elsewhere")
	second := sandboxCommit(t, e.remote, "c", "agent\n", "agent 2")
	res, err = r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, "refs/heads/elsewhere", res.Branch)
	assert.Equal(t, second, strings.TrimSpace(git(t, e.local, "rev-parse", "elsewhere")))
	assert.Equal(t, first, strings.TrimSpace(git(t, e.local, "rev-parse", "work")))
	assert.Contains(t, logs.String(), `moved=refs/heads/elsewhere "prepared on"=refs/heads/work`)

	git(t, e.local, "checkout", "-q", "--detach")
	third := sandboxCommit(t, e.remote, "d", "agent\n", "agent 3")
	res, err = r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, "", res.Branch)
	assert.Equal(t, third, res.Head)
	assert.Contains(t, logs.String(), `moved="detached HEAD"`)
}

// TestStagedGitlinkRemovalRefused: the agent's git rm --cached of a
// submodule is a submodule change like any other, refused and listed; the
// local index keeps the submodule.
func TestStagedGitlinkRemovalRefused(t *testing.T) {
	e := newEnv(t, runners[0].new)
	up := filepath.Join(filepath.Dir(e.local), "upstream")
	require.NoError(t, os.MkdirAll(up, 0o755))
	initRepo(t, up, map[string]string{"x.go": "package x\n"})
	initRepo(t, e.local, map[string]string{"a": "1\n"})
	git(t, e.local, "-c", "protocol.file.allow=always", "submodule", "add", "-q", up, "sub")
	git(t, e.local, "commit", "-qm", "add submodule")
	before := lineOf(git(t, e.local, "ls-files", "-s"), "sub")
	require.NotEmpty(t, before)
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	git(t, e.remote, "rm", "-q", "--cached", "sub")
	write(t, e.remote, "b", "agent\n")
	git(t, e.remote, "add", "b")
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Contains(t, res.Refused, "sub")
	assert.Contains(t, res.Reasons["sub"], "submodule")
	after := git(t, e.local, "ls-files", "-s")
	assert.Equal(t, before, lineOf(after, "sub"))
	assert.NotEmpty(t, lineOf(after, "b"), "the agent's other staged entry")
	assert.Empty(t, res.Kept)
	assert.Equal(t, []string{"b"}, res.Updated)
}
