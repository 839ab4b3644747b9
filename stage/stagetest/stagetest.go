package stagetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/stage"
)

// TestTarget is the conformance suite every stage.Target passes. newTarget
// returns a fresh, empty sandbox for each subtest: the Target and a runtime
// root to stage under (an absolute sandbox path other than "/"; it need not
// exist yet). The suite stages host trees into it through stage.Stage and
// reads the results back through Target.Fetch, so it checks what the
// sandbox really holds: content, modes, names that need quoting, links left
// out, replacement of a changed asset, reuse of an unchanged one, that a
// cancelled stage keeps the previous copy and leaves nothing behind, and
// that concurrent stages of one asset leave one complete copy.
func TestTarget(t *testing.T, newTarget func(t *testing.T) (stage.Target, string)) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			target, root := newTarget(t)
			require.NotNil(t, target, "newTarget returned a nil Target")
			require.True(t, path.IsAbs(root) && path.Clean(root) == root && root != "/", "newTarget must return an absolute, clean root other than /, got %q", root)
			c.run(t, target, root)
		})
	}
}

var cases = []struct {
	name string
	run  func(t *testing.T, target stage.Target, root string)
}{
	{"StageAndFetch", testStageAndFetch},
	{"ProbeAbsent", testProbeAbsent},
	{"Reused", testReused},
	{"Replace", testReplace},
	{"MultipleAssets", testMultipleAssets},
	{"Names", testNames},
	{"Modes", testModes},
	{"LargeFile", testLargeFile},
	{"LinksLeftOut", testLinksLeftOut},
	{"Progress", testProgress},
	{"CancelKeepsPreviousCopy", testCancelKeepsPreviousCopy},
	{"CancelledBeforeStart", testCancelledBeforeStart},
	{"Concurrent", testConcurrent},
}

// spec describes a host tree: "d/" is a directory, "f" a file with content
// data, "l@" a symbolic link to data. mode 0 means 0o644 (files) or 0o755
// (directories).
type spec struct {
	path string
	data string
	mode fs.FileMode
}

func write(t *testing.T, dir string, specs ...spec) {
	t.Helper()
	var dirModes []spec
	for _, s := range specs {
		p := filepath.Join(dir, filepath.FromSlash(strings.TrimSuffix(strings.TrimSuffix(s.path, "/"), "@")))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		switch {
		case strings.HasSuffix(s.path, "/"):
			require.NoError(t, os.MkdirAll(p, 0o755))
			if s.mode != 0 {
				dirModes = append(dirModes, spec{path: p, mode: s.mode})
			}
		case strings.HasSuffix(s.path, "@"):
			require.NoError(t, os.Symlink(s.data, p))
		default:
			mode := s.mode
			if mode == 0 {
				mode = 0o644
			}
			require.NoError(t, os.WriteFile(p, []byte(s.data), 0o600))
			require.NoError(t, os.Chmod(p, mode))
		}
	}
	for _, d := range slices.Backward(dirModes) {
		require.NoError(t, os.Chmod(d.path, d.mode))
		t.Cleanup(func() { assert.NoError(t, os.Chmod(d.path, 0o755)) }) // let t.TempDir clean up
	}
}

func source(t *testing.T, specs ...spec) string {
	t.Helper()
	dir := t.TempDir()
	write(t, dir, specs...)
	return dir
}

// node is one entry as the suite compares it.
type node struct {
	Mode fs.FileMode
	Data string // file content, or its SHA-256 when long
}

func digestOf(b []byte) string {
	if len(b) <= 64 {
		return string(b)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// hostTree reads what a stage of dir must produce: directories and regular
// files, no links, no special files.
func hostTree(t *testing.T, dir string) map[string]node {
	t.Helper()
	out := map[string]node{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			out[filepath.ToSlash(rel)] = node{Mode: fs.ModeDir | fi.Mode().Perm()}
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[filepath.ToSlash(rel)] = node{Mode: fi.Mode().Perm(), Data: digestOf(b)}
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

// fetch reads <root>/<name> back through the target.
func fetch(t *testing.T, target stage.Target, root, name string) map[string]node {
	t.Helper()
	out := map[string]node{}
	err := target.Fetch(context.Background(), root, name, func(e stage.Entry, r io.Reader) error {
		if _, dup := out[e.Path]; dup {
			return fmt.Errorf("Fetch reported %q twice", e.Path)
		}
		n := node{Mode: e.Mode.Type() | e.Mode.Perm()}
		if e.Mode.IsRegular() {
			b, err := io.ReadAll(r)
			if err != nil {
				return err
			}
			if int64(len(b)) != e.Size {
				return fmt.Errorf("Fetch: %q yields %d bytes but its Entry says %d", e.Path, len(b), e.Size)
			}
			n.Data = digestOf(b)
		}
		out[e.Path] = n
		return nil
	})
	require.NoError(t, err, "Fetch %s/%s", root, name)
	return out
}

// listRoot returns the names directly under root.
func listRoot(t *testing.T, target stage.Target, root string) []string {
	t.Helper()
	var names []string
	for p := range fetch(t, target, path.Dir(root), path.Base(root)) {
		if !strings.Contains(p, "/") {
			names = append(names, p)
		}
	}
	slices.Sort(names)
	return names
}

func stageOK(t *testing.T, target stage.Target, root string, assets []stage.Asset, opts ...stage.Option) *stage.Runtime {
	t.Helper()
	rt, err := stage.Stage(context.Background(), target, root, assets, opts...)
	require.NoError(t, err)
	require.NotNil(t, rt)
	require.Len(t, rt.Assets, len(assets))
	return rt
}

func storedDigest(t *testing.T, target stage.Target, root, name string) string {
	t.Helper()
	got, err := target.Probe(context.Background(), root, []string{name})
	require.NoError(t, err)
	require.Len(t, got, 1)
	if got[0] == nil {
		return ""
	}
	sum := sha256.Sum256(got[0])
	return "sha256:" + hex.EncodeToString(sum[:])
}

var mixed = []spec{
	{path: "SKILL.md", data: "---\nname: x\n---\nbody\n"},
	{path: "empty"},
	{path: "bin/run.sh", data: "#!/bin/sh\necho hi\n", mode: 0o755},
	{path: "docs/a/b/c/deep.txt", data: "deep"},
	{path: "emptydir/"},
}

func testStageAndFetch(t *testing.T, target stage.Target, root string) {
	src := source(t, mixed...)
	rt := stageOK(t, target, root, []stage.Asset{{Name: "skills", Source: src}})
	assert.Equal(t, root, rt.Root)
	a := rt.Assets[0]
	assert.Equal(t, "skills", a.Name)
	assert.Equal(t, src, a.Source)
	assert.Equal(t, path.Join(root, "skills"), a.Path)
	assert.Equal(t, 4, a.Files)
	assert.Equal(t, int64(len(mixed[0].data)+len(mixed[2].data)+len("deep")), a.Bytes)
	assert.False(t, a.Reused)
	assert.Empty(t, a.Skipped)
	assert.Regexp(t, `^sha256:[0-9a-f]{64}$`, a.Digest)
	assert.Equal(t, a.Digest, storedDigest(t, target, root, "skills"), "the stored manifest must be the one the asset was published with")
	assert.Equal(t, hostTree(t, src), fetch(t, target, root, "skills"))
}

func testProbeAbsent(t *testing.T, target stage.Target, root string) {
	got, err := target.Probe(context.Background(), root, []string{"never", "staged"})
	require.NoError(t, err, "probing a root that does not exist yet")
	assert.Equal(t, [][]byte{nil, nil}, got)

	src := source(t, spec{path: "f", data: "x"})
	stageOK(t, target, root, []stage.Asset{{Name: "one", Source: src}})
	got, err = target.Probe(context.Background(), root, []string{"never", "one"})
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Nil(t, got[0])
	assert.NotEmpty(t, got[1])
}

func testReused(t *testing.T, target stage.Target, root string) {
	src := source(t, mixed...)
	assets := []stage.Asset{{Name: "skills", Source: src}}
	first := stageOK(t, target, root, assets)
	listing := listRoot(t, target, root)
	for i, opts := range [][]stage.Option{nil, {stage.WithVerify()}} {
		again := stageOK(t, target, root, assets, opts...)
		assert.True(t, again.Assets[0].Reused, "stage %d of unchanged content", i+2)
		assert.Equal(t, first.Assets[0].Digest, again.Assets[0].Digest)
		assert.Equal(t, first.Assets[0].Files, again.Assets[0].Files)
	}
	assert.Equal(t, listing, listRoot(t, target, root), "a reuse must write nothing")
	assert.Equal(t, hostTree(t, src), fetch(t, target, root, "skills"))
}

func testReplace(t *testing.T, target stage.Target, root string) {
	src := source(t, mixed...)
	assets := []stage.Asset{{Name: "skills", Source: src}}
	first := stageOK(t, target, root, assets)
	listing := listRoot(t, target, root)

	require.NoError(t, os.WriteFile(filepath.Join(src, "SKILL.md"), []byte("changed"), 0o644))
	require.NoError(t, os.RemoveAll(filepath.Join(src, "docs")))
	require.NoError(t, os.Chmod(filepath.Join(src, "bin", "run.sh"), 0o700))
	write(t, src, spec{path: "new/dir/file", data: "new"})

	second := stageOK(t, target, root, assets, stage.WithVerify())
	assert.False(t, second.Assets[0].Reused)
	assert.NotEqual(t, first.Assets[0].Digest, second.Assets[0].Digest)
	assert.Equal(t, second.Assets[0].Digest, storedDigest(t, target, root, "skills"))
	assert.Equal(t, hostTree(t, src), fetch(t, target, root, "skills"), "the new copy replaces the old one entirely")
	assert.Equal(t, listing, listRoot(t, target, root), "publishing again must leave nothing behind")
}

func testMultipleAssets(t *testing.T, target stage.Target, root string) {
	a := source(t, spec{path: "a.txt", data: "a"})
	b := source(t, spec{path: "b/b.txt", data: "b"})
	empty := t.TempDir()
	rt := stageOK(t, target, root, []stage.Asset{
		{Name: "alpha", Source: a},
		{Name: "beta", Source: b},
		{Name: "empty", Source: empty},
	})
	for i, name := range []string{"alpha", "beta", "empty"} {
		p, ok := rt.Path(name)
		assert.True(t, ok)
		assert.Equal(t, path.Join(root, name), p)
		assert.Equal(t, name, rt.Assets[i].Name)
	}
	_, ok := rt.Path("gamma")
	assert.False(t, ok)
	assert.Equal(t, hostTree(t, a), fetch(t, target, root, "alpha"))
	assert.Equal(t, hostTree(t, b), fetch(t, target, root, "beta"))
	assert.Empty(t, fetch(t, target, root, "empty"))
	assert.Equal(t, 0, rt.Assets[2].Files)
}

func testNames(t *testing.T, target stage.Target, root string) {
	odd := []string{
		"with space", "it's", `"quoted"`, "$(touch pwned)", "`touch pwned`", "-rf", "--", "new\nline",
		"tab\there", "ünïcødé", `back\slash`, "*", "?", "[a]", "semi;colon", "amp&", "pipe|", "a>b",
		strings.Repeat("long", 60), "trailing.", ".hidden", "..dots",
	}
	var specs []spec
	for i, n := range odd {
		specs = append(specs, spec{path: n, data: fmt.Sprint(i)}, spec{path: "dir " + fmt.Sprint(i) + "/" + n, data: n})
	}
	deep := strings.Repeat("d/", 20) + "leaf"
	specs = append(specs, spec{path: deep, data: "deep"})
	src := source(t, specs...)
	// Asset names that a shell would mangle too.
	for _, name := range []string{"sk ills", "it's", "$(touch pwned)", "-x"} {
		stageOK(t, target, root, []stage.Asset{{Name: name, Source: src}}, stage.WithVerify())
		assert.Equal(t, hostTree(t, src), fetch(t, target, root, name), "asset %q", name)
	}
	assert.NotContains(t, listRoot(t, target, root), "pwned", "a name reached a shell unquoted")
}

func testModes(t *testing.T, target stage.Target, root string) {
	src := source(t,
		spec{path: "exec", data: "x", mode: 0o755},
		spec{path: "private", data: "x", mode: 0o600},
		spec{path: "readonly", data: "x", mode: 0o444},
		spec{path: "odd", data: "x", mode: 0o751},
		spec{path: "closed/inner", data: "x"},
		spec{path: "closed/", mode: 0o700},
		spec{path: "ro/inner/file", data: "x"},
		spec{path: "ro/inner/", mode: 0o555},
		spec{path: "ro/", mode: 0o555},
	)
	rt := stageOK(t, target, root, []stage.Asset{{Name: "m", Source: src}}, stage.WithVerify())
	assert.Equal(t, hostTree(t, src), fetch(t, target, root, "m"))
	// Replacing a copy with read-only directories must work too.
	require.NoError(t, os.WriteFile(filepath.Join(src, "exec"), []byte("y"), 0o755))
	again := stageOK(t, target, root, []stage.Asset{{Name: "m", Source: src}}, stage.WithVerify())
	assert.NotEqual(t, rt.Assets[0].Digest, again.Assets[0].Digest)
	assert.Equal(t, hostTree(t, src), fetch(t, target, root, "m"))
	// Replace it with a writable tree, so that the sandbox can be cleaned up
	// by a user who is not root.
	plain := source(t, spec{path: "f", data: "x"})
	stageOK(t, target, root, []stage.Asset{{Name: "m", Source: plain}})
	assert.Equal(t, hostTree(t, plain), fetch(t, target, root, "m"))
}

func testLargeFile(t *testing.T, target stage.Target, root string) {
	rng := rand.New(rand.NewPCG(7, 7))
	big := make([]byte, 3<<20+1)
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	src := source(t, spec{path: "big.bin", data: string(big)}, spec{path: "small", data: "s"})
	rt := stageOK(t, target, root, []stage.Asset{{Name: "big", Source: src}}, stage.WithVerify())
	assert.Equal(t, int64(len(big)+1), rt.Assets[0].Bytes)
	assert.Equal(t, hostTree(t, src), fetch(t, target, root, "big"))
}

func testLinksLeftOut(t *testing.T, target stage.Target, root string) {
	outside := source(t, spec{path: "secret", data: "SECRET"})
	src := source(t,
		spec{path: "ok", data: "ok"},
		spec{path: "top@", data: filepath.Join(outside, "secret")},
		spec{path: "a/mid@", data: outside},
		spec{path: "a/b/rel@", data: "../../ok"},
		spec{path: "a/b/c/dangling@", data: "nowhere"},
	)
	rt := stageOK(t, target, root, []stage.Asset{{Name: "l", Source: src}})
	assert.Equal(t, []string{"a/b/c/dangling", "a/b/rel", "a/mid", "top"}, rt.Assets[0].Skipped)
	got := fetch(t, target, root, "l")
	assert.Equal(t, hostTree(t, src), got)
	for p, n := range got {
		assert.NotEqual(t, "SECRET", n.Data, "%s carries the secret", p)
		assert.Zero(t, n.Mode&fs.ModeSymlink, "%s is a link in the sandbox", p)
	}
}

func testProgress(t *testing.T, target stage.Target, root string) {
	a := source(t, mixed...)
	b := source(t, spec{path: "x", data: "xx"}, spec{path: "y/z", data: "zzz"})
	var mu sync.Mutex
	var seen []stage.Progress
	opt := stage.WithProgress(func(p stage.Progress) {
		mu.Lock()
		seen = append(seen, p)
		mu.Unlock()
	})
	assets := []stage.Asset{{Name: "a", Source: a}, {Name: "b", Source: b}}
	stageOK(t, target, root, assets[:1]) // so that one asset is reused below
	stageOK(t, target, root, assets, opt)
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, seen)
	for i := 1; i < len(seen); i++ {
		p, q := seen[i-1], seen[i]
		assert.True(t, q.Files >= p.Files && q.Bytes >= p.Bytes && q.TotalFiles >= p.TotalFiles && q.TotalBytes >= p.TotalBytes,
			"progress went back: %+v then %+v", p, q)
	}
	for _, p := range seen {
		assert.LessOrEqual(t, p.Files, p.TotalFiles)
		assert.LessOrEqual(t, p.Bytes, p.TotalBytes)
	}
	last := seen[len(seen)-1]
	assert.Equal(t, 6, last.Files)
	assert.Equal(t, 6, last.TotalFiles)
	assert.Equal(t, last.TotalBytes, last.Bytes)
}

func testCancelKeepsPreviousCopy(t *testing.T, target stage.Target, root string) {
	var specs []spec
	for i := range 50 {
		specs = append(specs, spec{path: fmt.Sprintf("d%d/f%02d", i%5, i), data: strings.Repeat("v1", 100+i)})
	}
	src := source(t, specs...)
	assets := []stage.Asset{{Name: "c", Source: src}}
	first := stageOK(t, target, root, assets)
	want := hostTree(t, src)
	listing := listRoot(t, target, root)

	for _, s := range specs {
		require.NoError(t, os.WriteFile(filepath.Join(src, filepath.FromSlash(s.path)), []byte("v2"), 0o644))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := stage.Stage(ctx, target, root, assets, stage.WithProgress(func(p stage.Progress) {
		if p.Files >= 1 {
			cancel()
		}
	}))
	require.Error(t, err)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, want, fetch(t, target, root, "c"), "the previous copy must survive a cancelled stage")
	assert.Equal(t, first.Assets[0].Digest, storedDigest(t, target, root, "c"))
	assert.Equal(t, listing, listRoot(t, target, root), "a cancelled stage must leave nothing behind")

	again := stageOK(t, target, root, assets)
	assert.False(t, again.Assets[0].Reused)
	assert.Equal(t, hostTree(t, src), fetch(t, target, root, "c"))
}

func testCancelledBeforeStart(t *testing.T, target stage.Target, root string) {
	src := source(t, mixed...)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := stage.Stage(ctx, target, root, []stage.Asset{{Name: "x", Source: src}})
	assert.ErrorIs(t, err, context.Canceled)
	got, err := target.Probe(context.Background(), root, []string{"x"})
	require.NoError(t, err)
	assert.Equal(t, [][]byte{nil}, got)
}

func testConcurrent(t *testing.T, target stage.Target, root string) {
	var srcs []string
	for v := range 3 {
		var specs []spec
		for i := range 20 {
			specs = append(specs, spec{path: fmt.Sprintf("d%d/f%d", i%4, i), data: fmt.Sprintf("version %d file %d", v, i)})
		}
		srcs = append(srcs, source(t, specs...))
	}
	var wg sync.WaitGroup
	errs := make([]error, len(srcs))
	for i, src := range srcs {
		wg.Go(func() {
			_, errs[i] = stage.Stage(context.Background(), target, root, []stage.Asset{{Name: "same", Source: src}})
		})
	}
	wg.Wait()
	for i, err := range errs {
		assert.NoError(t, err, "stage %d", i)
	}
	got := fetch(t, target, root, "same")
	match := -1
	for i, src := range srcs {
		if equalTrees(hostTree(t, src), got) {
			match = i
		}
	}
	require.GreaterOrEqual(t, match, 0, "the sandbox copy is a mix of concurrent stages")
	rt := stageOK(t, target, root, []stage.Asset{{Name: "same", Source: srcs[match]}}, stage.WithVerify())
	assert.True(t, rt.Assets[0].Reused, "the stored manifest must describe the copy that won")
}

func equalTrees(a, b map[string]node) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
