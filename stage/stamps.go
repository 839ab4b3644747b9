package stage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/airlockdev/airlock/internal/atomicfile"
	"github.com/airlockdev/airlock/internal/digest"
	"github.com/airlockdev/airlock/internal/tree"
)

// fileStamps are the Stamps and SHA-256s of a Source's regular files as the
// walk of its last publish found them. The next Stage of that Source
// compares it with the sandbox's manifest without reading a file that
// shows the same Stamp and last changed before the recording began, less
// racyWindow (see known): only what changed since is read and hashed.
type fileStamps struct {
	before time.Time // only files that changed before this are trusted
	m      map[string]stampedFile
}

type stampedFile struct {
	sum [32]byte
	st  tree.Stamp
}

// known is tree.Options.Known: the recorded hash of rel when the file
// shows the recorded Stamp and changed before the recording began. A
// write after that moved its change time (the kernel sets it; only the
// clock's step is needed to be shorter than racyWindow), so the same
// Stamp means the same content.
func (f *fileStamps) known(rel string, st tree.Stamp) ([32]byte, bool) {
	e, ok := f.m[rel]
	if !ok || e.st != st || !st.ChangedBefore(f.before) {
		return [32]byte{}, false
	}
	return e.sum, true
}

// stampsOf collects the stamps of a finished walk's listing (taken with
// Options.Stamps); before is when the stage that walked began, less
// racyWindow. Files without a full Stamp are left out.
func stampsOf(l *tree.Listing, before time.Time) *fileStamps {
	f := &fileStamps{before: before, m: make(map[string]stampedFile, l.Files())}
	l.EachFile(func(path []byte, _ fs.FileMode, _ int64, sum [32]byte, st tree.Stamp) {
		if st.Valid() {
			f.m[string(path)] = stampedFile{sum: sum, st: st}
		}
	})
	return f
}

// stampsSchema versions the stamps file of a persistent Index.
const stampsSchema = "airlock.stage.stamps.v1\n"

// maxStampsFile bounds a stamps file written or read back (about 100 bytes
// a file): a larger Source is hashed on every Stage that changes it.
const maxStampsFile = 64 << 20

// stampsPath returns the file that holds key's stamps.
func (ix *Index) stampsPath(key string) string {
	return filepath.Join(ix.dir, "stamps-v1-"+digest.Fields(stampsSchema, key)[:32]+".bin")
}

// stamps returns the stamps recorded for key: an in-memory Index's own, a
// persistent one's from its file (not kept in memory: a large Source's
// stamps are megabytes). nil when there are none or the file is unusable
// (logged).
func (ix *Index) stamps(key string) *fileStamps {
	if ix.dir == "" {
		ix.mu.Lock()
		defer ix.mu.Unlock()
		return ix.st[key]
	}
	p := ix.stampsPath(key)
	unlock := ix.lockKey(key)
	data, err := readIndexFile(p, maxStampsFile)
	unlock()
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var f *fileStamps
	if err == nil {
		f, err = decodeStamps(data, key)
	}
	if err != nil {
		ix.log.Warn("stage: stamps file discarded; this stage hashes the source, and the next one that publishes it replaces the file", "path", p, "err", err)
		return nil
	}
	return f
}

// keepStamps records f as key's stamps (nil: forgets them).
func (ix *Index) keepStamps(key string, f *fileStamps) {
	if ix.dir == "" {
		ix.mu.Lock()
		defer ix.mu.Unlock()
		if ix.st == nil {
			ix.st = make(map[string]*fileStamps)
		}
		if f == nil {
			delete(ix.st, key)
		} else {
			ix.st[key] = f
		}
		return
	}
	p := ix.stampsPath(key)
	unlock := ix.lockKey(key)
	defer unlock()
	var err error
	if f != nil {
		data := encodeStamps(key, f)
		if len(data) > maxStampsFile {
			f, err = nil, fmt.Errorf("%d bytes, over the %d-byte bound", len(data), maxStampsFile)
		} else {
			err = atomicfile.WriteFile(context.Background(), p, data, 0o600)
		}
	}
	if f == nil {
		if rerr := os.Remove(p); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) && err == nil {
			err = rerr
		}
	}
	if err != nil {
		ix.log.Warn("stage: stamps file not written; the next stage of this source hashes it", "path", p, "err", err)
	}
}

// encodeStamps writes the stamps file: the schema line, the key, the
// time, the count, then each file in path order (path length, path,
// SHA-256, Stamp), and a SHA-256 of everything before it.
func encodeStamps(key string, f *fileStamps) []byte {
	paths := make([]string, 0, len(f.m))
	for p := range f.m {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	b := []byte(stampsSchema)
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	b = binary.BigEndian.AppendUint64(b, uint64(f.before.UnixNano()))
	b = binary.AppendUvarint(b, uint64(len(paths)))
	for _, p := range paths {
		e := f.m[p]
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
		b = append(b, e.sum[:]...)
		b, _ = e.st.AppendBinary(b) // never fails
	}
	sum := sha256.Sum256(b)
	return append(b, sum[:]...)
}

// decodeStamps decodes a stamps file strictly: exactly what encodeStamps
// writes for key, its checksum matching, paths clean, relative, sorted and
// unique. Anything else is an error.
func decodeStamps(data []byte, key string) (*fileStamps, error) {
	if len(data) < len(stampsSchema)+sha256.Size || !bytes.HasPrefix(data, []byte(stampsSchema)) {
		return nil, errors.New("not a stamps file of this version")
	}
	body, sum := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if s := sha256.Sum256(body); !bytes.Equal(s[:], sum) {
		return nil, errors.New("checksum mismatch (corrupt or truncated)")
	}
	r := body[len(stampsSchema):]
	bad := func(what string) (*fileStamps, error) { return nil, fmt.Errorf("malformed stamps file: %s", what) }
	field := func() ([]byte, bool) {
		n, k := binary.Uvarint(r)
		if k <= 0 || n > uint64(len(r)-k) {
			return nil, false
		}
		v := r[k : k+int(n)]
		r = r[k+int(n):]
		return v, true
	}
	k, ok := field()
	if !ok || string(k) != key {
		return nil, errors.New("stamps file belongs to another source")
	}
	if len(r) < 8 {
		return bad("no time")
	}
	f := &fileStamps{before: time.Unix(0, int64(binary.BigEndian.Uint64(r)))}
	r = r[8:]
	n, w := binary.Uvarint(r)
	if w <= 0 || n > uint64(len(r))/(1+32+tree.StampBytes) {
		return bad("bad count")
	}
	r = r[w:]
	f.m = make(map[string]stampedFile, n)
	prev := ""
	for i := uint64(0); i < n; i++ {
		p, ok := field()
		if !ok || len(p) == 0 || len(r) < 32+tree.StampBytes {
			return bad("truncated entry")
		}
		ps := string(p)
		if i > 0 && ps <= prev {
			return bad(fmt.Sprintf("path %q out of order", ps))
		}
		var e stampedFile
		copy(e.sum[:], r)
		if err := e.st.UnmarshalBinary(r[32 : 32+tree.StampBytes]); err != nil || !e.st.Valid() {
			return bad(fmt.Sprintf("stamp of %q", ps))
		}
		r = r[32+tree.StampBytes:]
		f.m[ps], prev = e, ps
	}
	if len(r) != 0 {
		return bad("trailing data")
	}
	return f, nil
}
