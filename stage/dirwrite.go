package stage

import (
	"context"
	"crypto/sha256"
	"io"
	"os"
	"sync"
	"syscall"

	"github.com/airlockdev/airlock/internal/tree"
)

// writeTree writes src into tr/tree; src keeps its manifest. Every
// directory and file is created exclusively, by one name relative to an
// open directory of the new tree, so nothing can redirect a write. The
// files are read, hashed and written by tree.CopyInto's workers; the
// manifest is the same as one Walk would give.
//
// old, when not nil, is the previous copy: a file that Tree.Unchanged lists
// is copied from there (and hashed while copied) instead of being read from
// the host; a copy with other bytes is replaced by the host's file.
func writeTree(ctx context.Context, tr *os.Root, src *Tree, old *os.Root) error {
	if err := tr.Mkdir("tree", 0o700); err != nil {
		return err
	}
	base, err := tr.Open("tree")
	if err != nil {
		return err
	}
	defer base.Close()
	var hooks tree.CopyHooks
	if src.onFile != nil {
		hooks.Done = func(e tree.Entry) { src.onFile(e.Size) } // on this goroutine, as WithProgress promises
	}
	if old != nil && len(src.Unchanged()) > 0 {
		hooks.Carry = newCarrier(src, old).carry
		hooks.Known = src.knownSum
	}
	if err := src.copyInto(ctx, base, hooks); err != nil {
		return err
	}
	return tr.Chmod("tree", 0o755)
}

// copyInto is Walk for a Target that writes into a local directory: the
// tree is copied into dst by tree.CopyInto, with Walk's contract (walked
// once, carried files checked, the manifest kept, compactly: see
// Tree.writeManifest).
func (t *Tree) copyInto(ctx context.Context, dst *os.File, hooks tree.CopyHooks) error {
	return t.run(func(opts tree.Options) (*tree.Result, error) {
		return tree.CopyInto(ctx, t.src, dst, opts, hooks)
	})
}

// carrier copies unchanged files from the previous copy (delta publish).
// Its carry runs on the copy's workers, several at once.
type carrier struct {
	src  *Tree
	old  *os.Root
	mu   sync.Mutex // guards src's Carry bookkeeping
	bufs sync.Pool
}

func newCarrier(src *Tree, old *os.Root) *carrier {
	c := &carrier{src: src, old: old}
	c.bufs.New = func() any { b := make([]byte, 256<<10); return &b }
	return c
}

// carry copies e from the previous copy, hashing the bytes as they are
// written. It reports whether the copy has the SHA-256 the sandbox's
// manifest claims; when it has not (or the old file is missing, not a
// regular file, or another size) the partial copy is removed and false is
// returned, so the host's file is written instead.
func (c *carrier) carry(e tree.Entry, d tree.Dest) (bool, error) {
	// src.known holds exactly the Unchanged files, with the SHA-256 the
	// sandbox's manifest claims (the comparing walk found the same).
	want, ok := c.src.known[e.Path]
	if !ok {
		return false, nil
	}
	in, err := c.old.OpenFile(e.Path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return false, nil
	}
	defer in.Close()
	if fi, err := in.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() != e.Size {
		return false, nil
	}
	f, err := d.Create()
	if err != nil {
		return false, err
	}
	buf := c.bufs.Get().(*[]byte)
	defer c.bufs.Put(buf)
	h := sha256.New()
	n, err := io.CopyBuffer(onlyWriter{io.MultiWriter(f, h)}, onlyReader{io.LimitReader(in, e.Size+1)}, *buf)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n == e.Size && [32]byte(h.Sum(nil)) == want.sum {
		c.mu.Lock()
		defer c.mu.Unlock()
		return true, c.src.Carry(Entry{Path: e.Path, Mode: e.Mode, Size: e.Size})
	}
	if rerr := d.Remove(); rerr != nil {
		return false, rerr
	}
	return false, nil
}
