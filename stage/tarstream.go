package stage

import (
	"context"
	"io"

	"github.com/airlockdev/airlock/internal/shellproto"
)

// The bridge's tar stream layout (see shellproto).
const (
	tarOld = shellproto.TarOld
)

// writeTarStream writes src to w as one tar stream (shellproto's layout)
// and returns its manifest. Files the Target carried from the previous copy
// (Tree.Carry) are left out of the stream.
func writeTarStream(ctx context.Context, w io.Writer, src *Tree, carried map[string]bool) ([]byte, error) {
	return shellproto.WriteStream(w, src.ModTime(), func(fn func(shellproto.Entry, io.Reader) error) ([]byte, error) {
		return src.Walk(ctx, func(e Entry, r io.Reader) error {
			if carried[e.Path] && e.Mode.IsRegular() {
				return src.Carry(e)
			}
			return fn(shellproto.Entry{Path: e.Path, Mode: e.Mode, Size: e.Size}, r)
		})
	})
}

// readTarStream parses a tar stream written by a sandbox's `tar -c .` (see
// shellproto.ReadTar: the stream is hostile).
func readTarStream(r io.Reader, fn func(Entry, io.Reader) error) error {
	return shellproto.ReadTar(r, func(e shellproto.Entry, r io.Reader) error {
		return fn(Entry{Path: e.Path, Mode: e.Mode, Size: e.Size}, r)
	})
}

// q quotes s for POSIX sh.
func q(s string) string { return shellproto.Quote(s) }

// limitedBuffer collects bounded sandbox output.
type limitedBuffer = shellproto.LimitedBuffer
