package skills

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/airlockdev/airlock/internal/tree"

	"github.com/airlockdev/airlock/internal/atomicfile"
	"github.com/spf13/afero"
)

// racyWindow: a file changed this recently may change again without its
// times changing (timestamp granularity), so its metadata cannot stand for
// its content yet.
const racyWindow = 2 * time.Second

// indexSchema versions the index entry format.
const indexSchema = "airlock.skills.index.v1"

// selectionPrint fingerprints a whole selection from metadata.
type selectionPrint struct {
	sum    [32]byte
	usable bool // every source's metadata pins its content
}

// fingerprint hashes, for each source in Name order, its key, name and
// directory and the metadata of its tree (tree.Fingerprint), together with
// the options that change Materialize's result.
func fingerprint(ctx context.Context, sources []Source, o options, cutoff time.Time) selectionPrint {
	sorted := append([]Source(nil), sources...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	h := sha256.New()
	p := selectionPrint{usable: true}
	field := func(s string) {
		h.Write(binary.AppendUvarint(nil, uint64(len(s))))
		h.Write([]byte(s))
	}
	field(indexSchema)
	l := o.limits.WithDefaults()
	h.Write(binary.AppendVarint(nil, int64(l.MaxFiles)))
	h.Write(binary.AppendVarint(nil, l.MaxBytes))
	h.Write(binary.AppendVarint(nil, l.MaxFileBytes))
	h.Write(binary.AppendVarint(nil, int64(l.MaxDepth)))
	h.Write(binary.AppendVarint(nil, int64(l.MaxPathLen)))
	if o.strict {
		field("strict")
	}
	for _, s := range sorted {
		field(s.Key)
		field(s.Name)
		field(s.Dir)
		if reason := dirReason(s.Dir); reason != "" {
			field(reason)
			continue
		}
		md := tree.Fingerprint(ctx, s.Dir, tree.Options{Limits: o.limits}, cutoff)
		p.usable = p.usable && md.Usable
		h.Write(md.Sum[:])
	}
	h.Sum(p.sum[:0])
	return p
}

type indexEntry struct {
	Schema   string    `json:"schema"`
	Skills   []Skill   `json:"skills"`
	Dropped  []Dropped `json:"dropped"`
	Identity Identity  `json:"identity"`
}

func indexPath(stateDir string, p selectionPrint) string {
	return filepath.Join(stateDir, ".index-"+hex.EncodeToString(p.sum[:16])+".json")
}

// lookupIndex returns the bundle an earlier call built from exactly this
// selection, when its metadata still pins its content and the bundle is
// still there.
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
	if err := dec.Decode(&e); err != nil || e.Schema != indexSchema || len(e.Skills) == 0 || identity(e.Skills) != e.Identity {
		return nil, false
	}
	dir := filepath.Join(stateDir, strings.TrimPrefix(e.Identity.Digest, "sha256:")[:32])
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		return nil, false
	}
	return &Bundle{Dir: dir, Skills: e.Skills, Dropped: e.Dropped, Identity: e.Identity}, true
}

// storeIndex records b for the selection p. The index is a cache: a failure
// to write it only costs the next call a copy.
func storeIndex(stateDir string, p selectionPrint, b *Bundle) {
	data, err := json.Marshal(indexEntry{Schema: indexSchema, Skills: b.Skills, Dropped: b.Dropped, Identity: b.Identity})
	if err != nil {
		return
	}
	// The index is a cache: a failed write only costs the next call a copy.
	_ = atomicfile.Write(context.Background(), afero.NewOsFs(), indexPath(stateDir, p), data, 0o600, "")
}
