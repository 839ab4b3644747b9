package tree

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
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
func (m Manifest) Canonical() []byte {
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
		// Entry holds only strings and integers: encoding cannot fail.
		panic(fmt.Sprintf("tree: encoding manifest: %v", err))
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// Digest returns "sha256:<64 hex>" over Canonical.
func (m Manifest) Digest() string {
	return digest.Of(m.Canonical())
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
		if len(e.SHA256) != 64 || strings.ToLower(e.SHA256) != e.SHA256 {
			return fmt.Errorf("%s: sha256 is not 64 lowercase hex digits", e.Path)
		}
		if _, err := hex.DecodeString(e.SHA256); err != nil {
			return fmt.Errorf("%s: sha256 is not 64 lowercase hex digits", e.Path)
		}
	default:
		return fmt.Errorf("%s: unknown type %q", e.Path, e.Type)
	}
	return nil
}
