package deliverable_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable"
)

func TestWorkspaceRefResolve(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	root := filepath.Join(base, "ws")
	outside := filepath.Join(base, "outside")
	writeFile(t, root, "src/main.go", []byte("package main\n"))
	writeFile(t, root, "real/notes.md", []byte("# notes\n"))
	writeFile(t, outside, "secret.txt", []byte("secret\n"))
	require.NoError(t, os.Symlink("real", filepath.Join(root, "inside-dir")))
	require.NoError(t, os.Symlink("real/notes.md", filepath.Join(root, "inside.md")))
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "out-dir")))
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(root, "out.txt")))
	require.NoError(t, os.Symlink("../outside/secret.txt", filepath.Join(root, "rel-out.txt")))
	require.NoError(t, os.Symlink(".", filepath.Join(root, "self")))

	cases := []struct {
		name string
		ref  deliverable.WorkspaceRef
		want string // host path relative to base, or ""
		err  error
	}{
		{"plain file", deliverable.WorkspaceRef{Kind: deliverable.KindWorkspaceFile, WorkspaceID: "w", RelativePath: "src/main.go", Line: 1, Column: 1}, "ws/src/main.go", nil},
		{"empty kind", deliverable.WorkspaceRef{RelativePath: "./src//main.go"}, "ws/src/main.go", nil},
		{"directory", deliverable.WorkspaceRef{RelativePath: "src"}, "ws/src", nil},
		{"link to a directory inside", deliverable.WorkspaceRef{RelativePath: "inside-dir/notes.md"}, "ws/real/notes.md", nil},
		{"link to a file inside", deliverable.WorkspaceRef{RelativePath: "inside.md", Line: 3}, "ws/real/notes.md", nil},
		{"absolute path of a workspace file (fails even without confinement)", deliverable.WorkspaceRef{RelativePath: filepath.Join(root, "src/main.go")}, "", deliverable.ErrPathDenied},
		{"absolute path outside", deliverable.WorkspaceRef{RelativePath: "/etc/passwd"}, "", deliverable.ErrPathDenied},
		{"home path", deliverable.WorkspaceRef{RelativePath: "~/.ssh/id_ed25519"}, "", deliverable.ErrPathDenied},
		{"other user's home", deliverable.WorkspaceRef{RelativePath: "~root/.profile"}, "", deliverable.ErrPathDenied},
		{"dot-dot escape", deliverable.WorkspaceRef{RelativePath: "../outside/secret.txt"}, "", deliverable.ErrPathDenied},
		{"dot-dot inside (fails even without confinement)", deliverable.WorkspaceRef{RelativePath: "src/../src/main.go"}, "", deliverable.ErrPathDenied},
		{"URL", deliverable.WorkspaceRef{RelativePath: "file:///etc/passwd"}, "", deliverable.ErrPathDenied},
		{"backslash", deliverable.WorkspaceRef{RelativePath: `src\main.go`}, "", deliverable.ErrPathDenied},
		{"root itself", deliverable.WorkspaceRef{RelativePath: "."}, "", deliverable.ErrPathDenied},
		{"link to the root", deliverable.WorkspaceRef{RelativePath: "self"}, "", deliverable.ErrPathDenied},
		{"link to an outside directory", deliverable.WorkspaceRef{RelativePath: "out-dir/secret.txt"}, "", deliverable.ErrSymlinkDenied},
		{"absolute link to an outside file", deliverable.WorkspaceRef{RelativePath: "out.txt"}, "", deliverable.ErrSymlinkDenied},
		{"relative link to an outside file", deliverable.WorkspaceRef{RelativePath: "rel-out.txt"}, "", deliverable.ErrSymlinkDenied},
		{"missing", deliverable.WorkspaceRef{RelativePath: "nope.go"}, "", fs.ErrNotExist},
		{"other kind", deliverable.WorkspaceRef{Kind: "url", RelativePath: "src/main.go"}, "", deliverable.ErrInvalidRequest},
		{"negative line", deliverable.WorkspaceRef{RelativePath: "src/main.go", Line: -1}, "", deliverable.ErrInvalidRequest},
		{"column without line", deliverable.WorkspaceRef{RelativePath: "src/main.go", Column: 2}, "", deliverable.ErrInvalidRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.ref.Resolve(root)
			if tc.err != nil {
				assert.ErrorIs(t, err, tc.err)
				assert.Empty(t, got)
				if tc.err != deliverable.ErrInvalidRequest {
					var pe *fs.PathError
					require.ErrorAs(t, err, &pe)
					assert.Equal(t, tc.ref.RelativePath, pe.Path)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, filepath.Join(base, filepath.FromSlash(tc.want)), got)
		})
	}

	_, err = deliverable.WorkspaceRef{RelativePath: "src/main.go"}.Resolve("relative/root")
	assert.ErrorIs(t, err, deliverable.ErrInvalidRequest)
}

func TestNewWorkspaceRefStoresRelativePath(t *testing.T) {
	r, err := deliverable.NewWorkspaceRef("w1", "./src//main.go", 12, 3)
	require.NoError(t, err)
	assert.Equal(t, deliverable.WorkspaceRef{Kind: deliverable.KindWorkspaceFile, WorkspaceID: "w1", RelativePath: "src/main.go", Line: 12, Column: 3}, r)

	for _, bad := range []string{"/home/u/ws/src/main.go", "~/x", "../x", "https://x/y", ""} {
		_, err := deliverable.NewWorkspaceRef("w1", bad, 0, 0)
		assert.ErrorIs(t, err, deliverable.ErrPathDenied, bad)
	}
}
