package workspace_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

const (
	whyLocalLink = "a local symbolic link or special file stands there, which a plain directory's round does not send"
	whyBelowX    = "below x, a local symbolic link or special file that a plain directory's round does not send"
)

// makeEntry makes rel below dir a file, a link or a directory holding one
// file, as kind ('f', 'l', 'd') says, replacing what is there.
func makeEntry(t *testing.T, dir, rel string, kind byte) {
	t.Helper()
	p := filepath.Join(dir, rel)
	require.NoError(t, os.RemoveAll(p))
	switch kind {
	case 'f':
		write(t, dir, rel, "file "+rel+"\n")
	case 'l':
		require.NoError(t, os.Symlink("target.txt", p))
	case 'd':
		write(t, dir, rel+"/in.txt", "in\n")
	}
}

// kindOf is what rel below dir is: 'f', 'l', 'd' or 0 when absent.
func kindOf(t *testing.T, dir, rel string) byte {
	t.Helper()
	fi, err := os.Lstat(filepath.Join(dir, rel))
	switch {
	case err != nil:
		require.ErrorIs(t, err, fs.ErrNotExist)
		return 0
	case fi.IsDir():
		return 'd'
	case fi.Mode()&fs.ModeSymlink != 0:
		return 'l'
	}
	return 'f'
}

func localRunner(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) }

// prepareWith makes the local work tree hold target.txt and x as kind
// from (committed for git) and prepares a round.
func prepareWith(t *testing.T, e *env, kind string, from byte) *workspace.Round {
	t.Helper()
	write(t, e.local, "target.txt", "t\n")
	makeEntry(t, e.local, "x", from)
	if kind == "git" {
		write(t, e.local, ".gitignore", "*.o\n")
		initRepo(t, e.local, nil)
		git(t, e.local, "add", "-A")
		git(t, e.local, "commit", "-q", "-m", "initial")
	}
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	return r
}

// TestTypeChanges: every change of type between rounds (file, link,
// directory, both directions) applies completely, with nothing kept: in
// a git work tree always; in a plain directory, whose rounds do not send
// links, a local link the sandbox never saw refuses the entry (and
// everything below it) with the reason.
func TestTypeChanges(t *testing.T) {
	kinds := []byte{'f', 'l', 'd'}
	for _, kind := range []string{"git", "plain"} {
		for _, from := range kinds {
			for _, to := range kinds {
				if from == to {
					continue
				}
				t.Run(kind+"/"+string(from)+"-"+string(to), func(t *testing.T) {
					e := newEnv(t, localRunner)
					r := prepareWith(t, e, kind, from)
					makeEntry(t, e.remote, "x", to)
					if to == 'd' {
						require.NoError(t, os.Rename(filepath.Join(e.remote, "x", "in.txt"), filepath.Join(e.remote, "x", "planted")))
					}
					res, err := r.Restore(ctx(t))
					require.NoError(t, err)
					assert.Empty(t, res.Kept, "nothing local changed")
					if kind == "plain" && from == 'l' {
						assert.Equal(t, byte('l'), kindOf(t, e.local, "x"), "the local link stays")
						want := map[string]string{"x": whyLocalLink}
						if to == 'd' {
							want["x/planted"] = whyBelowX
						}
						assert.Equal(t, want, res.Reasons)
						assert.Len(t, res.Refused, len(want))
						assert.Empty(t, res.Updated)
						assert.Empty(t, res.Deleted)
						return
					}
					assert.Empty(t, res.Refused)
					assert.Equal(t, to, kindOf(t, e.local, "x"))
					switch to {
					case 'f':
						assert.Equal(t, "file x\n", read(t, e.local, "x"))
						assert.Equal(t, []string{"x"}, res.Updated)
					case 'l':
						got, err := os.Readlink(filepath.Join(e.local, "x"))
						require.NoError(t, err)
						assert.Equal(t, "target.txt", got)
						assert.Equal(t, []string{"x"}, res.Updated)
					case 'd':
						assert.Equal(t, "in\n", read(t, e.local, "x/planted"))
						assert.Equal(t, []string{"x/planted"}, res.Updated)
					}
					switch from {
					case 'd':
						assert.Equal(t, []string{"x/in.txt"}, res.Deleted)
					default:
						if to == 'd' {
							assert.Equal(t, []string{"x"}, res.Deleted)
						} else {
							assert.Empty(t, res.Deleted)
						}
					}
					// Nothing more on a second restore.
					res2, err := r.Restore(ctx(t))
					require.NoError(t, err)
					assert.Empty(t, res2.Updated)
					assert.Empty(t, res2.Deleted)
					assert.Empty(t, res2.Kept)
					assert.Empty(t, res2.Refused)
				})
			}
		}
	}
}

// TestTypeChangeRefusedWhole: a change of type that cannot apply whole is
// refused whole, with the reason, and nothing local is lost: a directory
// holding a file the sandbox does not replace stays with all its files; a
// local edit of the entry the sandbox replaced by a directory is kept, and
// what the sandbox put below it is refused.
func TestTypeChangeRefusedWhole(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		for _, to := range []byte{'f', 'l'} {
			t.Run(kind+"/new-file-in-dir-"+string(to), func(t *testing.T) {
				e := newEnv(t, localRunner)
				r := prepareWith(t, e, kind, 'd')
				write(t, e.local, "x/late.o", "build output\n")
				makeEntry(t, e.remote, "x", to)
				res, err := r.Restore(ctx(t))
				require.NoError(t, err)
				assert.Equal(t, map[string]string{
					"x":        "the local directory it replaces holds x/late.o, which the sandbox does not replace (a local edit, or an untracked or ignored file)",
					"x/in.txt": "below x, whose change of type was refused",
				}, res.Reasons)
				assert.Equal(t, []string{"x", "x/in.txt"}, res.Refused)
				assert.Empty(t, res.Kept)
				assert.Empty(t, res.Updated)
				assert.Empty(t, res.Deleted)
				assert.Equal(t, "in\n", read(t, e.local, "x/in.txt"))
				assert.Equal(t, "build output\n", read(t, e.local, "x/late.o"))
			})
			t.Run(kind+"/edited-in-dir-"+string(to), func(t *testing.T) {
				e := newEnv(t, localRunner)
				r := prepareWith(t, e, kind, 'd')
				write(t, e.local, "x/in.txt", "local edit\n")
				makeEntry(t, e.remote, "x", to)
				res, err := r.Restore(ctx(t))
				require.NoError(t, err)
				assert.Equal(t, map[string]string{
					"x": "the local directory it replaces holds x/in.txt, which the sandbox does not replace (a local edit, or an untracked or ignored file)",
				}, res.Reasons)
				assert.Equal(t, []string{"x"}, res.Refused)
				assert.Equal(t, []string{"x/in.txt"}, res.Kept)
				assert.Equal(t, "local edit\n", read(t, e.local, "x/in.txt"))
			})
		}
		froms := []byte{'f'}
		if kind == "git" {
			froms = append(froms, 'l')
		}
		for _, from := range froms {
			t.Run(kind+"/edited-"+string(from)+"-to-dir", func(t *testing.T) {
				e := newEnv(t, localRunner)
				r := prepareWith(t, e, kind, from)
				if from == 'f' {
					write(t, e.local, "x", "local edit\n")
				} else {
					require.NoError(t, os.Remove(filepath.Join(e.local, "x")))
					require.NoError(t, os.Symlink("elsewhere.txt", filepath.Join(e.local, "x")))
				}
				makeEntry(t, e.remote, "x", 'd')
				res, err := r.Restore(ctx(t))
				require.NoError(t, err)
				assert.Equal(t, []string{"x"}, res.Kept)
				assert.Equal(t, map[string]string{"x/in.txt": "below x, a local edit that was kept"}, res.Reasons)
				assert.Equal(t, []string{"x/in.txt"}, res.Refused)
				assert.Equal(t, from, kindOf(t, e.local, "x"))
			})
		}
	}
}

// TestLinkReplacedByDirectory is the defect seen: a link brought back in
// one round, replaced by the sandbox with a directory holding a file in
// the next. A git round applies it whole; a plain round, which never sent
// the link, refuses both with the reason; neither calls it kept.
func TestLinkReplacedByDirectory(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, localRunner)
			r := prepareOneFile(t, e, kind)
			symlink(t, e.remote, "d", "a")
			res, err := r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, []string{"d"}, res.Updated)

			r, err = workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			require.NoError(t, os.RemoveAll(filepath.Join(e.remote, "d")))
			write(t, e.remote, "d/planted", "planted\n")
			res, err = r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Empty(t, res.Kept)
			if kind == "git" {
				assert.Empty(t, res.Refused)
				assert.Equal(t, []string{"d"}, res.Deleted)
				assert.Equal(t, []string{"d/planted"}, res.Updated)
				assert.Equal(t, "planted\n", read(t, e.local, "d/planted"))
				return
			}
			assert.Equal(t, []string{"d", "d/planted"}, res.Refused)
			assert.Equal(t, map[string]string{
				"d":         whyLocalLink,
				"d/planted": "below d, a local symbolic link or special file that a plain directory's round does not send",
			}, res.Reasons)
			assert.Equal(t, byte('l'), kindOf(t, e.local, "d"))
		})
	}
}
