package workspace_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/sandboxtest"
	"github.com/airlockdev/airlock/sandbox"
)

// TestRestoreWithoutFind: a sandbox without find (a plain one needs only
// sh and tar) still reports every entry a tar header or a git tree cannot
// be trusted to show, at any depth and whatever its name: hard links,
// setuid and setgid files, FIFOs, runtime directory entries.
// The same sandbox with find gives the same report.
func TestRestoreWithoutFind(t *testing.T) {
	for _, kind := range []string{"git", "plain", "git/find", "plain/find"} {
		t.Run(kind, func(t *testing.T) {
			withFind := strings.HasSuffix(kind, "/find")
			e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner {
				if withFind {
					return sandbox.Local(dir)
				}
				return sandboxtest.Without(t, sandbox.Local(dir), "find")
			})
			r := prepareOneFile(t, e, strings.TrimSuffix(kind, "/find"))
			// Prove the runner hides find, or has it.
			var out strings.Builder
			require.NoError(t, e.spec.Runner.Run(ctx(t), sandbox.Command{Script: "command -v find >/dev/null && echo find || echo none", Stdout: &out}))
			require.Equal(t, map[bool]string{true: "find\n", false: "none\n"}[withFind], out.String())

			plantHostile(t, e)
			deep := filepath.Join(e.remote, "deep", "a dir *", "-x")
			write(t, deep, "kept.txt", "kept\n")
			require.NoError(t, os.Link(filepath.Join(deep, "kept.txt"), filepath.Join(deep, "twin [1]")))
			require.NoError(t, syscall.Mkfifo(filepath.Join(deep, ".pipe\nx"), 0o644))
			write(t, deep, "..sticky", "s\n")
			require.NoError(t, os.Chmod(filepath.Join(deep, "..sticky"), fs.ModeSticky|0o644))
			write(t, e.remote, "deep/plain.txt", "p\n")

			base := filepath.Dir(e.local)
			before := hashOutside(t, base, e.local, filepath.Dir(e.remote))
			res, err := r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, before, hashOutside(t, base, e.local, filepath.Dir(e.remote)), "something outside the work tree changed")
			d := "deep/a dir */-x/"
			assert.Equal(t, []string{d + "..sticky", d + ".pipe\nx", d + "kept.txt", d + "twin [1]", "etc", "fifo", "hard", "sgid", "suid", "up"}, res.Refused)
			assert.Equal(t, []string{sandbox.RuntimeDir + "/evil"}, res.Runtime)
			for _, p := range []string{"hard", "fifo", d + "kept.txt", d + "twin [1]", d + ".pipe\nx"} {
				assert.False(t, exists(e.local, p), "%s was written", p)
			}
			fi, err := os.Lstat(filepath.Join(e.local, d+"..sticky"))
			require.NoError(t, err)
			assert.Equal(t, fs.FileMode(0o644), fi.Mode(), "the sticky bit is stripped")
			assert.Equal(t, "p\n", read(t, e.local, "deep/plain.txt"))
		})
	}
}

// TestRestoreNestedGit: a .git below the top of the sandbox's tree (a
// directory that is no repository, a gitfile, a link, a real nested
// repository) never reaches the host, and is listed in Refused with its
// reason, although the sandbox's git never shows it (git add and ls-files
// skip every entry named .git); with find and without, both kinds. What
// else the directories hold arrives; a real nested repository is a
// submodule to a git sandbox, refused as such.
func TestRestoreNestedGit(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		for _, rc := range []string{"local", "local-without-find", "remotetest"} {
			t.Run(kind+"/"+rc, func(t *testing.T) {
				e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner {
					switch rc {
					case "local-without-find":
						return sandboxtest.Without(t, sandbox.Local(dir), "find")
					case "remotetest":
						return runners[1].new(t, dir)
					}
					return sandbox.Local(dir)
				})
				r := prepareOneFile(t, e, kind)
				write(t, e.remote, "sub/.git/config", "[core]\n\thooksPath = /tmp\n")
				write(t, e.remote, "sub/ok.txt", "ok\n")
				write(t, e.remote, "only/.git/config", "[core]\n")
				write(t, e.remote, "deep/x/y/.git", "gitdir: /etc\n")
				write(t, e.remote, "deep/x/y/z.txt", "z\n")
				require.NoError(t, os.MkdirAll(filepath.Join(e.remote, "lnk"), 0o755))
				require.NoError(t, os.Symlink("/etc", filepath.Join(e.remote, "lnk", ".git")))
				write(t, e.remote, "lnk/file.txt", "f\n")
				mod := filepath.Join(e.remote, "mod")
				require.NoError(t, os.MkdirAll(mod, 0o755))
				git(t, mod, "init", "-q")
				write(t, mod, "file.txt", "in a nested repository\n")
				git(t, mod, "add", "file.txt")
				git(t, mod, "commit", "-q", "-m", "nested")

				res, err := r.Restore(ctx(t))
				require.NoError(t, err)
				nested := []string{"deep/x/y/.git", "lnk/.git", "mod/.git", "only/.git", "sub/.git"}
				want := nested
				if kind == "git" {
					want = []string{"deep/x/y/.git", "lnk/.git", "mod", "mod/.git", "only/.git", "sub/.git"}
				}
				assert.Equal(t, want, res.Refused)
				for _, p := range nested {
					assert.Equal(t, "a .git directory (nested repository) is never restored", res.Reasons[p], p)
					assert.False(t, exists(e.local, p), "%s was written on the host", p)
				}
				assert.Equal(t, "ok\n", read(t, e.local, "sub/ok.txt"))
				assert.Equal(t, "z\n", read(t, e.local, "deep/x/y/z.txt"))
				assert.Equal(t, "f\n", read(t, e.local, "lnk/file.txt"))
				if kind == "git" {
					assert.False(t, exists(e.local, "mod"), "a nested repository is a submodule to the sandbox's git: refused")
				} else {
					assert.Equal(t, "in a nested repository\n", read(t, e.local, "mod/file.txt"))
				}
				assert.Empty(t, res.Kept)
			})
		}
	}
}
