package tree

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestManifestNamesNotUTF8(t *testing.T) {
	ff := Manifest{Entries: []Entry{{Path: "d", Type: Dir, Mode: 0o755}, {Path: "d/f\xff", Type: File, Mode: 0o644, Size: 1, SHA256: sum("x")}}}
	fe := Manifest{Entries: []Entry{{Path: "d", Type: Dir, Mode: 0o755}, {Path: "d/f\xfe", Type: File, Mode: 0o644, Size: 1, SHA256: sum("x")}}}
	want := `{"entries":[{"path":"d","type":"dir","mode":493,"size":0,"sha256":""},` +
		`{"path_hex":"642f66ff","type":"file","mode":420,"size":1,"sha256":"` + sum("x") + `"}]}`
	assert.Equal(t, want, string(ff.Canonical()))
	assert.NotEqual(t, ff.Digest(), fe.Digest(), "names that differ only in invalid UTF-8 must not share a digest")
	for _, m := range []Manifest{ff, fe} {
		got, err := ParseManifest(m.Canonical())
		require.NoError(t, err, "the library must accept the manifest it wrote")
		assert.Equal(t, m, got)
	}
}

func TestWalkNamesNotUTF8(t *testing.T) {
	modes(t, func(t *testing.T, force bool, _ Mode) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "f\xff"), []byte("x"), 0o644))
		a, err := Walk(context.Background(), dir, Options{ForceFallback: force}, nil)
		require.NoError(t, err)
		require.Len(t, a.Manifest.Entries, 1)
		assert.Equal(t, "f\xff", a.Manifest.Entries[0].Path, "the raw name")
		got, err := ParseManifest(a.Manifest.Canonical())
		require.NoError(t, err)
		assert.Equal(t, a.Manifest, got)

		require.NoError(t, os.Rename(filepath.Join(dir, "f\xff"), filepath.Join(dir, "f\xfe")))
		b, err := Walk(context.Background(), dir, Options{ForceFallback: force}, nil)
		require.NoError(t, err)
		assert.NotEqual(t, a.Manifest.Digest(), b.Manifest.Digest(), "a rename is a change")

		dst := filepath.Join(t.TempDir(), "copy")
		c, err := Copy(context.Background(), dir, dst, Options{ForceFallback: force})
		require.NoError(t, err)
		assert.Equal(t, b.Manifest, c.Manifest)
		data, err := os.ReadFile(filepath.Join(dst, "f\xfe"))
		require.NoError(t, err)
		assert.Equal(t, "x", string(data))
	})
}

func TestParseManifestPathHexRejects(t *testing.T) {
	h := sum("x")
	file := func(key string) string {
		return `{"entries":[{` + key + `"type":"file","mode":420,"size":1,"sha256":"` + h + `"}]}`
	}
	for name, in := range map[string]string{
		"both keys":         file(`"path":"a","path_hex":"61ff",`),
		"both keys hex 1st": file(`"path_hex":"61ff","path":"a",`),
		"neither key":       file(``),
		"upper hex":         file(`"path_hex":"61FF",`),
		"odd hex":           file(`"path_hex":"61f",`),
		"not hex":           file(`"path_hex":"zz",`),
		"empty hex":         file(`"path_hex":"",`),
		"hex of utf8":       file(`"path_hex":"61",`),
		"hex of absolute":   file(`"path_hex":"2fff",`),
		"hex of dotdot":     file(`"path_hex":"2e2e2fff",`),
		"hex of nul":        file(`"path_hex":"00ff",`),
		"hex of unclean":    file(`"path_hex":"ff2f",`),
		"duplicate hex":     file(`"path_hex":"61ff","path_hex":"62ff",`),
		"null path":         file(`"path":null,`),
		"hex after type":    `{"entries":[{"type":"file","path_hex":"61ff","mode":420,"size":1,"sha256":"` + h + `"}]}`,
		"unsorted raw": `{"entries":[{"path_hex":"62ff","type":"dir","mode":493,"size":0,"sha256":""},` +
			`{"path_hex":"61ff","type":"dir","mode":493,"size":0,"sha256":""}]}`,
		"escaped U+FFFD": file(`"path":"a\ufffd",`),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseManifest([]byte(in))
			require.ErrorIs(t, err, ErrBadManifest)
			_, ok := parseCanonical([]byte(in))
			assert.False(t, ok, "the fast path accepted it")
		})
	}
	// The canonical spelling of the same entry parses.
	m, err := ParseManifest([]byte(file(`"path_hex":"61ff",`)))
	require.NoError(t, err)
	assert.Equal(t, "a\xff", m.Entries[0].Path)
	fast, ok := parseCanonical([]byte(file(`"path_hex":"61ff",`)))
	assert.True(t, ok, "the fast path reads path_hex")
	assert.Equal(t, m, fast)
}

// manifestFrom builds a valid manifest from fuzz input: data split at
// '\n' gives the paths (invalid ones are dropped, the rest sorted and made
// unique, parent directories not required), kinds picks each entry's type.
func manifestFrom(data []byte, kinds uint64, size int64) Manifest {
	seen := map[string]bool{}
	var paths []string
	for _, p := range bytes.Split(data, []byte("\n")) {
		if s := string(p); ValidPath(s) && !seen[s] {
			seen[s] = true
			paths = append(paths, s)
		}
	}
	slices.Sort(paths) // byte order
	m := Manifest{Entries: []Entry{}}
	for i, p := range paths {
		e := Entry{Path: p, Type: Dir, Mode: 0o755}
		if kinds>>(uint(i)%64)&1 == 1 {
			e = Entry{Path: p, Type: File, Mode: 0o640, Size: max(size, 0), SHA256: sum(p)}
		}
		m.Entries = append(m.Entries, e)
	}
	return m
}

// FuzzManifestRoundTrip: every manifest, whatever bytes its names hold,
// survives Canonical and ParseManifest unchanged, and its canonical form is
// valid UTF-8 JSON.
func FuzzManifestRoundTrip(f *testing.F) {
	f.Add([]byte("a\na/b\nf\xff"), uint64(0b100), int64(3))
	f.Add([]byte("\xff\xfe\n\xc0\x80\ned\xa0\x80"), uint64(0), int64(0))
	f.Add([]byte("a<b>&\n\u2028\n\x01\x1f\n\"q\"\\"), uint64(0xff), int64(1<<40))
	f.Fuzz(func(t *testing.T, data []byte, kinds uint64, size int64) {
		m := manifestFrom(data, kinds, size)
		c := m.Canonical()
		if !utf8.Valid(c) {
			t.Fatalf("canonical form is not UTF-8: %q", c)
		}
		got, err := ParseManifest(c)
		if err != nil {
			t.Fatalf("ParseManifest(Canonical(%+v)): %v", m.Entries, err)
		}
		if len(got.Entries) != len(m.Entries) {
			t.Fatalf("round trip changed the entry count: %d != %d", len(got.Entries), len(m.Entries))
		}
		for i := range m.Entries {
			if got.Entries[i] != m.Entries[i] {
				t.Fatalf("entry %d: round trip gave %+v, want %+v", i, got.Entries[i], m.Entries[i])
			}
		}
	})
}

// FuzzManifestDigestInjective: two one-entry manifests share a digest
// exactly when their names are the same bytes.
func FuzzManifestDigestInjective(f *testing.F) {
	f.Add("f\xff", "f\xfe")
	f.Add("f\xff", "f\ufffd")
	f.Add("66ff", "f\xff")
	f.Add("a", "a")
	f.Add("a\xff", "a\xff")
	f.Fuzz(func(t *testing.T, a, b string) {
		if !ValidPath(a) || !ValidPath(b) {
			return
		}
		one := func(p string) Manifest {
			return Manifest{Entries: []Entry{{Path: p, Type: File, Mode: 0o644, Size: 1, SHA256: sum("x")}}}
		}
		if same := one(a).Digest() == one(b).Digest(); same != (a == b) {
			t.Fatalf("names %q and %q: digests equal=%v", a, b, same)
		}
	})
}

// BenchmarkParseManifest parses the manifest of a 38,000-file tree (the size
// of issue 22's large tree), through ParseManifest's fast path and through
// the decoder alone:
//
//	go test -run '^$' -bench ParseManifest ./internal/tree/
func BenchmarkParseManifest(b *testing.B) {
	m := Manifest{}
	for d := range 380 {
		dir := fmt.Sprintf("pages/dir%03d", d)
		m.Entries = append(m.Entries, Entry{Path: dir, Type: Dir, Mode: 0o755})
		for f := range 100 {
			m.Entries = append(m.Entries, Entry{Path: fmt.Sprintf("%s/page-%03d.md", dir, f), Type: File, Mode: 0o644,
				Size: int64(100 + f), SHA256: hex.EncodeToString(make([]byte, 32))})
		}
	}
	slices.SortFunc(m.Entries, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	data := m.Canonical()
	for name, parse := range map[string]func([]byte) (Manifest, error){"fast": ParseManifest, "decoder": decodeManifest} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := parse(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// fileSizes is what ManifestFileSizes reports of data.
func fileSizes(data []byte) []int64 {
	var got []int64
	ManifestFileSizes(data, func(n int64) { got = append(got, n) })
	return got
}

// parsedFileSizes is the sizes of m's regular files, in order.
func parsedFileSizes(m Manifest) []int64 {
	var want []int64
	for _, e := range m.Entries {
		if e.Type == File {
			want = append(want, e.Size)
		}
	}
	return want
}

func TestManifestFileSizes(t *testing.T) {
	m := Manifest{Entries: []Entry{
		{Path: "a", Type: Dir, Mode: 0o755},
		{Path: `a/,"type":"file","mode":1,"size":99`, Type: File, Mode: 0o600, Size: 3, SHA256: sum("abc")},
		{Path: "a/b", Type: File, Mode: 0o755, Size: 0, SHA256: sum("")},
		{Path: "a/c", Type: File, Mode: 0o644, Size: 1 << 40, SHA256: sum("c")},
		{Path: "a/d", Type: File, Mode: 0o644, Size: math.MaxInt64, SHA256: sum("d")},
		{Path: "d", Type: Dir, Mode: 0o700},
	}}
	assert.Equal(t, []int64{3, 0, 1 << 40, math.MaxInt64}, fileSizes(m.Canonical()))
	assert.Empty(t, fileSizes(Manifest{Entries: []Entry{}}.Canonical()))
	// Not a manifest: what is not in the canonical shape is not counted.
	for data, want := range map[string][]int64{
		``:                                  nil,
		`,"type":"file","mode":`:            nil,
		`,"type":"file","mode":x,"size":5`:  nil,
		`,"type":"file","mode":7,"size":`:   nil,
		`,"type":"file","mode":7,"size":-5`: nil,
		`,"type":"file","mode":7,"size":99999999999999999999999`:            {0},
		`,"type":"file","mode":7,"size":12,"type":"file","mode":1,"size":3`: {12, 3},
	} {
		assert.Equal(t, want, fileSizes([]byte(data)), "%q", data)
	}
}

// FuzzManifestFileSizes: on a manifest that parses, the scan reports
// exactly its regular files' sizes; on anything, it reports no more
// sizes than the data holds file entries and none negative.
func FuzzManifestFileSizes(f *testing.F) {
	f.Add(Manifest{Entries: []Entry{{Path: "a", Type: Dir, Mode: 0o755}, {Path: "a/b", Type: File, Mode: 0o600, Size: 3, SHA256: sum("abc")}}}.Canonical())
	f.Add([]byte(`,"type":"file","mode":7,"size":12`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got := fileSizes(data)
		if m, err := ParseManifest(data); err == nil {
			if want := parsedFileSizes(m); !slices.Equal(got, want) {
				t.Fatalf("scan %v, parse %v, for %q", got, want, data)
			}
		}
		if n := bytes.Count(data, []byte(fileEntry)); len(got) > n {
			t.Fatalf("%d sizes from %d file entries in %q", len(got), n, data)
		}
		for _, n := range got {
			if n < 0 {
				t.Fatalf("negative size %d from %q", n, data)
			}
		}
	})
}

// FuzzManifestFileSizesEntries: every canonical manifest of fuzzed
// entries scans to its regular files' sizes, whatever its paths hold.
func FuzzManifestFileSizesEntries(f *testing.F) {
	f.Add("a", "file", int64(3), `,"type":"file","mode":1,"size":9`, int64(7))
	f.Add("a", "dir", int64(0), "b", int64(math.MaxInt64))
	f.Fuzz(func(t *testing.T, p1, typ string, s1 int64, p2 string, s2 int64) {
		m := Manifest{Entries: []Entry{
			{Path: p1, Type: Type(typ), Mode: 0o644, Size: max(s1, 0), SHA256: sum(p1)},
			{Path: p2, Type: File, Mode: 0o600, Size: max(s2, 0), SHA256: sum(p2)},
		}}
		if got, want := fileSizes(m.Canonical()), parsedFileSizes(m); !slices.Equal(got, want) {
			t.Fatalf("scan %v, entries %v, for %q", got, want, m.Canonical())
		}
	})
}

func TestFirstFile(t *testing.T) {
	file := func(p string) Entry { return Entry{Path: p, Type: File, Mode: 0o644, Size: 1, SHA256: sum(p)} }
	dir := func(p string) Entry { return Entry{Path: p, Type: Dir, Mode: 0o755} }
	for _, c := range []struct {
		name    string
		entries []Entry
		want    string
	}{
		{"empty", []Entry{}, ""},
		{"directories only", []Entry{dir("a"), dir("a/b")}, ""},
		{"a file after directories", []Entry{dir("a"), dir("a/b"), file("a/b/c"), file("d")}, "a/b/c"},
		{"an escaped name first", []Entry{file("a<b"), file("c")}, "a<b"},
		{"a hex name first", []Entry{file("a\xff"), file("c")}, "a\xff"},
		{"a quote and a backslash", []Entry{dir(`q"`), file(`q"/\x`)}, `q"/\x`},
	} {
		got, ok := FirstFile(Manifest{Entries: c.entries}.Canonical())
		assert.Equal(t, c.want, got, c.name)
		assert.Equal(t, c.want != "", ok, c.name)
	}
	for _, bad := range []string{``, `{}`, `{"entries":[{"path":"../x","type":"file","mode":420,"size":1,"sha256":"` + sum("x") + `"}]}`, `{"entries":[{"path":"b","type":"dir","mode":493,"size":0,"sha256":""},{"path":"a","type":"file","mode":420,"size":1,"sha256":"` + sum("a") + `"}]}`} {
		got, ok := FirstFile([]byte(bad))
		assert.False(t, ok, "%q gave %q", bad, got)
	}
	// Only as far as the first file: what follows it is not read.
	got, ok := FirstFile([]byte(`{"entries":[{"path":"a","type":"file","mode":420,"size":1,"sha256":"` + sum("a") + `"},garbage`))
	assert.True(t, ok)
	assert.Equal(t, "a", got)
}

// FuzzFirstFile: on a manifest that parses, FirstFile names its first
// regular file (none: false); on anything, what it names is a valid path.
func FuzzFirstFile(f *testing.F) {
	f.Add(Manifest{Entries: []Entry{{Path: "a", Type: Dir, Mode: 0o755}, {Path: "a/b", Type: File, Mode: 0o600, Size: 3, SHA256: sum("abc")}}}.Canonical())
	f.Add(Manifest{Entries: []Entry{{Path: "a\\b", Type: File, Mode: 0o600, Size: 3, SHA256: sum("abc")}}}.Canonical())
	f.Add([]byte(`{"entries":[{"path":"a","type":"file","mode":420,"size":1,"sha256":""}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := FirstFile(data)
		if ok && !ValidPath(got) {
			t.Fatalf("FirstFile(%q) = %q, not a valid path", data, got)
		}
		m, err := ParseManifest(data)
		if err != nil {
			return
		}
		want, wantOK := "", false
		for _, e := range m.Entries {
			if e.Type == File {
				want, wantOK = e.Path, true
				break
			}
		}
		if got != want || ok != wantOK {
			t.Fatalf("FirstFile(%q) = %q, %v; the parsed manifest's first file is %q, %v", data, got, ok, want, wantOK)
		}
	})
}
