package deliverable

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// KindWorkspaceFile is the Kind of a reference to a file in a workspace.
const KindWorkspaceFile = "workspace_file"

// WorkspaceRef is a stored reference to a place in a workspace file. It keeps
// the workspace-relative path, never a host path; Resolve turns it into one
// for a given workspace root.
type WorkspaceRef struct {
	Kind         string `json:"kind"` // KindWorkspaceFile (empty means the same)
	WorkspaceID  string `json:"workspaceId"`
	RelativePath string `json:"relativePath"`     // slash-separated, relative to the workspace root
	Line         int    `json:"line,omitempty"`   // 1-based; 0 means none
	Column       int    `json:"column,omitempty"` // 1-based; 0 means none; needs Line
}

// NewWorkspaceRef validates unsafePath like Resolve does (lexically) and
// returns a reference holding its cleaned relative form.
func NewWorkspaceRef(workspaceID, unsafePath string, line, column int) (WorkspaceRef, error) {
	r := WorkspaceRef{Kind: KindWorkspaceFile, WorkspaceID: workspaceID, RelativePath: unsafePath, Line: line, Column: column}
	rel, err := r.check("reference")
	if err != nil {
		return WorkspaceRef{}, err
	}
	r.RelativePath = rel
	return r, nil
}

// check validates the reference lexically and returns its cleaned relative path.
func (r WorkspaceRef) check(op string) (string, error) {
	if r.Kind != "" && r.Kind != KindWorkspaceFile {
		return "", fmt.Errorf("%w: workspace reference kind %q is not %q", ErrInvalidRequest, clip(r.Kind), KindWorkspaceFile)
	}
	if r.Line < 0 || r.Column < 0 || (r.Column > 0 && r.Line == 0) {
		return "", fmt.Errorf("%w: workspace reference line %d column %d; use 1-based numbers, and a column only with a line", ErrInvalidRequest, r.Line, r.Column)
	}
	return cleanRef(op, r.RelativePath)
}

// Resolve returns the host path of the referenced file inside the workspace
// whose root directory is root (an absolute path). The reference must name an
// existing file or directory strictly inside root: absolute and home paths,
// URLs, ".." components and backslashes are refused lexically
// (ErrPathDenied), and a symbolic link anywhere on the path may only lead to
// another place inside root (ErrSymlinkDenied otherwise). The result is the
// fully resolved path, without links. Errors are *fs.PathError values with
// Path set to RelativePath.
//
// Resolve checks a point in time: a link planted after it returns is not
// seen. To read the file, open it beneath the root with a descriptor-based,
// no-follow open rather than by the returned path.
func (r WorkspaceRef) Resolve(root string) (string, error) {
	rel, err := r.check("resolve")
	if err != nil {
		return "", err
	}
	pathErr := func(err error) error { return &fs.PathError{Op: "resolve", Path: r.RelativePath, Err: err} }
	if !filepath.IsAbs(root) {
		return "", fmt.Errorf("%w: workspace root %q is not absolute", ErrInvalidRequest, clip(root))
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", fmt.Errorf("deliverable: resolve workspace root %s: %w", root, err)
	}
	real, err := filepath.EvalSymlinks(filepath.Join(realRoot, filepath.FromSlash(rel)))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", pathErr(fmt.Errorf("the referenced file does not exist in the workspace: %w", err))
		}
		return "", pathErr(err)
	}
	inside, err := filepath.Rel(realRoot, real)
	if err != nil || inside == ".." || strings.HasPrefix(inside, ".."+string(filepath.Separator)) || filepath.IsAbs(inside) {
		return "", pathErr(fmt.Errorf("%w: a symbolic link on the path leads outside the workspace", ErrSymlinkDenied))
	}
	if inside == "." {
		return "", pathErr(fmt.Errorf("%w: the path resolves to the workspace root, not a file in it", ErrPathDenied))
	}
	// Cross-check with os.Root, which refuses to leave the root at all.
	rt, err := os.OpenRoot(realRoot)
	if err != nil {
		return "", fmt.Errorf("deliverable: open workspace root %s: %w", realRoot, err)
	}
	defer func() { _ = rt.Close() }() // a directory handle: nothing to flush
	if _, err := rt.Lstat(inside); err != nil {
		return "", pathErr(fmt.Errorf("%w: the resolved path is not inside the workspace (%w)", ErrPathDenied, err))
	}
	return real, nil
}
