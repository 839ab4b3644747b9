package workspace

// This file holds the workspace's tar stream writer and hostile tar reader.
// They move to the shared internal package (with stage's) once it lands.

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"

	"github.com/airlockdev/airlock/internal/tree"
)

// writeTar streams the tree at dir (read through internal/tree, links
// skipped, exclude applied) to w and returns what it sent.
func writeTar(ctx context.Context, w io.Writer, dir string, exclude func(rel string, isDir bool) bool) (*tree.Result, error) {
	bw := bufio.NewWriterSize(w, 256<<10)
	tw := tar.NewWriter(bw)
	mt := time.Now().Truncate(time.Second)
	var fixups []tree.Entry
	buf := make([]byte, 256<<10)
	res, err := tree.Walk(ctx, dir, tree.Options{Exclude: exclude}, func(it *tree.Item) error {
		h := &tar.Header{Name: it.Path, Mode: int64(it.Mode.Perm()), ModTime: mt, Format: tar.FormatPAX}
		if it.Type == tree.Dir {
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
			if it.Mode&0o700 != 0o700 {
				h.Mode |= 0o700
				fixups = append(fixups, it.Entry)
			}
			return tw.WriteHeader(h)
		}
		h.Typeflag, h.Size = tar.TypeReg, it.Size
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := io.CopyBuffer(struct{ io.Writer }{tw}, struct{ io.Reader }{it}, buf)
		return err
	})
	if err != nil {
		return nil, err
	}
	for i := len(fixups) - 1; i >= 0; i-- {
		e := fixups[i]
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: e.Path + "/", Mode: int64(e.Mode.Perm()), ModTime: mt, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return res, bw.Flush()
}

// tarEntry is one member of a sandbox's tar stream, as the hostile reader
// reports it. Name is the raw member name; Path is set only when Name is a
// clean relative path.
type tarEntry struct {
	Name   string
	Path   string
	Mode   fs.FileMode // type and permission bits; setuid/setgid/sticky kept so the caller can refuse them
	Size   int64
	Target string // symbolic links
}

// readTar parses a tar stream from a sandbox's `tar -c`. Nothing in it is
// trusted: a member's name may be anything (Path is "" when it is not a
// clean relative path), links are reported by type and never resolved,
// and at most limit bytes of content are read: the member that crosses it
// is reported to fn with r == nil and the reader stops with errTruncated.
// fn may read r (valid until it returns) or not.
func readTar(r io.Reader, limit int64, fn func(e tarEntry, r io.Reader) error) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: reading the sandbox's tar stream: %v", ErrHostile, err)
		}
		e := tarEntry{Name: h.Name, Mode: fs.FileMode(h.Mode) & fs.ModePerm}
		if h.Mode&0o4000 != 0 {
			e.Mode |= fs.ModeSetuid
		}
		if h.Mode&0o2000 != 0 {
			e.Mode |= fs.ModeSetgid
		}
		if h.Mode&0o1000 != 0 {
			e.Mode |= fs.ModeSticky
		}
		name := strings.TrimPrefix(h.Name, "./")
		if h.Typeflag == tar.TypeDir {
			name = strings.TrimSuffix(name, "/")
		}
		if name == "" || name == "." {
			continue // the top directory
		}
		if tree.ValidPath(name) && !strings.Contains(name, "\\") && len(name) <= tree.DefaultMaxPathLen {
			e.Path = name
		}
		switch h.Typeflag {
		case tar.TypeDir:
			e.Mode |= fs.ModeDir
		case tar.TypeReg, '\x00': // '\x00': the pre-POSIX regular file
			e.Size = h.Size
		case tar.TypeSymlink:
			e.Mode |= fs.ModeSymlink
			e.Target = h.Linkname
		case tar.TypeFifo:
			e.Mode |= fs.ModeNamedPipe
		case tar.TypeChar:
			e.Mode |= fs.ModeDevice | fs.ModeCharDevice
		case tar.TypeBlock:
			e.Mode |= fs.ModeDevice
		default: // hard links, sparse files, anything else
			e.Mode |= fs.ModeIrregular
			e.Target = h.Linkname
		}
		if e.Mode.IsRegular() {
			if e.Size > limit {
				if err := fn(e, nil); err != nil {
					return err
				}
				return errTruncated
			}
			limit -= e.Size
		}
		if err := fn(e, tr); err != nil {
			return err
		}
	}
}
