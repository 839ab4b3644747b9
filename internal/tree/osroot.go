package tree

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// rootNode is a directory opened as its own os.Root. os.Root refuses to leave
// the root but follows links inside it, even with O_NOFOLLOW; the lstat and
// SameFile checks around every open are what keep a link from being followed.
type rootNode struct {
	r   *os.Root
	top *os.Root // the walk root, for FollowLinksWithin
}

func osRootOpen(root string, want fs.FileInfo) (node, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, &fs.PathError{Op: "walk", Path: root, Err: fmt.Errorf("%w: %w", ErrNotDir, err)}
	}
	fi, err := r.Stat(".")
	if err != nil || !os.SameFile(fi, want) {
		r.Close()
		return nil, &fs.PathError{Op: "walk", Path: root, Err: fmt.Errorf("%w: the root was replaced while opened", ErrChanged)}
	}
	return &rootNode{r: r, top: r}, nil
}

func (n *rootNode) names() ([]string, error) {
	d, err := n.r.Open(".")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.Readdirnames(-1)
}

func (n *rootNode) info() (fs.FileInfo, error) { return n.r.Stat(".") }

func (n *rootNode) close() error { return n.r.Close() }

func (n *rootNode) lstat(name string) (stat, error) {
	fi, err := n.r.Lstat(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return stat{}, fs.ErrNotExist
		}
		return stat{}, err
	}
	return statInfo(fi), nil
}

func (n *rootNode) openDir(name string, want stat) (node, error) {
	sub, err := n.r.OpenRoot(name)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrChanged, err)
	}
	fi, err := sub.Stat(".")
	if err == nil {
		err = checkSame(fi, name, want)
	}
	if err != nil {
		sub.Close()
		return nil, fmt.Errorf("%w: %s was replaced during the walk", ErrChanged, name)
	}
	return &rootNode{r: sub, top: n.top}, nil
}

func (n *rootNode) openFile(name string, want stat) (srcFile, error) {
	f, err := n.r.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return srcFile{}, fmt.Errorf("%w: %w", ErrChanged, err)
	}
	if _, err := verifyOpened(f, name, want); err != nil {
		return srcFile{}, err
	}
	return srcFile{fd: -1, f: f}, nil
}

func (n *rootNode) lstatBelow(p string) (stat, string, error) {
	fi, err := n.top.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return stat{}, "", fs.ErrNotExist
	}
	if err != nil {
		return stat{}, "", err
	}
	st := statInfo(fi)
	if st.mode&fs.ModeSymlink == 0 {
		return st, "", nil
	}
	target, err := n.top.Readlink(p)
	if errors.Is(err, fs.ErrNotExist) {
		return stat{}, "", fs.ErrNotExist
	}
	if errors.Is(err, syscall.EINVAL) { // no longer a link
		return stat{}, "", fmt.Errorf("%w: %s was replaced during the walk", ErrChanged, p)
	}
	if err != nil {
		return stat{}, "", err
	}
	return st, target, nil
}
