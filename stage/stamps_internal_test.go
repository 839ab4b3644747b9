package stage

import (
	"bytes"
	"testing"
	"time"

	"github.com/airlockdev/airlock/internal/tree"
)

// sampleStamps is a stamps record with a few files, of real stamps.
func sampleStamps(t testing.TB) *fileStamps {
	var st tree.Stamp
	b := make([]byte, tree.StampBytes)
	for i := range 40 {
		b[i] = byte(i + 1)
	}
	b[40] = 1
	if err := st.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	return &fileStamps{before: time.Unix(1700000000, 5), m: map[string]stampedFile{
		"a": {sum: [32]byte{1}, st: st}, "d/b": {sum: [32]byte{2}, st: st}, "d/\xffc": {sum: [32]byte{3}, st: st},
	}}
}

// FuzzDecodeStamps: whatever decodeStamps accepts is canonical (encoding
// it again gives the same bytes) and belongs to the key asked for; a
// record round-trips.
func FuzzDecodeStamps(f *testing.F) {
	good := encodeStamps("key", sampleStamps(f))
	f.Add(good, "key")
	f.Add(good[:len(good)-1], "key")
	f.Add(good, "other")
	f.Add([]byte(stampsSchema), "key")
	f.Fuzz(func(t *testing.T, data []byte, key string) {
		s, err := decodeStamps(data, key)
		if err != nil {
			if s != nil {
				t.Fatal("a result with an error")
			}
			return
		}
		if again := encodeStamps(key, s); !bytes.Equal(again, data) {
			t.Fatalf("accepted a non-canonical file:\n%x\nre-encodes as\n%x", data, again)
		}
	})
}

func TestStampsRoundTrip(t *testing.T) {
	s := sampleStamps(t)
	got, err := decodeStamps(encodeStamps("key", s), "key")
	if err != nil {
		t.Fatal(err)
	}
	if !got.before.Equal(s.before) || len(got.m) != len(s.m) {
		t.Fatalf("got %v, want %v", got, s)
	}
	for p, e := range s.m {
		if got.m[p] != e {
			t.Fatalf("%q: got %v, want %v", p, got.m[p], e)
		}
	}
	if _, err := decodeStamps(encodeStamps("key", s), "other"); err == nil || err.Error() != "stamps file belongs to another source" {
		t.Fatalf("another key: %v", err)
	}
}
