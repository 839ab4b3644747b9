package session

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNoProcessesNoEnvironment pins the package's promise: its non-test code
// imports nothing that starts a process and calls nothing that reads the
// environment (os.Getwd is excluded because it consults $PWD; so are
// os.TempDir, os.UserHomeDir and friends, and afero.TempFile/TempDir, which
// fall back to os.TempDir).
func TestNoProcessesNoEnvironment(t *testing.T) {
	forbiddenImports := map[string]bool{"os/exec": true, "os/user": true, "plugin": true}
	forbiddenCalls := map[string]bool{
		"os.Getenv": true, "os.LookupEnv": true, "os.Environ": true, "os.ExpandEnv": true,
		"os.Setenv": true, "os.Getwd": true, "os.TempDir": true, "os.UserHomeDir": true,
		"os.UserCacheDir": true, "os.UserConfigDir": true, "os.StartProcess": true,
		"syscall.Exec": true, "syscall.ForkExec": true, "syscall.StartProcess": true,
		"syscall.Getenv": true, "syscall.Environ": true,
		"afero.TempFile": true, "afero.TempDir": true, "filepath.Abs": true,
	}
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		checked++
		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			require.NoError(t, err)
			assert.False(t, forbiddenImports[path], "%s imports %s", name, path)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); ok {
				call := pkg.Name + "." + sel.Sel.Name
				assert.False(t, forbiddenCalls[call], "%s: %s uses %s", name, fset.Position(sel.Pos()), call)
			}
			return true
		})
	}
	assert.GreaterOrEqual(t, checked, 5)
}
