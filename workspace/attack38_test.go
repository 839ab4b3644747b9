package workspace_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

// The defects an outside attack on the round trip found on 2026-12-06 (a
// user's file deleted by a refused plain entry or by an agent's
// .gitignore; an agent's change dropped, unlisted; a user's ignored file
// sent), each kept as the test that failed on the code before.

// TestRestoreBackslashNames: a backslash is one character of a file name
// here. In a git work tree under eol=crlf the agent's changes and
// deletions of such files arrive (they were kept out as local edits). A
// plain directory's restore refuses such a name (its documented rule),
// and the local entry then stays: it was deleted, as if the sandbox had
// deleted it. A deletion by the agent arrives in both.
func TestRestoreBackslashNames(t *testing.T) {
	names := []string{`back\slash`, `d\n`, `dir\x/f`, `trail\`}
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, runners[0].new)
			files := map[string]string{`gone\x`: "g\n"}
			for _, n := range names {
				files[n] = "x\ny\n"
			}
			local := "x\ny\n"
			if kind == "git" {
				files[".gitattributes"] = "* text eol=crlf\n"
				initRepo(t, e.local, files)
				for n := range files {
					if n != ".gitattributes" {
						require.NoError(t, os.Remove(filepath.Join(e.local, n)))
					}
				}
				git(t, e.local, "checkout", "--", ".")
				local = "x\r\ny\r\n"
				require.Equal(t, local, read(t, e.local, names[0]))
			} else {
				for n, v := range files {
					write(t, e.local, n, v)
				}
			}
			r, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			for _, n := range names {
				write(t, e.remote, n, "x\nz\n")
			}
			require.NoError(t, os.Remove(filepath.Join(e.remote, `gone\x`)))
			res, err := r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Empty(t, res.Kept)
			assert.Equal(t, []string{`gone\x`}, res.Deleted)
			assert.False(t, exists(e.local, `gone\x`))
			slices.Sort(res.Updated)
			slices.Sort(res.Refused)
			want := "x\r\nz\r\n"
			if kind == "plain" {
				assert.Empty(t, res.Updated)
				assert.Equal(t, []string{`back\slash`, `d\n`, `dir\x`, `trail\`}, res.Refused)
				want = local
			} else {
				assert.Empty(t, res.Refused)
				assert.Equal(t, slices.Sorted(slices.Values(names)), res.Updated)
			}
			for _, n := range names {
				assert.Equal(t, want, read(t, e.local, n), n)
			}
		})
	}
}

// TestRestoreSandboxAddFails: a file the sandbox's git cannot add (a
// working-tree-encoding its bytes do not have, which stops git add
// whole) is refused, and every other change of the agent arrives: they
// were all dropped, unlisted. A name holding a newline, which the
// sandbox's retry cannot name, is refused too, never dropped.
func TestRestoreSandboxAddFails(t *testing.T) {
	eachRunner(t, func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner) {
		e := newEnv(t, newRunner)
		initRepo(t, e.local, map[string]string{"a.txt": "1\n", "b.md": "1\n", "c.md": "1\n"})
		r, err := workspace.Prepare(ctx(t), e.spec)
		require.NoError(t, err)
		write(t, e.remote, ".gitattributes", "*.txt working-tree-encoding=UTF-16\n")
		write(t, e.remote, "a.txt", "2\n") // no BOM: git add dies on it
		write(t, e.remote, "b.md", "2\n")
		write(t, e.remote, "new\nline.md", "n\n")
		require.NoError(t, os.Remove(filepath.Join(e.remote, "c.md")))
		res, err := r.Restore(ctx(t))
		require.NoError(t, err)
		slices.Sort(res.Updated)
		slices.Sort(res.Refused)
		assert.Equal(t, []string{".gitattributes", "b.md"}, res.Updated)
		assert.Equal(t, []string{"c.md"}, res.Deleted)
		assert.Equal(t, []string{"a.txt", "new\nline.md"}, res.Refused)
		assert.Contains(t, res.Reasons["a.txt"], "not added by the sandbox's git")
		assert.Equal(t, "1\n", read(t, e.local, "a.txt"))
		assert.Equal(t, "2\n", read(t, e.local, "b.md"))
		assert.False(t, exists(e.local, "c.md"))
	})
}

// TestRestorePlainRefusedKeepsBelow: a plain directory the sandbox
// replaced by an entry the Restore refuses (a name with a backslash, a
// FIFO, a file with several links, a reserved name) keeps everything the
// local tree holds below it: a refused change of type is refused
// completely. They were deleted, with success reported.
func TestRestorePlainRefusedKeepsBelow(t *testing.T) {
	for _, c := range []struct {
		name, dir string
		replace   func(t *testing.T, p string)
	}{
		{"backslash", `m\n`, func(t *testing.T, p string) { require.NoError(t, os.WriteFile(p, []byte("now a file\n"), 0o644)) }},
		{"fifo", "d", func(t *testing.T, p string) { require.NoError(t, syscall.Mkfifo(p, 0o644)) }},
		{"hardlink", "d", func(t *testing.T, p string) {
			require.NoError(t, os.WriteFile(p, []byte("x\n"), 0o644))
			require.NoError(t, os.Link(p, p+"-twin"))
		}},
		{"reserved", "x/.GIT", func(t *testing.T, p string) { require.NoError(t, os.WriteFile(p, []byte("x\n"), 0o644)) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, runners[0].new)
			write(t, e.local, c.dir+"/inner", "in\n")
			write(t, e.local, c.dir+"/sub/deep", "deep\n")
			write(t, e.local, "other", "o\n")
			r, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			require.NoError(t, os.RemoveAll(filepath.Join(e.remote, c.dir)))
			c.replace(t, filepath.Join(e.remote, filepath.FromSlash(c.dir)))
			write(t, e.remote, "other", "o2\n")
			res, err := r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Contains(t, res.Refused, c.dir)
			assert.Empty(t, res.Deleted)
			assert.Contains(t, res.Updated, "other")
			assert.Equal(t, "in\n", read(t, e.local, c.dir+"/inner"))
			assert.Equal(t, "deep\n", read(t, e.local, c.dir+"/sub/deep"))
		})
	}
}

// TestRestoreAgentIndexFlags: a file the agent marked assume-unchanged or
// skip-worktree in the sandbox's index still comes back as the work tree
// holds it (git add would have trusted the bit and dropped the change,
// unlisted).
func TestRestoreAgentIndexFlags(t *testing.T) {
	eachRunner(t, func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner) {
		e := newEnv(t, newRunner)
		initRepo(t, e.local, map[string]string{"x": "x\n", "y": "y\n", "z": "z\n"})
		r, err := workspace.Prepare(ctx(t), e.spec)
		require.NoError(t, err)
		git(t, e.remote, "update-index", "--skip-worktree", "x")
		git(t, e.remote, "update-index", "--assume-unchanged", "y")
		write(t, e.remote, "x", "x2\n")
		write(t, e.remote, "y", "y2\n")
		require.NoError(t, os.Remove(filepath.Join(e.remote, "z")))
		git(t, e.remote, "update-index", "--skip-worktree", "z")
		res, err := r.Restore(ctx(t))
		require.NoError(t, err)
		slices.Sort(res.Updated)
		assert.Equal(t, []string{"x", "y"}, res.Updated)
		assert.Equal(t, []string{"z"}, res.Deleted)
		assert.Equal(t, "x2\n", read(t, e.local, "x"))
		assert.Equal(t, "y2\n", read(t, e.local, "y"))
	})
}

// TestPrepareUserExcludes: a file the user's git ignores through a
// core.excludesFile of the global configuration (which host git
// otherwise does not read) never travels to the sandbox, and Restore
// leaves it alone. A file that did travel and that the sandbox's git
// ignores (git's default global ignore file, which the sandbox reads and
// the host does not, with core.excludesFile set) is not deleted.
func TestPrepareUserExcludes(t *testing.T) {
	home := t.TempDir()
	write(t, home, ".gitconfig", "[core]\n\texcludesFile = ~/.gitignore_global\n")
	write(t, home, ".gitignore_global", "secret.env\n")
	write(t, home, ".config/git/ignore", "*.pem\n")
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	e := newEnv(t, runners[0].new)
	initRepo(t, e.local, map[string]string{"a": "1\n"})
	write(t, e.local, "secret.env", "TOKEN=hunter2\n")
	write(t, e.local, "d/key.pem", "KEY\n")
	write(t, e.local, "new.txt", "n\n")
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	assert.False(t, exists(e.remote, "secret.env"), "a file of the user's global ignore list travelled")
	assert.Equal(t, "KEY\n", read(t, e.remote, "d/key.pem"))
	assert.Equal(t, "n\n", read(t, e.remote, "new.txt"))
	write(t, e.remote, "a", "2\n")
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, res.Updated)
	assert.Empty(t, res.Deleted)
	assert.Equal(t, "TOKEN=hunter2\n", read(t, e.local, "secret.env"))
	assert.Equal(t, "KEY\n", read(t, e.local, "d/key.pem"))
}

// TestRestoreAgentIgnores: a .gitignore line the agent writes does not
// delete the user's untracked files it matches (they were sent, and the
// sandbox still holds them); an agent's edit of one arrives, and its
// deletion of one arrives as a deletion.
func TestRestoreAgentIgnores(t *testing.T) {
	eachRunner(t, func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner) {
		e := newEnv(t, newRunner)
		initRepo(t, e.local, map[string]string{"a": "1\n", "tracked.log": "t\n"})
		write(t, e.local, "debug.log", "my notes\n")
		write(t, e.local, "out/build.log", "build\n")
		write(t, e.local, "gone.log", "g\n")
		r, err := workspace.Prepare(ctx(t), e.spec)
		require.NoError(t, err)
		write(t, e.remote, ".gitignore", "*.log\n")
		write(t, e.remote, "out/build.log", "build 2\n")
		require.NoError(t, os.Remove(filepath.Join(e.remote, "gone.log")))
		res, err := r.Restore(ctx(t))
		require.NoError(t, err)
		slices.Sort(res.Updated)
		assert.Equal(t, []string{".gitignore", "out/build.log"}, res.Updated)
		assert.Equal(t, []string{"gone.log"}, res.Deleted)
		assert.Equal(t, "my notes\n", read(t, e.local, "debug.log"))
		assert.Equal(t, "build 2\n", read(t, e.local, "out/build.log"))
		assert.Equal(t, "t\n", read(t, e.local, "tracked.log"))
	})
}

// TestRestoreAgentIgnoresOddNames: a third attack's cases of
// TestRestoreAgentIgnores. A sent file whose name holds a newline (the
// sandbox's list splits lines) and many sent files under a directory the
// agent ignores stay, and the agent's own ignored files never come back.
func TestRestoreAgentIgnoresOddNames(t *testing.T) {
	eachRunner(t, func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner) {
		e := newEnv(t, newRunner)
		initRepo(t, e.local, map[string]string{"a": "1\n"})
		names := []string{"notes\n.log", "p\nq", "end\n", "out/a\nb", "tab\t.log", `back\.log`}
		for i := range 40 {
			names = append(names, fmt.Sprintf("out/gen/f%02d.o", i))
		}
		for _, n := range names {
			write(t, e.local, n, "user's "+n)
		}
		r, err := workspace.Prepare(ctx(t), e.spec)
		require.NoError(t, err)
		write(t, e.remote, ".gitignore", "*.log\np*\nq\nend*\nout/\n")
		write(t, e.remote, "p", "agent's ignored p\n")
		write(t, e.remote, "q", "agent's ignored q\n")
		write(t, e.remote, "out/gen/f00.o", "agent's edit\n")
		res, err := r.Restore(ctx(t))
		require.NoError(t, err)
		assert.Empty(t, res.Deleted)
		assert.Equal(t, []string{".gitignore", "out/gen/f00.o"}, res.Updated)
		assert.False(t, exists(e.local, "p"), "the agent's ignored file came back")
		assert.Equal(t, "agent's edit\n", read(t, e.local, "out/gen/f00.o"))
		for _, n := range names[:len(names)-40] {
			assert.Equal(t, "user's "+n, read(t, e.local, n), "%q", n)
		}
	})
}

// TestPrepareUserExcludesEnv: the user's global configuration is where
// the user's git finds it (GIT_CONFIG_GLOBAL), and a core.excludesFile
// set to nothing turns git's default ignore file off, as for the user.
func TestPrepareUserExcludesEnv(t *testing.T) {
	home := t.TempDir()
	write(t, home, "alt.gitconfig", "[core]\n\texcludesFile = ~/ig\n")
	write(t, home, "ig", "secret.env\n")
	write(t, home, ".gitconfig", "[core]\n\texcludesFile =\n")
	write(t, home, ".config/git/ignore", "s1\n")
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Run("GIT_CONFIG_GLOBAL", func(t *testing.T) {
		t.Setenv("GIT_CONFIG_GLOBAL", filepath.Join(home, "alt.gitconfig"))
		e := newEnv(t, runners[0].new)
		initRepo(t, e.local, map[string]string{"a": "1\n"})
		write(t, e.local, "secret.env", "TOKEN\n")
		_, err := workspace.Prepare(ctx(t), e.spec)
		require.NoError(t, err)
		assert.False(t, exists(e.remote, "secret.env"), "a file of the user's ignore list travelled")
	})
	t.Run("empty", func(t *testing.T) {
		e := newEnv(t, runners[0].new)
		initRepo(t, e.local, map[string]string{"a": "1\n"})
		write(t, e.local, "s1", "mine\n")
		_, err := workspace.Prepare(ctx(t), e.spec)
		require.NoError(t, err)
		assert.Equal(t, "mine\n", read(t, e.remote, "s1"), "the user's git does not ignore it")
	})
}

// TestRestoreAgentStatConfig: the sandbox's repository configuration
// cannot hide the agent's changes from the snapshot: with core.trustctime
// off, core.checkStat minimal and core.ignoreStat on, an edit of the same
// size whose modification time is set back arrives; with the untracked
// cache on (and filled), a file made in a directory whose modification
// time is set back arrives.
func TestRestoreAgentStatConfig(t *testing.T) {
	eachRunner(t, func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner) {
		e := newEnv(t, newRunner)
		initRepo(t, e.local, map[string]string{"x": "x1\n", "d/y": "y\n"})
		r, err := workspace.Prepare(ctx(t), e.spec)
		require.NoError(t, err)
		for _, kv := range [][2]string{{"core.trustctime", "false"}, {"core.checkStat", "minimal"}, {"core.ignoreStat", "true"}, {"core.untrackedCache", "true"}} {
			git(t, e.remote, "config", kv[0], kv[1])
		}
		// Times an hour back, recorded by an index written now: no entry
		// is racily clean, so git trusts what the stat data say.
		x, d := filepath.Join(e.remote, "x"), filepath.Join(e.remote, "d")
		past := time.Now().Add(-time.Hour).Truncate(time.Second)
		require.NoError(t, os.Chtimes(x, past, past))
		require.NoError(t, os.Chtimes(d, past, past))
		git(t, e.remote, "update-index", "--untracked-cache")
		git(t, e.remote, "update-index", "--refresh")
		git(t, e.remote, "status", "--porcelain")
		// git compares whole seconds: the edit comes in the next one, by
		// the file system's coarse clock too (a tick behind at most).
		time.Sleep(time.Until(time.Unix(time.Now().Unix()+1, 50e6)))
		write(t, e.remote, "x", "x2\n")
		write(t, e.remote, "d/new", "new\n")
		require.NoError(t, os.Chtimes(x, past, past))
		require.NoError(t, os.Chtimes(d, past, past))
		// The sandbox's own git no longer sees the edit (d/new it may
		// or may not hide: the untracked cache is off where the file
		// system's directory times do not suit it, tmpfs among them).
		require.NotContains(t, git(t, e.remote, "status", "--porcelain"), " x\n", "the sandbox's git sees the edit of x")
		res, err := r.Restore(ctx(t))
		require.NoError(t, err)
		assert.Equal(t, []string{"d/new", "x"}, res.Updated)
		assert.Equal(t, "x2\n", read(t, e.local, "x"))
		assert.Equal(t, "new\n", read(t, e.local, "d/new"))
	})
}

// TestRestoreAgentFileModeFalse: core.fileMode false in the sandbox's
// repository (the agent's) does not hide the agent's chmod: a tracked
// file made executable, an executable one made plain and a new executable
// file arrive with their modes (they came back with the old ones, unlisted).
func TestRestoreAgentFileModeFalse(t *testing.T) {
	eachRunner(t, func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner) {
		e := newEnv(t, newRunner)
		initRepo(t, e.local, map[string]string{"run.sh": "#!/bin/sh\n", "tool": "#!/bin/sh\n"})
		require.NoError(t, os.Chmod(filepath.Join(e.local, "tool"), 0o755))
		git(t, e.local, "add", "-A")
		git(t, e.local, "commit", "-q", "-m", "tool")
		r, err := workspace.Prepare(ctx(t), e.spec)
		require.NoError(t, err)
		git(t, e.remote, "config", "core.fileMode", "false")
		require.NoError(t, os.Chmod(filepath.Join(e.remote, "run.sh"), 0o755))
		require.NoError(t, os.Chmod(filepath.Join(e.remote, "tool"), 0o644))
		write(t, e.remote, "new.sh", "#!/bin/sh\n")
		require.NoError(t, os.Chmod(filepath.Join(e.remote, "new.sh"), 0o755))
		res, err := r.Restore(ctx(t))
		require.NoError(t, err)
		assert.Equal(t, []string{"new.sh", "run.sh", "tool"}, res.Updated)
		for p, want := range map[string]os.FileMode{"run.sh": 0o755, "tool": 0o644, "new.sh": 0o755} {
			fi, err := os.Stat(filepath.Join(e.local, p))
			require.NoError(t, err)
			assert.Equal(t, want, fi.Mode().Perm(), p)
		}
	})
}

// TestRestoreAgentIgnoreCase: core.ignoreCase true in the sandbox's
// repository does not hide the agent's new files whose names differ from
// tracked ones only in case (they never arrived, unlisted).
func TestRestoreAgentIgnoreCase(t *testing.T) {
	eachRunner(t, func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner) {
		e := newEnv(t, newRunner)
		initRepo(t, e.local, map[string]string{"readme": "lower\n", "src/Main.go": "package main\n"})
		r, err := workspace.Prepare(ctx(t), e.spec)
		require.NoError(t, err)
		git(t, e.remote, "config", "core.ignoreCase", "true")
		write(t, e.remote, "README", "upper\n")
		write(t, e.remote, "src/main.go", "package lower\n")
		res, err := r.Restore(ctx(t))
		require.NoError(t, err)
		assert.Equal(t, []string{"README", "src/main.go"}, res.Updated)
		assert.Equal(t, "upper\n", read(t, e.local, "README"))
		assert.Equal(t, "lower\n", read(t, e.local, "readme"))
		assert.Equal(t, "package lower\n", read(t, e.local, "src/main.go"))
		assert.Equal(t, "package main\n", read(t, e.local, "src/Main.go"))
	})
}

// TestProbeLeftoverRemoved: the file-mode probe file a command killed
// between its creation and its removal leaves in the sandbox's .git (a
// fault test cut a Prepare's connection there) is removed by the next
// Prepare or Restore, whichever comes first.
func TestProbeLeftoverRemoved(t *testing.T) {
	eachRunner(t, func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner) {
		e := newEnv(t, newRunner)
		initRepo(t, e.local, map[string]string{"a": "a\n"})
		plant := func() string {
			t.Helper()
			p := filepath.Join(e.remote, ".git", "airlock-fm-99999999")
			require.NoError(t, os.WriteFile(p, nil, 0o644))
			return p
		}
		r, err := workspace.Prepare(ctx(t), e.spec)
		require.NoError(t, err)
		p := plant()
		write(t, e.remote, "a", "b\n")
		res, err := r.Restore(ctx(t))
		require.NoError(t, err)
		assert.Equal(t, []string{"a"}, res.Updated)
		assert.NoFileExists(t, p, "after the Restore")
		p = plant()
		_, err = workspace.Prepare(ctx(t), e.spec)
		require.NoError(t, err)
		assert.NoFileExists(t, p, "after the Prepare")
	})
}
