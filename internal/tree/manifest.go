package tree

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/airlockdev/airlock/internal/digest"
)

// Type is the kind of a manifest entry.
type Type string

// Entry types.
const (
	Dir  Type = "dir"
	File Type = "file"
)

// Entry describes one directory or regular file of a tree.
type Entry struct {
	Path   string      // slash-separated, relative to the root; raw name bytes, not necessarily UTF-8
	Type   Type        // Dir or File
	Mode   fs.FileMode // permission bits only
	Size   int64       // files only; 0 for directories
	SHA256 string      // lowercase hex, files only; "" for directories
}

// Manifest lists a tree's entries sorted by Path (byte order).
type Manifest struct {
	Entries []Entry
}

// wireManifest and wireEntry are the JSON shape of a manifest. Exactly one
// of Path and PathHex is set: Path when the raw path is valid UTF-8,
// PathHex (lowercase hex of the raw bytes) otherwise, so that the encoding
// is lossless and two different trees never share a manifest.
type wireManifest struct {
	Entries []wireEntry `json:"entries"`
}

type wireEntry struct {
	Path    *string     `json:"path,omitempty"`
	PathHex *string     `json:"path_hex,omitempty"`
	Type    Type        `json:"type"`
	Mode    fs.FileMode `json:"mode"`
	Size    int64       `json:"size"`
	SHA256  string      `json:"sha256"`
}

// Canonical returns the manifest's canonical JSON encoding: one object with
// the key "entries", entries in Path order, keys in the fixed order
// path, type, mode, size, sha256, no insignificant white space.
//
// A path that is valid UTF-8 is written as "path" (a JSON string, as
// encoding/json escapes it with HTML escaping off). A path that is not
// valid UTF-8 is written as "path_hex", the lowercase hex of its raw bytes,
// in place of "path". The encoding is therefore injective: manifests that
// differ in any byte of any name have different canonical forms and
// different digests.
//
// The encoder is written out by hand (encoding/json through reflection
// cost a struct and a pointer per entry, and twice the memory while the
// buffer grew); a test holds it byte for byte to encoding/json.
func (m Manifest) Canonical() []byte {
	return m.encode(make([]byte, 0, m.canonicalLen()), nil)
}

// Digest returns "sha256:<64 hex>" over Canonical, streaming the encoding
// through the hash rather than holding it.
func (m Manifest) Digest() string {
	d, _ := streamDigest(m.encode, nil)
	return d
}

// streamDigest runs encode (Manifest.encode or Listing.encode) with a
// 32 KiB buffer, hashing every piece it flushes and writing it to w when w
// is not nil, and returns the digest of the encoding. The first error of w
// is returned, and w sees nothing after it.
func streamDigest(encode func(buf []byte, flush func([]byte)) []byte, w io.Writer) (string, error) {
	h := sha256.New()
	var err error
	encode(make([]byte, 0, 32<<10), func(b []byte) {
		h.Write(b)
		if w != nil && err == nil {
			_, err = w.Write(b)
		}
	})
	if err != nil {
		return "", err
	}
	return digest.Prefix + hex.EncodeToString(h.Sum(nil)), nil
}

// encode appends the canonical encoding to buf. With flush, every time the
// buffer holds 32 KiB or more (and at the end) it is handed to flush and
// emptied.
func (m Manifest) encode(buf []byte, flush func([]byte)) []byte {
	buf = append(buf, `{"entries":[`...)
	for i, e := range m.Entries {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendPath(buf, e.Path)
		buf = append(buf, `,"type":`...)
		buf = appendJSONString(buf, string(e.Type))
		buf = append(buf, `,"mode":`...)
		buf = strconv.AppendUint(buf, uint64(uint32(e.Mode)), 10)
		buf = append(buf, `,"size":`...)
		buf = strconv.AppendInt(buf, e.Size, 10)
		buf = append(buf, `,"sha256":`...)
		buf = appendJSONString(buf, e.SHA256)
		buf = append(buf, '}')
		buf = chunk(buf, flush, false)
	}
	return chunk(append(buf, "]}"...), flush, true)
}

// canonicalLen is the exact length of Canonical.
func (m Manifest) canonicalLen() int {
	n := len(`{"entries":[]}`)
	for i, e := range m.Entries {
		if i > 0 {
			n++
		}
		n += pathLen(e.Path)
		n += len(`,"type":`) + jsonStringLen(string(e.Type))
		n += len(`,"mode":`) + decimalLen(uint64(uint32(e.Mode)))
		n += len(`,"size":`) + decimalLen(uint64(e.Size))
		if e.Size < 0 {
			n = n - decimalLen(uint64(e.Size)) + 1 + decimalLen(uint64(-e.Size))
		}
		n += len(`,"sha256":`) + jsonStringLen(e.SHA256) + len(`}`)
	}
	return n
}

func decimalLen(v uint64) int {
	n := 1
	for ; v >= 10; v /= 10 {
		n++
	}
	return n
}

// appendJSONString appends s as encoding/json writes a string with HTML
// escaping off: quotes and backslashes escaped, control bytes as \b, \f,
// \n, \r, \t or \u00XX, invalid UTF-8 as \ufffd, U+2028 and U+2029
// escaped, everything else as is.
func appendJSONString(dst []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// jsonStringLen is len(appendJSONString(nil, s)).
func jsonStringLen(s string) int {
	n := 2
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			switch {
			case b >= 0x20 && b != '"' && b != '\\':
				n++
			case b == '\\', b == '"', b == '\b', b == '\f', b == '\n', b == '\r', b == '\t':
				n += 2
			default:
				n += 6
			}
			i++
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			n += 6
		case c == '\u2028' || c == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}

// Files counts the regular files.
func (m Manifest) Files() int {
	n := 0
	for _, e := range m.Entries {
		if e.Type == File {
			n++
		}
	}
	return n
}

// Bytes sums the sizes of the regular files.
func (m Manifest) Bytes() int64 {
	var n int64
	for _, e := range m.Entries {
		n += e.Size
	}
	return n
}

// ErrBadManifest is wrapped by every ParseManifest error.
var ErrBadManifest = errors.New("malformed manifest")

// ParseManifest decodes a manifest that may come from a hostile place (a
// sandbox). It accepts only the canonical encoding of a valid manifest:
// re-encoding the result yields data byte for byte, so unknown or duplicate
// keys, other key spellings, unsorted or duplicate paths, white space, an
// entry with both or neither of "path" and "path_hex", upper-case hex, and
// a "path_hex" whose bytes are valid UTF-8 (canonically a "path") are all
// rejected.
func ParseManifest(data []byte) (Manifest, error) {
	if m, ok := parseCanonical(data); ok {
		return m, nil
	}
	return decodeManifest(data)
}

// decodeManifest is ParseManifest through encoding/json: slower than
// parseCanonical, and it says what is wrong with data.
func decodeManifest(data []byte) (Manifest, error) {
	if !utf8.Valid(data) {
		return Manifest{}, fmt.Errorf("%w: invalid UTF-8", ErrBadManifest)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var w wireManifest
	if err := dec.Decode(&w); err != nil {
		return Manifest{}, fmt.Errorf("%w: %v", ErrBadManifest, err)
	}
	if w.Entries == nil {
		return Manifest{}, fmt.Errorf("%w: no entries list", ErrBadManifest)
	}
	m := Manifest{Entries: make([]Entry, len(w.Entries))}
	for i, we := range w.Entries {
		p, err := wirePath(we)
		if err != nil {
			return Manifest{}, fmt.Errorf("%w: entry %d: %v", ErrBadManifest, i, err)
		}
		e := Entry{Path: p, Type: we.Type, Mode: we.Mode, Size: we.Size, SHA256: we.SHA256}
		if err := checkEntry(e); err != nil {
			return Manifest{}, fmt.Errorf("%w: entry %d: %v", ErrBadManifest, i, err)
		}
		if i > 0 && m.Entries[i-1].Path >= e.Path {
			return Manifest{}, fmt.Errorf("%w: entry %d: path %q not after %q", ErrBadManifest, i, e.Path, m.Entries[i-1].Path)
		}
		m.Entries[i] = e
	}
	if !bytes.Equal(m.Canonical(), data) {
		return Manifest{}, fmt.Errorf("%w: not in canonical form", ErrBadManifest)
	}
	return m, nil
}

// wirePath returns the raw path of a decoded entry.
func wirePath(we wireEntry) (string, error) {
	switch {
	case we.Path != nil && we.PathHex != nil:
		return "", errors.New(`both "path" and "path_hex"`)
	case we.Path != nil:
		return *we.Path, nil
	case we.PathHex == nil:
		return "", errors.New(`no "path" or "path_hex"`)
	}
	h := *we.PathHex
	raw, err := hex.DecodeString(h)
	if err != nil || strings.ToLower(h) != h {
		return "", fmt.Errorf("path_hex %q is not lowercase hex", h)
	}
	if utf8.Valid(raw) {
		return "", fmt.Errorf("path_hex %q is valid UTF-8; it must be written as \"path\"", h)
	}
	return string(raw), nil
}

// ValidPath reports whether p is a clean, relative, slash-separated path that
// stays below its root: not empty, not ".", no ".." element, no NUL.
func ValidPath(p string) bool {
	return p != "" && p != "." && !strings.HasPrefix(p, "/") && path.Clean(p) == p &&
		p != ".." && !strings.HasPrefix(p, "../") && !strings.ContainsRune(p, 0)
}

func checkEntry(e Entry) error {
	if !ValidPath(e.Path) {
		return fmt.Errorf("invalid path %q", e.Path)
	}
	if e.Mode&^fs.ModePerm != 0 {
		return fmt.Errorf("%s: mode %o has more than permission bits", e.Path, uint32(e.Mode))
	}
	switch e.Type {
	case Dir:
		if e.Size != 0 || e.SHA256 != "" {
			return fmt.Errorf("%s: directory with size or hash", e.Path)
		}
	case File:
		if e.Size < 0 {
			return fmt.Errorf("%s: negative size", e.Path)
		}
		if len(e.SHA256) != 64 || strings.ContainsFunc(e.SHA256, func(r rune) bool { return (r < '0' || r > '9') && (r < 'a' || r > 'f') }) {
			return fmt.Errorf("%s: sha256 is not 64 lowercase hex digits", e.Path)
		}
	default:
		return fmt.Errorf("%s: unknown type %q", e.Path, e.Type)
	}
	return nil
}

// chunk hands buf to flush, when there is one, once it holds 32 KiB or
// when final, and returns it emptied; without flush buf grows whole.
func chunk(buf []byte, flush func([]byte), final bool) []byte {
	if flush == nil || (!final && len(buf) < 32<<10) {
		return buf
	}
	flush(buf)
	return buf[:0]
}

// fileEntry is how every regular file's entry of a canonical manifest
// goes on after its path: no JSON string holds it (its quotes would be
// escaped), so it marks exactly the regular files.
const fileEntry = `,"type":"file","mode":`

// ManifestFileSizes calls fn with the size of each regular file that the
// canonical manifest data lists, in order, from a scan of its bytes rather
// than a parse: a fraction of ParseManifest's cost, for an estimate. data
// may be anything (a sandbox's stored manifest): what is not in the
// canonical shape is not counted, a negative or overlong size counts as
// 0, and nothing is checked.
func ManifestFileSizes(data []byte, fn func(size int64)) {
	const sizeField = `,"size":`
	for {
		i := bytes.Index(data, []byte(fileEntry))
		if i < 0 {
			return
		}
		data = data[i+len(fileEntry):]
		j := 0
		for j < len(data) && data[j] >= '0' && data[j] <= '9' {
			j++
		}
		if j == 0 || !bytes.HasPrefix(data[j:], []byte(sizeField)) {
			continue
		}
		data = data[j+len(sizeField):]
		var size int64
		j = 0
		for ; j < len(data) && data[j] >= '0' && data[j] <= '9'; j++ {
			if d := int64(data[j] - '0'); size < 0 || size > (math.MaxInt64-d)/10 {
				size = -1 // overlong: counted as 0
			} else {
				size = size*10 + d
			}
		}
		if j > 0 {
			fn(max(size, 0))
		}
		data = data[j:]
	}
}
