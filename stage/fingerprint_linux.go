package stage

import (
	"io/fs"

	"golang.org/x/sys/unix"
)

// fdDir is a directory opened by descriptor; every lookup is one name
// relative to it, with AT_SYMLINK_NOFOLLOW or O_NOFOLLOW.
type fdDir struct {
	fd  int
	buf []byte
}

const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK

func openFPRoot(src string) (fpDir, fpStat, error) {
	fd, err := unix.Open(src, dirFlags, 0)
	if err != nil {
		return nil, fpStat{}, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fpStat{}, err
	}
	return &fdDir{fd: fd}, toFPStat(&st), nil
}

func (d *fdDir) names() ([]string, error) {
	if d.buf == nil {
		d.buf = make([]byte, 32<<10)
	}
	var names []string
	for {
		n, err := unix.ReadDirent(d.fd, d.buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(d.buf[:n], -1, names)
	}
}

func (d *fdDir) lstat(name string) (fpStat, error) {
	var st unix.Stat_t
	for {
		err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fpStat{}, err
		}
		return toFPStat(&st), nil
	}
}

func (d *fdDir) open(name string) (fpDir, error) {
	fd, err := unix.Openat(d.fd, name, dirFlags, 0)
	if err != nil {
		return nil, err
	}
	return &fdDir{fd: fd, buf: d.buf}, nil
}

func (d *fdDir) close() { unix.Close(d.fd) }

func toFPStat(st *unix.Stat_t) fpStat {
	m := fs.FileMode(st.Mode & 0o777)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		m |= fs.ModeDir
	case unix.S_IFLNK:
		m |= fs.ModeSymlink
	case unix.S_IFREG:
	case unix.S_IFIFO:
		m |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		m |= fs.ModeSocket
	case unix.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		m |= fs.ModeDevice
	default:
		m |= fs.ModeIrregular
	}
	return fpStat{
		mode: m, raw: st.Mode, size: st.Size,
		mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(),
		ino: st.Ino, dev: uint64(st.Dev), full: true,
	}
}
