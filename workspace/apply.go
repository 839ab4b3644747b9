package workspace

import (
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/airlockdev/airlock/internal/tree"
)

// An entry's state on one side of the 3-way merge.
type state struct {
	kind byte        // 0 absent, 'f' regular file, 'l' symbolic link, 'd' directory, 'x' anything else
	perm fs.FileMode // files: permission bits as compared
	id   string      // files and links: content hash (git blob id or sha256)
}

func (a state) eq(b state) bool { return a == b }

// hashKind says how content is hashed for comparison.
type hashKind int

const (
	hashSHA256    hashKind = iota // plain directories: sha256 of the content
	hashGitSHA1                   // git blob id, sha1 repositories
	hashGitSHA256                 // git blob id, sha256 repositories
)

// local is the host work tree, written only through root.
type local struct {
	dir  string
	root *os.Root
	hk   hashKind
}

func openLocal(dir string, hk hashKind) (*local, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace: opening the local work tree: %w", err)
	}
	return &local{dir: dir, root: root, hk: hk}, nil
}

func (l *local) close() { l.root.Close() }

func (l *local) newHash(size int64) hash.Hash {
	switch l.hk {
	case hashGitSHA1:
		h := sha1.New()
		fmt.Fprintf(h, "blob %d\x00", size)
		return h
	case hashGitSHA256:
		h := sha256.New()
		fmt.Fprintf(h, "blob %d\x00", size)
		return h
	}
	return sha256.New()
}

// filePerm is how a file's permission bits are compared and written: git
// knows only 0644 and 0755; a plain directory keeps the bits without
// setuid, setgid and sticky.
func (l *local) filePerm(m fs.FileMode) fs.FileMode {
	if l.hk != hashSHA256 {
		if m&0o100 != 0 {
			return 0o755
		}
		return 0o644
	}
	return m & fs.ModePerm
}

// parentsState reports what stands in the way of rel's parent directories:
// 0 when every existing component is a real directory (missing ones may be
// created), 'x' when one is a link or not a directory.
func (l *local) parentsBlocked(rel string) (bool, error) {
	parts := strings.Split(rel, "/")
	p := ""
	for _, c := range parts[:len(parts)-1] {
		p = path.Join(p, c)
		fi, err := l.root.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if !fi.IsDir() {
			return true, nil
		}
	}
	return false, nil
}

// stat reads rel's local state; a path whose parent is a link or a file is
// 'x'.
func (l *local) stat(rel string) (state, error) {
	blocked, err := l.parentsBlocked(rel)
	if err != nil {
		return state{}, err
	}
	if blocked {
		return state{kind: 'x'}, nil
	}
	fi, err := l.root.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return state{}, nil
	}
	if err != nil {
		return state{}, err
	}
	switch {
	case fi.IsDir():
		return state{kind: 'd'}, nil
	case fi.Mode()&fs.ModeSymlink != 0:
		t, err := l.root.Readlink(rel)
		if err != nil {
			return state{}, err
		}
		h := l.newHash(int64(len(t)))
		io.WriteString(h, t)
		return state{kind: 'l', id: hex.EncodeToString(h.Sum(nil))}, nil
	case fi.Mode().IsRegular():
		f, err := tree.OpenFile(l.dir, rel)
		if err != nil {
			return state{kind: 'x'}, nil
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return state{}, err
		}
		h := l.newHash(st.Size())
		n, err := io.Copy(h, f)
		if err != nil {
			return state{}, fmt.Errorf("workspace: reading local %s: %w", rel, err)
		}
		if n != st.Size() {
			return state{kind: 'x'}, nil // changing under us: treat as a local edit
		}
		return state{kind: 'f', perm: l.filePerm(st.Mode()), id: hex.EncodeToString(h.Sum(nil))}, nil
	}
	return state{kind: 'x'}, nil
}

var errBlocked = errors.New("a parent is a symbolic link or not a directory")

// mkdirs creates the missing parents of rel (mode 0755), refusing to pass
// through a link or a non-directory.
func (l *local) mkdirs(rel string) error {
	parts := strings.Split(rel, "/")
	p := ""
	for _, c := range parts[:len(parts)-1] {
		p = path.Join(p, c)
		fi, err := l.root.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			if err := l.root.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s: %w", p, errBlocked)
		}
	}
	return nil
}

func tmpName(rel string) string {
	dir, base := path.Split(rel)
	return dir + "." + base + ".airlock-" + strings.ToLower(rand.Text()[:16])
}

// writeFile replaces rel with the content of r, atomically (a temporary
// file in the same directory, renamed over rel).
func (l *local) writeFile(rel string, r io.Reader, perm fs.FileMode) (err error) {
	if err := l.mkdirs(rel); err != nil {
		return err
	}
	tmp := tmpName(rel)
	f, err := l.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			l.root.Remove(tmp)
		}
	}()
	_, err = io.Copy(f, r)
	if err == nil {
		err = f.Chmod(perm &^ (fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky) & fs.ModePerm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return l.root.Rename(tmp, rel)
}

// writeLink replaces rel with a symbolic link to target, atomically.
func (l *local) writeLink(rel, target string) error {
	if err := l.mkdirs(rel); err != nil {
		return err
	}
	tmp := tmpName(rel)
	if err := l.root.Symlink(target, tmp); err != nil {
		return err
	}
	if err := l.root.Rename(tmp, rel); err != nil {
		l.root.Remove(tmp)
		return err
	}
	return nil
}

// remove deletes the file or link rel; a directory only when empty.
func (l *local) remove(rel string) error {
	if blocked, err := l.parentsBlocked(rel); err != nil || blocked {
		return errors.Join(err, errBlocked)
	}
	err := l.root.Remove(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// linkInside reports whether a link at rel pointing to target stays inside
// the work tree and out of its reserved directories.
func linkInside(rel, target string) bool {
	if target == "" || path.IsAbs(target) || strings.ContainsRune(target, 0) || len(target) > 4096 {
		return false
	}
	p := path.Join(path.Dir(rel), target)
	return tree.ValidPath(p) && !reserved(p)
}

// gitMode maps a git tree mode onto a state kind and permission.
func gitMode(mode string) (kind byte, perm fs.FileMode, ok bool) {
	switch mode {
	case "000000":
		return 0, 0, true
	case "100644":
		return 'f', 0o644, true
	case "100755":
		return 'f', 0o755, true
	case "120000":
		return 'l', 0, true
	}
	return 'x', 0, false
}
