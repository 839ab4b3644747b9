package workspace_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

// a35Same asserts the sandbox holds the local HEAD, status and every
// tracked file, and that its repository is whole (git fsck --full).
func a35Same(t *testing.T, e *env) {
	t.Helper()
	assert.Equal(t, git(t, e.local, "rev-parse", "HEAD"), git(t, e.remote, "rev-parse", "HEAD"))
	assert.Equal(t, git(t, e.local, "status", "--porcelain"), git(t, e.remote, "status", "--porcelain"))
	for _, f := range strings.Fields(git(t, e.local, "ls-files")) {
		assert.Equal(t, read(t, e.local, f), read(t, e.remote, f), "file %s", f)
	}
	cmd := exec.Command("git", "fsck", "--full", "--no-dangling", "--connectivity-only")
	cmd.Dir = e.remote
	out, err := cmd.CombinedOutput()
	assert.NoError(t, err, "the sandbox repository is not whole after Prepare: %s", out)
}

// a35Commit commits files in dir with message msg.
func a35Commit(t *testing.T, dir, msg string, files map[string]string) {
	t.Helper()
	for k, v := range files {
		write(t, dir, k, v)
	}
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "--allow-empty", "-m", msg)
}

// a35StripSandbox leaves the sandbox's repository with only the commit
// objects (loose), every tree and blob gone: its refs name commits it has
// but not what they reach.
func a35StripSandbox(t *testing.T, e *env, keepTrees bool) {
	t.Helper()
	objs := strings.Fields(git(t, e.remote, "rev-list", "--objects", "--all"))
	type obj struct {
		id, typ string
		data    []byte
	}
	var keep []obj
	for _, o := range objs {
		if len(o) != 40 {
			continue
		}
		typ := strings.TrimSpace(git(t, e.remote, "cat-file", "-t", o))
		if typ == "commit" || (keepTrees && typ == "tree") {
			cmd := exec.Command("git", "cat-file", typ, o)
			cmd.Dir = e.remote
			b, err := cmd.Output()
			require.NoError(t, err)
			keep = append(keep, obj{o, typ, b})
		}
	}
	require.NoError(t, os.RemoveAll(filepath.Join(e.remote, ".git", "objects")))
	require.NoError(t, os.MkdirAll(filepath.Join(e.remote, ".git", "objects", "pack"), 0o755))
	for _, o := range keep {
		cmd := exec.Command("git", "hash-object", "-w", "--literally", "-t", o.typ, "--stdin")
		cmd.Dir = e.remote
		cmd.Stdin = bytes.NewReader(o.data)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Equal(t, o.id, strings.TrimSpace(string(out)))
	}
}

// TestA35ThinPrepareSandboxLacksObjects: the sandbox's refs name commits
// it has, but the trees and blobs they reach are gone (or only the blobs,
// or only a blob of an old commit). The doc: "A second Prepare on the same
// sandbox sends only the commits it lacks (the whole history when the
// sandbox's repository turns out to lack objects its refs name)". So the
// Prepare must succeed and leave a sandbox equal to the local work tree,
// its repository whole.
func TestA35ThinPrepareSandboxLacksObjects(t *testing.T) {
	for _, tc := range []struct {
		name      string
		keepTrees bool
		change    string // the file the second commit changes
		small     bool   // no delta against a missing base
	}{
		{"trees kept, blobs gone, no delta", true, "a", true},
		{"nothing but commits, no delta", false, "a", true},
		{"no trees or blobs, unchanged file needed", false, "a", false},
		{"trees kept, blobs gone", true, "a", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, localRunner)
			initRepo(t, e.local, map[string]string{"a": "1\n", "c": "unchanged\n", "big": strings.Repeat("big line\n", 2000)})
			_, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			a35StripSandbox(t, e, tc.keepTrees)
			files := map[string]string{tc.change: "2\n"}
			if !tc.small {
				files["big"] = strings.Repeat("big line\n", 2000) + "more\n"
			}
			a35Commit(t, e.local, "second", files)
			_, err = workspace.Prepare(ctx(t), e.spec)
			if err != nil {
				_, err2 := workspace.Prepare(ctx(t), e.spec)
				t.Logf("a retry: %v", err2)
			}
			require.NoError(t, err, "the sandbox lacks objects its refs name: Prepare should send the whole history")
			a35Same(t, e)
		})
	}
}

// TestA35PrepareSubjects: prerequisite lines of a thin bundle carry the
// subject of each prerequisite commit; subjects with backslashes (a
// trailing one too), leading spaces, non-UTF-8 bytes, a very long line,
// shell-special text: the second Prepare must succeed.
func TestA35PrepareSubjects(t *testing.T) {
	for name, subj := range map[string]string{
		"backslash":   `a\b\\c\`,
		"trailing-bs": `ends with \`,
		"lead-space":  "   \tleading",
		"non-utf8":    "bad \xff\xfe bytes",
		"long":        strings.Repeat("x", 70000),
		"shell":       `$(touch /tmp/a35pwn) ; "' %s %n -- `,
		"dash":        "-",
		"cr":          "carriage\rreturn",
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, localRunner)
			initRepo(t, e.local, nil)
			a35Commit(t, e.local, subj, map[string]string{"a": "1\n"})
			_, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			a35Commit(t, e.local, subj+" 2", map[string]string{"a": "2\n"})
			_, err = workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			a35Same(t, e)
			a35Commit(t, e.remote, "agent", map[string]string{"b": "agent\n"})
		})
	}
}

// TestA35PrepareSHA256: a SHA-256 local repository, to a new sandbox and
// again to a prepared one.
func TestA35PrepareSHA256(t *testing.T) {
	e := newEnv(t, localRunner)
	git(t, e.local, "init", "-q", "-b", "main", "--object-format=sha256")
	a35Commit(t, e.local, "one", map[string]string{"a": "1\n"})
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	a35Same(t, e)
	a35Commit(t, e.remote, "agent", map[string]string{"b": "agent\n"})
	_, err = r.Restore(ctx(t))
	require.NoError(t, err)
	a35Commit(t, e.local, "two", map[string]string{"a": "2\n"})
	_, err = workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	a35Same(t, e)
}

// a35Cut passes the prepare command's stdin on cut after n bytes (and
// reports the full length).
type a35Cut struct {
	r    sandbox.Runner
	n    int // >= 0: from the start; < 0: from the end
	full int
	cut  bool
}

func (c *a35Cut) Run(ctx context.Context, cmd sandbox.Command) error {
	if strings.Contains(cmd.Script, "airlock-prepare-") && cmd.Stdin != nil {
		b, err := io.ReadAll(cmd.Stdin)
		if err != nil {
			return err
		}
		c.full = len(b)
		n := c.n
		if n < 0 {
			n += len(b)
		}
		c.cut = false
		if n >= 0 && n < len(b) {
			b = b[:n]
			c.cut = true
		}
		cmd.Stdin = bytes.NewReader(b)
	}
	return c.r.Run(ctx, cmd)
}

// TestA35PrepareStdinCut: the Runner delivers only the first n bytes of
// the prepare's stdin (and returns what the command returned): every such
// Prepare must fail (never nil with a sandbox that is not the local work
// tree), and a Prepare over the real Runner then succeeds.
func TestA35PrepareStdinCut(t *testing.T) {
	for _, again := range []bool{false, true} {
		e := newEnv(t, localRunner)
		initRepo(t, e.local, map[string]string{"a": "1\n", "b": strings.Repeat("b\n", 3000)})
		if again {
			_, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			a35Commit(t, e.local, "second", map[string]string{"a": "2\n"})
		}
		real := e.spec.Runner
		c := &a35Cut{r: real, n: 1 << 30}
		e.spec.Runner = c
		_, err := workspace.Prepare(ctx(t), e.spec)
		require.NoError(t, err)
		full := c.full
		require.NotZero(t, full)
		for _, n := range []int{0, 1, 15, 16, 17, 40, 60, full / 2, -40, -21, -20, -1} {
			if again {
				a35Commit(t, e.local, "more", map[string]string{"a": strings.Repeat("x", (n+100)%97) + "\n"})
			}
			c.n = n
			_, err := workspace.Prepare(ctx(t), e.spec)
			require.True(t, c.cut)
			assert.Error(t, err, "again=%v: stdin cut at %d of %d bytes, Prepare returned nil", again, n, c.full)
			if err != nil {
				assert.NotErrorIs(t, err, workspace.ErrHostile, "a cut stdin is no hostile sandbox: %v", err)
				t.Logf("again=%v cut %d/%d: %v", again, n, c.full, err)
			}
			c.n = 1 << 30
			_, err = workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err, "again=%v: the Prepare after a cut at %d", again, n)
			a35Same(t, e)
		}
	}
}

// TestA35PrepareHostileGitConfig: the sandbox's own .git/config points
// git elsewhere (core.worktree) or thins the checkout (sparse checkout).
// Prepare must still leave the sandbox's work tree the local one.
func TestA35PrepareHostileGitConfig(t *testing.T) {
	for _, c := range []struct {
		name string
		set  func(t *testing.T, remote string)
	}{
		{"core.worktree", func(t *testing.T, remote string) {
			git(t, remote, "config", "core.worktree", t.TempDir())
		}},
		{"sparse checkout", func(t *testing.T, remote string) {
			git(t, remote, "config", "core.sparseCheckout", "true")
			write(t, remote, ".git/info/sparse-checkout", "/nothing-matches\n")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, localRunner)
			initRepo(t, e.local, map[string]string{"a": "1\n", "d/b": "2\n"})
			_, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			c.set(t, e.remote)
			a35Commit(t, e.local, "two", map[string]string{"a": "changed\n", "d/c": "new\n"})
			_, err = workspace.Prepare(ctx(t), e.spec)
			if err != nil {
				t.Logf("Prepare refused: %v", err)
				return
			}
			for _, f := range []string{"a", "d/b", "d/c"} {
				assert.Equal(t, read(t, e.local, f), read(t, e.remote, f), "file %s", f)
			}
		})
	}
}

// TestA35PreparePlantedScratch: the sandbox put a directory, a link or a
// fifo where a prepare keeps its scratch files (.git/airlock-prepare-*);
// Prepare must clear them and succeed.
func TestA35PreparePlantedScratch(t *testing.T) {
	e := newEnv(t, localRunner)
	initRepo(t, e.local, map[string]string{"a": "1\n"})
	_, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	g := filepath.Join(e.remote, ".git")
	write(t, g, "airlock-prepare-planted.bundle/x", "x")
	require.NoError(t, os.Symlink(t.TempDir(), filepath.Join(g, "airlock-prepare-link")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(g, "airlock-restore-fifo"), 0o644))
	a35Commit(t, e.local, "two", map[string]string{"a": "2\n"})
	_, err = workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	a35Same(t, e)
	entries, err := os.ReadDir(g)
	require.NoError(t, err)
	for _, en := range entries {
		assert.False(t, strings.HasPrefix(en.Name(), "airlock-"), "left in .git: %s", en.Name())
	}
}
