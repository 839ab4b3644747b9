package tree

import (
	"context"
	"crypto/sha256"
	"hash"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/airlockdev/airlock/internal/digest"
)

// Metadata is what a metadata-only pass saw of a tree.
type Metadata struct {
	Sum    [32]byte // over every entry's path, type, mode, size, identity and times
	Usable bool     // Sum pins the content (see Fingerprint)
	Files  int
	Bytes  int64
}

// Fingerprint hashes the metadata of every entry Walk would visit under
// root with opts — path, type and permission bits, size, device and inode
// numbers, modification and change times — reading no content and following
// no link. It also counts files and bytes, for progress totals. The
// directories directly under root are fingerprinted concurrently (the pass
// is all system calls); the result does not depend on the schedule.
//
// Sum is Usable, and so may stand for the content the way a git index entry
// does, only when every lookup succeeded, no file changed at or after cutoff
// (timestamp granularity makes recent changes invisible), no link would be
// followed (links are hashed as links under SkipLinks; any link makes the
// sum unusable under the other policies), the platform reports identities
// and change times, and the tree is within opts' limits.
func Fingerprint(ctx context.Context, root string, opts Options, cutoff time.Time) Metadata {
	return fingerprint(ctx, root, opts, cutoff, max(1, runtime.GOMAXPROCS(0)))
}

// FingerprintSeen is Fingerprint that also returns what the pass saw of
// the tree (nil when it could not open root), for a Copy or Walk of the
// same tree that follows it (Options.Seen): that walk then lists and
// lstat's the tree only once, here. The Seen keeps at most maxEntries
// entries (about 130 bytes each); the directories past them are not kept.
func FingerprintSeen(ctx context.Context, root string, opts Options, cutoff time.Time, maxEntries int) (Metadata, *Seen) {
	return fingerprintTree(ctx, root, opts, cutoff, max(1, runtime.GOMAXPROCS(0)), maxEntries)
}

// fingerprint is Fingerprint with workers goroutines.
func fingerprint(ctx context.Context, root string, opts Options, cutoff time.Time, workers int) Metadata {
	md, _ := fingerprintTree(ctx, root, opts, cutoff, workers, 0)
	return md
}

// fingerprintTree is Fingerprint with workers goroutines; with keep > 0 it
// records what it saw, up to keep entries.
func fingerprintTree(ctx context.Context, root string, opts Options, cutoff time.Time, workers, keep int) (Metadata, *Seen) {
	fi, err := os.Lstat(root)
	if err != nil || !fi.IsDir() {
		return Metadata{}, nil
	}
	top, _, err := openRoot(root, opts.ForceFallback)
	if err != nil {
		return Metadata{}, nil
	}
	defer top.close()
	f := newFingerprinter(ctx, opts, cutoff)
	if keep > 0 {
		f.seen = &Seen{dirs: make(map[string]*seenDir), max: keep, stamps: make(map[string]stat)}
	}
	st := statInfo(fi)
	f.add("", st)
	f.dir(top, "", st, 0, workers)
	md := f.finish()
	if md.Files > f.lim.MaxFiles {
		md.Usable = false
	}
	return md, f.seen
}

// Seen is what a fingerprint pass saw of a tree (FingerprintSeen): the
// sorted names of each directory it listed and the lstat of each of them.
//
// A Copy or Walk given it (Options.Seen) takes a directory's names and
// their lstat from it, instead of listing and lstat'ing again, when the
// directory it opened is the one (device and inode) the pass listed. Each
// entry is then handled as if the walk had taken that lstat itself: it is
// the baseline the opened file or directory must match (identity and
// type) and the file must still show after it was read (size, times), so
// the copy holds the content the fingerprint describes, or the walk fails
// with ErrChanged. An entry the pass could not lstat, and a directory it
// did not keep (a failure, or past the entries it may keep), are read
// from the file system as usual; what appeared since the pass is not seen.
type Seen struct {
	mu      sync.Mutex
	dirs    map[string]*seenDir // by path below the root, "" for the root
	entries int                 // recorded so far, at most max
	max     int
	// stamps holds the lstat of every directory the pass reached, by
	// path below the root, taken before it was listed (not bounded by
	// max: one per directory); gaps says the pass missed part of the tree.
	stamps map[string]stat
	gaps   bool
}

// stamp keeps st, the lstat of the directory at rel; one without an
// identity or change time is a gap.
func (s *Seen) stamp(rel string, st stat) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !st.full {
		s.gaps = true
		return
	}
	s.stamps[rel] = st
}

// markGap records that the pass missed part of the tree.
func (s *Seen) markGap() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gaps = true
}

// seenDir is one directory as a fingerprint pass saw it.
type seenDir struct {
	dev, ino uint64   // the directory's identity
	names    []string // sorted
	stats    []stat   // stats[i] is the lstat of names[i]
	took     []bool   // took[i] says stats[i] was taken (the lstat succeeded)
}

// Len returns the number of entries s holds; 0 for nil.
func (s *Seen) Len() int {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.entries
}

// TopLevel returns the number of entries the pass saw at the root, or -1
// when it did not keep the root's listing (or s is nil).
func (s *Seen) TopLevel() int {
	if s == nil {
		return -1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if d := s.dirs[""]; d != nil {
		return len(d.names)
	}
	return -1
}

// Still reports whether no entry can have been added to, removed from or
// renamed in any directory of the tree at root since the pass reached it:
// the pass missed nothing (no failure, no limit), and every directory it
// reached, looked up again by its path, is the one the pass saw (device
// and inode) with the modification and change times the pass saw before
// it listed it. A rename changes both directories' times, and a
// directory's times are taken before its listing, so a move the pass or a
// later copy half saw (a file in neither listing, or in both) shows. What
// the times cannot show: a second change in the same tick of the file
// system's clock as a change made just before the pass took the times. A
// change inside a file is not its directory's: a Copy given s checks each
// file against the pass's lstat itself. Still reads no listing.
func (s *Seen) Still(root string) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.stamps[""]; s.gaps || !ok {
		return false
	}
	for rel, was := range s.stamps {
		fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil || !fi.IsDir() {
			return false
		}
		now := statInfo(fi)
		if !now.full || now.dev != was.dev || now.ino != was.ino || !now.mtime.Equal(was.mtime) || now.ctime != was.ctime {
			return false
		}
	}
	return true
}

// record keeps d, the directory at rel, unless s is full.
func (s *Seen) record(rel string, d *seenDir) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.entries+len(d.names) > s.max {
		return
	}
	s.entries += len(d.names)
	s.dirs[rel] = d
}

// dir returns the listing of the directory at rel (a path below the root
// with no link in it) when the pass listed that very directory, fi being
// the walk's fstat of the one it opened; else nil.
func (s *Seen) dir(rel string, fi fs.FileInfo) *seenDir {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	d := s.dirs[rel]
	s.mu.Unlock()
	if d == nil {
		return nil
	}
	if k, ok := keyOf(fi); !ok || k != (fileKey{dev: d.dev, ino: d.ino}) {
		return nil
	}
	return d
}

type fingerprinter struct {
	ctx    context.Context
	opts   Options
	lim    Limits
	cutoff int64
	h      hash.Hash
	buf    []byte
	md     Metadata
	seen   *Seen // where the pass records what it saw; nil: nowhere
}

func newFingerprinter(ctx context.Context, opts Options, cutoff time.Time) *fingerprinter {
	f := &fingerprinter{ctx: ctx, opts: opts, lim: opts.Limits.WithDefaults(), cutoff: cutoff.UnixNano(),
		h: sha256.New(), md: Metadata{Usable: true}}
	f.h.Write(digest.AppendField(nil, fingerprintTag))
	return f
}

func (f *fingerprinter) finish() Metadata {
	f.h.Sum(f.md.Sum[:0])
	return f.md
}

// fingerprintTag versions the metadata encoding.
const fingerprintTag = "airlock.tree.fingerprint.v2"

// add hashes one entry as a record of digest fields: "e", the raw relative
// path, the type and permission bits, the raw mode word, inode and device
// numbers, and for a non-directory its size, modification and change
// times. Every record is self-delimiting and starts with its kind ("e" for
// an entry, "s" for a folded subdirectory sum), so distinct trees never
// share a stream.
func (f *fingerprinter) add(rel string, st stat) {
	isDir := st.mode.IsDir()
	if !st.full || !isDir && (st.mtime.UnixNano() >= f.cutoff || st.ctime >= f.cutoff) {
		f.md.Usable = false
	}
	b := digest.AppendField(f.buf[:0], "e")
	b = digest.AppendField(b, rel)
	b = digest.AppendUint64(b, uint64(st.mode))
	b = digest.AppendUint64(b, uint64(st.raw))
	b = digest.AppendUint64(b, st.ino)
	b = digest.AppendUint64(b, st.dev)
	if !isDir {
		b = digest.AppendUint64(b, uint64(st.size))
		b = digest.AppendUint64(b, uint64(st.mtime.UnixNano()))
		b = digest.AppendUint64(b, uint64(st.ctime))
	}
	f.buf = b
	f.h.Write(b)
}

// fold hashes a subdirectory's sum into f.
func (f *fingerprinter) fold(sum [32]byte) {
	b := digest.AppendField(f.buf[:0], "s")
	b = digest.AppendField(b, sum[:])
	f.buf = b
	f.h.Write(b)
}

// dir fingerprints the directory n. With workers == 0 its subdirectories
// are hashed inline. With workers >= 1 each subdirectory is fingerprinted
// by its own fingerprinter, up to workers at a time, and its sum folded
// into f in name order, so the result is the same for every workers >= 1.
//
// self is n's lstat; with f.seen, the listing and the lstat of every entry
// are recorded there.
func (f *fingerprinter) dir(n node, prefix string, self stat, depth, workers int) {
	if f.seen != nil {
		f.seen.stamp(prefix, self)
	}
	if depth >= f.lim.MaxDepth || f.ctx.Err() != nil {
		f.gap()
		return
	}
	names, err := n.names()
	if err != nil {
		f.gap()
		return
	}
	slices.Sort(names)
	var seen *seenDir
	if f.seen != nil && self.full {
		seen = &seenDir{dev: self.dev, ino: self.ino, names: names, stats: make([]stat, len(names)), took: make([]bool, len(names))}
		defer f.seen.record(prefix, seen)
	}
	var subs []chan Metadata
	var sem chan struct{}
	if workers > 0 {
		sem = make(chan struct{}, workers)
	}
	// Fold the subdirectories' sums in name order, also on an early return,
	// so that no worker outlives the call.
	defer func() {
		for _, done := range subs {
			g := <-done
			f.fold(g.Sum)
			f.md.Usable = f.md.Usable && g.Usable
			f.md.Files += g.Files
			f.md.Bytes += g.Bytes
		}
	}()
	for i, name := range names {
		rel := name
		if prefix != "" {
			rel = prefix + "/" + name
		}
		st, err := n.lstat(name)
		if err != nil {
			f.gap()
			continue
		}
		if seen != nil {
			seen.stats[i], seen.took[i] = st, true
		}
		if f.opts.Exclude != nil && f.opts.Exclude(rel, st.mode.IsDir()) {
			continue
		}
		f.add(rel, st)
		switch {
		case st.mode.IsDir():
			sub, err := n.openDir(name, st)
			if err != nil {
				f.gap()
				continue
			}
			if workers == 0 {
				f.dir(sub, rel, st, depth+1, 0)
				sub.close()
				continue
			}
			done := make(chan Metadata, 1)
			subs = append(subs, done)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem }()
				g := newFingerprinter(f.ctx, f.opts, time.Unix(0, f.cutoff))
				g.seen = f.seen
				g.dir(sub, rel, st, depth+1, 0)
				sub.close()
				done <- g.finish()
			}()
		case st.mode.IsRegular():
			f.md.Files++
			f.md.Bytes += st.size
			if f.md.Files > f.lim.MaxFiles || len(rel) > f.lim.MaxPathLen {
				f.gap()
				return
			}
		case st.mode&fs.ModeSymlink != 0:
			if f.opts.Links != SkipLinks {
				f.md.Usable = false
			}
		}
	}
}

// gap marks the pass as one that missed part of the tree (a failure, a
// limit): its sum does not pin the content, and its Seen cannot tell
// that the tree held still.
func (f *fingerprinter) gap() {
	f.md.Usable = false
	if f.seen != nil {
		f.seen.markGap()
	}
}
