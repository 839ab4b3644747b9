package workspace_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

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
// --pathspec-from-file, as git before 2.25 does (and leaves it out of
// its usage).
func gitWithoutPathspecFile(t *testing.T, r sandbox.Runner) sandbox.Runner {
	t.Helper()
	return gitWrapped(t, r, oldGit)
}

// oldGit is the body of a git wrapper (gitWrapped) that refuses
// --pathspec-from-file and leaves it out of its usage.
const oldGit = `for a in "$@"; do case $a in
--pathspec-from-file*) echo "error: unknown option '${a#--}'" >&2; exit 129;;
-h) "$real" "$@" | grep -v pathspec-from-file; exit 129;;
esac; done`

// gitWrapped runs r's commands with a git that runs the sh code body
// (with $real the real git) before the real git.
func gitWrapped(t *testing.T, r sandbox.Runner, body string) sandbox.Runner {
	t.Helper()
	real, err := exec.LookPath("git")
	require.NoError(t, err)
	bin := t.TempDir()
	wrapper := "#!/bin/sh\nreal=" + shell.Quote(real) + "\n" + body + "\nexec \"$real\" \"$@\"\n"
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

// TestExcludeOneReadingBothRounds: a plain round reads Spec.Exclude as a
// git round does (git's glob pathspecs: "**/*.env" at every depth, the top
// included; "*.env" at the top only): an outside attack found a plain
// round sending the top-level .env and bringing the agent's back over the
// user's. A ** inside a component is refused: git reads it its own way.
func TestExcludeOneReadingBothRounds(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, runners[0].new)
			e.spec.Exclude = []string{"**/*.env", "top.key"}
			seed(t, e.local, kind, map[string]string{"a": "a\n"})
			write(t, e.local, ".env", "API_KEY=top-secret\n")
			write(t, e.local, "svc/db.env", "DB_PASS=secret\n")
			write(t, e.local, "top.key", "K\n")
			write(t, e.local, "svc/top.key", "sent\n")
			r, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			assert.False(t, exists(e.remote, ".env"))
			assert.False(t, exists(e.remote, "svc/db.env"))
			assert.False(t, exists(e.remote, "top.key"))
			assert.Equal(t, "sent\n", read(t, e.remote, "svc/top.key"), "top.key is anchored at the top")
			write(t, e.remote, ".env", "API_KEY=agent\n")
			write(t, e.remote, "svc/db.env", "DB_PASS=agent\n")
			write(t, e.remote, "svc/top.key", "agent\n")
			res, err := r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, []string{"svc/top.key"}, res.Updated)
			assert.Equal(t, "API_KEY=top-secret\n", read(t, e.local, ".env"))
			assert.Equal(t, "DB_PASS=secret\n", read(t, e.local, "svc/db.env"))
		})
	}
	e := newEnv(t, runners[0].new)
	initRepo(t, e.local, map[string]string{"a": "a\n"})
	e.spec.Exclude = []string{"a**/x"}
	_, err := workspace.Prepare(ctx(t), e.spec)
	require.ErrorIs(t, err, workspace.ErrSpec)
	assert.Contains(t, err.Error(), `exclude pattern "a**/x" has ** inside a path component`)
}

// detachOnce runs its first command detached: it reports ErrTransport
// after delay while the command goes on in the sandbox, as a cut
// connection or a killed exec client leaves it.
type detachOnce struct {
	r     sandbox.Runner
	delay time.Duration
	once  sync.Once
	wg    sync.WaitGroup
}

func (l *detachOnce) Run(ctx context.Context, cmd sandbox.Command) error {
	first := false
	l.once.Do(func() { first = true })
	if !first {
		return l.r.Run(ctx, cmd)
	}
	var in []byte
	if cmd.Stdin != nil {
		var err error
		if in, err = io.ReadAll(cmd.Stdin); err != nil {
			return err
		}
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), io.Discard, io.Discard
	l.wg.Add(1)
	go func() { defer l.wg.Done(); _ = l.r.Run(context.Background(), cmd) }()
	time.Sleep(l.delay)
	return fmt.Errorf("%w: connection lost (test)", sandbox.ErrTransport)
}

// TestRetryWhileEarlierRestoreRuns: a git round's Restore retried at once
// after a transport failure, while the first run's script still runs in
// the sandbox, succeeds with everything arrived and the user's index
// whole (an outside attack: the two runs shared their scratch files, and
// the retry reported success with every committed file an intent-to-add
// entry, so the user's next commit deleted them).
func TestRetryWhileEarlierRestoreRuns(t *testing.T) {
	for _, ms := range []int{10, 20, 35, 50, 80, 150} {
		t.Run(fmt.Sprint(ms, "ms"), func(t *testing.T) {
			e := newEnv(t, runners[0].new)
			initRepo(t, e.local, map[string]string{"a": "1\n"})
			r, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			for j := range 300 {
				write(t, e.remote, fmt.Sprintf("new/%03d/g", j), strings.Repeat("z", j*50))
			}
			write(t, e.remote, "a", "agent\n")
			write(t, e.remote, "big", randomBytes(t, 4<<20))
			git(t, e.remote, "add", "-A")
			git(t, e.remote, "commit", "-q", "-m", "agent")
			head := strings.TrimSpace(git(t, e.remote, "rev-parse", "HEAD"))

			cut := &detachOnce{r: e.spec.Runner, delay: time.Duration(ms) * time.Millisecond}
			spec := e.spec
			spec.Runner = cut
			r1, err := workspace.Reopen(ctx(t), spec, r.ID())
			require.NoError(t, err)
			_, err = r1.Restore(ctx(t))
			require.ErrorIs(t, err, sandbox.ErrTransport)

			r2, err := workspace.Reopen(ctx(t), e.spec, r.ID())
			require.NoError(t, err)
			res, err := r2.Restore(ctx(t))
			cut.wg.Wait()
			require.NoError(t, err)
			assert.Empty(t, res.Refused)
			assert.Empty(t, res.StagedDropped)
			assert.Equal(t, head, strings.TrimSpace(git(t, e.local, "rev-parse", "HEAD")))
			assert.Empty(t, git(t, e.local, "status", "--porcelain"), "the user's index and work tree are the agent's commit")
			assert.Equal(t, "agent\n", read(t, e.local, "a"))
			left, err := filepath.Glob(filepath.Join(e.remote, ".git", "airlock-*"))
			require.NoError(t, err)
			assert.Empty(t, left, "scratch files left in the sandbox")
		})
	}
}

// TestRestoreSweepsDeadRunsOnly: the scratch files and refs of an earlier
// restore run whose shell is gone go at the next run; those of a run whose
// shell is alive stay.
func TestRestoreSweepsDeadRunsOnly(t *testing.T) {
	e := newEnv(t, runners[0].new)
	initRepo(t, e.local, map[string]string{"a": "1\n"})
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	id := r.ID()
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	deadPid, livePid := dead.Process.Pid, os.Getpid()
	for _, pid := range []int{deadPid, livePid} {
		write(t, e.remote, fmt.Sprintf(".git/airlock-restore-%s-%d-tok.index", id, pid), "scratch")
		git(t, e.remote, "update-ref", fmt.Sprintf("refs/airlock/out/%s/%d-tok/snap", id, pid), "HEAD")
		write(t, e.remote, fmt.Sprintf(".git/refs/airlock/out/%s/%d-lk/snap.lock", id, pid), "")
	}
	sandboxCommit(t, e.remote, "b", "agent\n", "agent")
	_, err = r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, "agent\n", read(t, e.local, "b"))
	assert.False(t, exists(e.remote, fmt.Sprintf(".git/airlock-restore-%s-%d-tok.index", id, deadPid)))
	assert.False(t, exists(e.remote, fmt.Sprintf(".git/refs/airlock/out/%s/%d-lk", id, deadPid)))
	assert.True(t, exists(e.remote, fmt.Sprintf(".git/airlock-restore-%s-%d-tok.index", id, livePid)))
	assert.True(t, exists(e.remote, fmt.Sprintf(".git/refs/airlock/out/%s/%d-lk/snap.lock", id, livePid)))
	assert.Equal(t, fmt.Sprintf("refs/airlock/out/%s/%d-tok/snap\n", id, livePid), git(t, e.remote, "for-each-ref", "--format=%(refname)", "refs/airlock/out"))
}

// cutStream writes the start of a restore stream, then fails as a cut
// connection does.
type cutStream struct {
	sandbox.Runner
	after string       // what the stream holds when it is cut
	on    *atomic.Bool // cut only once set
}

func (c cutStream) Run(ctx context.Context, cmd sandbox.Command) error {
	if !c.on.Load() || !strings.Contains(cmd.Script, "airlock-restore") {
		return c.Runner.Run(ctx, cmd)
	}
	if _, err := io.WriteString(cmd.Stdout, c.after); err != nil {
		return err
	}
	return fmt.Errorf("%w: the connection dropped (test)", sandbox.ErrTransport)
}

// TestCutRestoreSaysItOnce: a restore stream cut mid-way is ErrTransport,
// and its message says the transport's failure once, then what the
// stream held (an outside attack: the whole chain was repeated inside
// itself); a cancelled Restore says to run Restore again.
func TestCutRestoreSaysItOnce(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		for _, after := range []string{"airlock-restore 1\nrep", "airlock-restore 1\nreport 0\n"} {
			t.Run(kind, func(t *testing.T) {
				e := newEnv(t, runners[0].new)
				seed(t, e.local, kind, map[string]string{"a": "a\n"})
				var on atomic.Bool
				e.spec.Runner = cutStream{e.spec.Runner, after, &on}
				r, err := workspace.Prepare(ctx(t), e.spec)
				require.NoError(t, err)
				on.Store(true)
				_, err = r.Restore(ctx(t))
				require.ErrorIs(t, err, sandbox.ErrTransport)
				assert.Equal(t, 1, strings.Count(err.Error(), "the connection dropped (test)"), "%v", err)
				assert.Contains(t, err.Error(), "(the stream was cut: ")
			})
		}
	}
	e := newEnv(t, runners[0].new)
	initRepo(t, e.local, map[string]string{"a": "a\n"})
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	c, cancel := context.WithCancel(ctx(t))
	cancel()
	_, err = r.Restore(c)
	require.ErrorIs(t, err, context.Canceled)
	assert.Contains(t, err.Error(), "run Restore again")
}

// TestReopenDamagedStateSaysWhatToDo: a round state file cut short is
// ErrBadState, naming the file, and says where the agent's work is and
// what to do.
func TestReopenDamagedStateSaysWhatToDo(t *testing.T) {
	e := newEnv(t, runners[0].new)
	initRepo(t, e.local, map[string]string{"a": "a\n"})
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	state := filepath.Join(e.local, ".git", "airlock", "rounds", r.ID()+".json")
	data, err := os.ReadFile(state)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(state, data[:len(data)/2], 0o600))
	_, err = workspace.Reopen(ctx(t), e.spec, r.ID())
	require.ErrorIs(t, err, workspace.ErrBadState)
	assert.Contains(t, err.Error(), state)
	assert.Contains(t, err.Error(), "the agent's work is still in the sandbox: copy what you need from there by hand before a new Prepare")
}

// TestExcludedStagedOnUnbornHead: on a branch with no commit yet, an
// excluded file the user staged does not travel either.
func TestExcludedStagedOnUnbornHead(t *testing.T) {
	e := newEnv(t, runners[0].new)
	e.spec.Exclude = []string{"secret.txt"}
	initRepo(t, e.local, nil)
	write(t, e.local, "a", "1\n")
	write(t, e.local, "secret.txt", "TOPSECRET\n")
	git(t, e.local, "add", "a", "secret.txt")
	_, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	assert.Equal(t, "a\n", git(t, e.remote, "ls-files"))
	assert.NotContains(t, git(t, e.remote, "cat-file", "--batch-all-objects", "--batch"), "TOPSECRET")
	assert.Equal(t, "a\nsecret.txt\n", git(t, e.local, "ls-files"), "the user's index keeps it")
}

// TestExcludeReadAsGitDoes: patterns whose reading once differed between
// the host and git (an outside attack): a POSIX class, and ? as one byte
// of a name (é is two). In a plain round a matching file stays home; in a
// git round the agent's commit of it is rewritten; a file git's reading
// sends (é.txt under ?.txt) has the agent's change arrive, never dropped
// unseen. A pattern git would read otherwise (./x, dir/) is refused.
func TestExcludeReadAsGitDoes(t *testing.T) {
	for _, c := range []struct{ pat, file string }{{"[[:upper:]].env", "A.env"}, {"??.txt", "é.txt"}} {
		t.Run("plain "+c.pat, func(t *testing.T) {
			e := newEnv(t, runners[0].new)
			e.spec.Exclude = []string{c.pat}
			write(t, e.local, c.file, "USER SECRET\n")
			write(t, e.local, "keep.txt", "k\n")
			r, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			assert.False(t, exists(e.remote, c.file), "sent")
			write(t, e.remote, c.file, "AGENT\n")
			_, err = r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, "USER SECRET\n", read(t, e.local, c.file))
		})
		t.Run("git "+c.pat, func(t *testing.T) {
			e := newEnv(t, runners[0].new)
			e.spec.Exclude = []string{c.pat}
			initRepo(t, e.local, map[string]string{"base.txt": "b\n"})
			write(t, e.local, c.file, "USER SECRET\n")
			r, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			require.False(t, exists(e.remote, c.file))
			write(t, e.remote, c.file, "AGENT\n")
			write(t, e.remote, "other.txt", "agent\n")
			git(t, e.remote, "add", "-A")
			git(t, e.remote, "commit", "-q", "-m", "agent")
			res, err := r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Len(t, res.Rewritten, 1)
			assert.Equal(t, "base.txt\nother.txt\n", git(t, e.local, "ls-tree", "-r", "--name-only", "HEAD"))
			assert.Equal(t, "USER SECRET\n", read(t, e.local, c.file))
		})
	}
	for _, commit := range []bool{false, true} {
		e := newEnv(t, runners[0].new)
		e.spec.Exclude = []string{"?.txt"}
		initRepo(t, e.local, map[string]string{"é.txt": "v1\n", "e.txt": "secret\n"})
		r, err := workspace.Prepare(ctx(t), e.spec)
		require.NoError(t, err)
		require.True(t, exists(e.remote, "é.txt"), "two bytes: ?.txt does not match it")
		write(t, e.remote, "é.txt", "agent v2\n")
		if commit {
			git(t, e.remote, "commit", "-q", "-am", "agent")
		}
		_, err = r.Restore(ctx(t))
		require.NoError(t, err)
		assert.Equal(t, "agent v2\n", read(t, e.local, "é.txt"), "commit=%v", commit)
	}
	for _, pat := range []string{"./secret.txt", "dir/", "[abc"} {
		e := newEnv(t, runners[0].new)
		initRepo(t, e.local, map[string]string{"a": "a\n"})
		e.spec.Exclude = []string{pat}
		_, err := workspace.Prepare(ctx(t), e.spec)
		require.ErrorIs(t, err, workspace.ErrSpec, "%q", pat)
	}
}

// TestIgnoredSentFilesResetFails: when the sandbox cannot put the sent
// files its git now ignores into the snapshot (a reset that fails: a full
// disk), the Restore fails saying so, before anything is written, rather
// than send a snapshot that would read as their deletion; the next
// Restore, with room again, brings everything.
func TestIgnoredSentFilesResetFails(t *testing.T) {
	for _, name := range []string{"new-git", "old-git"} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner {
				body := `for a in "$@"; do if [ "$a" = reset ] && [ -e "$FAILFLAG" ]; then
case " $* " in *" -h "*) ;; *) echo "fatal: Unable to write new index file" >&2; exit 128;; esac; fi; done`
				if name == "old-git" {
					body += "\n" + oldGit
				}
				return gitWrapped(t, sandbox.Local(dir), body)
			})
			flag := filepath.Join(t.TempDir(), "fail")
			e.spec.Runner = prefixed{e.spec.Runner, "FAILFLAG=" + shell.Quote(flag) + "; export FAILFLAG\n"}
			initRepo(t, e.local, map[string]string{"a": "1\n"})
			write(t, e.local, "notes.log", "user's notes\n")
			r, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			write(t, e.remote, ".gitignore", "*.log\n")
			write(t, e.remote, "b", "agent\n")
			require.NoError(t, os.WriteFile(flag, nil, 0o600))
			before := hashOutside(t, e.local, filepath.Join(e.local, ".git"))
			_, err = r.Restore(ctx(t))
			var ee *sandbox.ExitError
			require.ErrorAs(t, err, &ee)
			assert.Equal(t, 18, ee.Status)
			assert.Contains(t, err.Error(), "free space in the sandbox and restore again")
			assert.Equal(t, before, hashOutside(t, e.local, filepath.Join(e.local, ".git")), "the work tree changed")
			require.NoError(t, os.Remove(flag))
			res, err := r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Empty(t, res.Deleted)
			assert.Equal(t, "user's notes\n", read(t, e.local, "notes.log"))
			assert.Equal(t, "agent\n", read(t, e.local, "b"))
		})
	}
}
