package stage

import (
	"encoding/binary"
	"slices"
	"sync"
	"time"

	"github.com/airlockdev/airlock/internal/tree"
)

// racyWindow: an entry whose modification or change time is this close to
// the start of the metadata pass may still change without its times
// changing (timestamp granularity), so its fingerprint is not trusted.
const racyWindow = 2 * time.Second

// Index remembers, per Source (with its link policy and exclusions), the
// metadata fingerprint and manifest of its last successful stage, so that
// Stage can skip hashing an unchanged Source (see WithIndex). It lives in
// memory, holds no file content, and is safe for concurrent use. One Index
// can serve any number of targets: Stage still compares the remembered
// digest with the manifest stored in the sandbox.
type Index struct {
	mu sync.Mutex
	m  map[string]indexRecord
}

// NewIndex returns an empty Index.
func NewIndex() *Index { return &Index{m: make(map[string]indexRecord)} }

type indexRecord struct {
	sum     [32]byte
	digest  string
	files   int
	bytes   int64
	skipped []string
}

func indexKey(a Asset) string {
	b := binary.AppendUvarint(nil, uint64(len(a.Source)))
	b = append(b, a.Source...)
	b = binary.AppendUvarint(b, uint64(a.Links))
	for _, p := range a.Exclude {
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
	}
	return string(b)
}

func (ix *Index) lookup(key string, m tree.Metadata) (indexRecord, bool) {
	if !m.Usable {
		return indexRecord{}, false
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	rec, ok := ix.m[key]
	if !ok || rec.sum != m.Sum {
		return indexRecord{}, false
	}
	rec.skipped = slices.Clone(rec.skipped)
	return rec, true
}

func (ix *Index) store(key string, m tree.Metadata, sa StagedAsset) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.m == nil {
		ix.m = make(map[string]indexRecord)
	}
	if !m.Usable {
		delete(ix.m, key)
		return
	}
	ix.m[key] = indexRecord{sum: m.Sum, digest: sa.Digest, files: sa.Files, bytes: sa.Bytes, skipped: slices.Clone(sa.Skipped)}
}
