package hostiletree

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Type is the kind of a Node.
type Type int

// The node types.
const (
	File     Type = iota // a regular file holding Data
	Dir                  // a directory
	Link                 // a symbolic link whose text is Target
	HardLink             // a second name for the regular file at Target (a path of the tree)
	FIFO                 // a named pipe
	Socket               // a socket file (made with mknod, nothing listens)
	Sparse               // a regular file of Size bytes, all a hole but its last byte
)

func (t Type) String() string {
	switch t {
	case File:
		return "file"
	case Dir:
		return "dir"
	case Link:
		return "link"
	case HardLink:
		return "hardlink"
	case FIFO:
		return "fifo"
	case Socket:
		return "socket"
	case Sparse:
		return "sparse"
	}
	return fmt.Sprintf("Type(%d)", int(t))
}

// Node is one entry of a hostile tree.
type Node struct {
	Path   string      // slash path relative to the tree's root; any byte but NUL, never "." or ".." components
	Type   Type        // what to create
	Data   string      // File: the content
	Mode   fs.FileMode // File, Dir, Sparse: permission and setuid/setgid/sticky bits; 0 means 0644 (file) or 0755 (dir)
	Target string      // Link: the link's text; HardLink: the tree path of the file it names
	Size   int64       // Sparse: the apparent size
}

// Case is one hostile tree, possibly over several rounds: a builder
// materializes Rounds[0], runs its operation, replaces the tree with
// Rounds[1], runs again, and so on (type changes between rounds).
type Case struct {
	Name   string
	Rounds [][]Node
	// Escapes: some link of some round resolves outside the root once
	// written; a builder that writes the tree back must refuse it.
	Escapes bool
	// Special: the case holds FIFOs, sockets, hard links or setuid bits,
	// none of which may arrive as they are.
	Special bool
	// Big: the case is a volume attack (many files, a huge sparse file);
	// builders choose what to run it against.
	Big bool
}

func f(p, data string) Node        { return Node{Path: p, Type: File, Data: data} }
func d(p string) Node              { return Node{Path: p, Type: Dir} }
func l(p, target string) Node      { return Node{Path: p, Type: Link, Target: target} }
func hard(p, target string) Node   { return Node{Path: p, Type: HardLink, Target: target} }
func up(n int) string              { return strings.Join(slices.Repeat([]string{".."}, n), "/") }
func one(nodes ...Node) [][]Node   { return [][]Node{nodes} }
func rounds(rs ...[]Node) [][]Node { return rs }

// Cases returns the table: every small case. Many and SparseFile make the
// two volume cases, whose size the caller picks.
func Cases() []Case {
	var depths []Node
	dir := ""
	for k := 1; k <= 4; k++ {
		dir = path.Join(dir, fmt.Sprintf("d%d", k))
		depths = append(depths,
			f(dir+"/file", "depth "+fmt.Sprint(k)),
			l(dir+"/up-in", up(k)),                   // resolves to the root: inside
			l(dir+"/up-out", up(k+1)),                // one level above the root
			l(dir+"/up-far", up(k+8)),                // far above, clamped at "/"
			l(dir+"/up-self", up(k)+"/"+dir+"/file"), // back down to a file of the tree: inside
		)
	}
	return []Case{
		{Name: "link-chain", Escapes: true, Rounds: one(
			f("chain/x", "x"),
			l("chain/a", "b"),
			l("chain/b", "c"),
			l("chain/c", "../../outside"), // a -> b -> c -> outside the root
			l("chain/in", "x"),
			l("chain/loop1", "loop2"),
			l("chain/loop2", "loop1"),
		)},
		{Name: "dotdot-every-depth", Escapes: true, Rounds: one(depths...)},
		{Name: "through-a-link", Escapes: true, Rounds: one(
			// Each text stays inside when read as text; each passes
			// through d/l1, which is the root, and climbs out of it.
			f("d/f", "f"),
			l("d/l1", ".."),
			l("d/l2", "l1/.."),
			l("d/l3", "l1/../outside"),
			l("via", "d/l1/.."),
			l("via2", "d/l2/d"),
			// e/self stays inside (it is e), so a text check passes it;
			// through it, ".." climbs one level more than the text says.
			f("e/f", "f"),
			l("e/self", "../e"),
			l("e/esc", "self/../.."),
			l("e/esc-file", "self/../../outside/victim"),
			l("e/hop2", "self/self/../.."),
		)},
		{Name: "through-a-restored-link", Escapes: true, Rounds: rounds(
			// Round 0 brings back a harmless link; round 1 passes through
			// it, now local.
			[]Node{f("e/f", "f"), l("e/self", "../e"), l("e/in", "self/f")},
			[]Node{f("e/f", "f"), l("e/self", "../e"), l("e/in", "self/f"), l("e/esc", "self/../.."), l("top", "e/self/../../outside")},
		)},
		{Name: "absolute", Escapes: true, Rounds: one(
			f("keep", "keep"),
			l("abs-file", "/etc/passwd"),
			l("abs-root", "/"),
			l("abs-tmp", "/tmp"),
		)},
		{Name: "dangling", Escapes: true, Rounds: one(
			f("keep", "keep"),
			l("dangling-in", "missing/x"),
			l("dangling-out", "../missing-outside/x"),
		)},
		{Name: "into-dot-git", Rounds: one(
			f("keep", "keep"),
			l("g-config", ".git/config"),
			l("g-dir", ".git"),
			l("g-hooks", ".GIT/hooks"),
			l("g-deep", "sub/../.git/HEAD"),
		)},
		{Name: "hard-links", Special: true, Rounds: one(
			f("h/one", "shared bytes"),
			hard("h/two", "h/one"),
			f("h/alone", "alone"),
		)},
		{Name: "fifo-socket", Special: true, Rounds: one(
			f("special/ok", "ok"),
			Node{Path: "special/fifo", Type: FIFO},
			Node{Path: "special/sock", Type: Socket},
		)},
		{Name: "setuid", Special: true, Rounds: one(
			Node{Path: "bin/suid", Type: File, Data: "#!/bin/sh\necho suid\n", Mode: 0o755 | fs.ModeSetuid},
			Node{Path: "bin/sgid", Type: File, Data: "#!/bin/sh\necho sgid\n", Mode: 0o755 | fs.ModeSetgid},
			Node{Path: "bin/plain", Type: File, Data: "#!/bin/sh\necho plain\n", Mode: 0o755},
		)},
		{Name: "odd-names", Rounds: one(
			f("new\nline", "newline"),
			f("bad-\xff\xfe-utf8", "invalid utf-8"),
			f("rlo-\u202egpj.exe", "right-to-left override"),
			f(strings.Repeat("n", 255), "255 bytes"),
			f("dir-"+strings.Repeat("m", 251)+"/"+strings.Repeat("o", 255), "two long components"),
			f(" lead and trail ", "spaces"),
			f("-dash", "dash"),
			f("tab\tname", "tab"),
			f("back\\slash", "backslash"),
		)},
		{Name: "git-spellings", Rounds: one(
			f("keep", "keep"),
			f(".GIT/config", "[core]\n\thooksPath = /tmp\n"),
			f(".Git/HEAD", "ref: refs/heads/evil\n"),
			f(".git./config", "[core]\n"),
			f("git~1/config", "[core]\n"),
			f("GIT~1/hooks/post-checkout", "#!/bin/sh\n"),
			f(".git\u200c/config", "[core]\n"), // HFS+ ignores U+200C
			f("sub/.git/config", "[core]\n"),
			f("sub/.GIT/HEAD", "ref: refs/heads/evil\n"),
		)},
		{Name: "case-fold-twins", Rounds: one(
			f("Twin", "upper"),
			f("twin", "lower"),
			f("dir/A", "upper A"),
			f("dir/a", "lower a"),
			f("DIR/b", "other dir"),
		)},
		{Name: "type-changes", Escapes: true, Rounds: rounds(
			[]Node{
				f("target", "target"),
				f("t1", "file first"),
				d("t2"), f("t2/inner", "inner"),
				l("t3", "target"),
				f("sub/x", "x"), l("d", "sub"), // a link brought back in an earlier round ...
			},
			[]Node{
				f("target", "target"),
				d("t1"), f("t1/planted", "now a dir"),
				l("t2", "target"),
				f("t3", "now a file"),
				f("sub/x", "x"), d("d"), f("d/planted", "planted under a former link"), // ... replaced by a directory
			},
			[]Node{
				f("target", "target"),
				l("t1", "target"),
				f("t2", "now a file"),
				d("t3"), f("t3/planted", "now a dir"),
				f("sub/x", "x"), l("d", ".."), // the directory replaced by a link out of the root
			},
			[]Node{
				f("target", "target"),
				f("t1", "a file again"),
				d("t2"), f("t2/inner", "a dir again"),
				l("t3", "t2/inner"),
				f("sub/x", "x"), f("d", "a file at last"),
			},
		)},
	}
}

// Many returns the case of n empty files in directories of 1000.
func Many(n int) Case {
	nodes := make([]Node, 0, n)
	for i := range n {
		nodes = append(nodes, f(fmt.Sprintf("many/%03d/e%06d", i/1000, i), ""))
	}
	return Case{Name: fmt.Sprintf("many-empty-%d", n), Big: true, Rounds: one(nodes...)}
}

// SparseFile returns the case of one sparse file of size bytes beside a
// small ordinary file.
func SparseFile(size int64) Case {
	return Case{Name: fmt.Sprintf("sparse-%d", size), Big: true, Rounds: one(
		f("small", "small"),
		Node{Path: "huge.bin", Type: Sparse, Size: size},
	)}
}

// Write creates nodes under root (which must exist), creating missing
// parent directories 0755. It refuses a node path that is not clean and
// relative, and one whose parent is a link it would follow.
func Write(root string, nodes []Node) error {
	made := map[string]bool{} // parent directories already checked or created
	for _, n := range nodes {
		if err := checkPath(n.Path); err != nil {
			return err
		}
		p := filepath.Join(root, filepath.FromSlash(n.Path))
		if dir := path.Dir(n.Path); !made[dir] {
			if err := mkdirs(root, dir); err != nil {
				return err
			}
			made[dir] = true
		}
		if err := write(root, p, n); err != nil {
			return fmt.Errorf("hostiletree: writing %s %q: %w", n.Type, n.Path, err)
		}
	}
	return nil
}

func checkPath(p string) error {
	if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, "\x00") {
		return fmt.Errorf("hostiletree: node path %q is not relative", p)
	}
	for _, c := range strings.Split(p, "/") {
		if c == "" || c == "." || c == ".." {
			return fmt.Errorf("hostiletree: node path %q is not clean", p)
		}
	}
	return nil
}

// mkdirs creates the directories of rel under root one by one, refusing
// to pass through a link.
func mkdirs(root, rel string) error {
	if rel == "." {
		return nil
	}
	cur := root
	for _, c := range strings.Split(rel, "/") {
		cur = filepath.Join(cur, c)
		fi, err := os.Lstat(cur)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := os.Mkdir(cur, 0o755); err != nil {
				return err
			}
		case err != nil:
			return err
		case !fi.IsDir():
			return fmt.Errorf("hostiletree: %s is a %v, not a directory: a node cannot be written below it", cur, fi.Mode().Type())
		}
	}
	return nil
}

func write(root, p string, n Node) error {
	switch n.Type {
	case File:
		mode := n.Mode
		if mode == 0 {
			mode = 0o644
		}
		fh, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode.Perm())
		if err != nil {
			return err
		}
		if n.Data != "" {
			if _, err := fh.WriteString(n.Data); err != nil {
				_ = fh.Close()
				return err
			}
		}
		if err := fh.Close(); err != nil {
			return err
		}
		if n.Mode == 0 {
			return nil // 0644 less the umask
		}
		return os.Chmod(p, mode) // the umask applied at creation; setuid needs chmod
	case Dir:
		mode := n.Mode
		if mode == 0 {
			mode = 0o755
		}
		if err := os.Mkdir(p, mode.Perm()); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		return os.Chmod(p, mode)
	case Link:
		return os.Symlink(n.Target, p)
	case HardLink:
		return os.Link(filepath.Join(root, filepath.FromSlash(n.Target)), p)
	case FIFO:
		return syscall.Mkfifo(p, 0o644)
	case Socket:
		return syscall.Mknod(p, syscall.S_IFSOCK|0o644, 0)
	case Sparse:
		fh, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return err
		}
		if n.Size > 0 {
			if _, err := fh.WriteAt([]byte{1}, n.Size-1); err != nil {
				_ = fh.Close()
				return err
			}
		}
		return fh.Close()
	}
	return fmt.Errorf("unknown node type %v", n.Type)
}

// Clear removes every entry of dir except the names in keep, without
// following links.
func Clear(dir string, keep ...string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if slices.Contains(keep, e.Name()) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// LinksOutside walks root without following links and returns, sorted,
// the slash paths of the links below it that resolve outside root: their
// target, resolved component by component against the tree as it is now
// (following every link on the way, as the kernel would), leaves root. A
// dangling link counts by where its missing part would be; a link loop
// counts as inside (nothing can be read through it). A link that resolves
// into one of the forbidden subtrees (slash paths relative to root, such
// as ".git") counts as outside; links inside them are not looked at.
func LinksOutside(root string, forbidden ...string) ([]string, error) {
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, err
	}
	var banned []string
	for _, f := range forbidden {
		banned = append(banned, filepath.Join(real, filepath.FromSlash(f)))
	}
	var out []string
	err = filepath.WalkDir(real, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if de.IsDir() && slices.Contains(banned, p) {
			return filepath.SkipDir
		}
		if de.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		where, err := Resolve(p)
		if err != nil {
			return err
		}
		if where != "" && (!within(real, where) || slices.ContainsFunc(banned, func(b string) bool { return within(b, where) })) {
			rel, err := filepath.Rel(real, p)
			if err != nil {
				return err
			}
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	slices.Sort(out)
	return out, err
}

func within(root, p string) bool {
	return p == root || strings.HasPrefix(p, root+string(filepath.Separator))
}

// Resolve returns where the absolute path p leads, following every link
// on the way component by component; the part past the first missing
// component is joined lexically. It returns "" for a link loop (more than
// 255 links followed).
func Resolve(p string) (string, error) {
	pending := strings.Split(strings.TrimPrefix(filepath.Clean(p), "/"), "/")
	cur := "/"
	hops := 0
	missing := false
	for len(pending) > 0 {
		c := pending[0]
		pending = pending[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, c)
		if missing {
			cur = next
			continue
		}
		fi, err := os.Lstat(next)
		switch {
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
			missing = true
			cur = next
			continue
		case err != nil:
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if hops++; hops > 255 {
			return "", nil
		}
		t, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if strings.HasPrefix(t, "/") {
			cur = "/"
		}
		pending = append(strings.Split(t, "/"), pending...)
	}
	return cur, nil
}

// Describe returns a listing of everything below dir (not following
// links) except the subtree skip (a path below dir, or ""): each entry's
// path, type, permission bits, link text or content hash. Two listings
// differ when anything there was written, created, removed or changed.
func Describe(dir, skip string) (string, error) {
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if skip != "" && p == skip {
			return filepath.SkipDir
		}
		fi, err := de.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%q %v", p, fi.Mode())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " -> %q", t)
		case fi.Mode().IsRegular() && fi.Size() > 64<<20:
			fmt.Fprintf(&b, " %d (not hashed)", fi.Size()) // a sparse giant: its size is enough
		case fi.Mode().IsRegular():
			sum, err := hashFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %d %s", fi.Size(), sum)
		}
		b.WriteByte('\n')
		return nil
	})
	return b.String(), err
}

func hashFile(p string) (string, error) {
	fh, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer fh.Close()
	h := sha256.New()
	if _, err := io.Copy(h, fh); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
