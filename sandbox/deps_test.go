package sandbox_test

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
var sshPackages = []string{"golang.org/x/crypto/ssh", "github.com/pkg/sftp", "github.com/kevinburke/ssh_config"}

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

// publicImports pins which of the module's public packages each library
// package may import (internal packages are not listed: any package may use
// them, and they import no public package but where named here). sandbox is
// the ground floor: the vocabulary every other package shares, importing
// only the protocol home (internal/shell, itself standard library and
// internal helpers only). A package imports another top-level package only
// where it composes it: remote.Host is a stage.Target built on
// stage.Bridge; stagetest checks stage Targets; mcptool serves deliverable's
// registration. workspace and deliverable reach a sandbox through
// sandbox.Runner alone.
var publicImports = map[string][]string{
	"sandbox":                       nil,
	"skills":                        {"sandbox"},
	"session":                       {"sandbox", "skills"},
	"stage":                         {"sandbox"},
	"stage/remote":                  {"sandbox", "stage"},
	"stage/remote/remotetest":       {"sandbox", "stage", "stage/remote"},
	"stage/stagetest":               {"sandbox", "stage"},
	"workspace":                     {"sandbox"},
	"deliverable":                   {"sandbox"},
	"deliverable/mcptool":           {"sandbox", "deliverable"},
	"internal/sshdtest":             {"sandbox", "stage", "stage/remote"}, // the real-sshd harness builds remote.Hosts
	"internal/busyboxuser":          {"sandbox"},                          // a test Runner: busybox sh as an unprivileged user
	"internal/sandboxtest":          {"sandbox"},                          // test Runners: a sandbox that lacks tools
	"internal/cmd/benchstage":       {"sandbox", "skills", "stage"},
	"github.com/airlockdev/airlock": {"sandbox", "skills", "session", "stage", "workspace", "deliverable"},
}

// TestImportGraph checks publicImports against go list: every library
// package of the module is listed (a new one must be placed), and none
// imports a public package it is not allowed to. internal packages import
// no public package except those listed.
func TestImportGraph(t *testing.T) {
	pkgs := modulePackages(t)
	for _, p := range pkgs {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		if rel == "" {
			rel = module
		}
		allowed, listed := publicImports[rel]
		if p.Name == "main" && !listed {
			continue // programs compose what they like
		}
		internal := strings.HasPrefix(rel, "internal/")
		if !listed && !internal {
			t.Errorf("%s is not in publicImports: place it in the import graph (sandbox/deps_test.go)", p.ImportPath)
			continue
		}
		for _, imp := range p.Imports {
			if imp != module && !strings.HasPrefix(imp, module+"/") {
				continue
			}
			irel := strings.TrimPrefix(strings.TrimPrefix(imp, module), "/")
			if strings.HasPrefix(irel, "internal/") {
				continue
			}
			if !slices.Contains(allowed, irel) {
				t.Errorf("%s imports %s: not allowed by publicImports (sandbox/deps_test.go); use sandbox's vocabulary, or move what is shared down into sandbox", p.ImportPath, imp)
			}
		}
	}
	// sandbox's own dependencies within the module: the protocol home and
	// what it uses, nothing public.
	for _, p := range pkgs {
		if p.ImportPath != module+"/sandbox" {
			continue
		}
		for _, d := range p.Deps {
			if strings.HasPrefix(d, module+"/") && !strings.HasPrefix(d, module+"/internal/") {
				t.Errorf("sandbox depends on %s: it is the ground floor and may depend on no other public package of the module", d)
			}
		}
		return
	}
	t.Fatal("go list did not list the sandbox package")
}
