// Package statedir is the one rule for airlock's host state directories
// (session.Bind's StateDir, session.OpenStore, skills.Materialize,
// deliverable.OpenFileStore): a missing one is created with its missing
// parents, mode 0700, through an os.Root on the real path of what exists,
// so that a dangling link is never followed to create anything; the result
// must resolve to a directory that is not a filesystem root. Errors are
// plain: each caller says which of its inputs was refused.
package statedir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/airlockdev/airlock/internal/tree"
)

// Make creates the state directory p when it is missing (p relative is
// taken against the working directory) and returns its real path (Real).
func Make(p string) (string, error) {
	abs, err := Abs(p)
	if err != nil {
		return "", err
	}
	if err := create(abs); err != nil {
		return "", err
	}
	return Real(p)
}

// Real resolves p to an absolute path with every symbolic link evaluated
// and requires a directory that is not a filesystem root.
func Real(p string) (string, error) {
	abs, err := Abs(p)
	if err != nil {
		return "", err
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("cannot resolve the real path (create the directory first): %w", err)
	}
	fi, err := os.Stat(resolved)
	if err != nil {
		return "", fmt.Errorf("cannot stat the real path %q: %w", resolved, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("the real path %q is a %s, not a directory; pass a directory", resolved, tree.Kind(fi.Mode()))
	}
	if filepath.Dir(resolved) == resolved {
		return "", fmt.Errorf("the real path %q is a filesystem root; pass a dedicated directory", resolved)
	}
	return resolved, nil
}

// Abs returns p made absolute against the working directory, not cleaned;
// a blank p is an error.
func Abs(p string) (string, error) {
	if strings.TrimSpace(p) == "" {
		return "", errors.New("the path is blank; pass a directory")
	}
	if filepath.IsAbs(p) {
		return p, nil
	}
	// syscall.Getwd, not os.Getwd (which consults $PWD): airlock never
	// reads the environment.
	wd, err := syscall.Getwd()
	if err != nil {
		return "", fmt.Errorf("cannot make the relative path absolute (pass an absolute path): %w", err)
	}
	return filepath.Join(wd, p), nil
}

// create creates the missing directories of the absolute path abs: with
// the missing parents, mode 0700 (before the umask). A path whose last
// component exists (a directory, a link, anything else) is left to Real to
// judge.
//
// Links: the existing part of abs is resolved as Real resolves a path
// (its links followed), but what is created is created through an os.Root
// on that real directory, so a link met on the way (a dangling link above
// abs is refused before; one planted while this runs) is never followed
// out of it; and the created path must then resolve to exactly the
// directories made, or the state directory is refused.
func create(abs string) error {
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

// Resolve returns the real path p has, or will have once Make has created
// it: the real path of its deepest existing path (links evaluated) joined
// with the missing components. It creates nothing.
func Resolve(p string) (string, error) {
	abs, err := Abs(p)
	if err != nil {
		return "", err
	}
	base, missing, err := missingTail(abs)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(base)
	if err != nil {
		return "", fmt.Errorf("%q, the last existing path of it, does not resolve (a dangling link?): %w", base, err)
	}
	return filepath.Join(append([]string{real}, missing...)...), nil
}
