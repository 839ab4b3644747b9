package skills

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/airlockdev/airlock/internal/atomicfile"
	"github.com/airlockdev/airlock/internal/digest"
	"github.com/airlockdev/airlock/internal/tree"
)

// racyWindow: a file changed this recently may change again without its
// times changing (timestamp granularity), so its metadata cannot stand for
// its content yet.
const racyWindow = 2 * time.Second

// indexSchema versions the index entry format and the selection
// fingerprint that names it.
const indexSchema = "airlock.skills.index.v3"

// selectionPrint fingerprints a whole selection from metadata.
type selectionPrint struct {
	sum    string // lowercase hex
	usable bool   // every source's metadata pins its content
	// passes holds what the pass saw of each source's tree, by Name: its
	// metadata, which a copy that follows is checked against, and its
	// listing (Seen), so that the copy lists and lstat's the tree only once.
	passes map[string]sourcePass
}

// sourcePass is what a fingerprint pass saw of one source's tree.
type sourcePass struct {
	md   tree.Metadata
	seen *tree.Seen // nil when the pass could not open the tree
}

// maxSeen bounds the entries the fingerprint pass keeps for the copies
// (tree.Seen, some 130 bytes each, so some 4 MiB) over the whole
// selection: each source may keep its share, and what a source's share
// does not hold its copy lists again.
var maxSeen = 1 << 15

// fingerprint hashes, for each source in Name order, its key, name and
// directory and the metadata of its tree (tree.Fingerprint), together with
// the options that change Materialize's result. Every value is one field
// of digest.Encode, so the fingerprint is injective over the raw bytes of
// every key, name and path.
//
// The sources are fingerprinted GOMAXPROCS at a time (each pass is all
// system calls, and a skill has few subdirectories to spread over the
// cores); the result does not depend on the schedule.
func fingerprint(ctx context.Context, sources []Source, o options, cutoff time.Time) selectionPrint {
	sorted := append([]Source(nil), sources...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	p := selectionPrint{usable: true, passes: make(map[string]sourcePass, len(sources))}
	l := o.limits.WithDefaults()
	fields := []string{
		strconv.Itoa(l.MaxFiles), strconv.FormatInt(l.MaxBytes, 10), strconv.FormatInt(l.MaxFileBytes, 10),
		strconv.Itoa(l.MaxDepth), strconv.Itoa(l.MaxPathLen), strconv.FormatBool(o.strict),
	}
	type pass struct {
		reason string
		sourcePass
	}
	passes := make([]pass, len(sorted))
	share := max(1, maxSeen/max(1, len(sorted)))
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	var wg sync.WaitGroup
	for i, s := range sorted {
		if passes[i].reason = dirReason(s.Dir); passes[i].reason != "" {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			passes[i].md, passes[i].seen = tree.FingerprintSeen(ctx, s.Dir, tree.Options{Limits: o.limits}, cutoff, share)
		})
	}
	wg.Wait()
	for i, s := range sorted {
		fields = append(fields, s.Key, s.Name, s.Dir)
		if r := passes[i].reason; r != "" {
			fields = append(fields, "unusable", r)
			continue
		}
		p.passes[s.Name] = passes[i].sourcePass
		p.usable = p.usable && passes[i].md.Usable
		fields = append(fields, "tree", string(passes[i].md.Sum[:]))
	}
	p.sum = digest.Fields(indexSchema, fields...)
	return p
}

// rawText is a string kept losslessly in the index: a JSON string when it
// is valid UTF-8, else {"hex":"<lowercase hex of its bytes>"}. Paths a
// skill holds (Skill.Skipped) and host paths in a drop reason need not be
// UTF-8, and encoding/json would replace such bytes with U+FFFD.
type rawText string

type hexText struct {
	Hex string `json:"hex"`
}

// MarshalJSON implements json.Marshaler: a JSON string when t is valid
// UTF-8, else {"hex":"…"}.
func (t rawText) MarshalJSON() ([]byte, error) {
	if utf8.ValidString(string(t)) {
		return json.Marshal(string(t))
	}
	return json.Marshal(hexText{Hex: hex.EncodeToString([]byte(t))})
}

// UnmarshalJSON implements json.Unmarshaler: it accepts either form
// MarshalJSON writes.
func (t *rawText) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*t = rawText(s)
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var h hexText
	if err := dec.Decode(&h); err != nil {
		return err
	}
	raw, err := hex.DecodeString(h.Hex)
	if err != nil {
		return err
	}
	if utf8.Valid(raw) {
		return errors.New("hex text is valid UTF-8")
	}
	*t = rawText(raw)
	return nil
}

type indexSkill struct {
	Key         string    `json:"key"`
	Name        string    `json:"name"`
	Description string    `json:"description"`
	Cut         *indexCut `json:"cut"`
	Digest      string    `json:"digest"`
	Files       int       `json:"files"`
	Bytes       int64     `json:"bytes"`
	Skipped     []rawText `json:"skipped"`
}

type indexCut struct {
	Original int    `json:"original"`
	Kept     int    `json:"kept"`
	At       string `json:"at"`
}

type indexDropped struct {
	Key    string  `json:"key"`
	Name   string  `json:"name"`
	Reason rawText `json:"reason"`
}

type indexEntry struct {
	Schema   string         `json:"schema"`
	Skills   []indexSkill   `json:"skills"`
	Dropped  []indexDropped `json:"dropped"`
	Identity string         `json:"identity"`
}

func toIndex(b *Bundle) indexEntry {
	e := indexEntry{Schema: indexSchema, Identity: b.Identity.Digest}
	for _, s := range b.Skills {
		is := indexSkill{Key: s.Key, Name: s.Name, Description: s.Description, Digest: s.Digest, Files: s.Files, Bytes: s.Bytes}
		if c := s.DescriptionCut; c != nil {
			is.Cut = &indexCut{Original: c.Original, Kept: c.Kept, At: c.At}
		}
		for _, p := range s.Skipped {
			is.Skipped = append(is.Skipped, rawText(p))
		}
		e.Skills = append(e.Skills, is)
	}
	for _, d := range b.Dropped {
		e.Dropped = append(e.Dropped, indexDropped{Key: d.Key, Name: d.Name, Reason: rawText(d.Reason)})
	}
	return e
}

func (e indexEntry) bundle(dir string) *Bundle {
	b := &Bundle{Dir: dir, Identity: Identity{Digest: e.Identity}}
	for _, is := range e.Skills {
		s := Skill{Key: is.Key, Name: is.Name, Description: is.Description, Digest: is.Digest, Files: is.Files, Bytes: is.Bytes}
		if c := is.Cut; c != nil {
			s.DescriptionCut = &Cut{Original: c.Original, Kept: c.Kept, At: c.At}
		}
		for _, p := range is.Skipped {
			s.Skipped = append(s.Skipped, string(p))
		}
		b.Skills = append(b.Skills, s)
	}
	for _, d := range e.Dropped {
		b.Dropped = append(b.Dropped, Dropped{Key: d.Key, Name: d.Name, Reason: string(d.Reason)})
	}
	return b
}

func indexPath(stateDir string, p selectionPrint) string {
	return filepath.Join(stateDir, ".index-"+p.sum[:32]+".json")
}

// lookupIndex returns the bundle an earlier call built from exactly this
// selection, when its metadata still pins its content and the bundle is
// still there. A selection of which no skill survived has no bundle
// directory: its entry alone is the answer.
func lookupIndex(stateDir string, p selectionPrint) (*Bundle, bool) {
	if !p.usable {
		return nil, false
	}
	data, err := os.ReadFile(indexPath(stateDir, p))
	if err != nil || len(data) > 16<<20 {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var e indexEntry
	if err := dec.Decode(&e); err != nil || e.Schema != indexSchema {
		return nil, false
	}
	b := e.bundle("")
	if identity(b.Skills) != b.Identity {
		return nil, false
	}
	if len(b.Skills) == 0 {
		return b, true
	}
	b.Dir = bundleDir(stateDir, b.Identity)
	if fi, err := os.Lstat(b.Dir); err != nil || !fi.IsDir() {
		return nil, false
	}
	return b, true
}

// storeIndex records b for the selection p. The index is a cache: a failure
// to write it only costs the next call a copy, so it is not reported.
func storeIndex(ctx context.Context, stateDir string, p selectionPrint, b *Bundle) {
	data, err := json.Marshal(toIndex(b))
	if err != nil {
		return
	}
	_ = atomicfile.WriteFile(ctx, indexPath(stateDir, p), data, 0o600)
}
