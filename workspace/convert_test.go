package workspace_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

// convRepo makes dir a repository whose files git converts on checkout:
// eol=crlf, ident and a filter driver of the repository's own
// configuration (rot13 both ways), checked out again so that the work
// tree holds every file in its converted form, as a clone would.
func convRepo(t *testing.T, dir string) {
	t.Helper()
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "config", "filter.rot.clean", "tr a-z n-za-m")
	git(t, dir, "config", "filter.rot.smudge", "tr a-z n-za-m")
	for k, v := range map[string]string{
		".gitattributes": "*.bat text eol=crlf\n*.r filter=rot\n*.id ident\n",
		"run.bat":        "echo 1\necho 2\n",
		"y.r":            "hello\n",
		"v.id":           "$Id$\nv1\n",
		"plain.txt":      "p\n",
	} {
		write(t, dir, k, v)
	}
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "initial")
	for _, f := range []string{"run.bat", "y.r", "v.id"} {
		require.NoError(t, os.Remove(filepath.Join(dir, f)))
	}
	git(t, dir, "checkout", "--", ".")
	require.Equal(t, "echo 1\r\necho 2\r\n", read(t, dir, "run.bat"))
	require.Equal(t, "uryyb\n", git(t, dir, "cat-file", "blob", "HEAD:y.r"))
	require.Equal(t, "hello\n", read(t, dir, "y.r"))
	require.Equal(t, "$Id: "+strings.TrimSpace(git(t, dir, "rev-parse", "HEAD:v.id"))+" $\nv1\n", read(t, dir, "v.id"))
	require.Empty(t, git(t, dir, "status", "--porcelain"))
}

// TestRestoreCheckoutConversions: a local file in its checkout form is
// the baseline's (not a local edit), and the sandbox's blob arrives in
// its checkout form, as the user's own git would write it: CRLF for
// eol=crlf, the driver's smudge, ident's expansion.
func TestRestoreCheckoutConversions(t *testing.T) {
	eachRunner(t, func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner) {
		e := newEnv(t, newRunner)
		convRepo(t, e.local)
		r, err := workspace.Prepare(ctx(t), e.spec)
		require.NoError(t, err)
		assert.Equal(t, "echo 1\r\necho 2\r\n", read(t, e.remote, "run.bat"), "the sandbox's git applies eol=crlf itself")
		assert.Equal(t, "uryyb\n", read(t, e.remote, "y.r"), "the sandbox has no rot driver: it holds the blob")

		// The agent edits each file in the form it has, and commits.
		write(t, e.remote, "run.bat", "echo 1\r\necho 3\r\n")
		write(t, e.remote, "y.r", "uryyb jbeyq\n")
		write(t, e.remote, "v.id", "$Id$\nv2\n")
		git(t, e.remote, "add", "-A")
		git(t, e.remote, "commit", "-q", "-m", "agent")
		res, err := r.Restore(ctx(t))
		require.NoError(t, err)
		assert.Empty(t, res.Kept, "a file in its checkout form is no local edit")
		assert.Empty(t, res.Refused)
		slices.Sort(res.Updated)
		assert.Equal(t, []string{"run.bat", "v.id", "y.r"}, res.Updated)
		assert.Equal(t, "echo 1\r\necho 3\r\n", read(t, e.local, "run.bat"))
		assert.Equal(t, "hello world\n", read(t, e.local, "y.r"))
		assert.Equal(t, "$Id: "+strings.TrimSpace(git(t, e.local, "rev-parse", "HEAD:v.id"))+" $\nv2\n", read(t, e.local, "v.id"))
		assert.Equal(t, "agent\n", git(t, e.local, "log", "-1", "--format=%s"))
		assert.Empty(t, git(t, e.local, "status", "--porcelain"), "the work tree is the agent's commit, checked out")

		// A real local edit of a converted file is still kept.
		write(t, e.local, "run.bat", "local\r\n")
		write(t, e.remote, "run.bat", "echo 1\r\necho 4\r\n")
		write(t, e.remote, "y.r", "uryyb ntnva\n")
		res, err = r.Restore(ctx(t))
		require.NoError(t, err)
		assert.Equal(t, []string{"run.bat"}, res.Kept)
		assert.Equal(t, []string{"y.r"}, res.Updated)
		assert.Equal(t, "local\r\n", read(t, e.local, "run.bat"))
		assert.Equal(t, "hello again\n", read(t, e.local, "y.r"))

		// Restoring again changes nothing.
		res, err = r.Restore(ctx(t))
		require.NoError(t, err)
		assert.Empty(t, res.Updated)
		assert.Equal(t, []string{"run.bat"}, res.Kept)
	})
}

// catRepo makes dir a repository with one commit of x.<drv>, whose
// filter driver drv is cat both ways (the test then breaks it).
func catRepo(t *testing.T, dir, drv, content string) {
	t.Helper()
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "config", "filter."+drv+".clean", "cat")
	git(t, dir, "config", "filter."+drv+".smudge", "cat")
	write(t, dir, ".gitattributes", "*."+drv+" filter="+drv+"\n")
	write(t, dir, "x."+drv, content)
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "initial")
}

// TestRestoreConversionFails: a smudge that fails (a required filter
// driver whose command exits 1) fails the Restore with an error naming
// the file, leaves the local file as it was (never a short one), and a
// Restore once the driver works brings it. The driver runs with
// GIT_LFS_SKIP_SMUDGE=1 (git-lfs's smudge contacts no server).
func TestRestoreConversionFails(t *testing.T) {
	e := newEnv(t, runners[0].new)
	catRepo(t, e.local, "f", "x1\n")
	git(t, e.local, "config", "filter.f.required", "true")
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	write(t, e.remote, "x.f", "x2 from the agent\n")

	git(t, e.local, "config", "filter.f.smudge", "head -c 2; exit 1")
	_, err = r.Restore(ctx(t))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "converting x.f for the work tree (git cat-file --filters, which runs its filter driver) failed")
	assert.Contains(t, err.Error(), "fix the driver")
	assert.Equal(t, "x1\n", read(t, e.local, "x.f"), "the failed conversion wrote nothing")
	ents, err := os.ReadDir(e.local)
	require.NoError(t, err)
	var names []string
	for _, de := range ents {
		names = append(names, de.Name())
	}
	assert.Equal(t, []string{".git", ".gitattributes", "x.f"}, names, "a temporary file was left")

	skip := filepath.Join(t.TempDir(), "skip")
	git(t, e.local, "config", "filter.f.smudge", `echo "$GIT_LFS_SKIP_SMUDGE" >'`+skip+`'; cat`)
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, []string{"x.f"}, res.Updated)
	assert.Equal(t, "x2 from the agent\n", read(t, e.local, "x.f"))
	assert.Equal(t, "1\n", read(t, filepath.Dir(skip), "skip"), "git-lfs would fetch from the remote's LFS server")
}

// TestRestoreUserAutocrlf: core.autocrlf in the user's global
// configuration (not the repository's) decides the checkout form too.
func TestRestoreUserAutocrlf(t *testing.T) {
	home := t.TempDir()
	write(t, home, ".gitconfig", "[core]\n\tautocrlf = true\n")
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	e := newEnv(t, runners[0].new)
	initRepo(t, e.local, map[string]string{"a.txt": "x\ny\n", "b.txt": "b\n"})
	require.NoError(t, os.Remove(filepath.Join(e.local, "a.txt")))
	git(t, e.local, "-c", "core.autocrlf=true", "checkout", "--", "a.txt")
	require.Equal(t, "x\r\ny\r\n", read(t, e.local, "a.txt"))
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	write(t, e.remote, "a.txt", "x\nz\n")
	write(t, e.remote, "b.txt", "b2\n")
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Empty(t, res.Kept)
	assert.Equal(t, []string{"a.txt", "b.txt"}, res.Updated)
	assert.Equal(t, "x\r\nz\r\n", read(t, e.local, "a.txt"))
	assert.Equal(t, "b2\r\n", read(t, e.local, "b.txt"))
}

// TestRestoreConversionHangs: a smudge that hangs ends with the Restore's
// context (its process group is killed), the file stays as it was, and a
// Restore once the driver works brings it.
func TestRestoreConversionHangs(t *testing.T) {
	e := newEnv(t, runners[0].new)
	catRepo(t, e.local, "h", "1\n")
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	write(t, e.remote, "x.h", "2\n")
	git(t, e.local, "config", "filter.h.smudge", "sleep 30; cat")
	c, cancel := context.WithTimeout(ctx(t), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err = r.Restore(c)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "Restore stopped while writing x.h")
	assert.Less(t, time.Since(start), 10*time.Second, "the hanging driver held the Restore")
	assert.Equal(t, "1\n", read(t, e.local, "x.h"))

	git(t, e.local, "config", "filter.h.smudge", "cat")
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, []string{"x.h"}, res.Updated)
	assert.Equal(t, "2\n", read(t, e.local, "x.h"))
}

// TestRestoreCleanFormUnreadable: a local file whose clean form cannot
// be read (its driver's clean command fails) is a local edit: kept, not
// overwritten, and a Restore once the driver works brings the agent's
// change.
func TestRestoreCleanFormUnreadable(t *testing.T) {
	e := newEnv(t, runners[0].new)
	convRepo(t, e.local)
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	write(t, e.remote, "y.r", "ntrag\n")
	git(t, e.local, "config", "filter.rot.clean", "exit 1")
	git(t, e.local, "config", "filter.rot.required", "true")
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, []string{"y.r"}, res.Kept, "an unreadable clean form is a local edit")
	assert.Equal(t, "hello\n", read(t, e.local, "y.r"))

	git(t, e.local, "config", "filter.rot.clean", "tr a-z n-za-m")
	res, err = r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Empty(t, res.Kept)
	assert.Equal(t, []string{"y.r"}, res.Updated)
	assert.Equal(t, "agent\n", read(t, e.local, "y.r"))
}

// TestRestoreAttributesOfTheRound: a .gitattributes the Restore brings
// decides the form of the files it writes with it, as git checkout's
// would: an attribute the agent removed no longer converts, one it added
// does, in the same Restore.
func TestRestoreAttributesOfTheRound(t *testing.T) {
	e := newEnv(t, runners[0].new)
	initRepo(t, e.local, map[string]string{".gitattributes": "*.txt text eol=crlf\n", "!a.txt": "a\n", "d/b.txt": "b\n", "c.md": "c\n"})
	for _, f := range []string{"!a.txt", "d/b.txt"} {
		require.NoError(t, os.Remove(filepath.Join(e.local, f)))
	}
	git(t, e.local, "checkout", "--", ".")
	require.Equal(t, "a\r\n", read(t, e.local, "!a.txt"))
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	write(t, e.remote, ".gitattributes", "*.md text eol=crlf\n")
	write(t, e.remote, "!a.txt", "a2\n")
	write(t, e.remote, "d/b.txt", "b2\n")
	write(t, e.remote, "c.md", "c2\n")
	git(t, e.remote, "add", "-A")
	git(t, e.remote, "commit", "-q", "-m", "agent")
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Empty(t, res.Kept)
	assert.Equal(t, "a2\n", read(t, e.local, "!a.txt"))
	assert.Equal(t, "b2\n", read(t, e.local, "d/b.txt"))
	assert.Equal(t, "c2\r\n", read(t, e.local, "c.md"))
	assert.Empty(t, git(t, e.local, "status", "--porcelain"))
}
