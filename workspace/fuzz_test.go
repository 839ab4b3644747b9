package workspace

import (
	"bytes"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"
)

// FuzzDecodeRecord: whatever decodes re-encodes to the same bytes.
func FuzzDecodeRecord(f *testing.F) {
	r := record{Schema: recordSchema, ID: strings.Repeat("a", 24), Kind: kindPlain, Local: "/l", Remote: "/r", Exclude: []string{}}
	f.Add(r.encode())
	f.Add(append(r.encode(), ' '))
	oid := strings.Repeat("1", 40)
	g := record{Schema: recordSchema, ID: strings.Repeat("b", 24), Kind: kindGit, Local: "/l", Remote: "/r", Exclude: []string{},
		Snap: oid, Tree: oid, Index: oid, BaseTree: strings.Repeat("2", 40), BaseIndex: strings.Repeat("3", 40)}
	f.Add(g.encode())
	pl := r
	pl.Links = []string{strings.Repeat("a", 64) + " 61", strings.Repeat("b", 64) + " 612f62"}
	f.Add(pl.encode())
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := decodeRecord(data)
		if err != nil {
			return
		}
		if !bytes.Equal(rec.encode(), data) {
			t.Fatalf("accepted non-canonical %q", data)
		}
		for _, h := range []string{rec.BaseTree, rec.BaseIndex} {
			if h != "" && (rec.Kind != kindGit || len(h) != 40 && len(h) != 64) {
				t.Fatalf("accepted baseline %q in a %s round", h, rec.Kind)
			}
		}
		for i, l := range rec.Links {
			p, id, err := parseLink(l)
			if err != nil || rec.Kind != kindPlain || formatLink(p, id) != l || i > 0 && rec.Links[i-1] >= l {
				t.Fatalf("accepted link %q (%v) in a %s round", l, err, rec.Kind)
			}
		}
	})
}

// TestDecodeRecordBaseline: a round's moved baseline is optional (a round
// saved before a Restore moved it, or by an earlier version, has none),
// names objects, and belongs to git rounds only.
func TestDecodeRecordBaseline(t *testing.T) {
	oid := strings.Repeat("1", 40)
	g := record{Schema: recordSchema, ID: strings.Repeat("b", 24), Kind: kindGit, Local: "/l", Remote: "/r", Exclude: []string{},
		Snap: oid, Tree: oid, Index: oid}
	for _, c := range []struct {
		base, index, kind string
		ok                bool
	}{
		{"", "", kindGit, true},
		{strings.Repeat("2", 40), "", kindGit, true},
		{"", strings.Repeat("3", 64), kindGit, true},
		{"HEAD", "", kindGit, false},
		{"", strings.Repeat("3", 39), kindGit, false},
		{strings.Repeat("2", 40), "", kindPlain, false},
	} {
		r := g
		r.BaseTree, r.BaseIndex, r.Kind = c.base, c.index, c.kind
		got, err := decodeRecord(r.encode())
		if !c.ok {
			if !errors.Is(err, ErrBadState) {
				t.Errorf("%+v: err %v, want ErrBadState", c, err)
			}
			continue
		}
		if err != nil || got.BaseTree != c.base || got.BaseIndex != c.index {
			t.Errorf("%+v: got %+v, %v", c, got, err)
		}
	}
	plain := record{Schema: recordSchema, ID: strings.Repeat("c", 24), Kind: kindPlain, Local: "/l", Remote: "/r", Exclude: []string{}}
	sum := strings.Repeat("a", 64)
	for _, c := range []struct {
		links []string
		kind  string
		ok    bool
	}{
		{[]string{formatLink("a", sum), formatLink("a/b", sum)}, kindPlain, true},
		{[]string{formatLink("\xff\xfe", sum)}, kindPlain, true}, // not UTF-8: hex keeps it
		{[]string{formatLink("a/b", sum), formatLink("a", sum)}, kindPlain, false},
		{[]string{formatLink("a", sum), formatLink("a", sum)}, kindPlain, false},
		{[]string{formatLink("../a", sum)}, kindPlain, false},
		{[]string{formatLink("a", strings.Repeat("A", 64))}, kindPlain, false},
		{[]string{sum + " 6"}, kindPlain, false},
		{[]string{sum + " 6A"}, kindPlain, false},
		{[]string{formatLink("a", sum)}, kindGit, false},
	} {
		r := plain
		r.Links, r.Kind = c.links, c.kind
		if c.kind == kindGit {
			r.Snap, r.Tree, r.Index = oid, oid, oid
		}
		got, err := decodeRecord(r.encode())
		if !c.ok {
			if !errors.Is(err, ErrBadState) {
				t.Errorf("links %q: err %v, want ErrBadState", c.links, err)
			}
			continue
		}
		if err != nil || !slices.Equal(got.Links, c.links) {
			t.Errorf("links %q: got %q, %v", c.links, got.Links, err)
		}
	}
	// A record without the keys (an earlier version's) still decodes.
	if !strings.Contains(string(g.encode()), `"index":"`+oid+`"}`) {
		t.Errorf("a record without a moved baseline has no base keys: %s", g.encode())
	}
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

// TestDecodeRecordMarked: a plain round's mark is optional (a round
// prepared by an earlier version has none) and belongs to plain rounds
// only; "marked": false is not canonical.
func TestDecodeRecordMarked(t *testing.T) {
	p := record{Schema: recordSchema, ID: strings.Repeat("a", 24), Kind: kindPlain, Local: "/l", Remote: "/r", Exclude: []string{}}
	old, err := decodeRecord(p.encode())
	if err != nil || old.Marked {
		t.Fatalf("a record without the mark: %+v, %v", old, err)
	}
	p.Marked = true
	if !bytes.HasSuffix(p.encode(), []byte(`,"marked":true}`)) {
		t.Fatalf("encoded %s", p.encode())
	}
	if got, err := decodeRecord(p.encode()); err != nil || !got.Marked {
		t.Fatalf("a marked plain round: %+v, %v", got, err)
	}
	oid := strings.Repeat("1", 40)
	g := record{Schema: recordSchema, ID: strings.Repeat("b", 24), Kind: kindGit, Local: "/l", Remote: "/r", Exclude: []string{},
		Snap: oid, Tree: oid, Index: oid, Marked: true}
	if _, err := decodeRecord(g.encode()); !errors.Is(err, ErrBadState) || !strings.Contains(err.Error(), "a git round marked as a plain one") {
		t.Fatalf("a marked git round: %v", err)
	}
	unmarked := bytes.Replace(p.encode(), []byte(`"marked":true`), []byte(`"marked":false`), 1)
	if _, err := decodeRecord(unmarked); !errors.Is(err, ErrBadState) {
		t.Fatalf(`"marked":false: %v`, err)
	}
}
