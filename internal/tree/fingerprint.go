package tree

import (
	"context"
	"crypto/sha256"
	"hash"
	"io/fs"
	"os"
	"runtime"
	"slices"
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

func fingerprint(ctx context.Context, root string, opts Options, cutoff time.Time, workers int) Metadata {
	fi, err := os.Lstat(root)
	if err != nil || !fi.IsDir() {
		return Metadata{}
	}
	top, _, err := openRoot(root, opts.ForceFallback)
	if err != nil {
		return Metadata{}
	}
	defer top.close()
	f := newFingerprinter(ctx, opts, cutoff)
	f.add("", statInfo(fi))
	f.dir(top, "", 0, workers)
	md := f.finish()
	if md.Files > f.lim.MaxFiles {
		md.Usable = false
	}
	return md
}

type fingerprinter struct {
	ctx    context.Context
	opts   Options
	lim    Limits
	cutoff int64
	h      hash.Hash
	buf    []byte
	md     Metadata
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
func (f *fingerprinter) dir(n node, prefix string, depth, workers int) {
	if depth >= f.lim.MaxDepth || f.ctx.Err() != nil {
		f.md.Usable = false
		return
	}
	names, err := n.names()
	if err != nil {
		f.md.Usable = false
		return
	}
	slices.Sort(names)
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
	for _, name := range names {
		rel := name
		if prefix != "" {
			rel = prefix + "/" + name
		}
		st, err := n.lstat(name)
		if err != nil {
			f.md.Usable = false
			continue
		}
		if f.opts.Exclude != nil && f.opts.Exclude(rel, st.mode.IsDir()) {
			continue
		}
		f.add(rel, st)
		switch {
		case st.mode.IsDir():
			sub, err := n.openDir(name, st)
			if err != nil {
				f.md.Usable = false
				continue
			}
			if workers == 0 {
				f.dir(sub, rel, depth+1, 0)
				sub.close()
				continue
			}
			done := make(chan Metadata, 1)
			subs = append(subs, done)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem }()
				g := newFingerprinter(f.ctx, f.opts, time.Unix(0, f.cutoff))
				g.dir(sub, rel, depth+1, 0)
				sub.close()
				done <- g.finish()
			}()
		case st.mode.IsRegular():
			f.md.Files++
			f.md.Bytes += st.size
			if f.md.Files > f.lim.MaxFiles || len(rel) > f.lim.MaxPathLen {
				f.md.Usable = false
				return
			}
		case st.mode&fs.ModeSymlink != 0:
			if f.opts.Links != SkipLinks {
				f.md.Usable = false
			}
		}
	}
}
