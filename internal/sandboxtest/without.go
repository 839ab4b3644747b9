// Package sandboxtest holds Runners that tests of several packages share.
package sandboxtest

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/airlockdev/airlock/internal/shell"
	"github.com/airlockdev/airlock/sandbox"
)

// without is a Runner whose scripts see a PATH of every command of this
// machine's PATH but some.
type without struct {
	real sandbox.Runner
	bin  string
}

// Without returns a Runner that runs every script of r with a PATH that
// holds every command of this machine's PATH except tools (links in a
// directory of the test's): a sandbox that lacks them. The script's shell
// is r's, found before the PATH is set.
func Without(t testing.TB, r sandbox.Runner, tools ...string) sandbox.Runner {
	t.Helper()
	bin := t.TempDir()
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue // a PATH entry that does not exist
		}
		for _, e := range ents {
			if slices.Contains(tools, e.Name()) {
				continue
			}
			if err := os.Symlink(filepath.Join(dir, e.Name()), filepath.Join(bin, e.Name())); err != nil && !os.IsExist(err) {
				t.Fatalf("linking %s: %v", e.Name(), err)
			}
		}
	}
	if _, err := os.Lstat(filepath.Join(bin, "sh")); err != nil {
		t.Fatalf("no sh on PATH: %v", err)
	}
	return without{real: r, bin: bin}
}

// Run implements sandbox.Runner.
func (w without) Run(ctx context.Context, cmd sandbox.Command) error {
	cmd.Script = "PATH=" + shell.Quote(w.bin) + "; export PATH\n" + cmd.Script
	return w.real.Run(ctx, cmd)
}
