package tree

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
