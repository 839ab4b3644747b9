package workspace_test

import (
	"crypto/rand"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

// TestMaxBytesGitBundle: sandbox history whose bundle is larger than
// WithMaxBytes is refused as a whole with ErrTooLarge; the local repository
// and work tree are unchanged and the received part is not kept.
func TestMaxBytesGitBundle(t *testing.T) {
	eachRunner(t, func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner) {
		e := newEnv(t, newRunner)
		initRepo(t, e.local, map[string]string{"a": "1\n"})
		const limit = 16 << 10
		r, err := workspace.Prepare(ctx(t), e.spec, workspace.WithMaxBytes(limit))
		require.NoError(t, err)
		noise := make([]byte, 64<<10) // incompressible: the bundle exceeds the limit
		_, err = rand.Read(noise)
		require.NoError(t, err)
		sandboxCommit(t, e.remote, "big.bin", string(noise), "big")
		write(t, e.remote, "small.txt", "small\n")

		refs := git(t, e.local, "for-each-ref")
		head := git(t, e.local, "rev-parse", "HEAD")
		before := hashOutside(t, e.local, filepath.Join(e.local, ".git"))
		_, err = r.Restore(ctx(t))
		require.ErrorIs(t, err, workspace.ErrTooLarge)
		assert.Equal(t, "sandbox data exceeds the byte limit: the bundle of "+e.remote+"'s commits and work tree is larger than 16384 bytes; nothing was integrated: raise WithMaxBytes", err.Error())
		assert.Equal(t, refs, git(t, e.local, "for-each-ref"))
		assert.Equal(t, head, git(t, e.local, "rev-parse", "HEAD"))
		assert.Equal(t, before, hashOutside(t, e.local, filepath.Join(e.local, ".git")), "the work tree changed")
		state, err := os.ReadDir(filepath.Join(e.local, ".git", "airlock", "rounds"))
		require.NoError(t, err)
		var names []string
		for _, d := range state {
			names = append(names, d.Name())
		}
		assert.Equal(t, []string{r.ID() + ".json"}, names, "the partial bundle was not removed")
	})
}

// TestMaxBytesGitFile: a bundle within the limit whose file content is
// larger (it compresses well) restores, with the over-limit file refused.
func TestMaxBytesGitFile(t *testing.T) {
	eachRunner(t, func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner) {
		e := newEnv(t, newRunner)
		initRepo(t, e.local, map[string]string{"a": "1\n"})
		r, err := workspace.Prepare(ctx(t), e.spec, workspace.WithMaxBytes(16<<10))
		require.NoError(t, err)
		write(t, e.remote, "zeros", strings.Repeat("0", 64<<10))
		write(t, e.remote, "small.txt", "small\n")
		res, err := r.Restore(ctx(t))
		require.NoError(t, err)
		assert.Equal(t, []string{"zeros"}, res.Refused)
		assert.Equal(t, []string{"small.txt"}, res.Updated)
		assert.False(t, exists(e.local, "zeros"))
	})
}

// fakeGitDir returns a directory holding a git that reports version v and
// otherwise runs the real git.
func fakeGitDir(t *testing.T, v string) string {
	t.Helper()
	real, err := exec.LookPath("git")
	require.NoError(t, err)
	dir := t.TempDir()
	script := "#!/bin/sh\nfor a; do last=$a; done\n" +
		"if [ \"$last\" = version ] || [ \"$last\" = --version ]; then echo 'git version " + v + "'; exit 0; fi\n" +
		"exec '" + real + "' \"$@\"\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "git"), []byte(script), 0o755))
	return dir
}

// TestHostGitMissingOrTooOld: Prepare and Reopen fail with a *ToolError
// naming the host's git before anything is changed. Not parallel: PATH.
func TestHostGitMissingOrTooOld(t *testing.T) {
	for _, tc := range []struct {
		name, version, have, msg string
	}{
		{"too old", "2.30.0", "2.30.0", "workspace: git on the host is 2.30.0; install git 2.38 or later"},
		{"missing", "", "", "workspace: git is missing on the host; install git 2.38 or later"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
			initRepo(t, e.local, map[string]string{"a": "1\n"})
			write(t, e.local, "a", "dirty\n")
			r, err := workspace.Prepare(ctx(t), e.spec) // with the real git, to Reopen below
			require.NoError(t, err)
			require.NoError(t, os.RemoveAll(filepath.Dir(e.remote)))
			before := hashOutside(t, filepath.Dir(e.local))

			pathDir := t.TempDir() // no git at all
			if tc.version != "" {
				pathDir = fakeGitDir(t, tc.version)
			}
			t.Setenv("PATH", pathDir)
			check := func(err error) {
				t.Helper()
				var te *workspace.ToolError
				require.ErrorAs(t, err, &te)
				assert.ErrorIs(t, err, workspace.ErrTool)
				assert.Equal(t, workspace.ToolError{Tool: "git", Where: "host", Have: tc.have, Need: "2.38"}, *te)
				assert.Equal(t, tc.msg, err.Error())
			}
			_, err = workspace.Prepare(ctx(t), e.spec)
			check(err)
			_, err = workspace.Reopen(ctx(t), e.spec, r.ID())
			check(err)
			assert.Equal(t, before, hashOutside(t, filepath.Dir(e.local)), "something changed")
			assert.NoDirExists(t, filepath.Dir(e.remote), "the sandbox was touched")
		})
	}
}

// TestMaxBytesSparseFile: a sparse file far past WithMaxBytes in the
// sandbox. A plain sandbox's stream is cut by the host at the limit: the
// Restore fails with ErrTooLarge naming the file (not with the exit
// status the sandbox's tar then dies of, SIGPIPE), and writes nothing; with
// the file gone, the next Restore brings the rest. A git sandbox's bundle
// compresses the zeros: the file is refused, the rest arrives.
func TestMaxBytesSparseFile(t *testing.T) {
	for _, kind := range []string{"plain", "git"} {
		for _, rc := range runners[:2] {
			t.Run(kind+"/"+rc.name, func(t *testing.T) {
				e := newEnv(t, rc.new)
				var opts []workspace.Option
				if kind == "git" {
					initRepo(t, e.local, map[string]string{"a": "1\n"})
				} else {
					write(t, e.local, "a", "1\n")
					opts = append(opts, workspace.WithStateDir(filepath.Join(filepath.Dir(e.local), "state")))
				}
				opts = append(opts, workspace.WithMaxBytes(1<<20))
				r, err := workspace.Prepare(ctx(t), e.spec, opts...)
				require.NoError(t, err)
				size := int64(1 << 30)
				if kind == "git" {
					size = 32 << 20 // the sandbox's git add reads it all
				}
				f, err := os.Create(filepath.Join(e.remote, "huge.bin"))
				require.NoError(t, err)
				require.NoError(t, f.Truncate(size))
				require.NoError(t, f.Close())
				write(t, e.remote, "small", "small\n")
				before := hashOutside(t, e.local, filepath.Join(e.local, ".git"))

				res, err := r.Restore(ctx(t))
				if kind == "git" {
					require.NoError(t, err)
					assert.Equal(t, []string{"huge.bin"}, res.Refused)
					assert.Equal(t, "over the byte limit", res.Reasons["huge.bin"])
					assert.False(t, exists(e.local, "huge.bin"))
					assert.Equal(t, "small\n", read(t, e.local, "small"))
					return
				}
				require.ErrorIs(t, err, workspace.ErrTooLarge)
				var ee *sandbox.ExitError
				assert.False(t, errors.As(err, &ee), "the sandbox command's end is not the reason: %v", err)
				assert.Contains(t, err.Error(), "huge.bin is the one past the limit")
				assert.Contains(t, err.Error(), "raise WithMaxBytes")
				assert.Equal(t, before, hashOutside(t, e.local), "a Restore that failed with ErrTooLarge wrote something")

				require.NoError(t, os.Remove(filepath.Join(e.remote, "huge.bin")))
				res, err = r.Restore(ctx(t))
				require.NoError(t, err)
				assert.Equal(t, []string{"small"}, res.Updated)
				assert.Empty(t, res.Refused)
				assert.Equal(t, "small\n", read(t, e.local, "small"))
			})
		}
	}
}
