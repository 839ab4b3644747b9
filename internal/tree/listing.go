package tree

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"math/bits"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Listing is what a walk recorded of a tree, kept compact: one record per
// entry — its mode, its path front-coded against the previous entry's, its
// size and (for a file) its hash as 32 bytes — packed back to back in
// blocks of up to 64 KiB. It gives the manifest in every form a caller
// needs — Manifest (entries), Canonical (bytes), WriteCanonical (streamed,
// with its digest) and Digest — without holding more than one of them at
// a time: a file costs about 40 bytes plus the part of its path it does
// not share with the previous entry's, not several copies of its
// manifest.
//
// Where the platform allows, the full-size blocks are mapped outside the
// Go heap (and unmapped once the Listing is unreachable), so that a large
// Listing does not also raise the garbage collector's heap goal, which
// would let the walk's short-lived garbage take as much again.
//
// A Listing is read-only once its walk returned; its methods may be called
// from several goroutines at once.
type Listing struct {
	mem    *chunkSet
	n      int      // records
	pos    []uint32 // record positions by record number; see index
	order  []uint32 // record numbers in path order; nil when walk order is path order
	once   sync.Once
	files  int
	bytes  int64
	unread int
	stamps *stampList // with Options.Stamps
	// The writer's state: the last path added, and where the current
	// run of front-coded records began.
	last    []byte
	restart int  // records since the last restart record in this block
	runAt   int  // offset of that restart record in the block
	mapped  bool // a cleanup frees the blocks
}

// A record at position p (chunk p>>16, offset p&0xffff) is: its mode
// (permission bits and flags, uint16), the distance back to its restart
// record (uint16), its path front-coded against the previous record's
// (the length of the prefix they share and the length of the rest, both
// uvarints, then the rest) and, for a file, its size (uvarint) and SHA-256
// (32 bytes); the fixed-size numbers little-endian. Every block starts
// with a restart record (a whole path, distance 0) and so does every
// restartEvery-th record after it, so a record's path is decoded in at
// most that many steps.
const restartEvery = 16
const (
	recDir    = 1 << (9 + iota) // a directory
	recUnread                   // a regular file the walk did not read (Options.SkipContent)
)

// rec is a decoded record; sum points into the Listing's blocks, path
// into the decoder's buffer (valid until the next decode into it).
type rec struct {
	mode uint16
	path []byte
	size int64
	sum  []byte // 32 bytes; nil for a directory
}

func (r rec) perm() uint16         { return r.mode & 0o777 }
func (r rec) is(flags uint16) bool { return r.mode&flags != 0 }

// Bounds of a Listing: a path of at most maxListedPath bytes (so that a
// record fits a block), at most maxChunks blocks of chunkBytes (4 GiB).
const (
	maxListedPath = 32 << 10
	maxChunks     = 1 << 16
	chunkBytes    = 64 << 10
)

func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

// chunkSet is a Listing's blocks. It is its own object so that the cleanup
// that unmaps them can hold it without holding the Listing.
type chunkSet struct{ c [][]byte }

func newListing() *Listing { return &Listing{mem: &chunkSet{}} }

// next decodes the record at offset off of block k, whose path is
// front-coded against buf (the previous record's path), and returns it
// with buf holding its path, and the offset after it.
func (c *chunkSet) next(k int, off int, buf []byte) (rec, []byte, int) {
	b := c.c[k][off:]
	r := rec{mode: binary.LittleEndian.Uint16(b)}
	i := 4
	shared, n := binary.Uvarint(b[i:])
	i += n
	rest, n := binary.Uvarint(b[i:])
	i += n
	buf = append(buf[:shared], b[i:i+int(rest)]...)
	i += int(rest)
	r.path = buf
	if r.mode&recDir == 0 {
		size, n := binary.Uvarint(b[i:])
		r.size = int64(size)
		i += n
		r.sum = b[i : i+32 : i+32]
		i += 32
	}
	return r, buf, off + i
}

// at decodes the record at position p, decoding its path from its
// restart record on into buf.
func (c *chunkSet) at(p uint32, buf []byte) (rec, []byte) {
	k, off := int(p>>16), int(p&0xffff)
	from := off - int(binary.LittleEndian.Uint16(c.c[k][off+2:]))
	buf = buf[:0]
	for {
		r, nbuf, next := c.next(k, from, buf)
		buf = nbuf
		if from == off {
			return r, buf
		}
		from = next
	}
}

// add records an entry in walk order; for a file that will be read it
// returns where its hash goes and, with Options.Stamps, its Stamp. false:
// the path is too long to list, or the listing is full.
func (l *Listing) add(p string, size int64, perm fs.FileMode, flags uint16) (*[32]byte, *Stamp, bool) {
	if len(p) > maxListedPath {
		return nil, nil, false
	}
	need := 4 + 2*binary.MaxVarintLen32 + len(p)
	if flags&recDir == 0 {
		need += uvarintLen(uint64(size)) + 32
	}
	c := l.mem
	k := len(c.c) - 1
	if k < 0 || cap(c.c[k])-len(c.c[k]) < need {
		if k+1 >= maxChunks {
			return nil, nil, false
		}
		size := 4 << 10
		if k >= 0 {
			size = min(2*cap(c.c[k]), chunkBytes)
		}
		if size == chunkBytes && !l.mapped {
			// The first block that may live outside the heap: a small
			// walk's Listing never needs (nor pays for) the cleanup.
			l.mapped = true
			runtime.AddCleanup(l, func(c *chunkSet) { c.free() }, l.mem)
		}
		c.c = append(c.c, allocChunk(size))
		k++
		l.restart = 0 // a block starts with a whole path
	}
	b := c.c[k]
	off := len(b)
	shared := 0
	if l.restart == 0 || l.restart == restartEvery {
		l.restart, l.runAt = 0, off
	} else {
		for shared < len(p) && shared < len(l.last) && p[shared] == l.last[shared] {
			shared++
		}
	}
	l.restart++
	b = binary.LittleEndian.AppendUint16(b, uint16(perm.Perm())|flags)
	b = binary.LittleEndian.AppendUint16(b, uint16(off-l.runAt))
	b = binary.AppendUvarint(b, uint64(shared))
	b = binary.AppendUvarint(b, uint64(len(p)-shared))
	b = append(b, p[shared:]...)
	l.last = append(l.last[:0], p...)
	var sum *[32]byte
	if flags&recDir == 0 {
		b = binary.AppendUvarint(b, uint64(size))
		b = append(b, make([]byte, 32)...)
		sum = (*[32]byte)(b[len(b)-32:])
		l.files++
		l.bytes += size
		if flags&recUnread != 0 {
			l.unread++
		}
	}
	c.c[k] = b
	l.n++
	var st *Stamp
	if l.stamps != nil {
		st = l.stamps.add(Stamp{})
	}
	return sum, st, true
}

// eachWalk calls fn for every record in walk order, with its number and
// position. r.path is valid during the call only.
func (l *Listing) eachWalk(fn func(seq int, p uint32, r rec)) {
	seq := 0
	var buf []byte
	for k, b := range l.mem.c {
		buf = buf[:0]
		for off := 0; off < len(b); {
			r, nbuf, next := l.mem.next(k, off, buf)
			buf = nbuf
			fn(seq, uint32(k)<<16|uint32(off), r)
			seq++
			off = next
		}
	}
}

// blocks holds records of a fixed type in blocks that never move, so a
// worker can fill one in while the walker appends more. Block k holds
// min(64<<k, maxBlock) records, so record i is found by arithmetic.
type blocks[T any] struct {
	blocks [][]T
	n      int
}

const (
	firstBlock = 64
	maxBlock   = 8192
	// growBlocks blocks double from firstBlock to maxBlock; they hold
	// grownRecs records.
	growBlocks = 8
	grownRecs  = firstBlock * (1<<growBlocks - 1)
)

func (l *blocks[T]) add(r T) *T {
	if k := len(l.blocks); k == 0 || len(l.blocks[k-1]) == cap(l.blocks[k-1]) {
		l.blocks = append(l.blocks, make([]T, 0, min(firstBlock<<k, maxBlock)))
	}
	b := &l.blocks[len(l.blocks)-1]
	*b = append(*b, r)
	l.n++
	return &(*b)[len(*b)-1]
}

// at returns record i.
func (l *blocks[T]) at(i int) *T {
	if i < grownRecs {
		k := bits.Len(uint(i/firstBlock+1)) - 1
		return &l.blocks[k][i-firstBlock*(1<<k-1)]
	}
	i -= grownRecs
	return &l.blocks[growBlocks+i/maxBlock][i%maxBlock]
}

// Stamp is what a walk saw of a regular file it read: identity, size,
// modification and change time, taken when the read began and found again
// when it ended. A later walk that finds the same Stamp on a path has the
// same evidence that the file is unchanged as a walk has that a file did
// not change while it was read (see Item.UseKnown, CopyHooks.Known).
type Stamp struct {
	dev, ino           uint64
	size, mtime, ctime int64
	ok                 bool // the platform reported identity and change time
}

// StampBytes is the length of a Stamp's binary form.
const StampBytes = 41

// AppendBinary appends s's binary form (StampBytes bytes) to b.
func (s Stamp) AppendBinary(b []byte) ([]byte, error) {
	b = binary.BigEndian.AppendUint64(b, s.dev)
	b = binary.BigEndian.AppendUint64(b, s.ino)
	b = binary.BigEndian.AppendUint64(b, uint64(s.size))
	b = binary.BigEndian.AppendUint64(b, uint64(s.mtime))
	b = binary.BigEndian.AppendUint64(b, uint64(s.ctime))
	if s.ok {
		return append(b, 1), nil
	}
	return append(b, 0), nil
}

// UnmarshalBinary decodes the binary form AppendBinary writes; anything
// else is an error.
func (s *Stamp) UnmarshalBinary(b []byte) error {
	if len(b) != StampBytes || b[40] > 1 {
		return errors.New("tree: malformed stamp")
	}
	*s = Stamp{dev: binary.BigEndian.Uint64(b), ino: binary.BigEndian.Uint64(b[8:]), size: int64(binary.BigEndian.Uint64(b[16:])),
		mtime: int64(binary.BigEndian.Uint64(b[24:])), ctime: int64(binary.BigEndian.Uint64(b[32:])), ok: b[40] == 1}
	return nil
}

// Valid reports whether s holds an identity and change time (a platform
// that reports them, a file that was read).
func (s Stamp) Valid() bool { return s.ok }

// ChangedBefore reports whether s is valid and both its modification and
// change time are before t: a write to the file after t would show in a
// Stamp taken then, even on a file system whose clock moves in coarse
// steps, as long as the step is shorter than the time between the two.
func (s Stamp) ChangedBefore(t time.Time) bool {
	n := t.UnixNano()
	return s.ok && s.mtime < n && s.ctime < n
}

func stampOf(st stat) Stamp {
	if !st.full {
		return Stamp{}
	}
	return Stamp{dev: st.dev, ino: st.ino, size: st.size, mtime: st.mtime.UnixNano(), ctime: st.ctime, ok: true}
}

// matches reports whether st, an lstat or fstat taken now, shows the file
// s was taken of, unchanged.
func (s Stamp) matches(st stat) bool {
	return s.ok && st.full && st.mode.IsRegular() && st.dev == s.dev && st.ino == s.ino &&
		st.size == s.size && st.mtime.Equal(time.Unix(0, s.mtime)) && st.ctime == s.ctime
}

// stampList holds one Stamp per record, in lockstep with recList.
type stampList = blocks[Stamp]

// Len is the number of entries.
func (l *Listing) Len() int { return l.n }

// Files counts the regular files.
func (l *Listing) Files() int { return l.files }

// Bytes sums the sizes of the regular files.
func (l *Listing) Bytes() int64 { return l.bytes }

// Unread counts the regular files whose content the walk did not read
// because Options.SkipContent said so. Their entries carry no hash, so
// while it is not zero the Listing is no manifest: Manifest, Canonical,
// WriteCanonical and Digest describe the others and an empty hash for
// them.
func (l *Listing) Unread() int { return l.unread }

// finish puts the records in path order once the walk is over.
func (l *Listing) finish() {
	sorted := true
	var prev []byte
	l.eachWalk(func(seq int, _ uint32, r rec) {
		if seq > 0 && sorted && bytes.Compare(prev, r.path) >= 0 {
			sorted = false
		}
		prev = append(prev[:0], r.path...)
	})
	runtime.KeepAlive(l)
	if sorted {
		return
	}
	l.index()
	l.order = make([]uint32, l.n)
	for i := range l.order {
		l.order[i] = uint32(i)
	}
	var bufA, bufB []byte
	slices.SortFunc(l.order, func(a, b uint32) int {
		var ra, rb rec
		ra, bufA = l.mem.at(l.pos[a], bufA)
		rb, bufB = l.mem.at(l.pos[b], bufB)
		return bytes.Compare(ra.path, rb.path)
	})
	runtime.KeepAlive(l)
}

// index makes pos, the records' positions by number, once.
func (l *Listing) index() {
	l.once.Do(func() {
		l.pos = make([]uint32, 0, l.n)
		l.eachWalk(func(_ int, p uint32, _ rec) { l.pos = append(l.pos, p) })
	})
}

// each calls fn for every record in path order.
func (l *Listing) each(fn func(r rec)) { l.eachSeq(func(_ int, r rec) { fn(r) }) }

// ith returns the i-th record in path order, and its number.
func (l *Listing) ith(i int) (rec, int) {
	l.index()
	seq := i
	if l.order != nil {
		seq = int(l.order[i])
	}
	r, _ := l.mem.at(l.pos[seq], nil)
	return r, seq
}

// Entry returns the i-th entry in path order.
func (l *Listing) Entry(i int) Entry {
	defer runtime.KeepAlive(l)
	r, _ := l.ith(i)
	return entryOf(r, string(r.path), "")
}

func entryOf(r rec, p, sum string) Entry {
	if r.is(recDir) {
		return Entry{Path: p, Type: Dir, Mode: fs.FileMode(r.perm())}
	}
	if sum == "" && !r.is(recUnread) {
		sum = hex.EncodeToString(r.sum)
	}
	return Entry{Path: p, Type: File, Mode: fs.FileMode(r.perm()), Size: r.size, SHA256: sum}
}

// Sum returns the SHA-256 the walk computed for the regular file at path
// p, and its Stamp (valid with Options.Stamps); ok is false when p is not
// a regular file of the listing or was not read.
func (l *Listing) Sum(p string) (sum [32]byte, st Stamp, ok bool) {
	defer runtime.KeepAlive(l)
	lo, hi := 0, l.n
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if r, _ := l.ith(mid); compareBS(r.path, p) < 0 {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == l.n {
		return sum, st, false
	}
	r, seq := l.ith(lo)
	if compareBS(r.path, p) != 0 || r.is(recDir|recUnread) {
		return sum, st, false
	}
	if l.stamps != nil {
		st = *l.stamps.at(seq)
	}
	return [32]byte(r.sum), st, true
}

func compareBS(b []byte, s string) int {
	n := min(len(b), len(s))
	for i := 0; i < n; i++ {
		if b[i] != s[i] {
			if b[i] < s[i] {
				return -1
			}
			return 1
		}
	}
	switch {
	case len(b) < len(s):
		return -1
	case len(b) > len(s):
		return 1
	}
	return 0
}

// Manifest returns the entries, sorted by path. The paths share one
// string and the hashes' hex digits another.
func (l *Listing) Manifest() Manifest {
	defer runtime.KeepAlive(l)
	var pathBytes int
	l.each(func(r rec) { pathBytes += len(r.path) })
	var paths strings.Builder
	paths.Grow(pathBytes)
	sums := make([]byte, 0, 2*sha256.Size*(l.files-l.unread))
	l.each(func(r rec) {
		paths.Write(r.path)
		if !r.is(recDir | recUnread) {
			sums = hex.AppendEncode(sums, r.sum)
		}
	})
	ps, hx := paths.String(), string(sums)
	out := make([]Entry, 0, l.n)
	l.each(func(r rec) {
		p := ps[:len(r.path)]
		ps = ps[len(r.path):]
		sum := ""
		if !r.is(recDir | recUnread) {
			sum, hx = hx[:2*sha256.Size], hx[2*sha256.Size:]
		}
		out = append(out, entryOf(r, p, sum))
	})
	return Manifest{Entries: out}
}

// Canonical returns the canonical JSON encoding (see Manifest.Canonical),
// byte for byte what Manifest().Canonical() returns.
func (l *Listing) Canonical() []byte {
	defer runtime.KeepAlive(l)
	return l.encode(make([]byte, 0, l.canonicalLen()), nil)
}

// Digest returns "sha256:<64 hex>" over Canonical, streaming the encoding
// through the hash rather than holding it.
func (l *Listing) Digest() string {
	defer runtime.KeepAlive(l)
	d, _ := streamDigest(l.encode, nil)
	return d
}

// WriteCanonical writes Canonical to w in pieces of about 32 KiB and
// returns its digest (as Digest), having encoded it once.
func (l *Listing) WriteCanonical(w io.Writer) (string, error) {
	defer runtime.KeepAlive(l)
	return streamDigest(l.encode, w)
}

// encode is Manifest.encode over the records.
func (l *Listing) encode(buf []byte, flush func([]byte)) []byte {
	buf = append(buf, `{"entries":[`...)
	first := true
	l.each(func(r rec) {
		if !first {
			buf = append(buf, ',')
		}
		first = false
		buf = appendPath(buf, r.path)
		if r.is(recDir) {
			buf = append(buf, `,"type":"dir","mode":`...)
			buf = strconv.AppendUint(buf, uint64(r.perm()), 10)
			buf = append(buf, `,"size":0,"sha256":""}`...)
		} else {
			buf = append(buf, `,"type":"file","mode":`...)
			buf = strconv.AppendUint(buf, uint64(r.perm()), 10)
			buf = append(buf, `,"size":`...)
			buf = strconv.AppendInt(buf, r.size, 10)
			buf = append(buf, `,"sha256":"`...)
			if !r.is(recUnread) {
				buf = hex.AppendEncode(buf, r.sum)
			}
			buf = append(buf, `"}`...)
		}
		buf = chunk(buf, flush, false)
	})
	return chunk(append(buf, "]}"...), flush, true)
}

// canonicalLen is the exact length of Canonical.
func (l *Listing) canonicalLen() int {
	n := len(`{"entries":[]}`) + max(l.n-1, 0)
	l.each(func(r rec) {
		n += pathLen(r.path) + decimalLen(uint64(r.perm()))
		if r.is(recDir) {
			n += len(`,"type":"dir","mode":,"size":0,"sha256":""}`)
			return
		}
		n += len(`,"type":"file","mode":,"size":,"sha256":""}`) + decimalLen(uint64(r.size))
		if !r.is(recUnread) {
			n += 2 * sha256.Size
		}
	})
	return n
}

// plainPath reports whether p is written in JSON as it is: every byte
// printable ASCII (or DEL) other than a quote or a backslash.
func plainPath[S string | []byte](p S) bool {
	for i := 0; i < len(p); i++ {
		if b := p[i]; b < 0x20 || b >= 0x80 || b == '"' || b == '\\' {
			return false
		}
	}
	return true
}

// appendPath appends an entry's opening and its path: `{"path":"…"` or,
// for a path that is not valid UTF-8, `{"path_hex":"…"`.
func appendPath[S string | []byte](buf []byte, p S) []byte {
	if plainPath(p) {
		buf = append(buf, `{"path":"`...)
		buf = append(buf, p...)
		return append(buf, '"')
	}
	s := string(p)
	if utf8.ValidString(s) {
		buf = append(buf, `{"path":`...)
		return appendJSONString(buf, s)
	}
	buf = append(buf, `{"path_hex":"`...)
	buf = hex.AppendEncode(buf, []byte(s))
	return append(buf, '"')
}

// pathLen is len(appendPath(nil, p)).
func pathLen[S string | []byte](p S) int {
	if plainPath(p) {
		return len(`{"path":""`) + len(p)
	}
	s := string(p)
	if utf8.ValidString(s) {
		return len(`{"path":`) + jsonStringLen(s)
	}
	return len(`{"path_hex":""`) + 2*len(s)
}

// EachFile calls fn, in path order, for every regular file the walk read:
// its path (valid during the call only), permission bits, size, SHA-256
// and, with Options.Stamps, Stamp. One pass, no allocation per file.
func (l *Listing) EachFile(fn func(path []byte, perm fs.FileMode, size int64, sum [32]byte, st Stamp)) {
	defer runtime.KeepAlive(l)
	l.eachSeq(func(seq int, r rec) {
		if r.is(recDir | recUnread) {
			return
		}
		var st Stamp
		if l.stamps != nil {
			st = *l.stamps.at(seq)
		}
		fn(r.path, fs.FileMode(r.perm()), r.size, [32]byte(r.sum), st)
	})
}

// eachSeq is each with the records' numbers.
func (l *Listing) eachSeq(fn func(seq int, r rec)) {
	if l.order == nil {
		l.eachWalk(func(seq int, _ uint32, r rec) { fn(seq, r) })
		return
	}
	var buf []byte
	for _, seq := range l.order {
		var r rec
		r, buf = l.mem.at(l.pos[seq], buf)
		fn(int(seq), r)
	}
}
