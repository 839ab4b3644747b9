package workspace

// The workspace's tar streams, in the shell protocol's encoding: the
// writer and the hostile reader are internal/shell's, shared with
// stage.Bridge and remote.Host.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"

	"github.com/airlockdev/airlock/internal/shell"
	"github.com/airlockdev/airlock/internal/tree"
)

// writeTar streams the tree at dir (read through internal/tree, links
// skipped, exclude applied) to w, in the shell protocol's tree encoding
// (shell.WritePlain, whose last member is the directories' modes script,
// named modes: a name exclude must leave out), and returns what it sent.
func writeTar(ctx context.Context, w io.Writer, dir, modes string, exclude func(rel string, isDir bool) bool) (*tree.Result, error) {
	var res *tree.Result
	_, err := shell.WritePlain(w, time.Now().Truncate(time.Second), modes, func(fn func(shell.Entry, io.Reader) error) ([]byte, error) {
		var err error
		res, err = tree.Walk(ctx, dir, tree.Options{Exclude: exclude}, func(it *tree.Item) error {
			e := shell.Entry{Path: it.Path, Mode: it.Mode.Perm(), Size: it.Size}
			if it.Type == tree.Dir {
				e.Mode |= fs.ModeDir
			}
			return fn(e, it)
		})
		return nil, err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// tarEntry is one member of a sandbox's tar stream, as the hostile reader
// reports it (shell.Member: Name raw, Path set only when Name is a
// clean relative path, Linkname for symbolic and hard links).
type tarEntry = shell.Member

// readTar parses a tar stream from a sandbox's `tar -c` through the shell
// protocol's hostile reader (shell.ReadLimited). Nothing in it is
// trusted: a member's name may be anything (Path is "" when it is not a
// clean relative path, holds a backslash or is too long), links are
// reported by type and never resolved, and at most limit bytes of content
// are read: the member that crosses it is reported to fn with r == nil and
// the reader stops with shell.ErrTruncated. fn may read r (valid until it
// returns) or not. A stream that is not tar is ErrHostile (and
// sandbox.ErrProtocol).
func readTar(r io.Reader, limit int64, fn func(e tarEntry, r io.Reader) error) error {
	err := shell.ReadLimited(r, limit, fn)
	if errors.Is(err, shell.ErrMalformedTar) {
		return fmt.Errorf("%w: reading the sandbox's tar stream: %w", ErrHostile, err)
	}
	return err
}
