package workspace

import (
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
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/airlockdev/airlock/internal/tree"
	"github.com/airlockdev/airlock/sandbox"
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

	journalDir string          // where the journal of temporary files goes (see tmpfiles.go)
	jf         *os.File        // the journal, once a temporary file was made
	noted      map[string]bool // the directories it lists
	made       []string        // the directories mkdirs made
	leftover   bool            // a temporary file could not be removed: the journal stays

	spoolMade   bool                  // the runtime directory exists for spool
	beforePlace func(tmp, rel string) // tests: runs before tmp is renamed over rel
}

// openLocal opens the work tree dir; the temporary files of its writes
// are journaled in journalDir.
func openLocal(dir string, hk hashKind, journalDir string) (*local, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace: opening the local work tree: %w", err)
	}
	return &local{dir: dir, root: root, hk: hk, journalDir: journalDir, noted: map[string]bool{}}, nil
}

// unmake removes the directories mkdirs made that are still empty, last
// made first: what a restore that failed made for the entries it did not
// get to write (a directory never holds content of its own in a git work
// tree, and an empty one would stand in the way of the sandbox's next
// entry there).
func (l *local) unmake() {
	for i := len(l.made) - 1; i >= 0; i-- {
		l.root.Remove(l.made[i]) // only when empty
	}
	l.made = nil
}

func (l *local) close() {
	l.closeJournal()
	l.root.Close()
}

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

// blockedAt returns the first existing component above rel that is not
// a directory (a link, a file or anything else), "" when every existing
// one is a directory (missing ones may be created).
func (l *local) blockedAt(rel string) (string, error) {
	parts := strings.Split(rel, "/")
	p := ""
	for _, c := range parts[:len(parts)-1] {
		p = path.Join(p, c)
		fi, err := l.root.Lstat(p)
		if cannotExist(err) {
			return "", nil
		}
		if err != nil {
			return "", err
		}
		if !fi.IsDir() {
			return p, nil
		}
	}
	return "", nil
}

// parentsBlocked reports whether a component above rel is a link or not
// a directory.
func (l *local) parentsBlocked(rel string) (bool, error) {
	q, err := l.blockedAt(rel)
	return q != "", err
}

// stat reads rel's local state; a path whose parent is a link or a file is
// 'x'.
func (l *local) stat(rel string) (state, error) {
	st, q, err := l.statAt(rel)
	if q != "" {
		return state{kind: 'x'}, err
	}
	return st, err
}

// statAt reads rel's local state. When a component above rel is a link or
// not a directory, rel does not exist locally: the state is absent and
// blocker names that component.
func (l *local) statAt(rel string) (st state, blocker string, err error) {
	blocker, err = l.blockedAt(rel)
	if err != nil || blocker != "" {
		return state{}, blocker, err
	}
	st, err = l.statLeaf(rel)
	return st, "", err
}

// statLeaf reads the state of rel, whose parents are directories.
func (l *local) statLeaf(rel string) (state, error) {
	fi, err := l.root.Lstat(rel)
	if cannotExist(err) {
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
		f, err := tree.OpenWorkTreeFile(l.dir, rel)
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

// cannotExist reports a lookup that found nothing: the path does not
// exist, or its name is one the file system cannot hold (too long, or an
// encoding it refuses), so it cannot exist either.
func cannotExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENAMETOOLONG) || errors.Is(err, syscall.EILSEQ)
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
			if err := l.root.Mkdir(p, 0o755); err == nil {
				l.made = append(l.made, p)
			} else if !errors.Is(err, fs.ErrExist) {
				return asNameError(p, err)
			}
			continue
		}
		if err != nil {
			return asNameError(p, err) // a name too long to look up
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s: %w", p, errBlocked)
		}
	}
	return nil
}

// tmpFile writes the content of r to a new temporary file in the
// directory dir (which exists) and returns its path.
func (l *local) tmpFile(dir string, r io.Reader, perm fs.FileMode) (string, error) {
	if err := l.note(dir); err != nil {
		return "", err
	}
	tmp := path.Join(dir, tmpBase())
	// A git round writes a file as git checks one out: 0666, or 0777 when
	// executable, less the umask (and a default ACL); a plain round writes
	// perm exactly (the sandbox's bits, less what withheld takes).
	git := l.hk != hashSHA256
	mode := fs.FileMode(0o600)
	if git {
		mode = 0o666 | perm&0o111
	}
	f, err := l.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, mode)
	if err != nil {
		return "", err
	}
	_, err = io.Copy(f, r)
	if err == nil && !git {
		err = f.Chmod(perm &^ (fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky) & fs.ModePerm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		l.removeTmp(tmp)
		return "", err
	}
	return tmp, nil
}

// spool writes the content of r to a new temporary file in the local
// runtime directory and returns its path.
func (l *local) spool(r io.Reader, perm fs.FileMode) (string, error) {
	if !l.spoolMade { // once per restore, not per file
		if err := l.mkdirs(sandbox.RuntimeDir + "/spool"); err != nil {
			return "", l.writeError(sandbox.RuntimeDir, err)
		}
		l.spoolMade = true
	}
	tmp, err := l.tmpFile(sandbox.RuntimeDir, r, perm)
	if err != nil {
		return "", l.writeError(sandbox.RuntimeDir, err)
	}
	return tmp, nil
}

// place renames the temporary file or link tmp over rel.
func (l *local) place(tmp, rel string) error {
	if l.beforePlace != nil {
		l.beforePlace(tmp, rel)
	}
	if err := l.root.Rename(tmp, rel); err != nil {
		l.removeTmp(tmp)
		return asNameError(rel, err)
	}
	return nil
}

// placeSpool renames the spooled file tmp (see spool) to rel, making
// rel's missing parents (see move).
func (l *local) placeSpool(tmp, rel string, perm fs.FileMode) error {
	if err := l.mkdirs(rel); err != nil {
		l.removeTmp(tmp)
		return err
	}
	if l.beforePlace != nil {
		l.beforePlace(tmp, rel)
	}
	return asNameError(rel, l.move(tmp, rel, perm))
}

// moveIn renames the spooled file spool to a new temporary name in the
// directory dir (which exists) and returns it (see move).
func (l *local) moveIn(spool, dir string, perm fs.FileMode) (string, error) {
	if err := l.note(dir); err != nil {
		l.removeTmp(spool)
		return "", err
	}
	tmp := path.Join(dir, tmpBase())
	if err := l.move(spool, tmp, perm); err != nil {
		return "", err
	}
	return tmp, nil
}

// move renames the spooled file spool to the path to, whose directory
// exists; across file systems (a mount point inside the work tree) it
// copies spool to a temporary file beside to and renames that. spool is
// gone either way.
func (l *local) move(spool, to string, perm fs.FileMode) error {
	err := l.root.Rename(spool, to)
	if !errors.Is(err, syscall.EXDEV) {
		if err != nil {
			l.removeTmp(spool)
		}
		return err
	}
	defer l.removeTmp(spool)
	f, err := l.root.Open(spool)
	if err != nil {
		return err
	}
	defer f.Close()
	tmp, err := l.tmpFile(path.Dir(to), f, perm)
	if err != nil {
		return err
	}
	if err := l.root.Rename(tmp, to); err != nil {
		l.removeTmp(tmp)
		return err
	}
	return nil
}

// writeFile replaces rel with the content of r, atomically (a temporary
// file in the same directory, renamed over rel).
func (l *local) writeFile(rel string, r io.Reader, perm fs.FileMode) error {
	if err := l.mkdirs(rel); err != nil {
		return err
	}
	tmp, err := l.tmpFile(path.Dir(rel), r, perm)
	if err != nil {
		return err
	}
	return l.place(tmp, rel)
}

// writeLink replaces rel with a symbolic link to target, atomically.
func (l *local) writeLink(rel, target string) error {
	if err := l.mkdirs(rel); err != nil {
		return err
	}
	tmp, err := l.tmpLink(path.Dir(rel), target)
	if err != nil {
		return asNameError(rel, err) // a target too long
	}
	return l.place(tmp, rel)
}

// tmpLink makes a symbolic link to target under a new temporary name in
// the directory dir (which exists) and returns that name.
func (l *local) tmpLink(dir, target string) (string, error) {
	if err := l.note(dir); err != nil {
		return "", err
	}
	tmp := path.Join(dir, tmpBase())
	if err := l.root.Symlink(target, tmp); err != nil {
		return "", err
	}
	return tmp, nil
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

// Why a sandbox entry is refused (Result.Reasons), for the entries the
// 3-way merge itself refuses.
const (
	whyLinkOutside  = "a symbolic link whose target leaves the work tree"
	whyLinkTop      = "a symbolic link to the top of the work tree"
	whyLinkReserved = "a symbolic link whose target enters .git or the runtime directory"
	whyLinkThrough  = "a symbolic link whose target passes through another symbolic link"
	whyLinkChained  = "a symbolic link that the target of the local symbolic link %s would pass through"
	whyBelowKept    = "below %s, a local edit that was kept"
	whyLocalLink    = "a local symbolic link or special file stands there, which a plain directory's round does not send"
	whyBelowLocal   = "below %s, a local symbolic link or special file that a plain directory's round does not send"
	whyDirHolds     = "the local directory it replaces holds %s, which the sandbox does not replace (a local edit, or an untracked or ignored file)"
	whyBelowRefused = "below %s, whose change of type was refused"
	whyBelowNonDir  = "below %s, which the sandbox sent as a file or link"
)

// writeError is a work-tree write that failed: the restore stops, and
// nothing is lost, since the sandbox still holds what did not arrive.
func (l *local) writeError(rel string, err error) error {
	return fmt.Errorf("workspace: writing %s in %s: %w; nothing was lost (the sandbox still holds it): fix the cause (free space, make it writable) and run Restore again", rel, l.dir, err)
}

// linkCheck decides which of the links a restore would write may be
// written: every one must resolve inside the work tree in the tree as
// restored. A target is walked component by component from the link's
// directory against the final tree (the local tree with the restore's
// planned files and links in place): it may not climb above the top, end
// at the top, enter .git or the runtime directory, or pass through any
// link, whether restored in this round or already local; and no local
// link may resolve through a link the restore writes. Which links arrive
// therefore does not depend on their order.
type linkCheck struct {
	l      *local
	links  map[string]string // the links the restore would write: path -> target
	folded map[string]bool   // the same paths as a case-folding file system reads them
	files  map[string]bool   // the paths the restore writes as regular files
	kinds  map[string]byte   // memo of fsKind
	tops   []string          // the work tree's top as an absolute path, as given and resolved
}

func newLinkCheck(l *local, links map[string]string, files map[string]bool) *linkCheck {
	c := &linkCheck{l: l, links: links, folded: map[string]bool{}, files: files, kinds: map[string]byte{}, tops: []string{l.dir}}
	for p := range links {
		c.folded[foldPath(p)] = true
	}
	if real, err := filepath.EvalSymlinks(l.dir); err == nil && real != l.dir {
		c.tops = append(c.tops, real)
	}
	return c
}

// fsKind is what p is in the local tree now, read component by
// component without following a link: 0 when absent (or below a
// non-directory), else 'd', 'l', 'f' or 'x'.
func (c *linkCheck) fsKind(p string) (byte, error) {
	if k, ok := c.kinds[p]; ok {
		return k, nil
	}
	var k byte
	if d := path.Dir(p); d != "." {
		pk, err := c.fsKind(d)
		if err != nil {
			return 0, err
		}
		if pk != 'd' {
			c.kinds[p] = 0
			return 0, nil
		}
	}
	fi, err := c.l.root.Lstat(p)
	switch {
	case cannotExist(err) || errors.Is(err, syscall.ENOTDIR):
	case err != nil:
		return 0, fmt.Errorf("workspace: reading local %s: %w", p, err)
	case fi.IsDir():
		k = 'd'
	case fi.Mode()&fs.ModeSymlink != 0:
		k = 'l'
	case fi.Mode().IsRegular():
		k = 'f'
	default:
		k = 'x'
	}
	c.kinds[p] = k
	return k, nil
}

// foldPath is p as a case-folding file system reads each component.
func foldPath(p string) string {
	parts := strings.Split(p, "/")
	for i, c := range parts {
		parts[i] = foldName(c)
	}
	return strings.Join(parts, "/")
}

// writesLink reports whether the restore would write a link at p, or at
// a path a case-folding file system reads as p.
func (c *linkCheck) writesLink(p string) bool {
	_, ok := c.links[p]
	return ok || c.folded[foldPath(p)]
}

// isLink reports whether p is a link in the final tree.
func (c *linkCheck) isLink(p string) (bool, error) {
	if c.writesLink(p) {
		return true, nil
	}
	if c.files[p] {
		return false, nil
	}
	k, err := c.fsKind(p)
	return k == 'l', err
}

func dirParts(p string) []string {
	if d := path.Dir(p); d != "." {
		return strings.Split(d, "/")
	}
	return nil
}

// why says why the link p -> target may not be written, "" when it may.
func (c *linkCheck) why(p, target string) (string, error) {
	if target == "" || path.IsAbs(target) || strings.ContainsRune(target, 0) || len(target) > 4096 {
		return whyLinkOutside, nil
	}
	cur := dirParts(p)
	for _, comp := range strings.Split(target, "/") {
		switch comp {
		case "", ".":
			continue
		case "..":
			if len(cur) == 0 {
				return whyLinkOutside, nil
			}
			cur = cur[:len(cur)-1]
			continue
		}
		cur = append(cur, comp)
		q := strings.Join(cur, "/")
		if !tree.ValidPath(q) {
			return whyLinkOutside, nil
		}
		if reserved(q) {
			return whyLinkReserved, nil
		}
		link, err := c.isLink(q)
		if err != nil {
			return "", err
		}
		if link {
			return whyLinkThrough, nil
		}
	}
	if len(cur) == 0 {
		return whyLinkTop, nil
	}
	return "", nil
}

// inTree maps an absolute link target onto the work tree: its components
// below the top, ok false when it points elsewhere.
func (c *linkCheck) inTree(target string) (parts []string, ok bool) {
	for _, top := range c.tops {
		if target == top {
			return nil, true
		}
		if rest, found := strings.CutPrefix(target, top+"/"); found {
			return strings.Split(rest, "/"), true
		}
	}
	return nil, false
}

// maxHops bounds the links followed while resolving one local link.
const maxHops = 40

// through follows the local link e (target t) through the final tree and
// returns the first link the restore would write that it passes through,
// "" when none. Local links are followed; a target that leaves the work
// tree ends the walk.
func (c *linkCheck) through(e, t string) (string, error) {
	cur := dirParts(e)
	rest := strings.Split(t, "/")
	if path.IsAbs(t) {
		parts, ok := c.inTree(path.Clean(t))
		if !ok {
			return "", nil
		}
		cur, rest = nil, parts
	}
	for hops := 0; len(rest) > 0; {
		comp := rest[0]
		rest = rest[1:]
		switch comp {
		case "", ".":
			continue
		case "..":
			if len(cur) == 0 {
				return "", nil
			}
			cur = cur[:len(cur)-1]
			continue
		}
		q := strings.Join(append(slices.Clone(cur), comp), "/")
		if c.writesLink(q) {
			for p := range c.links {
				if p == q || foldPath(p) == foldPath(q) {
					return p, nil
				}
			}
		}
		if !c.files[q] {
			k, err := c.fsKind(q)
			if err != nil {
				return "", err
			}
			if k == 'l' {
				if hops++; hops > maxHops {
					return "", nil
				}
				lt, err := c.l.root.Readlink(q)
				if err != nil {
					return "", fmt.Errorf("workspace: reading local link %s: %w", q, err)
				}
				more := strings.Split(lt, "/")
				if path.IsAbs(lt) {
					parts, ok := c.inTree(path.Clean(lt))
					if !ok {
						return "", nil
					}
					cur, more = nil, parts
				}
				rest = append(more, rest...)
				continue
			}
		}
		cur = append(cur, comp)
	}
	return "", nil
}

// decide returns the links that may not be written, with the reason.
func (c *linkCheck) decide() (map[string]string, error) {
	out := map[string]string{}
	for p, t := range c.links {
		why, err := c.why(p, t)
		if err != nil {
			return nil, err
		}
		if why != "" {
			out[p] = why
		}
	}
	if len(out) == len(c.links) {
		return out, nil
	}
	// A local link that would resolve through one of them.
	err := filepath.WalkDir(c.l.dir, func(fp string, d fs.DirEntry, err error) error {
		if err != nil {
			if fp == c.l.dir {
				return err
			}
			return nil // unreadable: nothing to follow there
		}
		if d.IsDir() {
			if fp != c.l.dir && isDotGit(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		rel, err := filepath.Rel(c.l.dir, fp)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if _, ok := c.links[rel]; ok || c.files[rel] {
			return nil // replaced
		}
		t, err := os.Readlink(fp)
		if err != nil {
			return nil
		}
		q, err := c.through(rel, t)
		if err != nil {
			return err
		}
		if q != "" && out[q] == "" {
			out[q] = fmt.Sprintf(whyLinkChained, rel)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("workspace: reading the links of %s: %w", c.l.dir, err)
	}
	return out, nil
}

// holds returns the first entry below the local directory rel, other than
// a directory, for which gone is false ("" when there is none).
func (l *local) holds(rel string, gone func(string) bool) (string, error) {
	var found string
	err := fs.WalkDir(l.root.FS(), rel, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && !gone(p) {
			found = p
			return fs.SkipAll
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("workspace: reading the local directory %s: %w", rel, err)
	}
	return found, nil
}

// removeDir removes the local directory rel and the directories below it,
// which must be empty of anything else by now.
func (l *local) removeDir(rel string) error {
	var dirs []string
	err := fs.WalkDir(l.root.FS(), rel, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	if err != nil {
		return l.writeError(rel, err)
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := l.root.Remove(dirs[i]); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return l.writeError(dirs[i], err)
		}
	}
	return nil
}

// below reports whether p is below dir.
func below(p, dir string) bool { return strings.HasPrefix(p, dir+"/") }

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
