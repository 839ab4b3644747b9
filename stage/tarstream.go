package stage

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/airlockdev/airlock/internal/tree"
)

// The bridge's tar stream, extracted into the temporary directory:
// "new/tree/" and everything below it, "new/manifest.json", an empty "old/"
// (where the publish moves the previous copy), and last an empty
// "complete". tar reads its input in order, so "complete" exists only when
// every member before it arrived whole.
const (
	tarNew      = "new/"
	tarTree     = "new/tree/"
	tarManifest = "new/manifest.json"
	tarOld      = "old/"
	tarComplete = "complete"
)

// writeTarStream writes src to w as one tar stream and returns its manifest.
func writeTarStream(ctx context.Context, w io.Writer, src *Tree) ([]byte, error) {
	bw := bufio.NewWriterSize(w, 256<<10)
	tw := tar.NewWriter(bw)
	mt := src.ModTime()
	for _, d := range []string{tarNew, tarTree} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: mt}); err != nil {
			return nil, err
		}
	}
	// A directory without owner rwx is created with it (so that tar, as a
	// non-root user, can fill it) and given its real mode at the end,
	// deepest first.
	var fixups []Entry
	buf := make([]byte, 256<<10)
	manifest, err := src.Walk(ctx, func(e Entry, r io.Reader) error {
		h := &tar.Header{Name: tarTree + e.Path, Mode: int64(e.Mode.Perm()), ModTime: mt}
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
		h := &tar.Header{Typeflag: tar.TypeDir, Name: tarTree + e.Path + "/", Mode: int64(e.Mode.Perm()), ModTime: mt}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
	}
	h := &tar.Header{Typeflag: tar.TypeReg, Name: tarManifest, Mode: 0o644, Size: int64(len(manifest)), ModTime: mt}
	if err := tw.WriteHeader(h); err != nil {
		return nil, err
	}
	if _, err := tw.Write(manifest); err != nil {
		return nil, err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: tarOld, Mode: 0o700, ModTime: mt}); err != nil {
		return nil, err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: tarComplete, Mode: 0o600, ModTime: mt}); err != nil {
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

// readTarStream parses a tar stream written by a sandbox's `tar -c .` and
// calls fn for each member below the top directory. The stream is hostile:
// a member name that is absolute, not clean or leaves the top is a protocol
// error; links and special files are reported by type, never resolved.
func readTarStream(r io.Reader, fn func(Entry, io.Reader) error) error {
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
