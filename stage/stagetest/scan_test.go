package stagetest_test

import (
	"fmt"
	"go/scanner"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/stage/stagetest"
)

// writeTree writes files (slash path → content) under root. A content that
// starts with "=> " makes a symbolic link to the rest of the string.
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(root, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		if target, ok := cutLink(content); ok {
			require.NoError(t, os.Symlink(target, path))
			continue
		}
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	}
}

func cutLink(content string) (string, bool) {
	if len(content) > 3 && content[:3] == "=> " {
		return content[3:], true
	}
	return "", false
}

// stageMod is a go.mod that makes <root>/stage the stage package itself.
const stageMod = "module github.com/airlockdev/airlock // the library\n\ngo 1.26\n"

// stagePkg is a minimal package stage: the declarations ScanSites resolves.
const stagePkg = `package stage

type LinkPolicy int

const (
	SkipLinks LinkPolicy = iota
	RejectLinks
	FollowLinksWithin
)

type Asset struct {
	Name    string
	Source  string
	Links   LinkPolicy
	Exclude []string
}

var defaults = Asset{Name: "self", Links: RejectLinks}
`

func TestScanSites(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  []stagetest.Site
	}{
		{
			name: "keyed literals in either field order, policy omitted",
			files: map[string]string{"adapter.go": `package adapter

import "github.com/airlockdev/airlock/stage"

func assets(src, name string) []any {
	return []any{
		stage.Asset{Name: "skills", Source: src, Links: stage.RejectLinks},
		stage.Asset{Links: stage.FollowLinksWithin, Exclude: nil, Source: src, Name: name},
		stage.Asset{Source: src, Name: "plain"},
		stage.Asset{},
		stage.Asset{Name: prefix + "x", Links: (stage.SkipLinks)},
		stage.Asset{Name: "computed", Links: policy()},
	}
}
`},
			want: []stagetest.Site{
				{File: "adapter.go", Line: 7, Name: `"skills"`, Links: "RejectLinks"},
				{File: "adapter.go", Line: 8, Name: "name", Links: "FollowLinksWithin"},
				{File: "adapter.go", Line: 9, Name: `"plain"`, Links: "SkipLinks"},
				{File: "adapter.go", Line: 10, Name: `""`, Links: "SkipLinks"},
				{File: "adapter.go", Line: 11, Name: `prefix + "x"`, Links: "SkipLinks"},
				{File: "adapter.go", Line: 12, Name: `"computed"`, Links: "policy()"},
			},
		},
		{
			name: "positional literals read as Name, Source, Links, Exclude",
			files: map[string]string{"pos.go": `package adapter

import "github.com/airlockdev/airlock/stage"

var a = stage.Asset{"skills", "/h/skills", stage.RejectLinks, nil}
var b = stage.Asset{name, src, stage.LinkPolicy(2), []string{"*.tmp"}}
`},
			want: []stagetest.Site{
				{File: "pos.go", Line: 5, Name: `"skills"`, Links: "RejectLinks"},
				{File: "pos.go", Line: 6, Name: "name", Links: "stage.LinkPolicy(2)"},
			},
		},
		{
			name: "renamed import",
			files: map[string]string{"renamed.go": `package adapter

import st "github.com/airlockdev/airlock/stage"

var a = st.Asset{Name: "renamed", Links: st.FollowLinksWithin}
`},
			want: []stagetest.Site{
				{File: "renamed.go", Line: 5, Name: `"renamed"`, Links: "FollowLinksWithin"},
			},
		},
		{
			name: "dot import, with a function-local Asset that shadows it",
			files: map[string]string{"dot.go": `package adapter

import . "github.com/airlockdev/airlock/stage"

var a = Asset{Name: "dotted", Links: RejectLinks}

func f() {
	type Asset struct{ Name string }
	_ = Asset{Name: "shadowed"}
}
`},
			want: []stagetest.Site{
				{File: "dot.go", Line: 5, Name: `"dotted"`, Links: "RejectLinks"},
			},
		},
		{
			name: "elided element types",
			files: map[string]string{
				"types.go": `package adapter

import "github.com/airlockdev/airlock/stage"

type Assets []stage.Asset
`,
				"slices.go": `package adapter

import "github.com/airlockdev/airlock/stage"

var s = []stage.Asset{{Name: "a"}, {Name: "b", Links: stage.RejectLinks}}
var m = map[string]stage.Asset{
	"k": {Name: "m"},
}
var arr = [...]stage.Asset{
	{"arr", src, stage.FollowLinksWithin, nil},
}
var nested = [][]stage.Asset{{{Name: "nested"}}}
var ptrs = []*stage.Asset{{Name: "p"}}
var named = Assets{{Name: "named"}}
var notAssets = []struct{ Name string }{{Name: "no"}}
`},
			want: []stagetest.Site{
				{File: "slices.go", Line: 5, Name: `"a"`, Links: "SkipLinks"},
				{File: "slices.go", Line: 5, Name: `"b"`, Links: "RejectLinks"},
				{File: "slices.go", Line: 7, Name: `"m"`, Links: "SkipLinks"},
				{File: "slices.go", Line: 10, Name: `"arr"`, Links: "FollowLinksWithin"},
				{File: "slices.go", Line: 12, Name: `"nested"`, Links: "SkipLinks"},
				{File: "slices.go", Line: 13, Name: `"p"`, Links: "SkipLinks"},
				{File: "slices.go", Line: 14, Name: `"named"`, Links: "SkipLinks"},
			},
		},
		{
			name: "pointer literal",
			files: map[string]string{"ptr.go": `package adapter

import "github.com/airlockdev/airlock/stage"

func f() *stage.Asset {
	return &stage.Asset{Name: "ptr", Links: stage.RejectLinks}
}
`},
			want: []stagetest.Site{
				{File: "ptr.go", Line: 6, Name: `"ptr"`, Links: "RejectLinks"},
			},
		},
		{
			name: "type aliases, package-level in another file and function-local",
			files: map[string]string{
				"alias.go": `package adapter

import "github.com/airlockdev/airlock/stage"

type A = stage.Asset
type B = A
type Defined stage.Asset
`,
				"use.go": `package adapter

import st "github.com/airlockdev/airlock/stage"

var a = A{Name: "alias"}
var b = &B{Name: "chained"}
var d = Defined{Name: "defined"}

func f() {
	type L = st.Asset
	_ = L{Name: "local", Links: st.RejectLinks}
}
`},
			want: []stagetest.Site{
				{File: "use.go", Line: 5, Name: `"alias"`, Links: "SkipLinks"},
				{File: "use.go", Line: 6, Name: `"chained"`, Links: "SkipLinks"},
				{File: "use.go", Line: 11, Name: `"local"`, Links: "RejectLinks"},
			},
		},
		{
			name: "Asset types and policy names from elsewhere are not stage's",
			files: map[string]string{
				"other.go": `package adapter

import (
	stage "example.com/other/stage"
	"github.com/airlockdev/airlock/stage/remote"
)

type Asset struct{ Name string }

var a = stage.Asset{Name: "other package named stage"}
var b = remote.Asset{Name: "other package"}
var c = Asset{Name: "own type"}
`,
				"blank.go": `package adapter

import _ "github.com/airlockdev/airlock/stage"

var d = Asset{Name: "blank import"}
`,
			},
			want: nil,
		},
		{
			name: "policy names shadowed in the scanned package are qualified",
			files: map[string]string{
				"consts.go": `package adapter

import "github.com/airlockdev/airlock/stage"

const RejectLinks = stage.FollowLinksWithin
`,
				"sneaky.go": `package adapter

import (
	"github.com/airlockdev/airlock/stage"
	other "example.com/other/stage"
)

var a = stage.Asset{Name: "pkg const", Links: RejectLinks}
var b = stage.Asset{Name: "other pkg", Links: other.RejectLinks}
`,
				"dot/dot.go": `package dot

import . "github.com/airlockdev/airlock/stage"

func f() {
	SkipLinks := FollowLinksWithin
	_ = Asset{Name: "local var", Links: SkipLinks}
}
`,
			},
			want: []stagetest.Site{
				{File: "dot/dot.go", Line: 7, Name: `"local var"`, Links: "dot.SkipLinks"},
				{File: "sneaky.go", Line: 8, Name: `"pkg const"`, Links: "adapter.RejectLinks"},
				{File: "sneaky.go", Line: 9, Name: `"other pkg"`, Links: "other.RejectLinks"},
			},
		},
		{
			name: "test files are scanned",
			files: map[string]string{"adapter_test.go": `package adapter_test

import (
	"testing"

	"github.com/airlockdev/airlock/stage"
)

func TestStage(t *testing.T) {
	_ = []stage.Asset{{Name: "fixture", Links: stage.RejectLinks}}
}
`},
			want: []stagetest.Site{
				{File: "adapter_test.go", Line: 10, Name: `"fixture"`, Links: "RejectLinks"},
			},
		},
		{
			name: "package stage itself, by module path",
			files: map[string]string{
				"go.mod":          stageMod,
				"stage/stage.go":  stagePkg,
				"stage/other.go":  "package stage\n\nvar all = []Asset{{Name: \"other\", Links: FollowLinksWithin}}\n",
				"stage/x_test.go": "package stage\n\nvar internal = Asset{\"internal\", \"\", SkipLinks, nil}\n",
				"stage/y_test.go": "package stage_test\n\nimport \"github.com/airlockdev/airlock/stage\"\n\nvar external = stage.Asset{Name: \"external\"}\n",
				"stage/z_test.go": "package stage_test\n\ntype Asset struct{ Name string }\n\nvar own = Asset{Name: \"external package's own\"}\n",
				// Package stage elsewhere in the module is a different package.
				"other/stage/stage.go": "package stage\n\ntype Asset struct{ Name string }\n\nvar decoy = Asset{Name: \"decoy\"}\n",
				// A nested module whose path is not the library's.
				"nested/go.mod":         "module example.com/nested\n",
				"nested/stage/stage.go": "package stage\n\ntype Asset struct{ Name string }\n\nvar decoy = Asset{Name: \"nested decoy\"}\n",
			},
			want: []stagetest.Site{
				{File: "stage/other.go", Line: 3, Name: `"other"`, Links: "FollowLinksWithin"},
				{File: "stage/stage.go", Line: 18, Name: `"self"`, Links: "RejectLinks"},
				{File: "stage/x_test.go", Line: 3, Name: `"internal"`, Links: "SkipLinks"},
				{File: "stage/y_test.go", Line: 5, Name: `"external"`, Links: "SkipLinks"},
			},
		},
		{
			name: "package stage without go.mod, in a GOPATH layout",
			files: map[string]string{
				"src/github.com/airlockdev/airlock/stage/stage.go": stagePkg,
				"src/example.com/stage/stage.go":                   "package stage\n\ntype Asset struct{ Name string }\n\nvar decoy = Asset{Name: \"decoy\"}\n",
			},
			want: []stagetest.Site{
				{File: "src/github.com/airlockdev/airlock/stage/stage.go", Line: 18, Name: `"self"`, Links: "RejectLinks"},
			},
		},
		{
			name: "walk skips what the go command ignores",
			files: map[string]string{
				"a.go":               "package a\n\nimport \"github.com/airlockdev/airlock/stage\"\n\nvar x = stage.Asset{Name: \"kept\"}\n",
				"sub/b.go":           "package b\n\nimport \"github.com/airlockdev/airlock/stage\"\n\nvar x = stage.Asset{Name: \"sub\"}\n",
				"vendor/v/v.go":      "package v\n\nimport \"github.com/airlockdev/airlock/stage\"\n\nvar x = stage.Asset{Name: \"vendor\"}\n",
				"testdata/t.go":      "package t\n\nimport \"github.com/airlockdev/airlock/stage\"\n\nvar x = stage.Asset{Name: \"testdata\"}\n",
				"testdata/broken.go": "package t\n\nfunc {\n",
				".hidden/h.go":       "package h\n\nimport \"github.com/airlockdev/airlock/stage\"\n\nvar x = stage.Asset{Name: \"hidden\"}\n",
				"_under/u.go":        "package u\n\nimport \"github.com/airlockdev/airlock/stage\"\n\nvar x = stage.Asset{Name: \"underscore dir\"}\n",
				"_file.go":           "package a\n\nimport \"github.com/airlockdev/airlock/stage\"\n\nvar x = stage.Asset{Name: \"underscore file\"}\n",
				".file.go":           "package a\n\nimport \"github.com/airlockdev/airlock/stage\"\n\nvar x = stage.Asset{Name: \"dot file\"}\n",
				"notes.txt":          "package a\n\nimport \"github.com/airlockdev/airlock/stage\"\n\nvar x = stage.Asset{Name: \"text\"}\n",
				"linked/l.go":        "=> ../sub/b.go",
				"linkdir":            "=> sub",
			},
			want: []stagetest.Site{
				{File: "a.go", Line: 5, Name: `"kept"`, Links: "SkipLinks"},
				{File: "linked/l.go", Line: 5, Name: `"sub"`, Links: "SkipLinks"},
				{File: "sub/b.go", Line: 5, Name: `"sub"`, Links: "SkipLinks"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, tt.files)
			got, err := stagetest.ScanSites(dir)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestScanSitesRoot shows that the directory passed in is scanned whatever
// its name, through a symbolic link, and by a relative path, with the same
// sites each time.
func TestScanSitesRoot(t *testing.T) {
	root := filepath.Join(t.TempDir(), "testdata")
	writeTree(t, root, map[string]string{
		"a.go": "package a\n\nimport \"github.com/airlockdev/airlock/stage\"\n\nvar x = stage.Asset{Name: \"root\"}\n",
	})
	want := []stagetest.Site{{File: "a.go", Line: 5, Name: `"root"`, Links: "SkipLinks"}}

	got, err := stagetest.ScanSites(root)
	require.NoError(t, err)
	assert.Equal(t, want, got)

	link := filepath.Join(t.TempDir(), "link")
	require.NoError(t, os.Symlink(root, link))
	got, err = stagetest.ScanSites(link)
	require.NoError(t, err)
	assert.Equal(t, want, got)

	t.Chdir(filepath.Dir(root))
	got, err = stagetest.ScanSites("testdata")
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

func TestScanSitesErrors(t *testing.T) {
	t.Run("parse error names the file", func(t *testing.T) {
		dir := t.TempDir()
		writeTree(t, dir, map[string]string{
			"good.go":     "package a\n",
			"pkg/bad.go":  "package a\n\nvar x = stage.Asset{Name: \n",
			"pkg/good.go": "package a\n",
		})
		_, err := stagetest.ScanSites(dir)
		require.Error(t, err)
		var pathErr *fs.PathError
		require.ErrorAs(t, err, &pathErr)
		assert.Equal(t, "parse", pathErr.Op)
		assert.Equal(t, filepath.Join(dir, "pkg", "bad.go"), pathErr.Path)
		var list scanner.ErrorList
		require.ErrorAs(t, err, &list)
		require.NotEmpty(t, list)
		assert.Equal(t, filepath.Join(dir, "pkg", "bad.go"), list[0].Pos.Filename)
		assert.Equal(t, 3, list[0].Pos.Line)
		assert.Contains(t, err.Error(), filepath.Join(dir, "pkg", "bad.go"))
	})
	t.Run("dangling link to a .go file", func(t *testing.T) {
		dir := t.TempDir()
		writeTree(t, dir, map[string]string{"gone.go": "=> missing.go"})
		_, err := stagetest.ScanSites(dir)
		assert.ErrorIs(t, err, fs.ErrNotExist)
		var pathErr *fs.PathError
		require.ErrorAs(t, err, &pathErr)
		assert.Equal(t, filepath.Join(dir, "gone.go"), pathErr.Path)
	})
	t.Run("missing directory", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "absent")
		_, err := stagetest.ScanSites(dir)
		assert.ErrorIs(t, err, fs.ErrNotExist)
		var pathErr *fs.PathError
		require.ErrorAs(t, err, &pathErr)
		assert.Equal(t, dir, pathErr.Path)
	})
	t.Run("not a directory", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "a.go")
		require.NoError(t, os.WriteFile(file, []byte("package a\n"), 0o644))
		_, err := stagetest.ScanSites(file)
		assert.ErrorIs(t, err, syscall.ENOTDIR)
		var pathErr *fs.PathError
		require.ErrorAs(t, err, &pathErr)
		assert.Equal(t, file, pathErr.Path)
	})
}

func ExampleScanSites() {
	dir, err := os.MkdirTemp("", "scansites")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() {
		if err := os.RemoveAll(dir); err != nil {
			fmt.Println(err)
		}
	}()
	src := `package adapter

import "github.com/airlockdev/airlock/stage"

func assets(skills, refs string) []stage.Asset {
	return []stage.Asset{
		{Name: "skills", Source: skills, Links: stage.RejectLinks},
		{Source: refs, Name: "refs"},
	}
}
`
	if err := os.WriteFile(filepath.Join(dir, "adapter.go"), []byte(src), 0o644); err != nil {
		fmt.Println(err)
		return
	}
	sites, err := stagetest.ScanSites(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range sites {
		fmt.Printf("%s:%d Name=%s Links=%s\n", s.File, s.Line, s.Name, s.Links)
	}
	// Output:
	// adapter.go:7 Name="skills" Links=RejectLinks
	// adapter.go:8 Name="refs" Links=SkipLinks
}
