package stage_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/shell"
)

// build creates a tree under dir from a tiny fixture language: "d/" is a
// directory, "f=content" a file, "l -> target" a symbolic link.
func build(t testing.TB, dir string, spec ...string) {
	t.Helper()
	for _, s := range spec {
		switch {
		case strings.Contains(s, " -> "):
			name, target, _ := strings.Cut(s, " -> ")
			p := filepath.Join(dir, filepath.FromSlash(name))
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			require.NoError(t, os.Symlink(target, p))
		case strings.HasSuffix(s, "/"):
			require.NoError(t, os.MkdirAll(filepath.Join(dir, filepath.FromSlash(s)), 0o755))
		default:
			name, content, _ := strings.Cut(s, "=")
			p := filepath.Join(dir, filepath.FromSlash(name))
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
		}
	}
}

// listDir returns the names in dir.
func listDir(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), shell.StageReserved+"-stamps-") { // the Bridge's record of its copy (TestStampsFollowTheCopy)
			names = append(names, e.Name())
		}
	}
	return names
}

// readFile reads a file that must exist.
func readFile(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	return string(b)
}
