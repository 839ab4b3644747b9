package stage

import (
	"context"
	"io"

	"github.com/airlockdev/airlock/internal/shell"
)

// writeTarStream writes src to w as one tar stream (shell's layout)
// and returns its manifest. Files the Target carried from the previous copy
// (Tree.Carry) are left out of the stream.
func writeTarStream(ctx context.Context, w io.Writer, src *Tree, carried map[string]bool) ([]byte, error) {
	return shell.WriteStream(w, src.ModTime(), func(fn func(shell.Entry, io.Reader) error) ([]byte, error) {
		return src.Walk(ctx, func(e Entry, r io.Reader) error {
			if carried[e.Path] && e.Mode.IsRegular() {
				return src.Carry(e)
			}
			return fn(shell.Entry{Path: e.Path, Mode: e.Mode, Size: e.Size}, r)
		})
	})
}

// readTarStream parses a tar stream written by a sandbox's `tar -c .` (see
// shell.ReadTar: the stream is hostile).
func readTarStream(r io.Reader, fn func(Entry, io.Reader) error) error {
	return shell.ReadTar(r, func(e shell.Entry, r io.Reader) error {
		return fn(Entry{Path: e.Path, Mode: e.Mode, Size: e.Size}, r)
	})
}

// limitedBuffer collects bounded sandbox output.
type limitedBuffer = shell.LimitedBuffer
