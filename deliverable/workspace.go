package deliverable

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/airlockdev/airlock/internal/tree"
)

// Workspace is the directory tree that holds the files an agent registers or
// a WorkspaceRef points into: a directory on the host's disk
// (LocalWorkspace) or one inside a sandbox that only runs commands
// (RemoteWorkspace). Registrar.Register and WorkspaceRef.Open consume it.
//
// Implementations are safe for concurrent use. The workspace root is
// trusted (the host chose it); everything below it is not.
type Workspace interface {
	// Open opens the file name for reading and describes it.
	//
	// name is a clean, slash-separated path relative to the workspace root,
	// without empty, "." or ".." components; callers validate it, and an
	// implementation refuses any other name with ErrPathDenied. No link is
	// followed in any component: a symbolic link anywhere on the path fails
	// with ErrSymlinkDenied, an entry that is not a regular file with
	// ErrPathDenied, a missing one with fs.ErrNotExist, and a path that
	// changed while it was looked up with ErrFileChanged; these are
	// *fs.PathError values naming name. Any other error is a failure of the
	// workspace itself (the disk, the transport, the sandbox's tools, a
	// root that is gone), and never wraps fs.ErrNotExist.
	//
	// On success the File describes what was opened (Stat) and reads exactly
	// FileStat.Size bytes. The caller closes it.
	Open(ctx context.Context, name string) (File, error)
}

// File is a workspace file opened for reading.
//
// Read yields at most Stat().Size bytes and returns io.EOF only once the
// workspace has confirmed that the file kept its identity, size and
// modification time from Open to the end of the read; a file that changed,
// grew or shrank fails with an error wrapping ErrFileChanged instead. Close
// releases the file (for a remote file: stops its command) and may be called
// before the end.
type File interface {
	io.ReadCloser
	// Stat describes the file as it was when opened.
	Stat() FileStat
}

// FileStat describes an opened workspace file.
type FileStat struct {
	Mode  fs.FileMode // type and permission bits; a regular file has no type bits
	Size  int64       // bytes
	Links uint64      // hard links
}

// LocalWorkspace returns the Workspace rooted at dir, a directory on this
// machine given as an absolute path. Files are opened beneath dir by
// descriptor without following a link in any component (openat2 with
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS on Linux, an os.Root walk elsewhere,
// package internal/tree), so a link planted or swapped in while a file is
// opened cannot lead outside; after reading, the path is opened again and
// must still name the same file.
//
// dir itself is trusted and may be reached through links. It fails with an
// *fs.PathError when dir is not absolute or is not an existing directory.
// When dir is no longer a directory at Open (removed or renamed away
// later), Open fails as the workspace itself, naming dir and saying what to
// do, not with fs.ErrNotExist: Register reports it as a *HostError, never
// as the agent's missing file.
func LocalWorkspace(dir string) (Workspace, error) {
	fail := func(err error) (Workspace, error) {
		return nil, &fs.PathError{Op: "deliverable.LocalWorkspace", Path: dir, Err: err}
	}
	if !filepath.IsAbs(dir) {
		return fail(errors.New("the workspace root is not an absolute path"))
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fail(err)
	}
	if !fi.IsDir() {
		return fail(fmt.Errorf("the workspace root is a %s, not a directory", tree.Kind(fi.Mode())))
	}
	return localWorkspace{dir: filepath.Clean(dir)}, nil
}

type localWorkspace struct{ dir string }

var _ Workspace = localWorkspace{}

func (w localWorkspace) Open(ctx context.Context, name string) (File, error) {
	if err := checkOpen(ctx, name); err != nil {
		return nil, err
	}
	f, err := tree.OpenFile(w.dir, name)
	if err != nil {
		if rerr := w.rootGone(err); rerr != nil {
			return nil, rerr
		}
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, &fs.PathError{Op: "open", Path: name, Err: openError(err)}
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, errors.Join(&fs.PathError{Op: "fstat", Path: name, Err: err}, f.Close())
	}
	links, err := linkCount(fi)
	if err != nil {
		return nil, errors.Join(&fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w: %w", ErrHardlinkDenied, err)}, f.Close())
	}
	it, err := tree.NewReader(f, name)
	if err != nil {
		return nil, errors.Join(&fs.PathError{Op: "open", Path: name, Err: err}, f.Close())
	}
	return &localFile{w: w, name: name, f: f, it: it, before: fi,
		st: FileStat{Mode: fi.Mode(), Size: fi.Size(), Links: links}}, nil
}

// rootGone returns the workspace's own failure when a file could not be
// opened (err) because the root itself is no longer a directory: removed
// or renamed away after LocalWorkspace. That is the host's to fix, not the
// agent's, so the error does not wrap fs.ErrNotExist (which Register
// reports to the agent as its file missing). It returns nil otherwise.
func (w localWorkspace) rootGone(err error) error {
	if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
		return nil
	}
	fi, serr := os.Stat(w.dir)
	switch {
	case serr == nil && fi.IsDir():
		return nil
	case serr == nil:
		serr = fmt.Errorf("it is now a %s", tree.Kind(fi.Mode()))
	}
	return fmt.Errorf("the local workspace root %s is no longer a directory (removed or renamed away after LocalWorkspace opened it: %v); restore it, or pass LocalWorkspace the workspace's current directory", w.dir, serr)
}

// checkOpen is what every Workspace.Open checks first: the context is live
// and name is already clean (see Workspace.Open).
func checkOpen(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if clean, why := cleanRef(name); why != "" || clean != name {
		if why == "" {
			why = "is not clean"
		}
		return pathDenied("open", name, why)
	}
	return nil
}

// openError maps internal/tree errors onto this package's sentinels.
func openError(err error) error {
	switch {
	case errors.Is(err, tree.ErrLink):
		return fmt.Errorf("%w: %w", ErrSymlinkDenied, err)
	case errors.Is(err, tree.ErrEscape), errors.Is(err, tree.ErrNotRegular):
		return fmt.Errorf("%w: %w", ErrPathDenied, err)
	case errors.Is(err, tree.ErrChanged):
		return fmt.Errorf("%w: %w", ErrFileChanged, err)
	}
	return err
}

// localFile reads through tree's reader (exactly the size the file had at
// open, then checked unchanged by descriptor: size, times, identity) and at
// the end also checks that the path still names the same file.
type localFile struct {
	w      localWorkspace
	name   string
	f      *os.File
	it     *tree.Item
	before fs.FileInfo
	st     FileStat
	done   bool
	err    error
}

var _ hashingFile = (*localFile)(nil)

func (l *localFile) Stat() FileStat { return l.st }

// sha256 implements hashingFile: tree's reader hashed every byte Read
// returned, and Verify (at io.EOF, with nothing left unread) filled the sum.
func (l *localFile) sha256() string {
	if !l.done {
		return ""
	}
	return l.it.SHA256
}

func (l *localFile) Close() error { return l.f.Close() }

func (l *localFile) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	if l.done {
		return 0, io.EOF
	}
	n, err := l.it.Read(p)
	switch {
	case errors.Is(err, io.EOF):
		if err := l.finish(); err != nil {
			l.err = err
			return n, err
		}
		l.done = true
		return n, io.EOF
	case errors.Is(err, tree.ErrChanged):
		l.err = &fs.PathError{Op: "read", Path: l.name, Err: fmt.Errorf("%w: %w", ErrFileChanged, err)}
		return n, l.err
	case err != nil:
		l.err = &fs.PathError{Op: "read", Path: l.name, Err: err}
		return n, l.err
	}
	return n, nil
}

// finish runs at end of file: unchanged by descriptor, same file by path.
func (l *localFile) finish() error {
	changed := func(err error) error {
		return &fs.PathError{Op: "read", Path: l.name, Err: fmt.Errorf("%w: %w", ErrFileChanged, err)}
	}
	if err := l.it.Verify(); err != nil {
		if errors.Is(err, tree.ErrChanged) {
			return changed(err)
		}
		return &fs.PathError{Op: "read", Path: l.name, Err: err}
	}
	g, err := tree.OpenFile(l.w.dir, l.name)
	if err != nil {
		if rerr := l.w.rootGone(err); rerr != nil {
			return rerr
		}
		return changed(fmt.Errorf("the path no longer opens as the same file: %w", err))
	}
	now, err := g.Stat()
	if cerr := g.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return &fs.PathError{Op: "fstat", Path: l.name, Err: err}
	}
	if !os.SameFile(l.before, now) {
		return changed(errors.New("the path was replaced by another file"))
	}
	return nil
}
