package stage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/airlockdev/airlock/internal/keylock"
	"github.com/airlockdev/airlock/internal/owner"
	"github.com/airlockdev/airlock/internal/tree"
)

// Dir is a Target backed by a host directory that plays the sandbox: the
// sandbox path /rt is <path>/rt. Every write goes through an [os.Root]
// opened on the directory, so nothing is ever created, changed or removed
// outside it, whatever links the sandbox plants inside it.
//
// Non-guarantees: links that the sandbox plants above the stage root
// (inside the directory) are followed, so the root may land elsewhere inside
// the directory. Two processes publishing the same asset at once are not
// coordinated (calls through one *Dir are).
type Dir struct {
	path  string
	rand  io.Reader // temporary names; crypto/rand unless a test sets it
	locks keylock.Map
	rm    func(r *os.Root, name string) error // removes a temporary directory; removeTree unless a test sets it
	made  func()                              // called once a temporary directory exists, before its owner file is written (tests)
	moved func(name string)                   // called once a publish or removal has moved name (a manifest, a copy) (tests)
}

var _ Target = (*Dir)(nil)

// NewDir returns a Target that treats the existing directory at path as the
// sandbox's file system root.
func NewDir(path string) (*Dir, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("stage: sandbox directory %q: %w", path, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("stage: sandbox directory: %w", err)
	}
	if !fi.IsDir() {
		return nil, &fs.PathError{Op: "stage", Path: abs, Err: errors.New("not a directory; pass the directory that plays the sandbox")}
	}
	return &Dir{path: abs, rand: rand.Reader}, nil
}

// rel maps an absolute sandbox path to a path relative to d.
func rel(p string) string {
	r := strings.TrimPrefix(path.Clean("/"+p), "/")
	if r == "" {
		return "."
	}
	return r
}

// openRoot opens the sandbox directory root under d. With create, missing
// directories are made and a link or a non-directory at root itself is
// replaced by a directory; without, a missing or non-directory root is
// reported as fs.ErrNotExist.
func (d *Dir) openRoot(root string, create bool) (*os.Root, error) {
	top, err := os.OpenRoot(d.path)
	if err != nil {
		return nil, fmt.Errorf("opening sandbox directory: %w", err)
	}
	defer top.Close()
	r := rel(root)
	if r == "." {
		return top.OpenRoot(".")
	}
	dir, base := path.Split(r)
	parent := top
	if dir != "" {
		dir = strings.TrimSuffix(dir, "/")
		if create {
			if err := top.MkdirAll(dir, 0o755); err != nil {
				return nil, fmt.Errorf("creating %s in the sandbox: %w%s", path.Dir(root), err, linkAbove(top, dir))
			}
		}
		if parent, err = top.OpenRoot(dir); err != nil {
			return nil, fmt.Errorf("opening %s in the sandbox: %w%s", path.Dir(root), err, linkAbove(top, dir))
		}
		defer parent.Close()
	}
	fi, err := parent.Lstat(base)
	switch {
	case err == nil && fi.IsDir():
	case !create && (err == nil || errors.Is(err, fs.ErrNotExist)):
		return nil, &fs.PathError{Op: "open", Path: root, Err: fs.ErrNotExist}
	case err == nil:
		// A link or file planted at the root: replace it, never follow it.
		if err := parent.Remove(base); err != nil {
			return nil, fmt.Errorf("replacing the %s at stage root %s: %w", tree.Kind(fi.Mode()), root, err)
		}
		fallthrough
	case errors.Is(err, fs.ErrNotExist):
		if err := parent.Mkdir(base, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("creating stage root %s: %w", root, err)
		}
	default:
		return nil, fmt.Errorf("inspecting stage root %s: %w", root, err)
	}
	return parent.OpenRoot(base)
}

// linkAbove explains a failure to reach dir (relative to top) that a
// symbolic link on its way caused: os.Root follows a link only while it
// stays inside, and one leading out fails as "path escapes from parent".
// It names the first such link, or returns "".
func linkAbove(top *os.Root, dir string) string {
	p := ""
	for c := range strings.SplitSeq(dir, "/") {
		p = path.Join(p, c)
		fi, err := top.Lstat(p)
		if err != nil {
			return ""
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			to := ""
			if t, err := top.Readlink(p); err == nil {
				to = fmt.Sprintf(" to %q", t)
			}
			return fmt.Sprintf(" (%s in the sandbox is a symbolic link%s; Dir follows no link out of the sandbox directory: make it a directory and stage again)", "/"+p, to)
		}
	}
	return ""
}

// Probe implements Target.
func (d *Dir) Probe(ctx context.Context, root string, names []string) ([][]byte, error) {
	out := make([][]byte, len(names))
	rr, err := d.openRoot(root, false)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	defer rr.Close()
	// A stage with nothing to publish still removes what killed
	// processes left behind.
	d.sweep(rr)
	for i, name := range names {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if out[i], err = readManifest(rr, manifestName(name)); err != nil {
			return nil, fmt.Errorf("reading the manifest of %s: %w", path.Join(root, name), err)
		}
		// A manifest without its copy (the directory deleted, or
		// something else in its place) is none: the asset is published
		// again rather than reported staged with nothing there.
		if fi, err := rr.Lstat(name); out[i] != nil && (err != nil || !fi.IsDir()) {
			out[i] = nil
		}
	}
	return out, nil
}

func manifestName(name string) string { return manifestPrefix + name + manifestSuffix }

// readManifest returns the regular file name in r, nil when it is missing,
// not a regular file, or larger than MaxManifestBytes.
func readManifest(r *os.Root, name string) ([]byte, error) {
	fi, err := r.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > MaxManifestBytes {
		return nil, nil
	}
	f, err := r.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil // replaced since the Lstat (by a link, say): no usable manifest
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, nil
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxManifestBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxManifestBytes {
		return nil, nil
	}
	return b, nil
}

// tempName returns a fresh temporary directory name for asset name.
func tempName(r io.Reader, name string) (string, error) {
	var b [8]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return "", fmt.Errorf("choosing a temporary name: %w", err)
	}
	return tempPrefix + name + "-" + hex.EncodeToString(b[:]), nil
}

// Publish implements Target.
func (d *Dir) Publish(ctx context.Context, root, name string, src *Tree) (err error) {
	unlock, err := d.locks.Lock(ctx, root+"\x00"+name)
	if err != nil {
		return err
	}
	defer unlock()
	// A Source equal to the copy in place (see laterCompare): nothing.
	if src.reuseWhole(true) {
		return nil
	}
	rr, err := d.openRoot(root, true)
	if err != nil {
		return err
	}
	defer rr.Close()
	tmp, err := tempName(d.rand, name)
	if err != nil {
		return err
	}
	if err := checkPlace(rr, root, name, src.src); err != nil {
		return err
	}
	d.sweep(rr)
	if err := d.mkTemp(rr, tmp); err != nil {
		return fmt.Errorf("creating temporary directory %s (exclusively): %w", path.Join(root, tmp), err)
	}
	defer func() {
		left, rerr := d.drop(rr, tmp)
		switch {
		case rerr == nil:
		case err == nil:
			err = fmt.Errorf("asset %s published, but its temporary directory %s could not be removed; remove %s by hand: %w", path.Join(root, name), leftAt(root, tmp, left), path.Join(root, left), rerr)
		default:
			err = errors.Join(err, fmt.Errorf("the temporary directory %s could not be removed; remove %s by hand: %w", leftAt(root, tmp, left), path.Join(root, left), rerr))
		}
	}()
	tr, err := rr.OpenRoot(tmp)
	if err != nil {
		return fmt.Errorf("opening temporary directory %s: %w", path.Join(root, tmp), err)
	}
	defer tr.Close()
	old := openPrevious(rr, name, src)
	if old != nil {
		defer old.Close()
	}
	if err := writeTree(ctx, tr, src, old); err != nil {
		return err
	}
	if err := writeManifestFile(tr, "manifest.json", src); err != nil {
		return fmt.Errorf("writing the manifest into %s: %w", path.Join(root, tmp), err)
	}
	// The last point at which a cancellation stops the publish.
	if err := ctx.Err(); err != nil {
		return err
	}
	mname := manifestName(name)
	d.mark(rr, tmp, name)
	if err := rr.RemoveAll(mname); err != nil {
		d.disown(rr, tmp, name)
		return fmt.Errorf("removing the old manifest %s: %w", path.Join(root, mname), err)
	}
	d.hookMoved(mname)
	movable(rr, name)
	if err := swapIn(rr, tr, tmp, name); err != nil {
		d.disown(rr, tmp, name)
		return fmt.Errorf("moving the new copy into place at %s: %w", path.Join(root, name), err)
	}
	d.hookMoved(name)
	if err := renameBetween(rr, tr, tmp, "manifest.json", mname); err != nil {
		// The new tree is in place without a manifest, beside its
		// marker (see dirmark.go), which names no process now: the next
		// Stage publishes it again, a prune removes it.
		d.disown(rr, tmp, name)
		return fmt.Errorf("storing the manifest of %s: %w", path.Join(root, name), err)
	}
	d.unmark(rr, name)
	return nil
}

// openPrevious opens the previous copy name in rr, for a Source with
// unchanged files to carry; nil when there is none or it is unusable
// (everything is sent).
func openPrevious(rr *os.Root, name string, src *Tree) *os.Root {
	if len(src.Unchanged()) == 0 {
		return nil
	}
	if fi, err := rr.Lstat(name); err != nil || !fi.IsDir() {
		return nil
	}
	old, err := rr.OpenRoot(name)
	if err != nil {
		return nil
	}
	return old
}

// writeManifestFile writes src's manifest into a new file name in r,
// streamed from its compact listing (see Tree.writeManifest).
func writeManifestFile(r *os.Root, name string, src *Tree) error {
	f, err := r.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return err
	}
	err = src.writeManifest(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// mkTemp makes the temporary directory tmp in rr, exclusively, with an
// owner file naming this process, so that what a killed process leaves
// there is removed by a later sweep. tmp never exists without its owner
// file: the directory is made as newPrefix + "<pid>-<rand>", gets the
// file, and is renamed to tmp; a process killed before the rename leaves
// a directory whose name holds its pid, which the sweep removes too.
func (d *Dir) mkTemp(rr *os.Root, tmp string) error {
	k := newPrefix + strconv.Itoa(os.Getpid()) + tmp[strings.LastIndexByte(tmp, '-'):]
	if err := rr.Mkdir(k, 0o700); err != nil {
		return err
	}
	if d.made != nil {
		d.made()
	}
	f, err := rr.OpenFile(k+"/"+ownerFile, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err == nil {
		_, err = fmt.Fprintf(f, "%d\n", os.Getpid())
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = renameNoReplace(rr, k, tmp)
	}
	if err != nil {
		return errors.Join(err, d.removeTree(rr, k))
	}
	return nil
}

// sweep removes the temporary directories under rr whose owner process is
// gone (dead, or a zombie): what a process killed mid-publish or
// mid-unstage left behind, and the newPrefix and gonePrefix directories of
// processes killed while making or deleting one (see mkTemp and drop). A
// directory without a readable owner file, or whose owner is alive (this
// process's own included), stays. Best effort: a failure is the next
// sweep's.
func (d *Dir) sweep(rr *os.Root) {
	f, err := rr.Open(".")
	if err != nil {
		return
	}
	names, _ := f.Readdirnames(-1)
	f.Close()
	for _, n := range names {
		if asset, ok := strings.CutPrefix(n, sweepPrefix); ok {
			d.sweepMarker(rr, n, asset)
			continue
		}
		rest, ok := strings.CutPrefix(n, newPrefix)
		if !ok {
			rest, ok = strings.CutPrefix(n, gonePrefix)
		}
		if ok {
			pid, _, _ := strings.Cut(rest, "-")
			if p, err := strconv.Atoi(pid); err == nil && p != os.Getpid() && owner.Gone(p) {
				if fi, err := rr.Lstat(n); err == nil && fi.IsDir() {
					_ = d.removeTree(rr, n)
				}
			}
			continue
		}
		if !strings.HasPrefix(n, tempPrefix) {
			continue
		}
		if fi, err := rr.Lstat(n); err != nil || !fi.IsDir() {
			continue
		}
		pid, _, ok := readOwner(rr, n+"/"+ownerFile)
		if !ok || pid == os.Getpid() || !owner.Gone(pid) {
			continue
		}
		_, _ = d.drop(rr, n)
	}
}

// leftAt names the temporary directory tmp under root and, when it is
// not tmp, the name left that drop gave it.
func leftAt(root, tmp, left string) string {
	if left == tmp {
		return path.Join(root, tmp)
	}
	return path.Join(root, tmp) + " (moved to " + path.Join(root, left) + " to be deleted)"
}

// drop removes the temporary directory tmp under rr. It first renames it
// to gonePrefix + "<pid>-<rand>", since a removal deletes the owner file
// long before the rest: a process killed while removing leaves a
// directory whose name holds its pid, which the sweep removes once that
// process is gone. When the rename fails, it removes tmp in place. It
// returns the name of what is left when the removal fails.
func (d *Dir) drop(rr *os.Root, tmp string) (string, error) {
	g := gonePrefix + strconv.Itoa(os.Getpid()) + tmp[strings.LastIndexByte(tmp, '-'):]
	if renameNoReplace(rr, tmp, g) == nil {
		return g, d.removeTree(rr, g)
	}
	return tmp, d.removeTree(rr, tmp)
}

func (d *Dir) removeTree(r *os.Root, name string) error {
	if d.rm != nil {
		return d.rm(r, name)
	}
	return removeTree(r, name)
}

// movable gives the directory name in rr (not a link) its owner's write
// permission when it lacks it: renaming a directory into another parent
// rewrites its "..", which a user other than root may do only in a
// directory they may write (a copy the sandbox made read-only, chmod 555,
// could be neither replaced nor removed). Best effort: the rename that
// follows reports what it cannot fix.
func movable(rr *os.Root, name string) {
	if fi, err := rr.Lstat(name); err == nil && fi.IsDir() && fi.Mode().Perm()&0o200 == 0 {
		_ = rr.Chmod(name, fi.Mode().Perm()|0o200)
	}
}

// removeTree removes name under r and everything below it, making
// directories writable first when that is what stops the removal.
func removeTree(r *os.Root, name string) error {
	err := r.RemoveAll(name)
	if err == nil || !errors.Is(err, fs.ErrPermission) {
		return err
	}
	makeWritable(r, name, 0)
	return r.RemoveAll(name)
}

// makeWritable is best effort: whatever it cannot fix, the RemoveAll that
// follows reports.
func makeWritable(r *os.Root, name string, depth int) {
	fi, err := r.Lstat(name)
	if err != nil || !fi.IsDir() || depth > 256 {
		return
	}
	_ = r.Chmod(name, 0o700)
	sub, err := r.OpenRoot(name)
	if err != nil {
		return
	}
	defer sub.Close()
	f, err := sub.Open(".")
	if err != nil {
		return
	}
	names, _ := f.Readdirnames(-1)
	f.Close()
	for _, n := range names {
		makeWritable(sub, n, depth+1)
	}
}

// Fetch implements Target. An asset directory that is missing, a link, not
// a directory or not readable (or a stage root that is missing or not a
// directory) is reported as ErrMismatch.
func (d *Dir) Fetch(ctx context.Context, root, name string, fn func(e Entry, r io.Reader) error) error {
	p := path.Join(root, name)
	rr, err := d.openRoot(root, false)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: the asset directory %s is missing in the sandbox (its stage root %s is missing or not a directory)", ErrMismatch, p, root)
	}
	if err != nil {
		return err
	}
	defer rr.Close()
	fi, err := rr.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: the asset directory %s is missing in the sandbox", ErrMismatch, p)
	case err != nil:
		return fmt.Errorf("inspecting the asset directory %s: %w", p, err)
	case !fi.IsDir():
		return fmt.Errorf("%w: the asset directory %s is a %s in the sandbox, not a directory", ErrMismatch, p, tree.Kind(fi.Mode()))
	}
	ar, err := rr.OpenRoot(name)
	if err != nil {
		if unusableDir(err) {
			return fmt.Errorf("%w: the asset directory %s cannot be opened in the sandbox: %w", ErrMismatch, p, err)
		}
		return err
	}
	defer ar.Close()
	err = fetchDir(ctx, ar, "", 0, fn)
	if errors.Is(err, fs.ErrPermission) && !errors.Is(err, ErrMismatch) {
		return fmt.Errorf("%w: the asset directory %s is not readable in the sandbox: %w", ErrMismatch, p, err)
	}
	return err
}

// unusableDir reports an error that opening a directory the sandbox has
// removed, replaced or locked returns.
func unusableDir(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) ||
		errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ELOOP)
}

// maxFetchDepth bounds the directory depth Fetch descends into.
const maxFetchDepth = 256

func fetchDir(ctx context.Context, r *os.Root, prefix string, depth int, fn func(Entry, io.Reader) error) error {
	if depth > maxFetchDepth {
		return fmt.Errorf("%w: %q is more than %d directories deep", ErrMismatch, prefix, maxFetchDepth)
	}
	f, err := r.Open(".")
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return err
	}
	slices.Sort(names)
	for _, n := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		p := n
		if prefix != "" {
			p = prefix + "/" + n
		}
		fi, err := r.Lstat(n)
		if err != nil {
			return err
		}
		e := Entry{Path: p, Mode: fi.Mode().Type() | fi.Mode().Perm()}
		switch {
		case fi.IsDir():
			if err := fn(e, eofReader{}); err != nil {
				return err
			}
			sub, err := r.OpenRoot(n)
			if err != nil {
				return err
			}
			err = fetchDir(ctx, sub, p, depth+1, fn)
			sub.Close()
			if err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			if err := fetchFile(r, n, e, fi, fn); err != nil {
				return err
			}
		default:
			if err := fn(e, eofReader{}); err != nil {
				return err
			}
		}
	}
	return nil
}

func fetchFile(r *os.Root, name string, e Entry, want fs.FileInfo, fn func(Entry, io.Reader) error) error {
	f, err := r.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !os.SameFile(fi, want) {
		return fmt.Errorf("%w: %q was replaced while read", ErrMismatch, e.Path)
	}
	e.Size = fi.Size()
	return fn(e, io.LimitReader(f, e.Size))
}

// onlyReader hides every method but Read, so io.CopyBuffer uses our buffer.
type onlyReader struct{ io.Reader }

// onlyWriter hides every method but Write, so io.CopyBuffer uses our buffer.
type onlyWriter struct{ io.Writer }

// swapPortable replaces name in rr with <tmp>/tree by two renames: the entry
// at name moves into tmp (and back if the second rename fails).
func swapPortable(rr *os.Root, tmp, name string) error {
	moved := false
	if _, err := rr.Lstat(name); err == nil {
		if err := rr.Rename(name, tmp+"/old"); err != nil {
			return err
		}
		moved = true
	}
	if err := rr.Rename(tmp+"/tree", name); err != nil {
		if moved {
			if rerr := rr.Rename(tmp+"/old", name); rerr != nil {
				return errors.Join(err, fmt.Errorf("restoring the previous copy: %w", rerr))
			}
		}
		return err
	}
	return nil
}

// renamePortable renames old to new in rr unless new exists (checked just
// before: an entry made in between is not detected).
func renamePortable(rr *os.Root, old, new string) error {
	if _, err := rr.Lstat(new); err == nil {
		return &os.LinkError{Op: "rename", Old: old, New: new, Err: fs.ErrExist}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return rr.Rename(old, new)
}
