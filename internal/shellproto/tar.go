package shellproto

import (
	"archive/tar"
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"

	"github.com/airlockdev/airlock/internal/tree"
)

// ErrTransport is wrapped by every transport failure: a command that could
// not be run or followed to its end, a control operation that outlived its
// deadline, output that does not follow the protocol. stage re-exports it as
// stage.ErrTransport.
var ErrTransport = errors.New("sandbox transport failure")

// Entry is one member of a tree stream: a directory (Mode.IsDir), a regular
// file (Mode.IsRegular, Size bytes) or, when read back from a sandbox, a
// link or special file reported by type only.
type Entry struct {
	Path string      // slash-separated, relative to the tree's top; never "" or "."
	Mode fs.FileMode // type and permission bits
	Size int64       // regular files only
}

// The host's tar stream, extracted into a fresh temporary directory:
// "new/tree/" and everything below it, "new/manifest.json", an empty "old/"
// (where the publish moves the previous copy), and last an empty
// "complete". tar reads its input in order, so "complete" exists only when
// every member before it arrived whole.
const (
	TarNew      = "new/"
	TarTree     = "new/tree/"
	TarManifest = "new/manifest.json"
	TarOld      = "old/"
	TarComplete = "complete"
)

// WalkFunc streams a tree: it calls fn for every directory and regular file,
// a directory before its contents, and returns the tree's canonical
// manifest. A file's reader yields exactly e.Size bytes.
type WalkFunc func(fn func(e Entry, r io.Reader) error) ([]byte, error)

// WriteStream writes the tree walk yields to w as one tar stream in the
// layout above and returns the manifest walk returned. Every member gets
// mtime. A directory without owner rwx is created with it (so that tar, as
// a non-root user, can fill it) and given its real mode at the end, deepest
// first.
func WriteStream(w io.Writer, mtime time.Time, walk WalkFunc) ([]byte, error) {
	bw := bufio.NewWriterSize(w, 256<<10)
	tw := tar.NewWriter(bw)
	for _, d := range []string{TarNew, TarTree} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: mtime}); err != nil {
			return nil, err
		}
	}
	var fixups []Entry
	buf := make([]byte, 256<<10)
	manifest, err := walk(func(e Entry, r io.Reader) error {
		h := &tar.Header{Name: TarTree + e.Path, Mode: int64(e.Mode.Perm()), ModTime: mtime}
		if e.Mode.IsDir() {
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
			if e.Mode&0o700 != 0o700 {
				h.Mode |= 0o700
				fixups = append(fixups, e)
			}
			return tw.WriteHeader(h)
		}
		h.Typeflag, h.Size = tar.TypeReg, e.Size
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := io.CopyBuffer(onlyWriter{tw}, onlyReader{r}, buf)
		return err
	})
	if err != nil {
		return nil, err
	}
	for i := len(fixups) - 1; i >= 0; i-- {
		e := fixups[i]
		h := &tar.Header{Typeflag: tar.TypeDir, Name: TarTree + e.Path + "/", Mode: int64(e.Mode.Perm()), ModTime: mtime}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
	}
	h := &tar.Header{Typeflag: tar.TypeReg, Name: TarManifest, Mode: 0o644, Size: int64(len(manifest)), ModTime: mtime}
	if err := tw.WriteHeader(h); err != nil {
		return nil, err
	}
	if _, err := tw.Write(manifest); err != nil {
		return nil, err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: TarOld, Mode: 0o700, ModTime: mtime}); err != nil {
		return nil, err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: TarComplete, Mode: 0o600, ModTime: mtime}); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := bw.Flush(); err != nil {
		return nil, err
	}
	return manifest, nil
}

// WriteFiles writes regular files as one plain tar stream (no layout):
// each name relative to where the sandbox extracts it. The sandbox's
// `tar -x` must create parent directories that are missing.
func WriteFiles(w io.Writer, mtime time.Time, files []Entry, open func(e Entry) (io.Reader, func() error, error)) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	tw := tar.NewWriter(bw)
	buf := make([]byte, 256<<10)
	for _, e := range files {
		r, done, err := open(e)
		if err != nil {
			return err
		}
		h := &tar.Header{Typeflag: tar.TypeReg, Name: e.Path, Mode: int64(e.Mode.Perm()), Size: e.Size, ModTime: mtime}
		if err := tw.WriteHeader(h); err != nil {
			done()
			return err
		}
		_, err = io.CopyBuffer(onlyWriter{tw}, onlyReader{r}, buf)
		if derr := done(); err == nil {
			err = derr
		}
		if err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

// ReadTar parses a tar stream written by a sandbox's `tar -c .` and calls
// fn for each member below the top directory. The stream is hostile: a
// member name that is absolute, not clean or leaves the top is a protocol
// error wrapping ErrTransport; links and special files are reported by
// type, never resolved; a hard link is reported as fs.ModeIrregular.
func ReadTar(r io.Reader, fn func(Entry, io.Reader) error) error {
	tr := tar.NewReader(bufio.NewReaderSize(r, 256<<10))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: reading the sandbox's tar stream: %v", ErrTransport, err)
		}
		name := strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")
		if name == "" || name == "." {
			continue // the top directory itself
		}
		if !tree.ValidPath(name) {
			return fmt.Errorf("%w: the sandbox's tar stream names %q, which is not a clean relative path", ErrTransport, h.Name)
		}
		e := Entry{Path: name, Mode: fs.FileMode(h.Mode) & fs.ModePerm}
		switch h.Typeflag {
		case tar.TypeDir:
			e.Mode |= fs.ModeDir
		case tar.TypeReg, '\x00':
			e.Size = h.Size
		case tar.TypeSymlink:
			e.Mode |= fs.ModeSymlink
		case tar.TypeFifo:
			e.Mode |= fs.ModeNamedPipe
		case tar.TypeChar:
			e.Mode |= fs.ModeDevice | fs.ModeCharDevice
		case tar.TypeBlock:
			e.Mode |= fs.ModeDevice
		default: // hard links and anything else
			e.Mode |= fs.ModeIrregular
		}
		if err := fn(e, tr); err != nil {
			return err
		}
	}
}

// onlyReader hides every method but Read, so io.CopyBuffer uses our buffer.
type onlyReader struct{ io.Reader }

// onlyWriter hides every method but Write, so io.CopyBuffer uses our buffer.
type onlyWriter struct{ io.Writer }
