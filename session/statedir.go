package session

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// stateDirOp is the Op of every state directory error of Bind.
const stateDirOp = "session.Bind state directory"

// stateDir creates the state directory p when it is missing (see
// createStateDir) and returns its real path (realDir).
func stateDir(p string) (string, error) {
	abs, err := absPath(p)
	if err != nil {
		return "", &fs.PathError{Op: stateDirOp, Path: p, Err: fmt.Errorf("%w: %w", ErrInvalidStateDir, err)}
	}
	if err := createStateDir(abs); err != nil {
		return "", &fs.PathError{Op: stateDirOp, Path: p, Err: fmt.Errorf("%w: %w", ErrInvalidStateDir, err)}
	}
	return realDir("state directory", p, ErrInvalidStateDir)
}

// createStateDir creates the missing directories of the absolute path abs,
// the way skills.Materialize and deliverable.FileStore create their state
// directories: with the missing parents, mode 0700 (before the umask). A
// path whose last component exists (a directory, a link, anything else) is
// left to realDir to judge.
//
// Links: the existing part of abs is resolved as Bind resolves every path
// (its links followed), but what is created is created through an os.Root
// on that real directory, so a link met on the way (a dangling link above
// abs is refused before; one planted while this runs) is never followed
// out of it; and the created path must then resolve to exactly the
// directories made, or the state directory is refused.
func createStateDir(abs string) error {
	base, missing, err := missingTail(abs)
	if err != nil || len(missing) == 0 {
		return err
	}
	return createBeneath(abs, base, missing)
}

// createBeneath creates the missing components below base, the last
// existing path of abs, through an os.Root on base's real path, and checks
// that abs then resolves to exactly what it created.
func createBeneath(abs, base string, missing []string) error {
	real, err := filepath.EvalSymlinks(base)
	if err != nil {
		return fmt.Errorf("cannot create it: %q, the last existing path above it, does not resolve (a dangling link?): %w", base, err)
	}
	root, err := os.OpenRoot(real)
	if err != nil {
		return fmt.Errorf("cannot create it under %q: %w", real, err)
	}
	defer root.Close()
	rel := filepath.Join(missing...)
	if err := root.MkdirAll(rel, 0o700); err != nil {
		return fmt.Errorf("cannot create it under %q: %w", real, err)
	}
	want := filepath.Join(real, rel)
	if got, err := filepath.EvalSymlinks(abs); err != nil || got != want {
		return fmt.Errorf("it was created as %q but resolves to %q (%v): a link was planted on its path while it was created; remove it and retry", want, got, err)
	}
	return nil
}

// missingTail splits abs into its last existing path (by Lstat: a link
// counts as existing) and the missing components below it, outermost
// first. A missing path with a ".." component is refused: lexical cleaning
// and the kernel's walk through a link may disagree about where it leads.
func missingTail(abs string) (string, []string, error) {
	if _, err := os.Lstat(abs); err == nil {
		return abs, nil, nil
	}
	if slices.Contains(strings.Split(filepath.ToSlash(abs), "/"), "..") {
		return "", nil, fmt.Errorf("%w: a missing state directory is created only from a path without \"..\"; pass its real path", fs.ErrNotExist)
	}
	var missing []string
	for base := filepath.Clean(abs); ; {
		_, err := os.Lstat(base)
		switch {
		case err == nil:
			slices.Reverse(missing)
			return base, missing, nil
		case !errors.Is(err, fs.ErrNotExist):
			return "", nil, fmt.Errorf("cannot check %q: %w", base, err)
		}
		parent := filepath.Dir(base)
		if parent == base {
			return "", nil, fmt.Errorf("cannot check %q: %w", base, err)
		}
		missing = append(missing, filepath.Base(base))
		base = parent
	}
}
