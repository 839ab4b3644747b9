package workspace_test

import (
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

// a23Entry is one entry of a raw git index.
type a23Entry struct {
	path  string
	mode  uint32
	id    string // hex object id
	stage int
}

// a23Entries reads the index of the repository at dir (git ls-files -s).
func a23Entries(t *testing.T, dir string) []a23Entry {
	t.Helper()
	var out []a23Entry
	for _, rec := range strings.Split(git(t, dir, "ls-files", "-s", "-z"), "\x00") {
		if rec == "" {
			continue
		}
		meta, path, ok := strings.Cut(rec, "\t")
		require.True(t, ok, rec)
		f := strings.Fields(meta)
		mode, err := strconv.ParseUint(f[0], 8, 32)
		require.NoError(t, err)
		stage, err := strconv.Atoi(f[2])
		require.NoError(t, err)
		out = append(out, a23Entry{path, uint32(mode), f[1], stage})
	}
	return out
}

// a23WriteIndex writes ents as a version 2 index file at file, bypassing
// every check git add and update-index make on paths: what a hostile
// sandbox can leave in its .git/index.
func a23WriteIndex(t *testing.T, file string, ents []a23Entry) {
	t.Helper()
	slices.SortFunc(ents, func(a, b a23Entry) int {
		if c := strings.Compare(a.path, b.path); c != 0 {
			return c
		}
		return a.stage - b.stage
	})
	var b bytes.Buffer
	b.WriteString("DIRC")
	require.NoError(t, binary.Write(&b, binary.BigEndian, []uint32{2, uint32(len(ents))}))
	for _, e := range ents {
		var stat [10]uint32
		stat[6] = e.mode
		require.NoError(t, binary.Write(&b, binary.BigEndian, stat))
		id, err := hex.DecodeString(e.id)
		require.NoError(t, err)
		require.Len(t, id, 20)
		b.Write(id)
		require.NoError(t, binary.Write(&b, binary.BigEndian, uint16(e.stage<<12|min(len(e.path), 0xfff))))
		b.WriteString(e.path)
		n := 62 + len(e.path)
		b.Write(make([]byte, 8-n%8))
	}
	sum := sha1.Sum(b.Bytes())
	b.Write(sum[:])
	require.NoError(t, os.WriteFile(file, b.Bytes(), 0o644))
}

// a23Blob stores content as a blob in the repository at dir.
func a23Blob(t *testing.T, dir, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "blob")
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return strings.TrimSpace(git(t, dir, "hash-object", "-w", p))
}

// a23Local is an env whose sandbox runs on this machine.
func a23Local(t *testing.T) *env {
	return newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
}

// a23Outcome checks the invariants every outcome of a hostile restore
// must keep: an error is ErrHostile (never a transport failure) and left
// the index as it was; a success staged "ok", and no path under .git (in
// any spelling) or outside the work tree was written.
func a23Outcome(t *testing.T, e *env, res *workspace.Result, err error, indexBefore []byte, hostile []string) {
	t.Helper()
	for _, p := range []string{".git/hooks/post-checkout", ".git/hooks/x"} {
		assert.False(t, exists(e.local, p), "%s was written", p)
	}
	assert.False(t, exists(filepath.Dir(e.local), "escape"), "../escape was written")
	if err != nil {
		assert.ErrorIs(t, err, workspace.ErrHostile)
		assert.ErrorIs(t, err, sandbox.ErrProtocol)
		assert.NotErrorIs(t, err, sandbox.ErrTransport)
		after, rerr := os.ReadFile(filepath.Join(e.local, ".git", "index"))
		require.NoError(t, rerr)
		assert.Equal(t, indexBefore, after, "a failed restore changed the index")
		return
	}
	ls := git(t, e.local, "ls-files", "-s")
	assert.Contains(t, ls, "\tok\n", "the agent's good staged entry did not arrive staged: %v", res)
	for _, h := range hostile {
		assert.NotContains(t, ls, "\t"+h+"\n", "the hostile entry %q was staged", h)
		assert.Contains(t, res.Refused, h, "the hostile entry %q is not listed in Refused (%v)", h, res.Refused)
	}
	git(t, e.local, "fsck", "--strict", "--no-progress")
}

// TestAttack23CraftedSandboxIndex: the agent writes its .git/index
// itself, with paths git add would refuse: under .git (in several
// spellings, one a case twin of .GIT), climbing out with "..", under the
// runtime directory. Nothing of them reaches the local index or the
// local .git; an escaping path fails the restore as ErrHostile; the
// agent's other staged entry arrives whenever the restore succeeds.
func TestAttack23CraftedSandboxIndex(t *testing.T) {
	for _, tc := range []struct {
		name    string
		hostile []string
		escapes bool
	}{
		{name: "dotgit hooks", hostile: []string{".git/hooks/post-checkout"}},
		{name: "case twins of .git", hostile: []string{".GIT/hooks/x", ".Git/config", "sub/.gIt/hooks/x"}},
		{name: "dotgit with trailing dot", hostile: []string{".git./hooks/x", "git~1/hooks/x"}},
		{name: "runtime directory", hostile: []string{sandbox.RuntimeDir + "/x", ".AIRLOCK/x"}},
		{name: "escape", hostile: []string{"../escape"}, escapes: true},
		{name: "absolute", hostile: []string{"/tmp/airlock-attack23-abs"}, escapes: true},
		{name: "dot component", hostile: []string{"x/./b", "./c"}, escapes: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := a23Local(t)
			r := prepareOneFile(t, e, "git")
			write(t, e.remote, "ok", "ok\n")
			git(t, e.remote, "add", "ok")
			evil := a23Blob(t, e.remote, "#!/bin/sh\ntouch /tmp/airlock-attack23-pwned\n")
			ents := a23Entries(t, e.remote)
			for _, h := range tc.hostile {
				ents = append(ents, a23Entry{h, 0o100755, evil, 0})
			}
			a23WriteIndex(t, filepath.Join(e.remote, ".git", "index"), ents)
			before, err := os.ReadFile(filepath.Join(e.local, ".git", "index"))
			require.NoError(t, err)

			res, err := r.Restore(ctx(t))
			t.Logf("result %+v, error %v", res, err)
			if tc.escapes {
				require.Error(t, err, "an index entry that is not a clean relative path is a protocol error")
			}
			a23Outcome(t, e, res, err, before, tc.hostile)
			assert.NoFileExists(t, "/tmp/airlock-attack23-abs")
			assert.NoFileExists(t, "/tmp/airlock-attack23-pwned")
		})
	}
}

// TestAttack23UnmergedSandboxIndex: the agent left a merge conflict in its
// index (stages 1-3). The work tree arrives; no unmerged entry reaches the
// local index; the restore is not an error; a warning is logged (doc:
// "brings nothing of its staged state back, and a warning is logged").
func TestAttack23UnmergedSandboxIndex(t *testing.T) {
	e := a23Local(t)
	var logs bytes.Buffer
	initRepo(t, e.local, map[string]string{"a": "1\n", "conf": "base\n"})
	r, err := workspace.Prepare(ctx(t), e.spec, workspace.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	require.NoError(t, err)
	write(t, e.remote, "ok", "ok\n")
	git(t, e.remote, "add", "ok")
	base, ours, theirs := a23Blob(t, e.remote, "base\n"), a23Blob(t, e.remote, "ours\n"), a23Blob(t, e.remote, "theirs\n")
	var ents []a23Entry
	for _, en := range a23Entries(t, e.remote) {
		if en.path != "conf" {
			ents = append(ents, en)
		}
	}
	ents = append(ents, a23Entry{"conf", 0o100644, base, 1}, a23Entry{"conf", 0o100644, ours, 2}, a23Entry{"conf", 0o100644, theirs, 3})
	a23WriteIndex(t, filepath.Join(e.remote, ".git", "index"), ents)
	write(t, e.remote, "conf", "<<<<<<< ours\nours\n=======\ntheirs\n>>>>>>> theirs\n")

	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Contains(t, res.Updated, "ok")
	assert.Contains(t, res.Updated, "conf")
	assert.Equal(t, "ok\n", read(t, e.local, "ok"))
	assert.NotContains(t, git(t, e.local, "ls-files", "-s", "--stage"), " 1\t", "an unmerged entry reached the local index")
	assert.Empty(t, git(t, e.local, "ls-files", "-u"))
	t.Logf("local status after an unmerged sandbox index:\n%s", git(t, e.local, "status", "--porcelain"))
	assert.Contains(t, strings.ToLower(logs.String()), "warn", "no warning was logged for the staged state that did not come back: %s", logs.String())
}

// TestAttack23CorruptSandboxIndex: an index file the sandbox's git cannot
// read. The restore is a protocol failure (ErrHostile), or succeeds
// without staging anything; never a transport error, and never a partial
// local index.
func TestAttack23CorruptSandboxIndex(t *testing.T) {
	for name, content := range map[string][]byte{
		"garbage":   []byte("this is not an index\n"),
		"truncated": []byte("DIRC\x00\x00\x00\x02\x00\x00\x00\x05"),
		"empty":     {},
	} {
		t.Run(name, func(t *testing.T) {
			e := a23Local(t)
			r := prepareOneFile(t, e, "git")
			write(t, e.remote, "new", "new\n")
			require.NoError(t, os.WriteFile(filepath.Join(e.remote, ".git", "index"), content, 0o644))
			before, err := os.ReadFile(filepath.Join(e.local, ".git", "index"))
			require.NoError(t, err)
			res, err := r.Restore(ctx(t))
			t.Logf("result %+v, error %v", res, err)
			if err != nil {
				assert.NotErrorIs(t, err, sandbox.ErrTransport, "a sandbox that answered is not a transport failure")
				assert.False(t, sandbox.Retryable(err), "the same corrupt index fails again")
				after, rerr := os.ReadFile(filepath.Join(e.local, ".git", "index"))
				require.NoError(t, rerr)
				assert.Equal(t, before, after)
				return
			}
			assert.Empty(t, git(t, e.local, "ls-files", "-u"))
		})
	}
}

// TestAttack23ManyStagedEntries: 500 staged files arrive staged, in
// bounded time.
func TestAttack23ManyStagedEntries(t *testing.T) {
	e := a23Local(t)
	r := prepareOneFile(t, e, "git")
	const n = 500
	for i := range n {
		write(t, e.remote, "many/f"+strconv.Itoa(i), strconv.Itoa(i)+"\n")
	}
	git(t, e.remote, "add", "many")
	start := time.Now()
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	t.Logf("restore of %d staged files: %s", n, time.Since(start))
	assert.Len(t, res.Updated, n)
	assert.Empty(t, res.Refused)
	assert.Equal(t, n+1, strings.Count(git(t, e.local, "ls-files", "-s"), "\n"))
	assert.Equal(t, strings.Repeat("A  ", 1)+"many/f0\n", git(t, e.local, "status", "--porcelain", "many/f0"))
}

// TestAttack23StagedOddNames: names with a newline, a tab, quotes, a
// backslash, a leading '-', glob and pathspec magic, and bytes that are not
// UTF-8, staged by the agent, arrive staged under exactly those names, and
// nothing else is touched (a name taken as an option or a pathspec would
// hit other entries).
func TestAttack23StagedOddNames(t *testing.T) {
	e := a23Local(t)
	initRepo(t, e.local, map[string]string{"a": "1\n", "b": "2\n", "[ab]": "glob\n", "keep-me": "k\n"})
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	names := []string{"new\nline", "tab\there", `quo"te`, `back\slash`, "-rf", "--output=x", "*", ":(top)magic", "\xff\xfe", " lead", "trail "}
	for _, n := range names {
		write(t, e.remote, n, "odd "+n+"\n")
	}
	git(t, e.remote, "--literal-pathspecs", "add", "--", names[0], names[1], names[2], names[3], names[4], names[5], names[6], names[7], names[8], names[9], names[10])
	git(t, e.remote, "--literal-pathspecs", "rm", "-q", "--cached", "--", "[ab]")
	want := a23Entries(t, e.remote)

	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Empty(t, res.Refused, "%v", res.Reasons)
	got := a23Entries(t, e.local)
	assert.Equal(t, want, got, "the local index is not the sandbox's")
	for _, n := range names {
		assert.Equal(t, "odd "+n+"\n", read(t, e.local, n))
	}
	assert.Equal(t, "glob\n", read(t, e.local, "[ab]"), "git rm --cached keeps the file")
}

// TestAttack23LocalUnmergedIndexKept: between Prepare and Restore the user
// left a merge conflict in the local index at a path the agent also
// staged. The user's unmerged stages stay exactly as they were (Kept);
// the agent's entry at another path arrives.
func TestAttack23LocalUnmergedIndexKept(t *testing.T) {
	e := a23Local(t)
	initRepo(t, e.local, map[string]string{"a": "1\n", "conf": "base\n"})
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	write(t, e.remote, "conf", "agent\n")
	write(t, e.remote, "ok", "ok\n")
	git(t, e.remote, "add", "conf", "ok")

	base, ours, theirs := a23Blob(t, e.local, "base\n"), a23Blob(t, e.local, "ours\n"), a23Blob(t, e.local, "theirs\n")
	git(t, e.local, "rm", "-q", "--cached", "conf")
	cmd := "100644 " + base + " 1\tconf\n100644 " + ours + " 2\tconf\n100644 " + theirs + " 3\tconf\n"
	gitStdin(t, e.local, cmd, "update-index", "--index-info")
	unmerged := git(t, e.local, "ls-files", "-u")
	require.NotEmpty(t, unmerged)

	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Contains(t, res.Kept, "conf")
	assert.Equal(t, unmerged, git(t, e.local, "ls-files", "-u"), "the user's conflict stages changed")
	assert.Contains(t, git(t, e.local, "ls-files", "-s", "ok"), "\tok\n")
}

// gitStdin runs git in dir with stdin.
func gitStdin(t *testing.T, dir, stdin string, args ...string) string {
	t.Helper()
	return gitIn(t, dir, stdin, args...)
}

// TestAttack23LocalIndexFormats: the user's index is in a form git
// supports but few tools write: version 4 (prefix-compressed paths),
// split (a shared index beside it), with skip-worktree and assume-unchanged
// entries. After a restore that stages the agent's entries, git reads the
// index, the entries the agent did not touch keep their flags, and the
// agent's entries are there.
func TestAttack23LocalIndexFormats(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string)
	}{
		{"v4", func(t *testing.T, dir string) { git(t, dir, "update-index", "--index-version", "4") }},
		{"split", func(t *testing.T, dir string) { git(t, dir, "update-index", "--split-index") }},
		{"flags", func(t *testing.T, dir string) {
			git(t, dir, "update-index", "--skip-worktree", "sw")
			git(t, dir, "update-index", "--assume-unchanged", "au")
		}},
		{"untracked cache", func(t *testing.T, dir string) {
			git(t, dir, "config", "core.untrackedCache", "true")
			git(t, dir, "update-index", "--untracked-cache")
			git(t, dir, "status", "--porcelain")
		}},
	} {
		for _, when := range []string{"before Prepare", "after Prepare"} {
			t.Run(tc.name+" "+when, func(t *testing.T) {
				e := a23Local(t)
				initRepo(t, e.local, map[string]string{"a": "1\n", "sw": "skip\n", "au": "assume\n", "dir/x": "x\n"})
				if when == "before Prepare" {
					tc.setup(t, e.local)
				}
				r, err := workspace.Prepare(ctx(t), e.spec)
				require.NoError(t, err)
				if when == "after Prepare" {
					tc.setup(t, e.local)
				}
				flagsBefore := git(t, e.local, "ls-files", "-v", "sw", "au")
				write(t, e.remote, "dir/new", "agent\n")
				write(t, e.remote, "a", "agent a\n")
				git(t, e.remote, "add", "dir/new", "a")

				res, err := r.Restore(ctx(t))
				require.NoError(t, err)
				assert.Empty(t, res.Refused)
				git(t, e.local, "fsck", "--no-progress")
				assert.Contains(t, git(t, e.local, "status", "--porcelain"), "A  dir/new\n")
				assert.Contains(t, git(t, e.local, "status", "--porcelain"), "M  a\n")
				assert.Equal(t, flagsBefore, git(t, e.local, "ls-files", "-v", "sw", "au"), "the flags of entries the agent did not touch changed")
				if tc.name == "split" {
					matches, err := filepath.Glob(filepath.Join(e.local, ".git", "sharedindex.*"))
					require.NoError(t, err)
					assert.NotEmpty(t, matches)
				}
			})
		}
	}
}

// TestAttack23LocalIndexRemoved: the user removed .git/index between
// Prepare and Restore (every entry is then a change of the user's). The
// restore keeps the user's (empty) index for the paths the agent staged
// (Kept), loses no file of the work tree, and fails nothing.
func TestAttack23LocalIndexRemoved(t *testing.T) {
	e := a23Local(t)
	initRepo(t, e.local, map[string]string{"a": "1\n", "b": "2\n"})
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	write(t, e.remote, "a", "agent\n")
	write(t, e.remote, "c", "new\n")
	git(t, e.remote, "add", "a", "c")
	require.NoError(t, os.Remove(filepath.Join(e.local, ".git", "index")))

	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	t.Logf("%+v", res)
	assert.Equal(t, "agent\n", read(t, e.local, "a"))
	assert.Equal(t, "2\n", read(t, e.local, "b"))
	assert.Equal(t, "new\n", read(t, e.local, "c"))
	assert.Contains(t, res.Kept, "a", "the user's removal of a's entry won, and should be reported")
}

// TestAttack23RuntimeVersusRefused: what the sandbox leaves in its runtime
// directory is in Result.Runtime (the top entries only) and never comes
// back; a case twin of the runtime directory, which a case-folding file
// system reads as it, is Refused and never written; a runtime directory
// that is a link is Refused as ".airlock". Both for git and plain rounds.
func TestAttack23RuntimeVersusRefused(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			e := a23Local(t)
			if kind == "plain" {
				e.spec.Exclude = nil
			}
			r := prepareOneFile(t, e, kind)
			write(t, e.remote, sandbox.RuntimeDir+"/skills/s/SKILL.md", "skill\n")
			write(t, e.remote, sandbox.RuntimeDir+"/state", "s\n")
			write(t, e.remote, sandbox.RuntimeDir+"/deep/a/b/c", "c\n")
			write(t, e.remote, ".Airlock/x", "twin\n")
			write(t, e.remote, "sub/"+sandbox.RuntimeDir+"/y", "nested\n")
			write(t, e.remote, sandbox.RuntimeDir+"/we\nird", "n\n")
			write(t, e.remote, "ok", "ok\n")
			res, err := r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, []string{sandbox.RuntimeDir + "/deep", sandbox.RuntimeDir + "/skills", sandbox.RuntimeDir + "/state", sandbox.RuntimeDir + "/we\nird"}, res.Runtime)
			for _, p := range res.Refused {
				assert.False(t, strings.HasPrefix(p, sandbox.RuntimeDir+"/"), "runtime entry %q also in Refused", p)
			}
			assert.False(t, exists(e.local, ".Airlock/x"), "the case twin of the runtime directory was written")
			assert.True(t, slices.ContainsFunc(res.Refused, func(p string) bool { return strings.HasPrefix(p, ".Airlock") }), "the case twin is not in Refused: %v", res.Refused)
			assert.Equal(t, "ok\n", read(t, e.local, "ok"))
			assert.False(t, exists(e.local, sandbox.RuntimeDir+"/state"))
			assert.Equal(t, "nested\n", read(t, e.local, "sub/"+sandbox.RuntimeDir+"/y"), "only the top .airlock is the runtime directory")
		})
	}
	t.Run("link", func(t *testing.T) {
		e := a23Local(t)
		r := prepareOneFile(t, e, "git")
		require.NoError(t, os.RemoveAll(filepath.Join(e.remote, sandbox.RuntimeDir)))
		require.NoError(t, os.Symlink("/etc", filepath.Join(e.remote, sandbox.RuntimeDir)))
		res, err := r.Restore(ctx(t))
		require.NoError(t, err)
		assert.Contains(t, res.Refused, sandbox.RuntimeDir)
		assert.Empty(t, res.Runtime)
		_, lerr := os.Lstat(filepath.Join(e.local, sandbox.RuntimeDir))
		if lerr == nil {
			fi, err := os.Lstat(filepath.Join(e.local, sandbox.RuntimeDir))
			require.NoError(t, err)
			assert.Zero(t, fi.Mode()&os.ModeSymlink, "the runtime link was written locally")
		}
	})
}

// TestAttack23ConcurrentUserGitAdd: the user keeps running git add while a
// Restore stages the agent's entries. Every git add that succeeded must
// still be in the index afterwards: the restore's copy-and-rename of the
// index must not put back an index read before the user's add.
func TestAttack23ConcurrentUserGitAdd(t *testing.T) {
	for round := range 3 {
		e := a23Local(t)
		initRepo(t, e.local, map[string]string{"a": "1\n"})
		r, err := workspace.Prepare(ctx(t), e.spec)
		require.NoError(t, err)
		for i := range 20 {
			write(t, e.remote, "agent/f"+strconv.Itoa(i), "agent\n")
		}
		git(t, e.remote, "add", "agent")

		stop := make(chan struct{})
		done := make(chan []string)
		go func() {
			var added []string
			for i := 0; ; i++ {
				select {
				case <-stop:
					done <- added
					return
				default:
				}
				name := "user" + strconv.Itoa(i)
				if os.WriteFile(filepath.Join(e.local, name), []byte("user\n"), 0o644) != nil {
					continue
				}
				cmd := exec.Command("git", "add", name)
				cmd.Dir = e.local
				cmd.Env = append(os.Environ(), gitEnv...)
				if cmd.Run() == nil {
					added = append(added, name)
				}
			}
		}()
		time.Sleep(20 * time.Millisecond)
		res, err := r.Restore(ctx(t))
		close(stop)
		added := <-done
		require.NoError(t, err)
		ls := git(t, e.local, "ls-files")
		var lost []string
		for _, name := range added {
			if !strings.Contains(ls, name+"\n") {
				lost = append(lost, name)
			}
		}
		t.Logf("round %d: %d git adds succeeded while Restore ran", round, len(added))
		assert.Empty(t, lost, "round %d: %d of the user's %d successful git adds were lost by the restore", round, len(lost), len(added))
		assert.Contains(t, ls, "agent/f0\n", "round %d: %v", round, res)
	}
}

// TestAttack23StagedThenDeleted: the agent staged a file and then removed
// it from its work tree (git status: AD, MD). The staged content is not
// lost: the local index holds it, and git status reads as in the sandbox.
func TestAttack23StagedThenDeleted(t *testing.T) {
	e := a23Local(t)
	initRepo(t, e.local, map[string]string{"a": "1\n", "b": "2\n"})
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	write(t, e.remote, "new", "staged then deleted\n")
	write(t, e.remote, "a", "changed, staged, deleted\n")
	git(t, e.remote, "add", "new", "a")
	require.NoError(t, os.Remove(filepath.Join(e.remote, "new")))
	require.NoError(t, os.Remove(filepath.Join(e.remote, "a")))
	want := withoutRuntime(git(t, e.remote, "status", "--porcelain"))

	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Empty(t, res.Refused, "%v", res.Reasons)
	assert.Equal(t, want, git(t, e.local, "status", "--porcelain"))
	assert.Equal(t, "staged then deleted\n", git(t, e.local, "show", ":new"), "the staged content was lost")
	assert.Equal(t, "changed, staged, deleted\n", git(t, e.local, "show", ":a"), "the staged content was lost")
}

var _ = errors.Is
