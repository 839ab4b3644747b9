package tree

import (
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// stat is what the walker knows about an entry before opening it.
type stat struct {
	mode  fs.FileMode // type and permission bits
	size  int64
	mtime time.Time
	// The platform's raw mode word, identity and change time; full says
	// they are known. Without them fi, the os package's lstat, carries
	// the identity for os.SameFile.
	raw      uint32
	ino, dev uint64
	ctime    int64
	full     bool
	fi       fs.FileInfo
}

// same reports whether fi is the same file (device and inode) as st.
func (st stat) same(fi fs.FileInfo) bool {
	if st.full {
		k, ok := keyOf(fi)
		return ok && k == fileKey{dev: st.dev, ino: st.ino}
	}
	return st.fi != nil && os.SameFile(st.fi, fi)
}

// unchanged reports whether now (a stat of the open file after it was
// read) shows the file st described at the start: same identity, size,
// modification time and, where known, change time. A file rewritten in
// place with its size and modification time restored still has a new
// change time.
func (st stat) unchanged(now stat) bool {
	if now.size != st.size || !now.mtime.Equal(st.mtime) {
		return false
	}
	if st.full && now.full {
		return now.dev == st.dev && now.ino == st.ino && now.ctime == st.ctime
	}
	return now.fi != nil && st.same(now.fi)
}

// srcFile is a regular file of the source tree opened for reading. Under
// the openat2 reader it is a bare descriptor: an *os.File would only add
// system calls (the poller cannot wait on a regular file). Under the
// os.Root reader, f owns the descriptor.
type srcFile struct {
	fd int
	f  *os.File
}

// read reads into p, retrying EINTR; io.EOF at the end of the file.
func (s *srcFile) read(p []byte) (int, error) {
	if s.f != nil {
		return s.f.Read(p)
	}
	return readFD(s.fd, p, -1)
}

// readAt reads into p from offset off (pread: the file's offset stays
// where it is), retrying EINTR; io.EOF at the end of the file.
func (s *srcFile) readAt(p []byte, off int64) (int, error) {
	if s.f != nil {
		return s.f.ReadAt(p, off)
	}
	return readFD(s.fd, p, off)
}

// readFD reads into p from fd, with read(2), or with pread(2) at off when
// off >= 0, retrying EINTR; io.EOF at the end of the file.
func readFD(fd int, p []byte, off int64) (int, error) {
	for {
		var n int
		var err error
		if off < 0 {
			n, err = unix.Read(fd, p)
		} else {
			n, err = unix.Pread(fd, p, off)
		}
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return 0, err
		case n == 0 && len(p) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// stat fstat's the open file.
func (s *srcFile) stat() (stat, error) {
	if s.f != nil {
		fi, err := s.f.Stat()
		if err != nil {
			return stat{}, err
		}
		return statInfo(fi), nil
	}
	return fstatFD(s.fd)
}

func (s *srcFile) close() error {
	if s.f != nil {
		return s.f.Close()
	}
	return unix.Close(s.fd)
}

// readFull reads exactly len(p) bytes, or fails: a file that ends early
// shrank while it was read.
func (s *srcFile) readFull(p []byte, rel string) error {
	for len(p) > 0 {
		n, err := s.read(p)
		p = p[n:]
		if err == io.EOF {
			return fmt.Errorf("%w: %s: file shrank while read", ErrChanged, rel)
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", rel, err)
		}
	}
	return nil
}

// settleWindow: how recent a file's modification may be, when its read
// ends, for the read to be checked once more. The kernel moves a file's times
// when a write begins, before it copies the data, so a write already under
// way when the read began shows neither in the size nor in the times taken
// after the read (what checkUnchanged compares) and can leave a torn read.
// Such a file is read again once the window has passed since its change,
// and must hash the same (checkSettled). A write that takes longer than
// the window can still go unseen.
const settleWindow = 50 * time.Millisecond

// checkSettled follows a passed checkUnchanged: sum is the SHA-256 of the
// st.size bytes read from f. When f was modified less than settleWindow
// before now, it waits until the window has passed, reads f again through buf
// (nil: one is made) with h (reset first; the hashed-bytes counter does
// not count a re-read)
// and requires the same sum and, once more, the times st describes;
// otherwise it fails with ErrChanged.
func checkSettled(f *srcFile, st stat, rel string, sum *[32]byte, h hash.Hash, buf []byte) error {
	// The modification time: a write moves it (and the change time) as it
	// begins; a rename, link or chmod moves only the change time and
	// cannot tear a read.
	wait := time.Until(st.mtime.Add(settleWindow))
	if wait <= 0 {
		return nil
	}
	time.Sleep(min(wait, settleWindow)) // a modification time in the future waits no longer
	if len(buf) == 0 {
		buf = make([]byte, 64<<10)
	}
	h.Reset()
	for off := int64(0); off < st.size; {
		n, err := f.readAt(buf[:min(int64(len(buf)), st.size-off)], off)
		h.Write(buf[:n])
		off += int64(n)
		if err == io.EOF && off < st.size {
			return fmt.Errorf("%w: %s: file shrank while read", ErrChanged, rel)
		}
		if err != nil && err != io.EOF {
			return readFailed(f, st, rel, fmt.Errorf("reading %s again: %w", rel, err))
		}
	}
	var again [32]byte
	if h.Sum(again[:0]); again != *sum {
		return fmt.Errorf("%w: %s: it was being written while read; retry when the tree is quiet", ErrChanged, rel)
	}
	return checkUnchanged(f, st, rel)
}
