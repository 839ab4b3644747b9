package tree

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/treetest"
)

func TestFingerprint(t *testing.T) {
	modes(t, func(t *testing.T, force bool, _ Mode) {
		dir, outside := t.TempDir(), t.TempDir()
		build(t, dir, "a:hello", "d/", "d/b:xy", "l => "+outside, "p|")
		ctx := context.Background()
		later := time.Now().Add(time.Hour)
		opts := Options{ForceFallback: force}

		base := Fingerprint(ctx, dir, opts, later)
		assert.True(t, base.Usable)
		assert.Equal(t, 2, base.Files)
		assert.Equal(t, int64(7), base.Bytes)
		assert.Equal(t, base, Fingerprint(ctx, dir, opts, later), "stable while nothing changes")

		recent := Fingerprint(ctx, dir, opts, time.Now().Add(-time.Hour))
		assert.False(t, recent.Usable, "a file changed after the cutoff is not trusted")
		assert.Equal(t, base.Sum, recent.Sum)

		for _, links := range []LinkPolicy{RejectLinks, FollowLinksWithin} {
			assert.False(t, Fingerprint(ctx, dir, Options{Links: links, ForceFallback: force}, later).Usable, links.String())
		}
		excl := Fingerprint(ctx, dir, Options{ForceFallback: force, Exclude: func(rel string, _ bool) bool { return rel == "d" }}, later)
		assert.Equal(t, 1, excl.Files)
		assert.NotEqual(t, base.Sum, excl.Sum)

		require.NoError(t, os.WriteFile(filepath.Join(dir, "d/b"), []byte("xz"), 0o644))
		assert.NotEqual(t, base.Sum, Fingerprint(ctx, dir, opts, later).Sum, "a rewrite changes the times")
		require.NoError(t, os.Chmod(filepath.Join(dir, "a"), 0o600))
		assert.NotEqual(t, base.Sum, Fingerprint(ctx, dir, opts, later).Sum, "a mode change")

		assert.Equal(t, Metadata{}, Fingerprint(ctx, filepath.Join(dir, "a"), opts, later), "not a directory")
		assert.False(t, Fingerprint(ctx, dir, Options{ForceFallback: force, Limits: Limits{MaxFiles: 1}}, later).Usable)
	})
}

func TestFingerprintScheduleIndependent(t *testing.T) {
	dir := t.TempDir()
	for i := range 12 {
		build(t, dir, fmt.Sprintf("d%02d/", i), fmt.Sprintf("d%02d/sub/", i), fmt.Sprintf("d%02d/sub/f:%d", i, i), fmt.Sprintf("f%02d", i))
	}
	later := time.Now().Add(time.Hour)
	want := fingerprint(context.Background(), dir, Options{}, later, 1)
	require.True(t, want.Usable)
	assert.Equal(t, 24, want.Files)
	for _, workers := range []int{2, 3, 8, 64} {
		for range 5 {
			assert.Equal(t, want, fingerprint(context.Background(), dir, Options{}, later, workers), "workers=%d", workers)
		}
	}
	capped := fingerprint(context.Background(), dir, Options{Limits: Limits{MaxFiles: 20}}, later, 4)
	assert.False(t, capped.Usable, "the file limit counts across concurrent subtrees")
}

func TestFingerprintRecordsAreInjective(t *testing.T) {
	st := stat{mode: 0o644, size: 1, mtime: time.Unix(1, 0), raw: 0o100644, ino: 7, dev: 1, ctime: 1, full: true}
	sumOf := func(add func(f *fingerprinter)) [32]byte {
		f := newFingerprinter(context.Background(), Options{}, time.Now())
		add(f)
		return f.finish().Sum
	}
	ff := sumOf(func(f *fingerprinter) { f.add("f\xff", st) })
	fe := sumOf(func(f *fingerprinter) { f.add("f\xfe", st) })
	assert.NotEqual(t, ff, fe, "names that differ only in invalid UTF-8 differ")
	assert.Equal(t, ff, sumOf(func(f *fingerprinter) { f.add("f\xff", st) }))
	// A folded subdirectory sum cannot pose as an entry, nor the reverse.
	var sub [32]byte
	copy(sub[:], "0123456789abcdef0123456789abcdef")
	folded := sumOf(func(f *fingerprinter) { f.fold(sub) })
	named := sumOf(func(f *fingerprinter) { f.add(string(sub[:]), st) })
	assert.NotEqual(t, folded, named)
}

// TestCopySeen: a Copy given what a fingerprint pass saw (FingerprintSeen)
// copies what it would copy without it, takes its listing from the pass
// (an entry added since is not seen), checks every entry against the
// pass's lstat (one changed or swapped for a link since fails with
// ErrChanged, and nothing from outside reaches the copy), and lists a
// directory that was replaced since afresh.
func TestCopySeen(t *testing.T) {
	modes(t, func(t *testing.T, force bool, _ Mode) {
		ctx := context.Background()
		later := time.Now().Add(time.Hour)
		setup := func(t *testing.T) (src, outside string, seen *Seen) {
			src, outside = t.TempDir(), t.TempDir()
			build(t, outside, "secret:TOPSECRET")
			build(t, src, "a:hello", "d/", "d/b:xy", "d/e/", "d/e/f:deep", "l => "+outside+"/secret", "p|")
			opts := Options{ForceFallback: force}
			md, seen := FingerprintSeen(ctx, src, opts, later, 1000)
			require.NotNil(t, seen)
			assert.Equal(t, Fingerprint(ctx, src, opts, later), md, "the same fingerprint, kept or not")
			return src, outside, seen
		}
		copyOf := func(t *testing.T, src string, seen *Seen) (*Result, string, error) {
			dst := filepath.Join(t.TempDir(), "copy")
			res, err := Copy(ctx, src, dst, Options{ForceFallback: force, Seen: seen})
			return res, dst, err
		}

		t.Run("unchanged: the same copy", func(t *testing.T) {
			src, _, seen := setup(t)
			with, _, err := copyOf(t, src, seen)
			require.NoError(t, err)
			without, _, err := copyOf(t, src, nil)
			require.NoError(t, err)
			assert.Equal(t, without.Manifest, with.Manifest)
			assert.Equal(t, []string{"l", "p"}, with.Skipped)
			assert.Len(t, seen.dirs, 3, "the root, d and d/e were recorded")
			assert.Equal(t, 7, seen.Len())
			assert.Equal(t, 4, seen.TopLevel(), "a, d, l and p")
		})
		t.Run("past maxEntries: the rest is listed again", func(t *testing.T) {
			src, _, _ := setup(t)
			// Directories are recorded as they are finished: d/e (1 entry),
			// d (2), then the root (4), which no longer fits.
			_, seen := FingerprintSeen(ctx, src, Options{ForceFallback: force}, later, 5)
			assert.Equal(t, 3, seen.Len())
			assert.Contains(t, seen.dirs, "d")
			assert.NotContains(t, seen.dirs, "")
			assert.Equal(t, -1, seen.TopLevel(), "the root was not kept")
			assert.Equal(t, -1, (*Seen)(nil).TopLevel())
			build(t, src, "new", "d/new", "d/e/new")
			with, _, err := copyOf(t, src, seen)
			require.NoError(t, err)
			got := paths(with.Manifest)
			assert.Contains(t, got, "new", "the root is listed again")
			assert.NotContains(t, got, "d/new")
			assert.NotContains(t, got, "d/e/new")
		})
		t.Run("added since the pass: not seen", func(t *testing.T) {
			src, _, seen := setup(t)
			build(t, src, "d/new:fresh")
			with, dst, err := copyOf(t, src, seen)
			require.NoError(t, err)
			assert.NotContains(t, paths(with.Manifest), "d/new", "the copy holds what the pass listed")
			_, err = os.Lstat(filepath.Join(dst, "d/new"))
			require.ErrorIs(t, err, fs.ErrNotExist)
			without, _, err := copyOf(t, src, nil)
			require.NoError(t, err)
			assert.Contains(t, paths(without.Manifest), "d/new")
		})
		t.Run("rewritten or replaced since the pass: ErrChanged", func(t *testing.T) {
			src, _, seen := setup(t)
			build(t, src, "d/b:longer")
			_, dst, err := copyOf(t, src, seen)
			require.ErrorIs(t, err, ErrChanged)
			_, err = os.Lstat(dst)
			require.ErrorIs(t, err, fs.ErrNotExist, "a failed copy is removed")

			src, _, seen = setup(t)
			require.NoError(t, os.Rename(filepath.Join(src, "d"), filepath.Join(t.TempDir(), "d")))
			build(t, src, "d/", "d/b:xy")
			_, _, err = copyOf(t, src, seen)
			require.ErrorIs(t, err, ErrChanged, "another directory at d")
		})
		t.Run("swapped for links since the pass: ErrChanged, nothing from outside", func(t *testing.T) {
			out := t.TempDir()
			src, outside, seen := setup(t)
			require.NoError(t, os.Rename(filepath.Join(src, "d"), filepath.Join(t.TempDir(), "d")))
			require.NoError(t, os.Symlink(outside, filepath.Join(src, "d")))
			_, err := Copy(ctx, src, filepath.Join(out, "1"), Options{ForceFallback: force, Seen: seen})
			require.ErrorIs(t, err, ErrChanged)

			src, outside, seen = setup(t)
			require.NoError(t, os.Remove(filepath.Join(src, "a")))
			require.NoError(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(src, "a")))
			_, err = Copy(ctx, src, filepath.Join(out, "2"), Options{ForceFallback: force, Seen: seen})
			require.ErrorIs(t, err, ErrChanged)
			treetest.NoLinkNoSecret(t, out, "TOPSECRET")
		})
		t.Run("a root replaced since the pass is listed afresh", func(t *testing.T) {
			src, _, seen := setup(t)
			require.NoError(t, os.Rename(src, src+".old"))
			require.NoError(t, os.Mkdir(src, 0o755))
			build(t, src, "d/", "d/other:x")
			with, _, err := copyOf(t, src, seen)
			require.NoError(t, err)
			assert.Equal(t, []string{"d", "d/other"}, paths(with.Manifest))
		})
	})
}

// paths lists the paths of m's entries.
func paths(m Manifest) []string {
	var p []string
	for _, e := range m.Entries {
		p = append(p, e.Path)
	}
	return p
}

// TestSeenStill: Still says no directory changed since the pass only when
// it can tell: the pass missed nothing, and every directory it reached is
// the same one with the same times, whether or not the pass kept its
// listing.
func TestSeenStill(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		change func(t *testing.T, root string)
		keep   int
		still  bool
	}{
		{"quiet", nil, 100, true},
		{"a file rewritten in place (its directory's times stay)", func(t *testing.T, root string) {
			require.NoError(t, os.WriteFile(filepath.Join(root, "a/x"), []byte("new"), 0o644))
		}, 100, true},
		{"a file moved between directories", func(t *testing.T, root string) {
			require.NoError(t, os.Rename(filepath.Join(root, "a/b/y"), filepath.Join(root, "c/y")))
		}, 100, false},
		{"a file added deep", func(t *testing.T, root string) {
			require.NoError(t, os.WriteFile(filepath.Join(root, "a/b/new"), nil, 0o644))
		}, 100, false},
		{"a file added deep, the listings not kept", func(t *testing.T, root string) {
			require.NoError(t, os.WriteFile(filepath.Join(root, "a/b/new"), nil, 0o644))
		}, 3, false},
		{"a directory replaced", func(t *testing.T, root string) {
			require.NoError(t, os.Rename(filepath.Join(root, "c"), filepath.Join(t.TempDir(), "c")))
			require.NoError(t, os.MkdirAll(filepath.Join(root, "c"), 0o755))
		}, 100, false},
		{"quiet, the listings not kept", nil, 3, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			for _, p := range []string{"a/x", "a/b/y", "c/z", "top"} {
				require.NoError(t, os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(root, p), []byte(p), 0o644))
			}
			_, seen := FingerprintSeen(ctx, root, Options{}, time.Now(), c.keep)
			if c.change != nil {
				c.change(t, root)
			}
			assert.Equal(t, c.still, seen.Still(root))
		})
	}
	t.Run("a pass that missed part of the tree", func(t *testing.T) {
		root := t.TempDir()
		require.NoError(t, os.MkdirAll(filepath.Join(root, "a", "b", "c"), 0o755))
		_, seen := FingerprintSeen(ctx, root, Options{Limits: Limits{MaxDepth: 2}}, time.Now(), 100)
		assert.False(t, seen.Still(root))
	})
	assert.False(t, (*Seen)(nil).Still(t.TempDir()))
}
