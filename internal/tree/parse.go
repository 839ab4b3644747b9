package tree

import (
	"bytes"
	"encoding/hex"
	"io/fs"
	"math"
	"strconv"
)

// parseCanonical is ParseManifest's fast path. It reads data only in the
// canonical shape, takes every string as written between its quotes, and
// returns ok only for a valid manifest whose canonical encoding is data byte
// for byte (so a string with an escape is never accepted here). The
// canonical encoding is injective, so that manifest is the one data encodes,
// whatever shortcuts the reading took. Anything else (ok false) goes to the
// strict decoder, which says what is wrong.
func parseCanonical(data []byte) (Manifest, bool) {
	r := canonicalReader{rest: data}
	r.lit(`{"entries":[`)
	// Each entry opens with `{"`, which no unescaped string holds, and takes
	// at least len(minEntry) bytes: hostile data cannot make the capacity more
	// than its own size's worth of entries.
	m := Manifest{Entries: make([]Entry, 0, min(bytes.Count(r.rest, []byte(`{"`)), len(data)/len(minEntry)))}
	for !r.bad && !r.try("]}") {
		if len(m.Entries) > 0 {
			r.lit(",")
		}
		e := r.entry()
		if r.bad || checkEntry(e) != nil || len(m.Entries) > 0 && m.Entries[len(m.Entries)-1].Path >= e.Path {
			return Manifest{}, false
		}
		m.Entries = append(m.Entries, e)
	}
	if r.bad || len(r.rest) != 0 || !encodes(m, data) {
		return Manifest{}, false
	}
	return m, true
}

// minEntry is the shortest canonical entry.
const minEntry = `{"path":"a","type":"dir","mode":0,"size":0,"sha256":""}`

// canonicalReader reads the canonical encoding from the front of rest. Its
// first failure sticks: every read after it fails too, and bad is set.
type canonicalReader struct {
	rest []byte
	bad  bool
}

// lit consumes s; rest must start with it.
func (r *canonicalReader) lit(s string) {
	if !r.try(s) {
		r.bad = true
	}
}

// try consumes s if rest starts with it, and reports whether it did.
func (r *canonicalReader) try(s string) bool {
	if r.bad || len(r.rest) < len(s) || string(r.rest[:len(s)]) != s {
		return false
	}
	r.rest = r.rest[len(s):]
	return true
}

// str consumes a string, quotes included, up to the next quote: an escaped
// quote ends it early, and an escape or a control byte stays as written;
// either way the result does not encode back to data, which encodes checks.
func (r *canonicalReader) str() string {
	r.lit(`"`)
	i := bytes.IndexByte(r.rest, '"')
	if r.bad || i < 0 {
		r.bad = true
		return ""
	}
	s := r.rest[:i]
	r.rest = r.rest[i+1:]
	switch string(s) { // no allocation for the types
	case string(File):
		return string(File)
	case string(Dir):
		return string(Dir)
	}
	return string(s)
}

// uint consumes a run of decimal digits no greater than max.
func (r *canonicalReader) uint(max uint64) uint64 {
	n := 0
	for n < len(r.rest) && r.rest[n] >= '0' && r.rest[n] <= '9' {
		n++
	}
	v, err := strconv.ParseUint(string(r.rest[:n]), 10, 64)
	if r.bad || err != nil || v > max {
		r.bad = true
		return 0
	}
	r.rest = r.rest[n:]
	return v
}

// entry consumes one entry object.
func (r *canonicalReader) entry() Entry {
	var e Entry
	switch {
	case r.try(`{"path":`):
		e.Path = r.str()
	case r.try(`{"path_hex":`):
		raw, err := hex.DecodeString(r.str())
		e.Path, r.bad = string(raw), r.bad || err != nil
	default:
		r.bad = true
	}
	r.lit(`,"type":`)
	e.Type = Type(r.str())
	r.lit(`,"mode":`)
	e.Mode = fs.FileMode(r.uint(math.MaxUint32))
	r.lit(`,"size":`)
	e.Size = int64(r.uint(math.MaxInt64))
	r.lit(`,"sha256":`)
	e.SHA256 = r.str()
	r.lit("}")
	return e
}

// encodes reports whether m's canonical encoding is data, encoding it in
// 32 KiB pieces rather than whole.
func encodes(m Manifest, data []byte) bool {
	off, same := 0, true
	m.encode(make([]byte, 0, 32<<10), func(b []byte) {
		same = same && len(data)-off >= len(b) && bytes.Equal(data[off:off+len(b)], b)
		off += len(b)
	})
	return same && off == len(data)
}

// FirstFile returns the path of the first regular file the manifest data
// lists (its entries are sorted by path), and false when it lists none or
// is no manifest. It reads data in the canonical shape only as far as that
// entry, checking the entries on the way; an entry it cannot take as
// written (a string with an escape, a hex path) has the whole manifest
// parsed instead. The rest of data is not checked: a path returned from a
// manifest that turns out invalid further on is still a valid path (see
// ValidPath), which is all a caller that only looks it up needs.
func FirstFile(data []byte) (string, bool) {
	r := canonicalReader{rest: data}
	r.lit(`{"entries":[`)
	prev := ""
	for i := 0; !r.bad && !r.try("]}"); i++ {
		if i > 0 {
			r.lit(",")
		}
		hex := bytes.HasPrefix(r.rest, []byte(`{"path_hex":`))
		e := r.entry()
		if r.bad || hex || bytes.IndexByte([]byte(e.Path), '\\') >= 0 || checkEntry(e) != nil || i > 0 && prev >= e.Path {
			break
		}
		if e.Type == File {
			return e.Path, true
		}
		prev = e.Path
	}
	if !r.bad && len(r.rest) == 0 {
		return "", false // every entry read, none a file
	}
	m, err := ParseManifest(data)
	if err != nil {
		return "", false
	}
	for _, e := range m.Entries {
		if e.Type == File {
			return e.Path, true
		}
	}
	return "", false
}
