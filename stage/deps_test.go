package stage_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/airlockdev/airlock"

// sshPackages are the imports that only the SSH transport may bring in.
var sshPackages = []string{"golang.org/x/crypto/ssh", "github.com/pkg/sftp"}

// sshHome are the library packages that may import sshPackages: the SSH
// target, its in-process server, and the harness that starts a real sshd
// for their tests. Programs (package main: examples, internal/cmd) may too,
// as callers that configure a remote.Host.
var sshHome = []string{
	module + "/stage/remote",
	module + "/stage/remote/remotetest",
	module + "/internal/sshdtest",
}

// listedPackage is what the test reads of `go list -json`.
type listedPackage struct {
	ImportPath string
	Name       string
	Imports    []string
	Deps       []string
	Module     *struct{ Path string }
}

// within reports whether p is one of the packages prefixes name, or below one.
func within(p string, prefixes []string) bool {
	return slices.ContainsFunc(prefixes, func(pre string) bool { return p == pre || strings.HasPrefix(p, pre+"/") })
}

// modulePackages lists the module's packages (not their tests) with
// `go list -deps`, run from the module root.
func modulePackages(t *testing.T) []listedPackage {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH: the import rules cannot be listed")
	}
	gomod, err := exec.Command(goTool, "env", "GOMOD").Output()
	require.NoError(t, err, "go env GOMOD")
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	cmd := exec.Command(goTool, "list", "-e", "-deps", "-json=ImportPath,Name,Imports,Deps,Module", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())
	var pkgs []listedPackage
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p listedPackage
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "decoding go list's output")
		if p.Module != nil && p.Module.Path == module {
			pkgs = append(pkgs, p)
		}
	}
	require.NotEmpty(t, pkgs, "go list found none of the module's packages")
	return pkgs
}

// TestDependencies pins what may import what: only the SSH transport (and
// programs that configure it) depends on x/crypto/ssh or pkg/sftp, directly
// or not, so that no other package pulls SSH into its users' builds; and
// stagetest, which adapters import into their tests, pulls in no test
// library.
func TestDependencies(t *testing.T) {
	pkgs := modulePackages(t)
	seen := map[string]bool{}
	for _, p := range pkgs {
		seen[p.ImportPath] = true
		if within(p.ImportPath, sshHome) || p.Name == "main" {
			continue
		}
		var bad []string
		for _, d := range p.Deps {
			if within(d, sshPackages) {
				bad = append(bad, d)
			}
		}
		assert.Empty(t, bad, "%s depends on SSH packages: only %v (and programs) may", p.ImportPath, sshHome)
	}
	for _, p := range pkgs {
		if p.ImportPath != module+"/stage/stagetest" {
			continue
		}
		var bad []string
		for _, d := range p.Deps {
			if within(d, []string{"github.com/stretchr/testify"}) {
				bad = append(bad, d)
			}
		}
		assert.Empty(t, bad, "stagetest depends on testify: adapters that run its suites would pull it in; use plain testing")
	}
	for _, p := range []string{module + "/stage", module + "/stage/stagetest", module + "/stage/remote"} {
		assert.True(t, seen[p], "go list did not list %s: the rules above checked nothing about it", p)
	}
}
