package tree

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/digest"
)

// checkListing holds every form of a Listing's manifest to the Manifest
// it describes, byte for byte.
func checkListing(t *testing.T, l *Listing, want Manifest) {
	t.Helper()
	got := l.Manifest()
	require.Equal(t, len(want.Entries), len(got.Entries))
	require.Equal(t, want, got)
	canon := want.Canonical()
	lc := l.Canonical()
	require.Equal(t, string(canon), string(lc))
	assert.Equal(t, len(lc), cap(lc), "Canonical sizes its buffer exactly")
	assert.Equal(t, digest.Of(canon), l.Digest())
	var buf bytes.Buffer
	d, err := l.WriteCanonical(&buf)
	require.NoError(t, err)
	assert.Equal(t, string(canon), buf.String())
	assert.Equal(t, digest.Of(canon), d)
	assert.Equal(t, want.Files(), l.Files())
	assert.Equal(t, want.Bytes(), l.Bytes())
	for i, e := range want.Entries {
		require.Equal(t, e, l.Entry(i))
		sum, _, ok := l.Sum(e.Path)
		if e.Type != File || e.SHA256 == "" {
			assert.False(t, ok, e.Path)
			continue
		}
		require.True(t, ok, e.Path)
		assert.Equal(t, e.SHA256, fmt.Sprintf("%x", sum))
	}
	_, _, ok := l.Sum("no such path")
	assert.False(t, ok)
}

// TestListingMatchesManifest builds Listings in an order that is not
// path order (as a walk of "a", "a-b" and "a.c" is), with odd names and
// more records than the doubling blocks hold, and compares each form of
// the manifest with Manifest's.
func TestListingMatchesManifest(t *testing.T) {
	odd := []string{"plain", "a b", `q"uote`, `back\slash`, "tab\there", "nl\nx", "\x00\x01\x1f\x7f", "<>&", "\u2028", "é/ü/日本", "\xff", "a\xc3", "🎉"}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 63, 64, 65, grownRecs - 1, grownRecs, grownRecs + maxBlock + 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			l := newListing()
			want := []Entry{}
			for i := range n {
				p := fmt.Sprintf("d%03d", i/100)
				switch i % 100 {
				case 0: // the directory, whose contents a walk lists before "d000-x"
					want = append(want, Entry{Path: p, Type: Dir, Mode: 0o755})
					_, _, ok := l.add(p, 0, 0o755, recDir)
					require.True(t, ok)
					continue
				case 99:
					p += "-x"
				default:
					p += "/" + fmt.Sprint(i%100) + odd[i%len(odd)]
				}
				size := int64(rng.IntN(1 << 30))
				r, _, ok := l.add(p, size, fs.FileMode(i%0o1000), 0)
				require.True(t, ok)
				for k := range r {
					r[k] = byte(rng.IntN(256))
				}
				want = append(want, Entry{Path: p, Type: File, Mode: fs.FileMode(i % 0o1000), Size: size, SHA256: fmt.Sprintf("%x", *r)})
			}
			l.finish()
			slices.SortFunc(want, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
			checkListing(t, l, Manifest{Entries: want})
		})
	}
}

// TestWalkListing: a walk's Listing (with and without Compact) describes
// what its Manifest does, and SkipContent leaves files unread and
// unhashed but listed.
func TestWalkListing(t *testing.T) {
	src := scheduleTree(t)
	build(t, src, "a-b", "a.c", "a/ z")
	var hashed atomic.Int64
	defer CountHashed(&hashed)()
	for _, workers := range workerCounts {
		hashed.Store(0)
		res, err := Walk(context.Background(), src, Options{Workers: workers, Exclude: excludeLogs}, nil)
		require.NoError(t, err)
		checkListing(t, res.Listing, res.Manifest)
		assert.Equal(t, res.Manifest.Bytes(), hashed.Load())
		compact, err := Walk(context.Background(), src, Options{Workers: workers, Exclude: excludeLogs, Compact: true}, nil)
		require.NoError(t, err)
		assert.Empty(t, compact.Manifest.Entries)
		checkListing(t, compact.Listing, res.Manifest)

		hashed.Store(0)
		var asked []string
		skip, err := Walk(context.Background(), src, Options{Workers: workers, Exclude: excludeLogs, SkipContent: func(e Entry) bool {
			asked = append(asked, e.Path) // on the calling goroutine: no lock
			return strings.HasPrefix(e.Path, "a/")
		}}, nil)
		require.NoError(t, err)
		var unread int
		var read int64
		want := slices.Clone(res.Manifest.Entries)
		for i, e := range want {
			if e.Type == File && strings.HasPrefix(e.Path, "a/") {
				want[i].SHA256 = ""
				unread++
			} else {
				read += e.Size
			}
		}
		assert.Equal(t, unread, skip.Listing.Unread())
		assert.Equal(t, want, skip.Manifest.Entries)
		assert.Equal(t, read, hashed.Load(), "skipped files are not read")
		assert.Len(t, asked, res.Manifest.Files())
	}
}

// TestStampsAndKnown: with Stamps a walk's Listing gives each file's
// stamp; a later Walk callback that offers a file's known hash with a
// matching stamp is spared the read, a changed file's stamp no longer
// matches, and CopyHooks.Known spares the copier the same read.
func TestStampsAndKnown(t *testing.T) {
	src := t.TempDir()
	build(t, src, "d/", "d/f", "g", "h")
	for _, n := range []string{"d/f", "g", "h"} {
		require.NoError(t, os.WriteFile(filepath.Join(src, n), []byte(strings.Repeat(n, 100)), 0o644))
	}
	first, err := Walk(context.Background(), src, Options{Stamps: true}, nil)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(src, "h"), []byte(strings.Repeat("H", 100)), 0o644))

	var hashed atomic.Int64
	defer CountHashed(&hashed)()
	known := func(p string) (sum [32]byte, st Stamp, ok bool) { return first.Listing.Sum(p) }
	used := map[string]bool{}
	res, err := Walk(context.Background(), src, Options{}, func(it *Item) error {
		if it.Type == File {
			sum, st, ok := known(it.Path)
			require.True(t, ok)
			used[it.Path] = it.UseKnown(sum, st)
		}
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, map[string]bool{"d/f": true, "g": true, "h": false}, used)
	assert.Equal(t, int64(100), hashed.Load(), "only the changed file is read")
	fresh, err := Walk(context.Background(), src, Options{}, nil)
	require.NoError(t, err)
	assert.Equal(t, fresh.Manifest, res.Manifest, "the changed file's new hash, the others' known ones")

	// A read file is hashed as read: a known hash offered afterwards is refused.
	_, err = Walk(context.Background(), src, Options{}, func(it *Item) error {
		if it.Type == File {
			var b [1]byte
			_, err := it.Read(b[:])
			require.NoError(t, err)
			sum, st, _ := known(it.Path)
			assert.False(t, it.UseKnown(sum, st))
		}
		return nil
	})
	require.NoError(t, err)

	// Copy: a carried file with a known hash and a matching stamp is not read.
	dstDir := filepath.Join(t.TempDir(), "copy")
	require.NoError(t, os.Mkdir(dstDir, 0o700))
	dst, err := os.Open(dstDir)
	require.NoError(t, err)
	defer dst.Close()
	hashed.Store(0)
	cres, err := CopyInto(context.Background(), src, dst, Options{Workers: 2}, CopyHooks{
		Carry: func(e Entry, d Dest) (bool, error) {
			f, err := d.Create()
			if err != nil {
				return false, err
			}
			b, _ := os.ReadFile(filepath.Join(src, e.Path))
			_, err = f.Write(b)
			return true, errorsJoin(err, f.Close())
		},
		Known: func(e Entry) ([32]byte, Stamp, bool) { return known(e.Path) },
	})
	require.NoError(t, err)
	assert.Equal(t, fresh.Manifest, cres.Manifest)
	assert.Equal(t, int64(100), hashed.Load(), "only the changed file is read")
}

func errorsJoin(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// TestWalkSeenKnown: a Walk given both a fingerprint pass's Seen and
// Known asks Known with the pass's lstat (its Stamp), lists what Known
// vouches for unopened, and reads the rest against the pass's lstat: a
// file rewritten since the pass and not vouched for fails the walk
// (ErrChanged). A rewrite since the pass of a file Known vouches for by the
// pass's Stamp is not seen by this walk: the caller's later walk, which
// lstat's again, is what sees it.
func TestWalkSeenKnown(t *testing.T) {
	ctx := context.Background()
	later := time.Now().Add(time.Hour)
	for _, workers := range workerCounts {
		src := t.TempDir()
		build(t, src, "d/", "d/f:ff", "g:gg", "h:hh")
		first, err := Walk(ctx, src, Options{Stamps: true}, nil)
		require.NoError(t, err)
		_, seen := FingerprintSeen(ctx, src, Options{}, later, 100)
		require.NotNil(t, seen)
		walk := func() (*Result, map[string]Stamp, int64, error) {
			asked := map[string]Stamp{}
			var opened atomic.Int64
			restore := CountOpened(&opened)
			defer restore()
			res, err := Walk(ctx, src, Options{Workers: workers, Stamps: true, Compact: true, Seen: seen, Known: func(rel string, st Stamp) ([32]byte, bool) {
				asked[rel] = st
				_, was, ok := first.Listing.Sum(rel)
				return [32]byte{7}, ok && was == st && rel != "h"
			}}, nil)
			return res, asked, opened.Load(), err
		}
		res, asked, opened, err := walk()
		require.NoError(t, err)
		assert.Len(t, asked, 3, "Known is asked about every file")
		for p, st := range asked {
			_, was, _ := first.Listing.Sum(p)
			assert.Equal(t, was, st, "%s: Known is asked with the pass's Stamp", p)
		}
		assert.Equal(t, int64(1), opened, "only h, which Known does not vouch for, is opened")
		sum, _, ok := res.Listing.Sum("g")
		require.True(t, ok)
		assert.Equal(t, [32]byte{7}, sum, "g is listed with Known's sum")
		sum, _, ok = res.Listing.Sum("h")
		require.True(t, ok)
		assert.Equal(t, sha256.Sum256([]byte("hh")), sum, "h is read")

		// Rewritten since the pass (same size: only the times move).
		time.Sleep(20 * time.Millisecond)
		build(t, src, "g:GG", "h:HH")
		res, asked, opened, err = walk()
		require.ErrorIs(t, err, ErrChanged, "h, read against the pass's lstat, changed since")
		assert.Nil(t, res)
		_, was, _ := first.Listing.Sum("g")
		assert.Equal(t, was, asked["g"], "g: asked with the pass's Stamp, not the rewrite's")
		assert.LessOrEqual(t, opened, int64(1))
	}
}

// TestWalkOptionsKnown: Options.Known spares the read of a file it vouches
// for (the Listing holds the sum it gave, and the file's Stamp), is asked
// with the Stamp the file shows now (a changed file's no longer matches the
// earlier walk's), and spares a Walk's callback the files it vouches for.
func TestWalkOptionsKnown(t *testing.T) {
	src := t.TempDir()
	build(t, src, "d/", "d/f", "g", "h")
	first, err := Walk(context.Background(), src, Options{Stamps: true}, nil)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(src, "h"), []byte("changed h"), 0o644))
	fake := [32]byte{7}
	var hashed atomic.Int64
	defer CountHashed(&hashed)()
	for _, workers := range workerCounts {
		hashed.Store(0)
		var asked []string
		res, err := Walk(context.Background(), src, Options{Workers: workers, Stamps: true, Compact: true, Known: func(rel string, st Stamp) ([32]byte, bool) {
			asked = append(asked, rel)
			_, was, ok := first.Listing.Sum(rel)
			return fake, ok && was == st
		}}, nil)
		require.NoError(t, err)
		assert.Equal(t, []string{"d/f", "g", "h"}, asked)
		for _, p := range []string{"d/f", "g"} {
			sum, st, ok := res.Listing.Sum(p)
			require.True(t, ok, p)
			assert.Equal(t, fake, sum, "%s: the sum Known gave", p)
			_, was, _ := first.Listing.Sum(p)
			assert.Equal(t, was, st, "%s keeps its Stamp", p)
		}
		sum, _, ok := res.Listing.Sum("h")
		require.True(t, ok)
		assert.Equal(t, sha256.Sum256([]byte("changed h")), sum, "the changed file is read")
		assert.Equal(t, int64(len("changed h")), hashed.Load(), "only the changed file is read")
		assert.Zero(t, res.Listing.Unread())
	}
	var given []string
	hashed.Store(0)
	res, err := Walk(context.Background(), src, Options{Known: func(rel string, st Stamp) ([32]byte, bool) {
		_, was, ok := first.Listing.Sum(rel)
		return fake, ok && was == st
	}}, func(it *Item) error {
		given = append(given, it.Path)
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"d", "h"}, given, "the callback is given the directory and the file Known does not vouch for")
	assert.Equal(t, int64(len("changed h")), hashed.Load(), "only the changed file is read")
	sum, _, ok := res.Listing.Sum("g")
	require.True(t, ok)
	assert.Equal(t, fake, sum)
}
