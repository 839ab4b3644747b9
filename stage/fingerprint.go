package stage

import (
	"context"
	"encoding/binary"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/airlockdev/airlock/internal/keylock"
	"github.com/airlockdev/airlock/internal/tree"
)

// racyWindow: an entry whose modification or change time is this close to
// the start of the metadata pass may still change without its times
// changing (timestamp granularity), so its fingerprint is not trusted.
const racyWindow = 2 * time.Second

// Index remembers, per Source (with its link policy and exclusions), the
// metadata fingerprint and manifest digest of its last successful stage, so
// that Stage can skip hashing an unchanged Source (see WithIndex). It holds
// no file content and is safe for concurrent use. One Index can serve any
// number of targets: Stage still compares the remembered digest with the
// manifest stored in the sandbox, so a stale or wrong record can only cost
// a re-hash, never reuse a copy that differs from the Source.
//
// An Index from NewIndex lives in memory and dies with the process. One from
// OpenIndex also keeps its records in a host directory, so that a new
// process re-stages an unchanged Source for the cost of its metadata pass
// and one round trip to the sandbox.
//
// Once a publish has read the Source, an Index also keeps the stamps of
// its regular files — identity, size, modification and change time — with
// their SHA-256s (also when the publish then fails: they describe the
// host's files, not the sandbox's copy). The next Stage of a changed
// Source compares it with the sandbox's copy reading only the files whose
// stamps moved: a file that
// shows the same stamp, and last changed more than racyWindow before the
// stage that recorded it began, has the recorded content (a write moves
// the change time, which only the kernel sets). Non-guarantee: a file
// system whose clock steps are longer than that window, or a change time
// reset by a privileged process, can make a changed file pass as
// unchanged, and so can a write through a shared writable memory mapping
// to a page still dirty from an earlier write (Linux moves the times at
// the first write fault after writeback only; git's index has the same
// blind spot); the metadata fingerprint has the same limits. WithVerify
// does not help (it checks the sandbox copy against its own manifest).
// Stage without an Index hashes every file.
type Index struct {
	dir   string       // "" for an in-memory index
	log   *slog.Logger // never nil for an OpenIndex one
	locks keylock.Map  // orders this process's reads and writes of one key's file

	mu sync.Mutex
	m  map[string]indexRecord
	st map[string]*fileStamps // an in-memory Index's stamps (see fileStamps)
}

// NewIndex returns an empty in-memory Index.
func NewIndex() *Index { return &Index{m: make(map[string]indexRecord)} }

type indexRecord struct {
	sum     [32]byte
	digest  string
	files   int
	bytes   int64
	skipped []string
	saved   bool // the index directory's file holds this record (read from it or written to it)
}

// same reports whether r and o describe the same stage.
func (r indexRecord) same(o indexRecord) bool {
	return r.sum == o.sum && r.digest == o.digest && r.files == o.files && r.bytes == o.bytes && slices.Equal(r.skipped, o.skipped)
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

// lookup returns the record of key when its fingerprint is m's (hit). A
// record in memory is trusted first; without one that matches, a
// persistent index reads the key's file. held reports whether a record of
// key was found at all, whatever its fingerprint (only for a usable m:
// an unusable one looks nothing up).
func (ix *Index) lookup(key string, m tree.Metadata) (rec indexRecord, hit, held bool) {
	if !m.Usable {
		return indexRecord{}, false, false
	}
	rec, ok := ix.get(key)
	if (!ok || rec.sum != m.Sum) && ix.dir != "" {
		unlock := ix.lockKey(key)
		rec, ok = ix.load(key)
		if ok {
			ix.put(key, rec)
		}
		unlock()
	}
	if !ok {
		return indexRecord{}, false, false
	}
	if rec.sum != m.Sum {
		return indexRecord{}, false, true
	}
	rec.skipped = slices.Clone(rec.skipped)
	return rec, true, true
}

// store remembers sa as the stage of key under fingerprint m; an unusable
// fingerprint forgets key instead. A persistent index writes the key's file
// (atomically; the last writer wins) unless it already holds this record.
// A write that fails is logged: it only costs a later process a re-hash.
func (ix *Index) store(key string, m tree.Metadata, sa StagedAsset) {
	rec := indexRecord{sum: m.Sum, digest: sa.Digest, files: sa.Files, bytes: sa.Bytes, skipped: slices.Clone(sa.Skipped)}
	if ix.dir == "" {
		if m.Usable {
			ix.put(key, rec)
		} else {
			ix.forget(key)
		}
		return
	}
	unlock := ix.lockKey(key)
	defer unlock()
	if !m.Usable {
		ix.forget(key)
		ix.remove(key)
		return
	}
	if old, ok := ix.get(key); ok && old.saved && old.same(rec) {
		return
	}
	rec.saved = ix.save(key, rec)
	ix.put(key, rec)
}

func (ix *Index) get(key string) (indexRecord, bool) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	rec, ok := ix.m[key]
	return rec, ok
}

func (ix *Index) put(key string, rec indexRecord) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.m == nil {
		ix.m = make(map[string]indexRecord)
	}
	ix.m[key] = rec
}

func (ix *Index) forget(key string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	delete(ix.m, key)
}

// lockKey serializes this process's file operations on key. The wait
// cannot be cancelled: each holder does one small read or write.
func (ix *Index) lockKey(key string) func() {
	unlock, err := ix.locks.Lock(context.Background(), key)
	if err != nil { // only a cancelled context fails, and Background is never cancelled
		return func() {}
	}
	return unlock
}
