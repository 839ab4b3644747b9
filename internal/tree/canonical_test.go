package tree

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/digest"
)

// referenceCanonical is the canonical encoding as encoding/json writes it
// (the implementation Canonical replaced): the hand-written encoder must
// match it byte for byte.
func referenceCanonical(m Manifest) []byte {
	w := wireManifest{Entries: make([]wireEntry, len(m.Entries))}
	for i, e := range m.Entries {
		p := e.Path
		we := wireEntry{Type: e.Type, Mode: e.Mode, Size: e.Size, SHA256: e.SHA256}
		if utf8.ValidString(p) {
			we.Path = &p
		} else {
			h := hex.EncodeToString([]byte(p))
			we.PathHex = &h
		}
		w.Entries[i] = we
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(w); err != nil {
		panic(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func checkCanonical(t *testing.T, m Manifest) {
	t.Helper()
	want := referenceCanonical(m)
	got := m.Canonical()
	require.Equal(t, string(want), string(got))
	assert.Equal(t, len(got), cap(got), "Canonical sizes its buffer exactly")
	assert.Equal(t, digest.Of(want), m.Digest())
}

func TestCanonicalMatchesEncodingJSON(t *testing.T) {
	odd := []string{
		"plain", "a/b c", `q"uote`, `back\slash`, "tab\there", "nl\nx", "cr\rx", "\b\f", "\x00\x01\x1f\x7f",
		"<>&", "\u2028\u2029", "é/ü/日本", "\xff", "a\xc3", "\xed\xa0\x80", "emoji 🎉", "",
	}
	var entries []Entry
	for i, p := range odd {
		entries = append(entries, Entry{Path: p, Type: File, Mode: fs.FileMode(i * 0o111), Size: int64(i) << 40, SHA256: sum(p)})
		entries = append(entries, Entry{Path: p + "/d", Type: Type(p), Mode: 0o755, SHA256: p})
	}
	entries = append(entries, Entry{Path: "neg", Type: File, Size: -1}, Entry{Path: "min", Size: math.MinInt64}, Entry{Path: "max", Size: math.MaxInt64, Mode: fs.ModeDir | fs.ModeSetuid | 0o7777})
	checkCanonical(t, Manifest{Entries: entries})
	checkCanonical(t, Manifest{})
	checkCanonical(t, Manifest{Entries: []Entry{}})

	// A large manifest crosses Digest's 32 KiB flushes.
	rng := rand.New(rand.NewPCG(1, 2))
	var big []Entry
	for i := range 3000 {
		b := make([]byte, rng.IntN(40))
		for k := range b {
			b[k] = byte(rng.IntN(256))
		}
		big = append(big, Entry{Path: fmt.Sprintf("%05d/%s", i, b), Type: File, Mode: 0o644, Size: int64(rng.IntN(1 << 20)), SHA256: sum(string(b))})
	}
	checkCanonical(t, Manifest{Entries: big})
}

func FuzzCanonical(f *testing.F) {
	f.Add("a/b", "file", uint32(0o644), int64(3), "x")
	f.Add("\xff\u2028", "d\"ir", uint32(0), int64(-7), "\x00")
	f.Fuzz(func(t *testing.T, p, typ string, mode uint32, size int64, sha string) {
		m := Manifest{Entries: []Entry{{Path: p, Type: Type(typ), Mode: fs.FileMode(mode), Size: size, SHA256: sha}, {Path: p + "/x", Type: Dir}}}
		checkCanonical(t, m)
		// Whatever parses re-encodes to the same bytes.
		if back, err := ParseManifest(m.Canonical()); err == nil {
			assert.Equal(t, m.Canonical(), back.Canonical())
		}
	})
}
