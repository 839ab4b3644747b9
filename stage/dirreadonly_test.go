//go:build linux

package stage_test

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/stage"
)

// TestDirReadOnlyCopy: the sandbox makes a staged copy read-only (chmod -R
// a-w, directories 555 or 500); as a user other than root, a Dir stages a
// changed Source over it and unstages it. Renaming a directory into
// another parent rewrites its "..", which needs its write bit: without it
// both failed for good. Permission bits do not bind root, so as root (CI)
// the test runs itself again as uid 1000 (setpriv, util-linux).
func TestDirReadOnlyCopy(t *testing.T) {
	if os.Geteuid() == 0 {
		asUser(t, "TestDirReadOnlyCopy")
		return
	}
	for _, mode := range []fs.FileMode{0o555, 0o500} {
		t.Run(mode.String(), func(t *testing.T) {
			dir, src := t.TempDir(), t.TempDir()
			d, err := stage.NewDir(dir)
			require.NoError(t, err)
			build(t, src, "a=v1", "sub/b=v1")
			assets := []stage.Asset{{Name: "x", Source: src}}
			_, err = stage.Stage(t.Context(), d, "/rt", assets)
			require.NoError(t, err)
			copyDir := filepath.Join(dir, "rt", "x")
			require.NoError(t, filepath.WalkDir(copyDir, func(p string, e fs.DirEntry, err error) error {
				if err != nil || e.IsDir() {
					return err
				}
				return os.Chmod(p, 0o444)
			}))
			for _, p := range []string{filepath.Join(copyDir, "sub"), copyDir} {
				require.NoError(t, os.Chmod(p, mode))
			}
			build(t, src, "a=v2")
			rt, err := stage.Stage(t.Context(), d, "/rt", assets)
			require.NoError(t, err, "a changed Source over a read-only copy")
			assert.False(t, rt.Assets[0].Reused)
			assert.Equal(t, "v2", readFile(t, filepath.Join(copyDir, "a")))
			require.NoError(t, filepath.WalkDir(copyDir, func(p string, e fs.DirEntry, err error) error {
				if err != nil || !e.IsDir() {
					return err
				}
				return os.Chmod(p, mode)
			}))
			require.NoError(t, stage.Unstage(t.Context(), d, "/rt", "x"), "a read-only copy unstaged")
			_, err = os.Lstat(copyDir)
			assert.ErrorIs(t, err, fs.ErrNotExist)
		})
	}
}

// asUser runs the test named test again, in a copy of this test binary,
// as uid and gid 1000 with a temporary directory that user owns; it skips
// when setpriv is missing.
func asUser(t *testing.T, test string) {
	t.Helper()
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skipf("running %s as a user other than root needs setpriv (util-linux): %v", test, err)
	}
	self, err := os.Executable()
	require.NoError(t, err)
	work, err := os.MkdirTemp("", "asuser-")
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, os.RemoveAll(work)) })
	require.NoError(t, os.Chmod(work, 0o755))
	bin := filepath.Join(work, "test.bin")
	data, err := os.ReadFile(self)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bin, data, 0o755))
	tmp := filepath.Join(work, "tmp")
	require.NoError(t, os.Mkdir(tmp, 0o700))
	require.NoError(t, os.Chown(tmp, 1000, 1000))
	cmd := exec.Command(setpriv, "--reuid=1000", "--regid=1000", "--clear-groups", bin, "-test.run", "^"+test+"$", "-test.count=1", "-test.v")
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "HOME="+tmp, "GOCACHE="+filepath.Join(tmp, "gocache"))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s as uid 1000:\n%s", test, out)
	assert.Contains(t, string(out), "--- PASS: "+test, "%s", out)
}
