package tree

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Copy copies the tree at src into dst, hashing in the same pass, and
// returns what it copied. dst must not exist (its parent must): it is created
// exclusively, every regular file is created with O_EXCL|O_NOFOLLOW, and each
// entry keeps its permission bits. Links and special files are handled by
// opts like Walk does; a copy never contains a link. On error dst is removed.
//
// Files are read, hashed and written by opts.Workers workers (see
// Options.Workers); the Result does not depend on how many.
func Copy(ctx context.Context, src, dst string, opts Options) (res *Result, err error) {
	if err := os.Mkdir(dst, 0o700); err != nil {
		return nil, fmt.Errorf("creating copy destination: %w", err)
	}
	defer func() {
		if err != nil {
			RemoveAll(dst)
		}
	}()
	fd, err := openDirNoFollow(unix.AT_FDCWD, dst)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: dst, Err: err}
	}
	defer unix.Close(fd)
	res, err = walk(ctx, src, opts, nil, newCopier(fd, dst, CopyHooks{}))
	if err != nil {
		return nil, err
	}
	if err := fchmod(fd, res.RootMode); err != nil {
		return nil, &fs.PathError{Op: "chmod", Path: dst, Err: err}
	}
	return res, nil
}

// CopyInto copies the tree at src into the directory dst, which should be
// empty and which the caller created and trusts, like Copy does (but dst's
// own mode is left alone, and on error the caller removes what was
// written). Every entry is created by one name relative to an open
// directory of the copy, so nothing below dst can redirect a write.
func CopyInto(ctx context.Context, src string, dst *os.File, opts Options, hooks CopyHooks) (*Result, error) {
	return walk(ctx, src, opts, nil, newCopier(int(dst.Fd()), dst.Name(), hooks))
}

// CopyError is a failure to write the copy (Copy, CopyInto): the
// destination file system's (a full disk, a quota, permissions), not the
// source's. Err is an *fs.PathError naming the entry of the copy.
type CopyError struct{ Err error }

// Error implements error.
func (e *CopyError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *CopyError) Unwrap() error { return e.Err }

// destErr is the failure of op on the copy of rel.
func (c *copier) destErr(op, rel string, err error) error {
	return &CopyError{&fs.PathError{Op: op, Path: c.show(rel), Err: err}}
}

// CopyHooks let the caller of CopyInto take part in the copy. Each is
// called on a worker goroutine, several at once.
type CopyHooks struct {
	// Carry, when set, is offered every regular file (e: path, mode and
	// size, no hash) before it is copied. It may put the content in place
	// itself, from another copy of it, through d, and return true: then
	// the copier writes nothing for the file, but still reads and hashes
	// the source file and checks it unchanged, so the Result describes the
	// source; the caller compares. With false the source is copied (the
	// caller removes whatever it created first).
	Carry func(e Entry, d Dest) (bool, error)
	// Known, when set, is asked about each file that Carry put in place:
	// a SHA-256 of its source from an earlier walk and the Stamp that walk
	// took (Listing.Sum). When the source's lstat in this walk shows that
	// Stamp — the evidence a walk has that a file did not change while it
	// was read — the copier takes the hash and does not read the file. The
	// caller, which checked the carried copy against that hash, keeps the
	// copy and the Result consistent. Files the copier writes are always
	// hashed as they are read.
	Known func(e Entry) (sum [32]byte, st Stamp, ok bool)
	// Done, when set, is called for each regular file once it is in
	// place, on the goroutine that called CopyInto (so a little after the
	// worker finished it; the last ones before CopyInto returns).
	Done func(e Entry)
}

// Dest is where a copy puts one regular file: a name in an open directory
// of the copy. It is valid during the CopyHooks.Carry call it is given to.
type Dest struct {
	dir  int
	name string
	rel  string
	perm fs.FileMode
	c    *copier
}

// Create creates the file exclusively, never through a link, with the
// entry's permission bits, and opens it for writing.
func (d Dest) Create() (*os.File, error) {
	fd, err := d.c.create(d.dir, d.name, d.rel, d.perm)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), d.c.show(d.rel)), nil
}

// Remove removes the file at the destination.
func (d Dest) Remove() error {
	if err := ignoringEINTR(func() error { return unix.Unlinkat(d.dir, d.name, 0) }); err != nil {
		return d.c.destErr("remove", d.rel, err)
	}
	return nil
}

// copier is the destination side of a copy.
type copier struct {
	root  int    // the copy's top directory
	name  string // its path, for messages
	hooks CopyHooks
	// exact says that a mode given to mkdirat or openat is the mode the
	// entry gets (umask known, no default ACL), so no chmod is needed
	// when mode&^umask == mode.
	exact bool
	umask fs.FileMode
	// done holds the files finished since the walker last handed them to
	// hooks.Done.
	doneMu  sync.Mutex
	done    []Entry
	pending atomic.Bool
}

func newCopier(root int, name string, hooks CopyHooks) *copier {
	c := &copier{root: root, name: name, hooks: hooks}
	c.umask, c.exact = creationMask(root)
	return c
}

func (c *copier) show(rel string) string { return filepath.Join(c.name, filepath.FromSlash(rel)) }

// modeKept reports whether creating with perm yields exactly perm.
func (c *copier) modeKept(perm fs.FileMode) bool { return c.exact && perm&c.umask == 0 }

// mkdir creates d's directory at leaf in parent's and opens it. A
// directory is created with its own mode when that mode lets the owner
// fill it and creation keeps it; otherwise it is created 0700 and gets its
// mode when d is released, after its last entry was written.
func (c *copier) mkdir(parent, d *dirRef, leaf, rel string, perm fs.FileMode) error {
	mode, fix := fs.FileMode(0o700), true
	if perm&0o700 == 0o700 && c.modeKept(perm) {
		mode, fix = perm, false
	}
	if err := ignoringEINTR(func() error { return unix.Mkdirat(parent.dst, leaf, uint32(mode)) }); err != nil {
		return c.destErr("mkdir", rel, err)
	}
	fd, err := openDirNoFollow(parent.dst, leaf)
	if err != nil {
		return c.destErr("open", rel, err)
	}
	d.dst, d.perm, d.fix = fd, perm, fix
	return nil
}

// create creates the regular file name in dir, exclusively and never
// through a link, with mode perm (a chmod only when creation cannot give
// it), and returns its descriptor.
func (c *copier) create(dir int, name, rel string, perm fs.FileMode) (int, error) {
	var fd int
	err := ignoringEINTR(func() (err error) {
		fd, err = unix.Openat(dir, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm))
		return err
	})
	if err != nil {
		return -1, c.destErr("open", rel, err)
	}
	if !c.modeKept(perm) {
		if err := fchmod(fd, perm); err != nil {
			unix.Close(fd)
			return -1, c.destErr("chmod", rel, err)
		}
	}
	return fd, nil
}

// copyFile copies j's open source file f to its place in the copy.
//
// copy_file_range(2) or splice would save the copy through user space, but
// the bytes must pass through here anyway to be hashed, so the file is
// read once into a buffer that is both hashed and written.
func (c *copier) copyFile(j *job, s *scratch) error {
	e := Entry{Path: j.rel, Type: File, Mode: j.st.mode.Perm(), Size: j.st.size}
	if c.hooks.Carry != nil {
		carried, err := c.hooks.Carry(e, Dest{dir: j.into.dst, name: j.leaf, rel: j.rel, perm: e.Mode, c: c})
		if err != nil {
			return err
		}
		if carried {
			if err := c.carried(j, s, e); err != nil {
				return err
			}
			c.finished(e)
			return nil
		}
	}
	f, err := j.open()
	if err != nil {
		return err
	}
	defer f.close()
	fd, err := c.create(j.into.dst, j.leaf, j.rel, e.Mode)
	if err != nil {
		return err
	}
	err = s.stream(&f, j.st, j.rel, fd, j.sum)
	var wf writeFailed
	if errors.As(err, &wf) {
		err = c.destErr("write", j.rel, wf.err)
	}
	if cerr := unix.Close(fd); err == nil && cerr != nil {
		err = c.destErr("close", j.rel, cerr)
	}
	if err == nil {
		c.finished(e)
	}
	return err
}

// carried hashes the source of a file that hooks.Carry put in place, so
// that the Result describes the source: it reads the file, unless
// hooks.Known vouches for it (a hash from an earlier walk whose Stamp the
// file's lstat still shows) — then it is not even opened.
func (c *copier) carried(j *job, s *scratch, e Entry) error {
	if c.hooks.Known != nil {
		if sum, st, ok := c.hooks.Known(e); ok && st.matches(j.st) {
			*j.sum = sum
			return nil
		}
	}
	f, err := j.open()
	if err != nil {
		return err
	}
	defer f.close()
	return s.stream(&f, j.st, j.rel, -1, j.sum)
}

// finished records that e is in place, for deliver.
func (c *copier) finished(e Entry) {
	if c.hooks.Done == nil {
		return
	}
	c.doneMu.Lock()
	defer c.doneMu.Unlock()
	c.done = append(c.done, e)
	c.pending.Store(true)
}

// deliver hands the finished files to hooks.Done; the walker calls it on
// its own goroutine.
func (c *copier) deliver() {
	if !c.pending.Load() {
		return
	}
	c.doneMu.Lock()
	done := c.done
	c.done = nil
	c.pending.Store(false)
	c.doneMu.Unlock()
	for _, e := range done {
		c.hooks.Done(e)
	}
}

// Buffers. A file of at most smallFile bytes is read with one read(2) into
// the worker's buffer; a file of pipelineFrom bytes or more is read in
// chunks that another goroutine hashes while this one writes them, so a
// large file costs about the longer of (read + write) and hash, not their
// sum.
const (
	smallFile    = 256 << 10
	pipelineFrom = 1 << 20
	chunkSize    = 256 << 10
	chunks       = 4
)

// scratch is one worker's buffers and hash.
type scratch struct {
	ctx  context.Context
	buf  []byte
	h    hash.Hash
	ring [][]byte // pipeline chunks, made on the first large file
}

func newScratch(ctx context.Context) *scratch {
	return &scratch{ctx: ctx, h: sha256.New()}
}

// buffer returns the worker's buffer for a file of size bytes: grown as
// the files need (up to smallFile), so a walk of small files never pays
// for a large buffer.
func (s *scratch) buffer(size int64) []byte {
	if int64(len(s.buf)) < size && len(s.buf) < smallFile {
		n := 4 << 10
		for int64(n) < size && n < smallFile {
			n *= 2
		}
		s.buf = make([]byte, n)
	}
	return s.buf
}

// stream reads exactly st.size bytes of f, hashes them into sum and, when
// dst >= 0, writes them to dst; then it checks that f did not change.
func (s *scratch) stream(f *srcFile, st stat, rel string, dst int, sum *[32]byte) error {
	s.h.Reset()
	var err error
	if st.size >= pipelineFrom {
		err = s.pipe(f, st.size, rel, dst)
	} else {
		buf := s.buffer(st.size)
		for remain := st.size; remain > 0 && err == nil; {
			b := buf[:min(remain, int64(len(buf)))]
			if err = f.readFull(b, rel); err == nil {
				hashWrite(s.h, b)
				err = writeAll(dst, b)
				remain -= int64(len(b))
			}
		}
	}
	if err != nil {
		return readFailed(f, st, rel, err)
	}
	if err := checkUnchanged(f, st, rel); err != nil {
		return err
	}
	s.h.Sum(sum[:0])
	return checkSettled(f, st, rel, sum, s.h, s.buffer(st.size))
}

// readFailed returns err, the failure of a read of f (or of writing what
// was read), unless f no longer is the file st describes: then that is
// the error (ErrChanged). A file replaced by a directory, say, fails its
// read with EISDIR.
func readFailed(f *srcFile, st stat, rel string, err error) error {
	if errors.Is(err, ErrChanged) {
		return err
	}
	if cerr := checkUnchanged(f, st, rel); cerr != nil {
		return cerr
	}
	return err
}

// pipe is stream's loop for a large file: this goroutine reads a chunk,
// hands it to a hashing goroutine and writes it; a chunk is read into
// again only once it has been both written and hashed.
func (s *scratch) pipe(f *srcFile, size int64, rel string, dst int) error {
	if s.ring == nil {
		s.ring = make([][]byte, chunks)
		for i := range s.ring {
			s.ring[i] = make([]byte, chunkSize)
		}
	}
	free := make(chan []byte, chunks)
	for _, b := range s.ring {
		free <- b
	}
	full := make(chan []byte, chunks)
	hashed := make(chan struct{})
	go func() {
		defer close(hashed)
		for b := range full {
			hashWrite(s.h, b)
			free <- b[:cap(b)]
		}
	}()
	var err error
	for remain := size; remain > 0; {
		if err = s.ctx.Err(); err != nil {
			break
		}
		b := <-free
		b = b[:min(remain, int64(len(b)))]
		if err = f.readFull(b, rel); err != nil {
			break
		}
		full <- b
		if err = writeAll(dst, b); err != nil {
			break
		}
		remain -= int64(len(b))
	}
	close(full)
	<-hashed
	return err
}

// writeFailed is writeAll's failure, which the copier names (destErr).
type writeFailed struct{ err error }

func (w writeFailed) Error() string { return "writing the copy: " + w.err.Error() }

// writeAll writes b to dst (nothing when dst < 0).
func writeAll(dst int, b []byte) error {
	for dst >= 0 && len(b) > 0 {
		n, err := unix.Write(dst, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return writeFailed{err}
		}
		b = b[n:]
	}
	return nil
}

// pool runs a walk's file jobs on a fixed number of goroutines. Jobs go
// out in batches (of a directory's consecutive files, up to batchFiles of
// them or batchBytes of content), so that a worker wakes once for many
// small files, not once for each.
type pool struct {
	jobs  chan []job
	free  chan []job // batches done with, for reuse: a walk of many files makes no garbage per batch
	batch []job
	bytes int64
	wg    sync.WaitGroup
}

const (
	batchFiles = 32
	batchBytes = 1 << 20
)

func startPool(w *walker, n int) *pool {
	p := &pool{jobs: make(chan []job, 2*n), free: make(chan []job, 2*n+n+1)}
	for range n {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			s := newScratch(w.ctx)
			for batch := range p.jobs {
				for i := range batch {
					j := &batch[i]
					if !w.fail.failed() {
						if err := w.doFile(j, s); err != nil {
							w.fail.record(j.seq, err)
						}
					}
					j.from.release(w)
					j.into.release(w)
				}
				clear(batch)
				select {
				case p.free <- batch[:0]:
				default:
				}
			}
		}()
	}
	return p
}

// add queues j, sending the batch when it is full.
func (p *pool) add(j job) {
	p.batch = append(p.batch, j)
	if p.bytes += j.st.size; len(p.batch) >= batchFiles || p.bytes >= batchBytes {
		p.flush()
	}
}

// flush sends the jobs queued so far.
func (p *pool) flush() {
	if len(p.batch) > 0 {
		p.jobs <- p.batch
		select {
		case p.batch = <-p.free:
		default:
			p.batch = make([]job, 0, batchFiles)
		}
		p.bytes = 0
	}
}

// stop sends what is queued and waits for every job handed out.
func (p *pool) stop() {
	p.flush()
	close(p.jobs)
	p.wg.Wait()
}

// dirRef is an open directory of the walk and, when copying, its open
// directory in the copy. The walker holds a reference while it walks the
// directory, and each pending file job one; the last release closes both
// (and gives the copy its mode).
type dirRef struct {
	n    node
	dst  int         // the copy's directory; -1 when not copying
	perm fs.FileMode // dst's mode, applied at the last release when fix
	fix  bool
	rel  string // its path in the walk
	seq  int    // its place in walk order
	root bool   // the walk root: closed by its owners, not here
	refs atomic.Int32
}

func (d *dirRef) release(w *walker) {
	if d.refs.Add(-1) != 0 || d.root {
		return
	}
	if d.dst >= 0 {
		if d.fix {
			if err := fchmod(d.dst, d.perm); err != nil {
				w.fail.record(d.seq, &fs.PathError{Op: "chmod", Path: w.cp.show(d.rel), Err: err})
			}
		}
		unix.Close(d.dst)
	}
	d.n.close()
}

// failure keeps the error of the earliest entry, in walk order, that
// failed.
type failure struct {
	set atomic.Bool
	mu  sync.Mutex
	seq int
	err error
}

func (f *failure) record(seq int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil || seq < f.seq {
		f.seq, f.err = seq, err
	}
	f.set.Store(true)
}

func (f *failure) failed() bool { return f.set.Load() }

func (f *failure) first() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// errStop unwinds the walk once a worker has failed; the worker's error is
// the one reported.
var errStop = errors.New("tree: walk stopped after a failure")

func fchmod(fd int, perm fs.FileMode) error {
	return ignoringEINTR(func() error { return unix.Fchmod(fd, uint32(perm.Perm())) })
}

func openDirNoFollow(dir int, name string) (int, error) {
	var fd int
	err := ignoringEINTR(func() (err error) {
		fd, err = unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		return err
	})
	return fd, err
}

func ignoringEINTR(fn func() error) error {
	for {
		if err := fn(); err != unix.EINTR {
			return err
		}
	}
}

// RemoveAll removes the tree at p like os.RemoveAll, also when a directory in
// it lacks write permission (a copy keeps the source's modes, and a
// read-only skill makes a read-only copy). It never follows a link.
func RemoveAll(p string) error {
	err := os.RemoveAll(p)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(q, 0o700)
		}
		return nil
	})
	return os.RemoveAll(p)
}
