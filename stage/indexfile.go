package stage

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/airlockdev/airlock/internal/atomicfile"
	"github.com/airlockdev/airlock/internal/digest"
)

// indexSchema versions the record format of a persistent Index. It is part
// of every record and of every record's file name, so two versions sharing
// a directory never read each other's files.
const indexSchema = "airlock.stage.index.v1"

// maxIndexRecord bounds a record file read back; a larger one is discarded.
const maxIndexRecord = 16 << 20

// IndexOption configures OpenIndex.
type IndexOption func(*indexOptions)

type indexOptions struct {
	log *slog.Logger
}

// WithIndexLogger sends the index's log records to l: a record file that is
// discarded (corrupt, truncated, of another version or another source) and
// a record that could not be written or removed. Default: discarded.
func WithIndexLogger(l *slog.Logger) IndexOption {
	return func(o *indexOptions) {
		if l != nil {
			o.log = l
		}
	}
}

// OpenIndex returns an Index that keeps its records in dir, a host state
// directory, as well as in memory. dir must be an absolute path; it is
// created, with its missing parents, mode 0700 when missing. Records
// written by an earlier process, or by another one sharing dir now, serve
// lookups.
//
// Each Source (with its link policy and exclusions) has its own files in
// dir — its record and its files' stamps (see Index), about 100 bytes a
// file — named by a digest of the Source and of the format's version, and
// replaced atomically (write a temporary file, sync, rename): a reader
// sees a whole file or none, and when processes stage one Source at once
// the last writer wins. No file is shared by two Sources and nothing is
// locked across processes.
//
// A record or stamps file is decoded strictly: it must be exactly the
// canonical encoding of a record of this version for this Source (a stamps
// file also ends with its SHA-256). Any other file —
// corrupt, truncated, of another version, of another Source — is discarded
// (logged, see WithIndexLogger, and never trusted), and the next successful
// stage of that Source replaces it. A failure to write a record is logged,
// not returned: the index is a cache, and a missing record only costs a
// re-hash.
//
// Non-guarantees: dir belongs to the host and is trusted the way a git
// index is: whoever can write a record for the Source's current metadata
// and the sandbox's current manifest digest can make Stage keep that
// sandbox copy when the Source differs from it, and whoever can write a
// stamps file can make Stage take a changed file for the one the sandbox
// holds (it never makes Stage read or send anything else; WithVerify does
// not help, it checks the copy against its own manifest). Records of
// Sources that are never staged again are never removed.
func OpenIndex(dir string, opts ...IndexOption) (*Index, error) {
	o := indexOptions{log: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(&o)
	}
	if dir == "" || !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("stage: open index: %q is not an absolute host path; pass an absolute state directory such as $HOME/.cache/airlock/stage-index", dir)
	}
	dir = filepath.Clean(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("stage: open index: %w; pass a directory this process may create and write", err)
	}
	return &Index{dir: dir, log: o.log, m: make(map[string]indexRecord)}, nil
}

// path returns the file that holds key's record.
func (ix *Index) path(key string) string {
	return filepath.Join(ix.dir, "index-v1-"+digest.Fields(indexSchema, key)[:32]+".json")
}

// load reads key's record file. A missing file is a miss; any other
// failure is logged and a miss.
func (ix *Index) load(key string) (indexRecord, bool) {
	p := ix.path(key)
	data, err := readIndexFile(p, maxIndexRecord)
	if errors.Is(err, fs.ErrNotExist) {
		return indexRecord{}, false
	}
	if err == nil {
		var rec indexRecord
		if rec, err = decodeIndexRecord(data, key); err == nil {
			rec.saved = true
			return rec, true
		}
	}
	ix.log.Warn("stage: index record discarded; the next stage of its source replaces it", "path", p, "err", err)
	return indexRecord{}, false
}

// readIndexFile reads a record or stamps file: a regular file, not a
// link, at most limit bytes.
func readIndexFile(p string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%s is a symbolic link, not a record file", p)
		}
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (mode %v)", p, fi.Mode())
	}
	if fi.Size() > limit { // refused unread (it may still grow past limit while read: the LimitReader stays)
		return nil, fmt.Errorf("%s is larger than %d bytes", p, limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: p, Err: err}
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", p, limit)
	}
	return data, nil
}

// save writes key's record file and reports whether it succeeded.
func (ix *Index) save(key string, rec indexRecord) bool {
	p := ix.path(key)
	data, err := encodeIndexRecord(key, rec)
	if err == nil {
		err = atomicfile.WriteFile(context.Background(), p, data, 0o600)
	}
	if err != nil {
		ix.log.Warn("stage: index record not written; a later process will hash this source again", "path", p, "err", err)
		return false
	}
	return true
}

// remove deletes key's record file.
func (ix *Index) remove(key string) {
	p := ix.path(key)
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		ix.log.Warn("stage: stale index record not removed", "path", p, "err", err)
	}
}

// wireIndexRecord is the v1 record format. Raw byte strings (the key, the
// skipped paths, which need not be UTF-8) are lowercase hex.
type wireIndexRecord struct {
	Schema  string   `json:"schema"`
	Key     string   `json:"key"`
	Sum     string   `json:"sum"`
	Digest  string   `json:"digest"`
	Files   int      `json:"files"`
	Bytes   int64    `json:"bytes"`
	Skipped []string `json:"skipped"`
}

func encodeIndexRecord(key string, rec indexRecord) ([]byte, error) {
	w := wireIndexRecord{Schema: indexSchema, Key: hex.EncodeToString([]byte(key)), Sum: hex.EncodeToString(rec.sum[:]),
		Digest: rec.digest, Files: rec.files, Bytes: rec.bytes, Skipped: make([]string, 0, len(rec.skipped))}
	for _, s := range rec.skipped {
		w.Skipped = append(w.Skipped, hex.EncodeToString([]byte(s)))
	}
	return json.Marshal(w)
}

// decodeIndexRecord decodes a record file strictly: it must be exactly the
// bytes encodeIndexRecord writes for a record of key. Anything else (an
// unknown, missing, duplicate or wrongly cased field, other spacing or field
// order, trailing data, uppercase hex) is refused.
func decodeIndexRecord(data []byte, key string) (indexRecord, error) {
	var head struct {
		Schema *string `json:"schema"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return indexRecord{}, fmt.Errorf("not a JSON record (corrupt or truncated): %w", err)
	}
	if head.Schema == nil || *head.Schema != indexSchema {
		got := "none"
		if head.Schema != nil {
			got = fmt.Sprintf("%q", *head.Schema)
		}
		return indexRecord{}, fmt.Errorf("record schema %s, want %q", got, indexSchema)
	}
	var w wireIndexRecord
	if err := json.Unmarshal(data, &w); err != nil {
		return indexRecord{}, fmt.Errorf("malformed record: %w", err)
	}
	if canon, err := json.Marshal(w); err != nil || !bytes.Equal(canon, data) {
		return indexRecord{}, errors.New("record is not in canonical form (unknown, missing, duplicate or reordered field, or extra data)")
	}
	if k, ok := lowerHex(w.Key); !ok || string(k) != key {
		return indexRecord{}, errors.New("record belongs to another source")
	}
	rec := indexRecord{digest: w.Digest, files: w.Files, bytes: w.Bytes}
	sum, ok := lowerHex(w.Sum)
	if !ok || len(sum) != len(rec.sum) {
		return indexRecord{}, fmt.Errorf("bad fingerprint %q", w.Sum)
	}
	copy(rec.sum[:], sum)
	if d, ok := lowerHex(strings.TrimPrefix(w.Digest, digest.Prefix)); !ok || len(d) != 32 || !strings.HasPrefix(w.Digest, digest.Prefix) {
		return indexRecord{}, fmt.Errorf("bad manifest digest %q", w.Digest)
	}
	if w.Files < 0 || w.Bytes < 0 {
		return indexRecord{}, fmt.Errorf("negative count (files %d, bytes %d)", w.Files, w.Bytes)
	}
	for _, s := range w.Skipped {
		p, ok := lowerHex(s)
		if !ok || len(p) == 0 {
			return indexRecord{}, fmt.Errorf("bad skipped path %q", s)
		}
		rec.skipped = append(rec.skipped, string(p))
	}
	return rec, nil
}

// lowerHex decodes lowercase hex.
func lowerHex(s string) ([]byte, bool) {
	b, err := hex.DecodeString(s)
	return b, err == nil && hex.EncodeToString(b) == s
}
