package tree

import (
	"fmt"
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
	for {
		n, err := unix.Read(s.fd, p)
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
