package workspace_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

// Why the restore refuses a link (Result.Reasons).
const (
	whyLinkOutside  = "a symbolic link whose target leaves the work tree"
	whyLinkTop      = "a symbolic link to the top of the work tree"
	whyLinkReserved = "a symbolic link whose target enters .git or the runtime directory"
	whyLinkThrough  = "a symbolic link whose target passes through another symbolic link"
)

// resolve follows the link at rel below top the way the kernel does,
// component by component, whether or not the end exists, and returns the
// absolute path it ends at ("" after too many hops).
func resolve(t *testing.T, top, rel string) string {
	t.Helper()
	dir := filepath.Dir(filepath.Join(top, rel))
	target, err := os.Readlink(filepath.Join(top, rel))
	require.NoError(t, err)
	rest := strings.Split(target, "/")
	if filepath.IsAbs(target) {
		dir = "/"
	}
	for hops := 0; len(rest) > 0; {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			dir = filepath.Dir(dir)
			continue
		}
		next := filepath.Join(dir, c)
		fi, err := os.Lstat(next)
		if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			if hops++; hops > 40 {
				return ""
			}
			lt, err := os.Readlink(next)
			require.NoError(t, err)
			if filepath.IsAbs(lt) {
				dir = "/"
			}
			rest = append(strings.Split(lt, "/"), rest...)
			continue
		}
		dir = next
	}
	return dir
}

// assertLinksInside walks the work tree top and fails for every link that
// resolves outside it, to its top itself, or into .git or the runtime
// directory.
func assertLinksInside(t *testing.T, top string) {
	t.Helper()
	real, err := filepath.EvalSymlinks(top)
	require.NoError(t, err)
	err = filepath.WalkDir(real, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		rel, err := filepath.Rel(real, p)
		require.NoError(t, err)
		end := resolve(t, real, rel)
		inside, ok := strings.CutPrefix(end, real+"/")
		if !assert.True(t, ok, "the link %s resolves to %s, outside the work tree %s", rel, end, real) {
			return nil
		}
		first, _, _ := strings.Cut(inside, "/")
		assert.NotEqual(t, ".git", strings.ToLower(first), "the link %s resolves into .git (%s)", rel, end)
		assert.NotEqual(t, sandbox.RuntimeDir, strings.ToLower(first), "the link %s resolves into the runtime directory (%s)", rel, end)
		assert.NotContains(t, strings.ToLower(inside), "/.git/", "the link %s resolves into a .git directory (%s)", rel, end)
		return nil
	})
	require.NoError(t, err)
}

func symlink(t *testing.T, dir, rel, target string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.Symlink(target, p))
}

// TestLinkChainsStayInside: a sandbox plants chains of links (a link to
// .. and a second one through it, several hops, .. at every depth,
// absolute, dangling, into .git, through a link that is already local, in
// an order where the link passed through sorts after, and a directory
// replaced by a link that a local link's target passes through). Every
// link that would not resolve inside the work tree, as restored, is
// refused with its reason; the inside ones arrive; and no link on the
// host resolves outside.
func TestLinkChainsStayInside(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			eachRunner(t, func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner) {
				e := newEnv(t, newRunner)
				write(t, filepath.Dir(e.local), "outside/secret", "host secret\n")
				files := map[string]string{"a.txt": "a\n", "sub/deep/f.txt": "f\n", "sub/q/inner.txt": "q\n", "sub/ff": "ff\n"}
				seed(t, e.local, kind, files)
				// Local links, inside: one the sandbox is given (git), and
				// one whose target passes through sub/q, a directory now.
				symlink(t, e.local, "loc", "sub")
				symlink(t, e.local, "sub/deep/u", "../q/../../a.txt")
				symlink(t, e.local, "sub/uf", "ff/../../outside/secret") // dangling while sub/ff is a file
				r, err := workspace.Prepare(ctx(t), e.spec)
				require.NoError(t, err)

				for rel, target := range map[string]string{
					"up":             "..",                              // leaves
					"sub/top":        "..",                              // the top
					"sub/deep/a":     "..",                              // inside: sub
					"esc":            "sub/deep/a/../../outside/secret", // "inside" as text (sub/outside/secret), through sub/deep/a
					"b":              "up/x",                            // "inside" as text, through up
					"a0":             "zz/secret",                       // through zz, which sorts after it
					"zz":             "../outside",                      // leaves
					"c":              "b",                               // a link to a link
					"h1":             "sub",                             // inside
					"h2":             "h1/deep",                         // through h1
					"h3":             "h2/f.txt",                        // through h2
					"sub/deep/e1":    "../../..",                        // leaves at depth 2
					"sub/deep/e2":    "../..",                           // the top
					"sub/deep/e3":    "../../a.txt",                     // inside
					"sub/e4":         "../../x",                         // leaves at depth 1
					"sub/deep/e5":    "../../sub/../../y",
					"sub/deep/e6":    "../deep/../../../outside/secret",
					"abs":            "/etc/passwd", // absolute
					"abs2":           filepath.Join(e.local, "a.txt"),
					"dang":           "nothere/x",   // dangling, inside
					"g1":             ".git/config", // into .git
					"g2":             "sub/../.git", // into .git
					"g3":             ".GIT/HEAD",   // .git as a case-folding system reads it
					"g4":             sandbox.RuntimeDir + "/x",
					"t1":             "loc/deep/f.txt", // through a local link
					"ok1":            "sub/deep",       // inside
					"ok2":            "ok1",            // through ok1
					"deep/z/y/x/w/v": "../../../../../../outside/secret",
				} {
					symlink(t, e.remote, rel, target)
				}
				// sub/q, a directory, replaced by a link to its own
				// directory: inside, but the local link sub/deep/u would
				// then resolve ../q/../.. above the top.
				require.NoError(t, os.RemoveAll(filepath.Join(e.remote, "sub", "q")))
				symlink(t, e.remote, "sub/q", ".")
				// sub/ff, a file, replaced by a link to its own directory:
				// the local link sub/uf would then resolve above the top.
				require.NoError(t, os.Remove(filepath.Join(e.remote, "sub", "ff")))
				symlink(t, e.remote, "sub/ff", ".")

				res, err := r.Restore(ctx(t))
				require.NoError(t, err)
				assertLinksInside(t, e.local)
				want := map[string]string{
					"up": whyLinkOutside, "sub/top": whyLinkTop, "esc": whyLinkThrough, "b": whyLinkThrough, "a0": whyLinkThrough, "zz": whyLinkOutside, "c": whyLinkThrough,
					"h2": whyLinkThrough, "h3": whyLinkThrough,
					"sub/deep/e1": whyLinkOutside, "sub/deep/e2": whyLinkTop, "sub/e4": whyLinkOutside, "sub/deep/e5": whyLinkOutside,
					"sub/deep/e6": whyLinkOutside, "abs": whyLinkOutside, "abs2": whyLinkOutside,
					"g1": whyLinkReserved, "g2": whyLinkReserved, "g3": whyLinkReserved, "g4": whyLinkReserved,
					"t1": whyLinkThrough, "ok2": whyLinkThrough, "deep/z/y/x/w/v": whyLinkOutside,
					"sub/q":  "a symbolic link that the target of the local symbolic link sub/deep/u would pass through",
					"sub/ff": "a symbolic link that the target of the local symbolic link sub/uf would pass through",
				}
				// Its change of type refused, the deletion below it is kept
				// back too.
				want["sub/q/inner.txt"] = "below sub/q, whose change of type was refused"
				for p, why := range want {
					assert.Equal(t, why, res.Reasons[p], "the reason for %s", p)
					assert.False(t, slices.Contains(res.Updated, p), "%s was written", p)
				}
				assert.ElementsMatch(t, slices.Collect(func(yield func(string) bool) {
					for p := range want {
						if !yield(p) {
							return
						}
					}
				}), res.Refused)
				assert.Equal(t, []string{"dang", "h1", "ok1", "sub/deep/a", "sub/deep/e3"}, res.Updated)
				assert.Empty(t, res.Kept)
				assert.Empty(t, res.Deleted)
				for p, target := range map[string]string{"dang": "nothere/x", "h1": "sub", "sub/deep/a": "..", "ok1": "sub/deep", "sub/deep/e3": "../../a.txt"} {
					got, err := os.Readlink(filepath.Join(e.local, p))
					require.NoError(t, err)
					assert.Equal(t, target, got)
				}
				assert.Equal(t, byte('d'), kindOf(t, e.local, "sub/q"), "the directory sub/q stays whole")
				assert.True(t, exists(e.local, "sub/q/inner.txt"), "the directory sub/q stays whole")

				// A second restore is refused the same way.
				res2, err := r.Restore(ctx(t))
				require.NoError(t, err)
				assert.Empty(t, res2.Updated)
				assert.ElementsMatch(t, res.Refused, res2.Refused)
				assertLinksInside(t, e.local)
			})
		})
	}
}

// TestLinkChainOverRounds: a link written in one round, whose target
// passes through a directory, cannot be turned into an escape by a later
// round that replaces the directory by a link, and a link that passes
// through a link written in an earlier round is refused.
func TestLinkChainOverRounds(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
			if kind == "git" {
				initRepo(t, e.local, map[string]string{"p/a/f": "f\n", "top.txt": "t\n"})
			} else {
				write(t, e.local, "p/a/f", "f\n")
				write(t, e.local, "top.txt", "t\n")
			}
			r, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			// Round 1: p/b -> a/../../top.txt stays inside while p/a is a
			// directory; l1 -> p is inside.
			symlink(t, e.remote, "p/b", "a/../../top.txt")
			symlink(t, e.remote, "l1", "p")
			res, err := r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, []string{"l1", "p/b"}, res.Updated)
			assertLinksInside(t, e.local)

			// Round 2: p/a becomes a link to ../q (depth 1), so p/b would
			// resolve q/../../top.txt, above the top; and l2 passes
			// through l1, which is local now.
			r, err = workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			require.NoError(t, os.RemoveAll(filepath.Join(e.remote, "p", "a")))
			symlink(t, e.remote, "p/a", "../q")
			write(t, e.remote, "q/x", "x\n")
			symlink(t, e.remote, "l2", "l1/a")
			res, err = r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, "a symbolic link that the target of the local symbolic link p/b would pass through", res.Reasons["p/a"])
			if kind == "git" {
				assert.Equal(t, whyLinkThrough, res.Reasons["l2"])
				assert.Equal(t, "below p/a, whose change of type was refused", res.Reasons["p/a/f"])
				assert.Equal(t, []string{"l2", "p/a", "p/a/f"}, res.Refused)
			} else {
				// A plain round does not send links: l1 is local only, and
				// the sandbox's l2 is refused all the same.
				assert.Equal(t, whyLinkThrough, res.Reasons["l2"])
				assert.Equal(t, "below p/a, whose change of type was refused", res.Reasons["p/a/f"])
				assert.Equal(t, []string{"l2", "p/a", "p/a/f"}, res.Refused)
			}
			assert.Equal(t, []string{"q/x"}, res.Updated)
			assert.Equal(t, "f\n", read(t, e.local, "p/a/f"))
			assertLinksInside(t, e.local)
		})
	}
}
