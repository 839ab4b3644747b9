package stage

import (
	"context"
	"fmt"
	"io"
	"path"

	"github.com/airlockdev/airlock/internal/shell"
)

// writeTarStream writes src to w as one tar stream (shell's layout)
// and returns its manifest. Files the Target carried from the previous copy
// (Tree.Carry) are left out of the stream. With uncarried (an early
// stream: carried holds every planned file), the planned files it returns
// after the walk are read again and sent (Tree.resend).
func writeTarStream(ctx context.Context, w io.Writer, src *Tree, carried map[string]bool, planned map[string]string, uncarried func(planned map[string]string) ([]string, error)) ([]byte, error) {
	return shell.WriteStream(w, src.ModTime(), func(fn func(shell.Entry, io.Reader) error) ([]byte, error) {
		send := func(e Entry, r io.Reader) error { return fn(shell.Entry{Path: e.Path, Mode: e.Mode, Size: e.Size}, r) }
		walked := make(map[string]bool, len(planned)) // planned files the walk found, still regular files
		m, err := src.walk(ctx, func(rel string) bool {
			if !carried[rel] {
				return false
			}
			if _, ok := planned[rel]; ok {
				walked[rel] = true
			}
			return true
		}, func(e Entry, r io.Reader) error {
			if _, ok := planned[e.Path]; ok && e.Mode.IsRegular() {
				walked[e.Path] = true
			}
			if carried[e.Path] && e.Mode.IsRegular() {
				return src.Carry(e)
			}
			return send(e, r)
		})
		if err == nil && len(walked) != len(planned) {
			err = vanished(src, planned, walked)
		}
		if err == nil && uncarried != nil {
			var missing []string
			if missing, err = uncarried(planned); err == nil {
				err = resendFiles(src, missing, send)
			}
		}
		return m, err
	})
}

// resendFiles sends, after the walk, the files in missing: files the walk
// took as carried that the sandbox did not carry after all.
func resendFiles(src *Tree, missing []string, send func(Entry, io.Reader) error) error {
	for _, rel := range missing {
		if err := src.resend(rel, send); err != nil {
			return err
		}
	}
	return nil
}

// vanished is the error of a stream whose walk no longer found, as a
// regular file, a file the sandbox carried into the new copy (it left the
// source, or became something else, after Stage compared it): the new
// copy would hold a file its manifest does not list, so nothing is
// published; staging again when the tree is quiet succeeds.
func vanished(src *Tree, planned map[string]string, walked map[string]bool) error {
	gone := ""
	for p := range planned {
		if !walked[p] && (gone == "" || p < gone) {
			gone = p
		}
	}
	return fmt.Errorf("%w: %s left the source while it was staged (its unchanged copy was carried over in the sandbox): stage again", ErrChanged, path.Join(src.src, gone))
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
