package tree

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

var errNoOpenat2 = errors.New("openat2 unavailable")

const (
	resolveStrict = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS
	openFlags     = unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_NOCTTY
)

// fdNode is a directory opened by descriptor; every lookup below it is one
// openat2 call relative to it.
type fdNode struct {
	f    *os.File
	fd   int     // f's descriptor, read once: f.Fd would make it blocking
	root *fdNode // the walk root, for FollowLinksWithin
}

// openat2 retries EINTR and EAGAIN (openat2 returns EAGAIN when a concurrent
// rename races a RESOLVE_BENEATH lookup).
func openat2(dirfd int, name string, how *unix.OpenHow) (int, error) {
	for i := 0; ; i++ {
		fd, err := unix.Openat2(dirfd, name, how)
		if (err == unix.EINTR || err == unix.EAGAIN) && i < 16 {
			continue
		}
		return fd, err
	}
}

func openat2Root(root string, want fs.FileInfo) (node, error) {
	fd, err := openat2(unix.AT_FDCWD, root, &unix.OpenHow{Flags: openFlags | unix.O_DIRECTORY})
	if err == unix.ENOSYS || err == unix.EPERM {
		return nil, errNoOpenat2
	}
	if err != nil {
		return nil, &fs.PathError{Op: "walk", Path: root, Err: fmt.Errorf("%w: %w", ErrNotDir, err)}
	}
	f := os.NewFile(uintptr(fd), root)
	fi, err := f.Stat()
	if err != nil || !os.SameFile(fi, want) {
		f.Close()
		return nil, &fs.PathError{Op: "walk", Path: root, Err: fmt.Errorf("%w: the root was replaced while opened", ErrChanged)}
	}
	n := &fdNode{f: f, fd: fd}
	n.root = n
	return n, nil
}

func (n *fdNode) names() ([]string, error) {
	if _, err := n.f.Seek(0, 0); err != nil {
		return nil, err
	}
	return n.f.Readdirnames(-1)
}

func (n *fdNode) info() (fs.FileInfo, error) { return n.f.Stat() }

func (n *fdNode) close() error { return n.f.Close() }

func (n *fdNode) lstat(name string) (stat, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(n.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if err == unix.ENOENT {
			return stat{}, fs.ErrNotExist
		}
		return stat{}, err
	}
	return statOf(&st), nil
}

func statOf(st *unix.Stat_t) stat {
	return stat{
		mode:  modeOf(st.Mode),
		size:  st.Size,
		mtime: time.Unix(st.Mtim.Sec, st.Mtim.Nsec),
		raw:   st.Mode, ino: st.Ino, dev: st.Dev, ctime: st.Ctim.Nano(), full: true,
	}
}

// fstatFD fstat's an open descriptor.
func fstatFD(fd int) (stat, error) {
	var st unix.Stat_t
	for {
		err := unix.Fstat(fd, &st)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return stat{}, err
		}
		return statOf(&st), nil
	}
}

// statInfo converts an lstat result of the os package.
func statInfo(fi fs.FileInfo) stat {
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		var st unix.Stat_t
		st.Mode, st.Size, st.Dev, st.Ino = sys.Mode, sys.Size, sys.Dev, sys.Ino
		st.Mtim = unix.Timespec(sys.Mtim)
		st.Ctim = unix.Timespec(sys.Ctim)
		return statOf(&st)
	}
	return stat{mode: fi.Mode(), size: fi.Size(), mtime: fi.ModTime(), fi: fi}
}

func modeOf(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	}
	return mode
}

// open opens name below n and checks that it is the file want describes.
// It returns the descriptor and its fstat.
func (n *fdNode) open(name string, flags uint64, want stat) (int, stat, error) {
	fd, err := n.openBelow(name, flags)
	if err != nil {
		return -1, stat{}, err
	}
	st, err := fstatFD(fd)
	if err != nil {
		unix.Close(fd)
		return -1, stat{}, fmt.Errorf("fstat %q: %w", name, err)
	}
	if st.dev != want.dev || st.ino != want.ino || st.mode.Type() != want.mode.Type() {
		unix.Close(fd)
		return -1, stat{}, fmt.Errorf("%w: %s was replaced during the walk", ErrChanged, name)
	}
	return fd, st, nil
}

func (n *fdNode) openDir(name string, want stat) (node, error) {
	fd, _, err := n.open(name, unix.O_DIRECTORY, want)
	if err != nil {
		return nil, err
	}
	return &fdNode{f: os.NewFile(uintptr(fd), name), fd: fd, root: n.root}, nil
}

// openFile opens a regular file as a bare descriptor. It takes no fstat
// of its own: the one after the read compares identity, size and times
// with want (the lstat), so a file replaced between the lstat and the open
// fails there with ErrChanged, having been read no further than want's
// size. The open itself follows no link (O_NOFOLLOW, RESOLVE_NO_SYMLINKS)
// and never blocks (O_NONBLOCK).
func (n *fdNode) openFile(name string, want stat) (srcFile, error) {
	fd, err := n.openBelow(name, 0)
	if err != nil {
		return srcFile{}, err
	}
	return srcFile{fd: fd}, nil
}

// openBelow opens the entry name of n with openFlags|flags, following no
// link; an entry that is gone or became a link fails with ErrChanged.
func (n *fdNode) openBelow(name string, flags uint64) (int, error) {
	fd, err := openat2(n.fd, name, &unix.OpenHow{Flags: openFlags | flags, Resolve: resolveStrict})
	if err == unix.ELOOP || err == unix.ENOTDIR || err == unix.EXDEV || err == unix.ENOENT {
		return -1, fmt.Errorf("%w: %s was replaced during the walk", ErrChanged, name)
	}
	return fd, err
}

func (n *fdNode) lstatBelow(p string) (stat, string, error) {
	dir, base := path.Split(p)
	dfd := n.root.fd
	if dir != "" {
		fd, err := openat2(dfd, strings.TrimSuffix(dir, "/"), &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: resolveStrict})
		switch err {
		case nil:
		case unix.ENOENT, unix.ENOTDIR:
			return stat{}, "", fs.ErrNotExist
		case unix.ELOOP, unix.EXDEV:
			return stat{}, "", fmt.Errorf("%w: %s was replaced during the walk", ErrChanged, p)
		default:
			return stat{}, "", err
		}
		defer unix.Close(fd)
		dfd = fd
	}
	var sys unix.Stat_t
	if err := unix.Fstatat(dfd, base, &sys, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if err == unix.ENOENT || err == unix.ENOTDIR {
			return stat{}, "", fs.ErrNotExist
		}
		return stat{}, "", err
	}
	st := statOf(&sys)
	if st.mode&fs.ModeSymlink == 0 {
		return st, "", nil
	}
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dfd, base, buf)
		if err == unix.ENOENT {
			return stat{}, "", fs.ErrNotExist
		}
		if err == unix.EINVAL { // no longer a link
			return stat{}, "", fmt.Errorf("%w: %s was replaced during the walk", ErrChanged, p)
		}
		if err != nil {
			return stat{}, "", err
		}
		if n < size || size >= 1<<16 {
			return st, string(buf[:n]), nil
		}
	}
}

func openat2File(root, rel string) (*os.File, error) {
	dfd, err := openat2(unix.AT_FDCWD, root, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_CLOEXEC | unix.O_DIRECTORY})
	if err == unix.ENOSYS || err == unix.EPERM {
		return nil, errNoOpenat2
	}
	if err != nil {
		return nil, fmt.Errorf("opening root %s: %w", root, err)
	}
	defer unix.Close(dfd)
	fd, err := openat2(dfd, rel, &unix.OpenHow{Flags: openFlags, Resolve: resolveStrict})
	switch err {
	case nil:
		return os.NewFile(uintptr(fd), rel), nil
	case unix.ENOSYS, unix.EPERM:
		return nil, errNoOpenat2
	case unix.ELOOP:
		return nil, fmt.Errorf("%w: a component is a symbolic link", ErrLink)
	case unix.EXDEV:
		return nil, ErrEscape
	case unix.ENOENT:
		return nil, fs.ErrNotExist
	case unix.ENOTDIR:
		return nil, fmt.Errorf("%w: a component is not a directory", ErrNotRegular)
	}
	return nil, err
}
