package stage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"

	"github.com/airlockdev/airlock/internal/tree"
)

// verify reads <root>/<name> back through t and checks it against the
// canonical manifest want, entry by entry and hash by hash. A difference
// wraps ErrMismatch.
func verify(ctx context.Context, t Target, root, name string, want []byte) error {
	m, err := tree.ParseManifest(want)
	if err != nil {
		return fmt.Errorf("%w: the stored manifest of %q is unusable: %v", ErrMismatch, name, err)
	}
	expect := make(map[string]tree.Entry, len(m.Entries))
	for _, e := range m.Entries {
		expect[e.Path] = e
	}
	seen := make(map[string]bool, len(m.Entries))
	buf := make([]byte, 256<<10)
	err = t.Fetch(ctx, root, name, func(e Entry, r io.Reader) error {
		w, ok := expect[e.Path]
		switch {
		case !ok:
			return fmt.Errorf("%w: %q is in the sandbox copy but not in the manifest", ErrMismatch, e.Path)
		case seen[e.Path]:
			return fmt.Errorf("%w: %q appears twice", ErrMismatch, e.Path)
		}
		seen[e.Path] = true
		switch {
		case w.Type == tree.Dir && !e.Mode.IsDir():
			return fmt.Errorf("%w: %q is a %s, want a directory", ErrMismatch, e.Path, tree.Kind(e.Mode))
		case w.Type == tree.File && !e.Mode.IsRegular():
			return fmt.Errorf("%w: %q is a %s, want a regular file", ErrMismatch, e.Path, tree.Kind(e.Mode))
		case e.Mode.Perm() != w.Mode:
			return fmt.Errorf("%w: %q has mode %v, want %v", ErrMismatch, e.Path, e.Mode.Perm(), w.Mode)
		case w.Type == tree.Dir:
			return nil
		}
		if e.Size != w.Size {
			return fmt.Errorf("%w: %q has %d bytes, want %d", ErrMismatch, e.Path, e.Size, w.Size)
		}
		h := sha256.New()
		n, err := io.CopyBuffer(h, io.LimitReader(r, w.Size+1), buf)
		if err != nil {
			return fmt.Errorf("reading %q back: %w", e.Path, err)
		}
		if n != w.Size {
			return fmt.Errorf("%w: %q yielded %d bytes, want %d", ErrMismatch, e.Path, n, w.Size)
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != w.SHA256 {
			return fmt.Errorf("%w: %q has SHA-256 %s, want %s", ErrMismatch, e.Path, got, w.SHA256)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, e := range m.Entries {
		if !seen[e.Path] {
			return fmt.Errorf("%w: %q is missing from the sandbox copy", ErrMismatch, e.Path)
		}
	}
	return nil
}
