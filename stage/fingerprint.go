package stage

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"io/fs"
	"slices"
	"sync"
	"time"

	"github.com/airlockdev/airlock/internal/tree"
)

// racyWindow: an entry whose modification or change time is this close to
// the start of the metadata pass may still change without its times
// changing (timestamp granularity), so its fingerprint is not trusted.
const racyWindow = 2 * time.Second

// meta is the result of a metadata-only pass over a Source: no file content
// is read and no link is followed.
type meta struct {
	sum    [32]byte
	usable bool // the sum identifies the content (see fingerprint)
	files  int
	bytes  int64
}

// fingerprint hashes the metadata of every entry Walk would visit under src
// with opts: path, type and permission bits, size, device and inode numbers,
// modification and change times. It also counts files and bytes for
// progress totals. The sum is usable only when it pins the content: no
// entry changed at or after cutoff (racyWindow before now), no link is followed (links are
// fingerprinted as links under SkipLinks; any link makes the sum unusable
// under the other policies), the platform reports inode numbers and change
// times, and the tree is within the walker's default limits.
func fingerprint(ctx context.Context, src string, opts tree.Options, cutoff time.Time) meta {
	top, st, err := openFPRoot(src)
	if err != nil {
		return meta{}
	}
	defer top.close()
	w := &fpWalker{ctx: ctx, opts: opts, lim: opts.Limits.WithDefaults(), cutoff: cutoff.UnixNano(), usable: true}
	w.h = sha256.New()
	w.add("", st)
	w.dir(top, "", 0)
	m := meta{usable: w.usable, files: w.files, bytes: w.bytes}
	w.h.Sum(m.sum[:0])
	return m
}

// fpStat is what the metadata pass records about one entry.
type fpStat struct {
	mode         fs.FileMode // type and permission bits
	raw          uint32      // the platform's mode word, when known
	size         int64
	mtime, ctime int64 // nanoseconds since the epoch
	ino, dev     uint64
	full         bool // ino, dev and ctime are known
}

// fpDir is an open directory of the metadata pass. Every method takes one
// name and never follows a link.
type fpDir interface {
	names() ([]string, error)
	lstat(name string) (fpStat, error)
	open(name string) (fpDir, error)
	close()
}

type fpWalker struct {
	ctx    context.Context
	opts   tree.Options
	lim    tree.Limits
	cutoff int64
	h      hash.Hash
	buf    []byte
	usable bool
	files  int
	bytes  int64
}

func (w *fpWalker) add(rel string, st fpStat) {
	if !st.full {
		w.usable = false
	}
	isDir := st.mode.IsDir()
	if !isDir && (st.mtime >= w.cutoff || st.ctime >= w.cutoff) {
		w.usable = false
	}
	b := w.buf[:0]
	b = binary.AppendUvarint(b, uint64(len(rel)))
	b = append(b, rel...)
	b = binary.LittleEndian.AppendUint32(b, uint32(st.mode))
	b = binary.LittleEndian.AppendUint32(b, st.raw)
	b = binary.LittleEndian.AppendUint64(b, st.ino)
	b = binary.LittleEndian.AppendUint64(b, st.dev)
	if !isDir {
		b = binary.LittleEndian.AppendUint64(b, uint64(st.size))
		b = binary.LittleEndian.AppendUint64(b, uint64(st.mtime))
		b = binary.LittleEndian.AppendUint64(b, uint64(st.ctime))
	}
	w.buf = b
	w.h.Write(b)
}

func (w *fpWalker) dir(d fpDir, prefix string, depth int) {
	if depth >= w.lim.MaxDepth || w.ctx.Err() != nil {
		w.usable = false
		return
	}
	names, err := d.names()
	if err != nil {
		w.usable = false
		return
	}
	slices.Sort(names)
	for _, name := range names {
		rel := name
		if prefix != "" {
			rel = prefix + "/" + name
		}
		st, err := d.lstat(name)
		if err != nil {
			w.usable = false
			continue
		}
		if w.opts.Exclude != nil && w.opts.Exclude(rel, st.mode.IsDir()) {
			continue
		}
		w.add(rel, st)
		switch {
		case st.mode.IsDir():
			sub, err := d.open(name)
			if err != nil {
				w.usable = false
				continue
			}
			w.dir(sub, rel, depth+1)
			sub.close()
		case st.mode.IsRegular():
			w.files++
			w.bytes += st.size
			if w.files > w.lim.MaxFiles {
				w.usable = false
				return
			}
		case st.mode&fs.ModeSymlink != 0:
			if w.opts.Links != tree.SkipLinks {
				w.usable = false
			}
		}
	}
}

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

func (ix *Index) lookup(key string, m meta) (indexRecord, bool) {
	if !m.usable {
		return indexRecord{}, false
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	rec, ok := ix.m[key]
	if !ok || rec.sum != m.sum {
		return indexRecord{}, false
	}
	rec.skipped = slices.Clone(rec.skipped)
	return rec, true
}

func (ix *Index) store(key string, m meta, sa StagedAsset) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.m == nil {
		ix.m = make(map[string]indexRecord)
	}
	if !m.usable {
		delete(ix.m, key)
		return
	}
	ix.m[key] = indexRecord{sum: m.sum, digest: sa.Digest, files: sa.Files, bytes: sa.Bytes, skipped: slices.Clone(sa.Skipped)}
}
