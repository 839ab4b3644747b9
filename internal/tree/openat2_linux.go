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
	root *os.File // the walk root, for FollowLinksWithin
	own  bool     // f is the root itself
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
	return &fdNode{f: f, root: f, own: true}, nil
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
	if err := unix.Fstatat(int(n.f.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if err == unix.ENOENT {
			return stat{}, fs.ErrNotExist
		}
		return stat{}, err
	}
	return statOf(&st), nil
}

func statOf(st *unix.Stat_t) stat {
	dev, ino := uint64(st.Dev), uint64(st.Ino)
	return stat{
		mode:  modeOf(st.Mode),
		size:  st.Size,
		mtime: time.Unix(st.Mtim.Sec, st.Mtim.Nsec),
		same: func(fi fs.FileInfo) bool {
			sys, ok := fi.Sys().(*syscall.Stat_t)
			return ok && uint64(sys.Dev) == dev && uint64(sys.Ino) == ino
		},
		raw: st.Mode, ino: ino, dev: dev, ctime: st.Ctim.Nano(), full: true,
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
	return stat{mode: fi.Mode(), size: fi.Size(), mtime: fi.ModTime(),
		same: func(o fs.FileInfo) bool { return os.SameFile(fi, o) }}
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

func (n *fdNode) open(name string, flags uint64, want stat) (*os.File, error) {
	fd, err := openat2(int(n.f.Fd()), name, &unix.OpenHow{Flags: openFlags | flags, Resolve: resolveStrict})
	if err != nil {
		if err == unix.ELOOP || err == unix.ENOTDIR || err == unix.EXDEV || err == unix.ENOENT {
			return nil, fmt.Errorf("%w: %s was replaced during the walk", ErrChanged, name)
		}
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := verifyOpened(f, name, want); err != nil {
		return nil, err
	}
	return f, nil
}

func (n *fdNode) openDir(name string, want stat) (node, error) {
	f, err := n.open(name, unix.O_DIRECTORY, want)
	if err != nil {
		return nil, err
	}
	return &fdNode{f: f, root: n.root}, nil
}

func (n *fdNode) openFile(name string, want stat) (*os.File, error) {
	return n.open(name, 0, want)
}

func (n *fdNode) lstatBelow(p string) (stat, string, error) {
	dir, base := path.Split(p)
	dfd := int(n.root.Fd())
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

// ctimeOf returns fi's change time in nanoseconds, when the platform has it.
func ctimeOf(fi fs.FileInfo) (int64, bool) {
	sys, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return sys.Ctim.Nano(), true
}
