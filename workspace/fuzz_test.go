package workspace

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"
)

// FuzzDecodeRecord: whatever decodes re-encodes to the same bytes.
func FuzzDecodeRecord(f *testing.F) {
	r := record{Schema: recordSchema, ID: strings.Repeat("a", 24), Kind: kindPlain, Local: "/l", Remote: "/r", Exclude: []string{}}
	f.Add(r.encode())
	f.Add(append(r.encode(), ' '))
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := decodeRecord(data)
		if err != nil {
			return
		}
		if !bytes.Equal(rec.encode(), data) {
			t.Fatalf("accepted non-canonical %q", data)
		}
	})
}

// FuzzParseTree checks the git tree object parser: what it accepts
// encodes back to exactly its input (octal modes, names up to their NUL,
// ids of the hash's length in lowercase hex), and it never reads past the
// data.
func FuzzParseTree(f *testing.F) {
	f.Add([]byte("100644 a\x00"+strings.Repeat("\x01", 20)+"40000 ..\x00"+strings.Repeat("\xff", 20)), 20)
	f.Add([]byte("100644 a\x00"+strings.Repeat("\x01", 32)), 32)
	f.Add([]byte("100644 \x00"+strings.Repeat("\x01", 19)), 20)
	f.Add([]byte("1x0644 a\x00"+strings.Repeat("\x01", 20)), 20)
	f.Fuzz(func(t *testing.T, data []byte, idLen int) {
		if idLen != 20 && idLen != 32 {
			return
		}
		ents, err := parseTree(data, idLen)
		if err != nil {
			return
		}
		var b bytes.Buffer
		for _, e := range ents {
			if e.mode == "" || strings.Trim(e.mode, "01234567") != "" || strings.ContainsRune(e.name, 0) || len(e.id) != 2*idLen || strings.ToLower(e.id) != e.id {
				t.Fatalf("bad entry accepted: %+v", e)
			}
			raw, err := hex.DecodeString(e.id)
			if err != nil {
				t.Fatal(err)
			}
			b.WriteString(e.mode + " " + e.name + "\x00")
			b.Write(raw)
		}
		if !bytes.Equal(b.Bytes(), data) {
			t.Fatalf("entries %+v encode to %q, not the input %q", ents, b.Bytes(), data)
		}
	})
}
