package workspace_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/shellproto"
	"github.com/airlockdev/airlock/stage"
)

// withoutFind runs every sandbox script with a PATH that holds every
// command of this machine's PATH except find.
type withoutFind struct {
	real stage.Runner
	bin  string
}

func newWithoutFind(t *testing.T, real stage.Runner) withoutFind {
	t.Helper()
	bin := t.TempDir()
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue // a PATH entry that does not exist
		}
		for _, e := range ents {
			if e.Name() == "find" {
				continue
			}
			err := os.Symlink(filepath.Join(dir, e.Name()), filepath.Join(bin, e.Name()))
			if err != nil && !os.IsExist(err) {
				require.NoError(t, err)
			}
		}
	}
	_, err := os.Lstat(filepath.Join(bin, "sh"))
	require.NoError(t, err, "no sh on PATH")
	return withoutFind{real: real, bin: bin}
}

func (w withoutFind) Run(ctx context.Context, cmd stage.Command) error {
	cmd.Script = "PATH=" + shellproto.Quote(w.bin) + "; export PATH\n" + cmd.Script
	return w.real.Run(ctx, cmd)
}

// TestRestoreWithoutFind: a sandbox without find (a plain one needs only
// sh and tar) still reports every entry a tar header or a git tree cannot
// be trusted to show, at any depth and whatever its name: hard links,
// setuid and setgid files, FIFOs, runtime directory entries.
// The same sandbox with find gives the same report.
func TestRestoreWithoutFind(t *testing.T) {
	for _, kind := range []string{"git", "plain", "git/find", "plain/find"} {
		t.Run(kind, func(t *testing.T) {
			withFind := strings.HasSuffix(kind, "/find")
			e := newEnv(t, func(t *testing.T, dir string) stage.Runner {
				if withFind {
					return stage.LocalRunner(dir)
				}
				return newWithoutFind(t, stage.LocalRunner(dir))
			})
			r := prepareOneFile(t, e, strings.TrimSuffix(kind, "/find"))
			// Prove the runner hides find, or has it.
			var out strings.Builder
			require.NoError(t, e.spec.Runner.Run(ctx(t), stage.Command{Script: "command -v find >/dev/null && echo find || echo none", Stdout: &out}))
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
			assert.Equal(t, []string{stage.RuntimeDir + "/evil", d + "..sticky", d + ".pipe\nx", d + "kept.txt", d + "twin [1]", "etc", "fifo", "hard", "sgid", "suid", "up"}, res.Refused)
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
