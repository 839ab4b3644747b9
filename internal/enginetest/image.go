package enginetest

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The image's fixed facts: where the work directory is, who runs there.
const (
	// Workdir is the containers' working directory, owned by User.
	Workdir = "/work"
	// User is the uid:gid the containers run as.
	User = "1000:1000"
	// imageRepo names the test images; the tag is a content hash.
	imageRepo = "airlock-enginetest"
	// imageRecipe changes whenever the layout below does.
	imageRecipe = "airlock-enginetest image v1"
)

// epoch is every entry's modification time, so that the tar stream (and
// its hash) depends on content alone.
var epoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// entry is one member of the image's root file system.
type entry struct {
	name string // absolute path in the image
	typ  byte   // tar.TypeDir, tar.TypeReg, tar.TypeSymlink
	mode int64
	uid  int
	src  string // regular files: the host file to copy
	data []byte // regular files without src
	link string // symlinks
}

// rootfs lists the image: a static busybox and its applets in /bin, the
// host's git (its binary, exec path and templates) with the libraries ldd
// names, /etc/passwd and /etc/group, /tmp, and Workdir owned by User.
func rootfs() ([]entry, error) {
	fsys := newTreeSet()
	if err := fsys.busybox(); err != nil {
		return nil, err
	}
	if err := fsys.git(); err != nil {
		return nil, err
	}
	fsys.dir("/tmp", 0o1777, 0)
	fsys.dir(Workdir, 0o755, 1000)
	fsys.dir("/root", 0o700, 0)
	for _, d := range []string{"/proc", "/sys", "/dev", "/etc"} {
		fsys.dir(d, 0o755, 0)
	}
	fsys.file("/etc/passwd", 0o644, "root:x:0:0:root:/root:/bin/sh\nagent:x:1000:1000:agent:"+Workdir+":/bin/sh\n")
	fsys.file("/etc/group", 0o644, "root:x:0:\nagent:x:1000:\n")
	return fsys.sorted(), nil
}

// treeSet collects entries by name, adding parent directories as needed.
type treeSet struct{ m map[string]entry }

func newTreeSet() *treeSet {
	return &treeSet{m: map[string]entry{"/": {name: "/", typ: tar.TypeDir, mode: 0o755}}}
}

func (s *treeSet) add(e entry) {
	for d := path.Dir(e.name); d != "/"; d = path.Dir(d) {
		if _, ok := s.m[d]; !ok {
			s.m[d] = entry{name: d, typ: tar.TypeDir, mode: 0o755}
		}
	}
	s.m[e.name] = e
}

func (s *treeSet) dir(name string, mode int64, uid int) {
	s.add(entry{name: name, typ: tar.TypeDir, mode: mode, uid: uid})
}

func (s *treeSet) file(name string, mode int64, data string) {
	s.add(entry{name: name, typ: tar.TypeReg, mode: mode, data: []byte(data)})
}

func (s *treeSet) sorted() []entry {
	out := make([]entry, 0, len(s.m))
	for _, e := range s.m {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	return out
}

// hostFile adds the host file src (links followed) at name, with its mode.
func (s *treeSet) hostFile(name, src string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", src)
	}
	s.add(entry{name: name, typ: tar.TypeReg, mode: int64(fi.Mode().Perm()), src: src})
	return nil
}

// busybox adds a static busybox at /bin/busybox and a link to it for each
// applet it lists.
func (s *treeSet) busybox() error {
	bin, err := exec.LookPath("busybox")
	if err != nil {
		return fmt.Errorf("%w: busybox is not on PATH (apt-get install busybox-static)", errMissing)
	}
	static, err := isStatic(bin)
	if err != nil {
		return err
	}
	if !static {
		return fmt.Errorf("%w: %s is dynamically linked; the image needs a static busybox (apt-get install busybox-static)", errMissing, bin)
	}
	out, err := exec.Command(bin, "--list").Output()
	if err != nil {
		return fmt.Errorf("%s --list: %w", bin, err)
	}
	if err := s.hostFile("/bin/busybox", bin); err != nil {
		return err
	}
	for _, applet := range strings.Fields(string(out)) {
		if applet == "busybox" || strings.Contains(applet, "/") || strings.HasPrefix(applet, "[") {
			continue
		}
		s.add(entry{name: "/bin/" + applet, typ: tar.TypeSymlink, mode: 0o777, link: "busybox"})
	}
	return nil
}

// isStatic reports whether the ELF file at p has no program interpreter.
func isStatic(p string) (bool, error) {
	f, err := elf.Open(p)
	if err != nil {
		return false, fmt.Errorf("reading %s as ELF: %w", p, err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return false, nil
		}
	}
	return true, nil
}

// git adds the host's git at /usr/bin/git, its exec path (the helpers
// whose libraries git's own set covers; the others, such as the curl
// transports, are left out), its templates, and the libraries.
func (s *treeSet) git() error {
	bin, err := exec.LookPath("git")
	if err != nil {
		return fmt.Errorf("%w: git is not on PATH (apt-get install git)", errMissing)
	}
	libs, err := lddDeps(bin)
	if err != nil {
		return err
	}
	if err := s.hostFile("/usr/bin/git", bin); err != nil {
		return err
	}
	out, err := exec.Command(bin, "--exec-path").Output()
	if err != nil {
		return fmt.Errorf("git --exec-path: %w", err)
	}
	execPath := strings.TrimSpace(string(out))
	if err := s.hostTree(execPath, libs); err != nil {
		return err
	}
	// git's compiled-in templates, so that git init does not warn.
	if tmpl := "/usr/share/git-core/templates"; isDir(tmpl) {
		if err := s.hostTree(tmpl, libs); err != nil {
			return err
		}
	}
	for _, l := range libs {
		if err := s.hostFile(l, l); err != nil {
			return fmt.Errorf("library of %s: %w", bin, err)
		}
	}
	return nil
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// hostTree adds the host tree at root under the same path: directories,
// symbolic links as links, regular files; an ELF file only when every
// library it needs is in libs.
func (s *treeSet) hostTree(root string, libs []string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			s.dir(p, 0o755, 0)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			s.add(entry{name: p, typ: tar.TypeSymlink, mode: 0o777, link: target})
		case d.Type().IsRegular():
			if elfFile(p) {
				deps, err := lddDeps(p)
				if err != nil || slices.ContainsFunc(deps, func(l string) bool { return !slices.Contains(libs, l) }) {
					return nil
				}
			}
			return s.hostFile(p, p)
		}
		return nil
	})
}

// elfFile reports whether p starts with the ELF magic.
func elfFile(p string) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	var magic [4]byte
	_, err = io.ReadFull(f, magic[:])
	return err == nil && string(magic[:]) == elf.ELFMAG
}

// lddDeps returns the libraries (and the program interpreter) ldd says
// the ELF file p loads, by the paths ldd prints.
func lddDeps(p string) ([]string, error) {
	var stderr bytes.Buffer
	cmd := exec.Command("ldd", p)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w: %s", p, err, strings.TrimSpace(stderr.String()))
	}
	var deps []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if _, after, ok := strings.Cut(line, "=>"); ok {
			line = strings.TrimSpace(after)
		}
		if strings.HasPrefix(line, "not found") {
			return nil, fmt.Errorf("ldd %s: a library is not found: %s", p, sc.Text())
		}
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "/") {
			deps = append(deps, f[0])
		}
	}
	if len(deps) == 0 {
		return nil, fmt.Errorf("ldd %s named no library: %q", p, out)
	}
	slices.Sort(deps)
	return slices.Compact(deps), nil
}

// writeTar writes entries as a tar stream with fixed times and owners.
func writeTar(w io.Writer, entries []entry) error {
	tw := tar.NewWriter(w)
	for _, e := range entries {
		name := strings.TrimPrefix(e.name, "/")
		if name == "" {
			name = "."
		}
		h := &tar.Header{Name: name, Typeflag: e.typ, Mode: e.mode, Uid: e.uid, Gid: e.uid, ModTime: epoch, Format: tar.FormatPAX}
		switch e.typ {
		case tar.TypeDir:
			h.Name += "/"
		case tar.TypeSymlink:
			h.Linkname = e.link
		}
		if err := writeEntry(tw, h, e); err != nil {
			return fmt.Errorf("image entry %s: %w", e.name, err)
		}
	}
	return tw.Close()
}

func writeEntry(tw *tar.Writer, h *tar.Header, e entry) error {
	if e.typ != tar.TypeReg {
		return tw.WriteHeader(h)
	}
	if e.src == "" {
		h.Size = int64(len(e.data))
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := tw.Write(e.data)
		return err
	}
	f, err := os.Open(e.src)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	h.Size = fi.Size()
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	n, err := io.Copy(tw, f)
	if err == nil && n != h.Size {
		err = fmt.Errorf("%s changed size while read (%d of %d bytes)", e.src, n, h.Size)
	}
	return err
}

// imageTag returns the image's tag: imageRepo and the first 16 hex digits
// of the SHA-256 of its tar stream (and the recipe).
func imageTag(entries []entry) (string, error) {
	h := sha256.New()
	io.WriteString(h, imageRecipe+"\n")
	if err := writeTar(h, entries); err != nil {
		return "", err
	}
	return imageRepo + ":" + hex.EncodeToString(h.Sum(nil))[:16], nil
}

// errMissing marks a tool the harness cannot do without: the test skips.
var errMissing = errors.New("enginetest: missing")
