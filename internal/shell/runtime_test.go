package shell_test

import (
	"testing"

	"github.com/airlockdev/airlock/internal/shell"
	"github.com/airlockdev/airlock/sandbox"
)

// TestRuntimeDir: the scripts keep out the directory every package
// reserves.
func TestRuntimeDir(t *testing.T) {
	if shell.RuntimeDir != sandbox.RuntimeDir {
		t.Fatalf("shell.RuntimeDir is %q, sandbox.RuntimeDir %q", shell.RuntimeDir, sandbox.RuntimeDir)
	}
}
