package stagetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
)

// An Option configures TestTarget.
type Option func(*config)

type config struct {
	shell func(t *testing.T, target stage.Target) (sandbox.Runner, string)
}

// WithSandboxShell lets TestTarget play the hostile sandbox: plant links at
// the stage root, at <root>/<name> and inside a published copy, where a
// process in the sandbox could. shell is called once per hostile case with
// the Target newTarget returned for it, and returns sh, a Runner whose
// scripts run in that Target's sandbox with the powers of a process there,
// and hostPrefix, the path at which sh's scripts see the sandbox's "/": ""
// when the sandbox's paths are their own (a real sandbox, remote.Host, a
// stage.Bridge over stage.LocalRunner), the directory of a stage.NewDir
// (whose sandbox path /rt is <dir>/rt).
//
// Without it (the default) the cases that need to reach into the sandbox
// are skipped, each with a message that names this option; the cases that
// attack from the host side (a source directory swapped for a link while a
// stage runs) always run.
func WithSandboxShell(shell func(t *testing.T, target stage.Target) (sh sandbox.Runner, hostPrefix string)) Option {
	return func(c *config) { c.shell = shell }
}

// TestTarget is the conformance suite every stage.Target passes. newTarget
// returns a fresh, empty sandbox for each subtest: the Target and a runtime
// root to stage under (an absolute sandbox path other than "/"; it need not
// exist yet). The suite stages host trees into it through stage.Stage and
// reads the results back through Target.Fetch, so it checks what the
// sandbox really holds: content, modes, names that need quoting, links left
// out, replacement of a changed asset, reuse of an unchanged one, that a
// cancelled stage keeps the previous copy and leaves nothing behind, and
// that concurrent stages of one asset leave one complete copy.
//
// It also checks what no Target may do, playing the attacker on both
// sides: a source directory swapped for a link to a host secret while
// stages run must never bring the secret into the sandbox (always run);
// and, with WithSandboxShell, links planted by the sandbox at the root, at
// <root>/<name> and inside a published copy must be replaced, never written
// through or followed, and never taken for a reusable copy; a copy whose
// directory the sandbox deleted (its manifest left) is published again.
func TestTarget(t *testing.T, newTarget func(t *testing.T) (stage.Target, string), opts ...Option) {
	t.Helper()
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.hostile != nil && cfg.shell == nil {
				t.Skip("this case plants links in the sandbox: pass stagetest.WithSandboxShell to run it")
			}
			target, root := newTarget(t)
			must(t, target != nil, "newTarget returned a nil Target")
			must(t, path.IsAbs(root) && path.Clean(root) == root && root != "/", "newTarget must return an absolute, clean root other than /, got %q", root)
			var sb *sandboxShell
			if cfg.shell != nil && c.run == nil {
				sh, prefix := cfg.shell(t, target)
				must(t, sh != nil, "the WithSandboxShell function returned a nil Runner")
				sb = &sandboxShell{sh: sh, prefix: strings.TrimSuffix(prefix, "/")}
			}
			switch {
			case c.hostile != nil:
				sb.check(t, target, root)
				c.hostile(t, target, root, sb)
			case c.source != nil:
				c.source(t, target, root, sb)
			default:
				c.run(t, target, root)
			}
		})
	}
}

var cases = []struct {
	name    string
	run     func(t *testing.T, target stage.Target, root string)
	source  func(t *testing.T, target stage.Target, root string, sb *sandboxShell) // attacks from the host; sb may be nil
	hostile func(t *testing.T, target stage.Target, root string, sb *sandboxShell) // needs the sandbox shell
}{
	{name: "StageAndFetch", run: testStageAndFetch},
	{name: "ProbeAbsent", run: testProbeAbsent},
	{name: "FetchMissing", run: testFetchMissing},
	{name: "Reused", run: testReused},
	{name: "Replace", run: testReplace},
	{name: "DeltaOneFile", run: testDeltaOneFile},
	{name: "MultipleAssets", run: testMultipleAssets},
	{name: "Names", run: testNames},
	{name: "Modes", run: testModes},
	{name: "LargeFile", run: testLargeFile},
	{name: "LinksLeftOut", run: testLinksLeftOut},
	{name: "Progress", run: testProgress},
	{name: "CancelKeepsPreviousCopy", run: testCancelKeepsPreviousCopy},
	{name: "CancelledBeforeStart", run: testCancelledBeforeStart},
	{name: "Concurrent", run: testConcurrent},
	{name: "SourceLinkSwapRace", source: testSourceLinkSwapRace},
	{name: "PlantedLinkAtRoot", hostile: testPlantedLinkAtRoot},
	{name: "PlantedLinkAtAsset", hostile: testPlantedLinkAtAsset},
	{name: "PlantedLinkToCopy", hostile: testPlantedLinkToCopy},
	{name: "PlantedLinkInCopy", hostile: testPlantedLinkInCopy},
	{name: "DeltaTamperedOldCopy", hostile: testDeltaTamperedOldCopy},
	{name: "CopyRemoved", hostile: testCopyRemoved},
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
		mustNoError(t, os.MkdirAll(filepath.Dir(p), 0o755), "creating the fixture")
		switch {
		case strings.HasSuffix(s.path, "/"):
			mustNoError(t, os.MkdirAll(p, 0o755), "creating the fixture")
			if s.mode != 0 {
				dirModes = append(dirModes, spec{path: p, mode: s.mode})
			}
		case strings.HasSuffix(s.path, "@"):
			mustNoError(t, os.Symlink(s.data, p), "creating the fixture")
		default:
			mode := s.mode
			if mode == 0 {
				mode = 0o644
			}
			mustNoError(t, os.WriteFile(p, []byte(s.data), 0o600), "creating the fixture")
			mustNoError(t, os.Chmod(p, mode), "creating the fixture")
		}
	}
	for _, d := range slices.Backward(dirModes) {
		mustNoError(t, os.Chmod(d.path, d.mode), "creating the fixture")
		t.Cleanup(func() { expectNoError(t, os.Chmod(d.path, 0o755), "making %s removable", d.path) }) // let t.TempDir clean up
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
	mustNoError(t, err, "reading the host tree %s", dir)
	return out
}

// walkFetch reads <root>/<name> back through the target and calls fn with
// every entry and, for a regular file, its whole content. It checks what
// every Fetch promises: no entry twice, a file's content as long as its
// Entry says, no content for anything but a regular file.
func walkFetch(ctx context.Context, target stage.Target, root, name string, fn func(e stage.Entry, data []byte)) error {
	seen := map[string]bool{}
	return target.Fetch(ctx, root, name, func(e stage.Entry, r io.Reader) error {
		if seen[e.Path] {
			return fmt.Errorf("stagetest: Fetch reported %q twice", e.Path)
		}
		seen[e.Path] = true
		var data []byte
		switch {
		case e.Mode.IsRegular():
			b, err := io.ReadAll(r)
			if err != nil {
				return err
			}
			if int64(len(b)) != e.Size {
				return fmt.Errorf("stagetest: Fetch: %q yields %d bytes but its Entry says %d", e.Path, len(b), e.Size)
			}
			data = b
		case r != nil:
			var one [1]byte
			if n, _ := r.Read(one[:]); n > 0 {
				return fmt.Errorf("stagetest: Fetch: %q (%v) is not a regular file but comes with content", e.Path, e.Mode.Type())
			}
		}
		fn(e, data)
		return nil
	})
}

// fetch reads <root>/<name> back through the target.
func fetch(t *testing.T, target stage.Target, root, name string) map[string]node {
	t.Helper()
	out := map[string]node{}
	err := walkFetch(context.Background(), target, root, name, func(e stage.Entry, data []byte) {
		n := node{Mode: e.Mode.Type() | e.Mode.Perm()}
		if e.Mode.IsRegular() {
			n.Data = digestOf(data)
		}
		out[e.Path] = n
	})
	mustNoError(t, err, "Fetch %s/%s", root, name)
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
	mustNoError(t, err, "Stage")
	must(t, rt != nil, "Stage returned a nil Runtime and no error")
	must(t, len(rt.Assets) == len(assets), "Stage returned %d assets for %d", len(rt.Assets), len(assets))
	return rt
}

func storedDigest(t *testing.T, target stage.Target, root, name string) string {
	t.Helper()
	got, err := target.Probe(context.Background(), root, []string{name})
	mustNoError(t, err, "Probe %s %q", root, name)
	must(t, len(got) == 1, "Probe returned %d manifests for one name", len(got))
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

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

func testStageAndFetch(t *testing.T, target stage.Target, root string) {
	src := source(t, mixed...)
	rt := stageOK(t, target, root, []stage.Asset{{Name: "skills", Source: src}})
	expectEqual(t, root, rt.Root, "Runtime.Root")
	a := rt.Assets[0]
	expectEqual(t, "skills", a.Name, "Name")
	expectEqual(t, src, a.Source, "Source")
	expectEqual(t, path.Join(root, "skills"), a.Path, "Path")
	expectEqual(t, 4, a.Files, "Files")
	expectEqual(t, int64(len(mixed[0].data)+len(mixed[2].data)+len("deep")), a.Bytes, "Bytes")
	expect(t, !a.Reused, "a first stage reports Reused")
	expect(t, len(a.Skipped) == 0, "Skipped = %q, want none", a.Skipped)
	expect(t, digestRE.MatchString(a.Digest), "Digest = %q, want sha256:<64 hex>", a.Digest)
	expectEqual(t, a.Digest, storedDigest(t, target, root, "skills"), "the stored manifest must be the one the asset was published with")
	expectTree(t, hostTree(t, src), fetch(t, target, root, "skills"), "the sandbox copy")
}

func testProbeAbsent(t *testing.T, target stage.Target, root string) {
	got, err := target.Probe(context.Background(), root, []string{"never", "staged"})
	mustNoError(t, err, "probing a root that does not exist yet")
	expectEqual(t, [][]byte{nil, nil}, got, "Probe of a missing root")

	src := source(t, spec{path: "f", data: "x"})
	stageOK(t, target, root, []stage.Asset{{Name: "one", Source: src}})
	got, err = target.Probe(context.Background(), root, []string{"never", "one"})
	mustNoError(t, err, "Probe")
	must(t, len(got) == 2, "Probe returned %d manifests for two names", len(got))
	expect(t, got[0] == nil, "Probe found a manifest for an asset never staged: %q", got[0])
	expect(t, len(got[1]) > 0, "Probe found no manifest for a staged asset")
}

// testFetchMissing checks that Fetch reports an asset that is not there,
// or whose root is not, as ErrMismatch naming its path.
func testFetchMissing(t *testing.T, target stage.Target, root string) {
	none := func(stage.Entry, io.Reader) error {
		return errors.New("stagetest: Fetch reported an entry of a missing asset")
	}
	err := target.Fetch(context.Background(), root, "never", none)
	expect(t, errors.Is(err, stage.ErrMismatch), "Fetch of an asset under a missing root: got %v, want an error wrapping stage.ErrMismatch", err)
	stageOK(t, target, root, []stage.Asset{{Name: "one", Source: source(t, spec{path: "f", data: "x"})}})
	err = target.Fetch(context.Background(), root, "never", none)
	expect(t, errors.Is(err, stage.ErrMismatch), "Fetch of an asset never staged: got %v, want an error wrapping stage.ErrMismatch", err)
	expect(t, err != nil && strings.Contains(err.Error(), path.Join(root, "never")), "the error must name %s: %v", path.Join(root, "never"), err)
}

func testReused(t *testing.T, target stage.Target, root string) {
	src := source(t, mixed...)
	assets := []stage.Asset{{Name: "skills", Source: src}}
	first := stageOK(t, target, root, assets)
	listing := listRoot(t, target, root)
	for i, opts := range [][]stage.Option{nil, {stage.WithVerify()}} {
		again := stageOK(t, target, root, assets, opts...)
		expect(t, again.Assets[0].Reused, "stage %d of unchanged content is not Reused", i+2)
		expectEqual(t, first.Assets[0].Digest, again.Assets[0].Digest, "Digest of stage %d", i+2)
		expectEqual(t, first.Assets[0].Files, again.Assets[0].Files, "Files of stage %d", i+2)
	}
	expectEqual(t, listing, listRoot(t, target, root), "a reuse must write nothing")
	expectTree(t, hostTree(t, src), fetch(t, target, root, "skills"), "the sandbox copy")
}

func testReplace(t *testing.T, target stage.Target, root string) {
	src := source(t, mixed...)
	assets := []stage.Asset{{Name: "skills", Source: src}}
	first := stageOK(t, target, root, assets)
	listing := listRoot(t, target, root)

	mustNoError(t, os.WriteFile(filepath.Join(src, "SKILL.md"), []byte("changed"), 0o644), "changing the source")
	mustNoError(t, os.RemoveAll(filepath.Join(src, "docs")), "changing the source")
	mustNoError(t, os.Chmod(filepath.Join(src, "bin", "run.sh"), 0o700), "changing the source")
	write(t, src, spec{path: "new/dir/file", data: "new"})

	second := stageOK(t, target, root, assets, stage.WithVerify())
	expect(t, !second.Assets[0].Reused, "changed content is reported Reused")
	expect(t, first.Assets[0].Digest != second.Assets[0].Digest, "changed content has the old digest")
	expectEqual(t, second.Assets[0].Digest, storedDigest(t, target, root, "skills"), "the stored manifest must be the new one")
	expectTree(t, hostTree(t, src), fetch(t, target, root, "skills"), "the new copy replaces the old one entirely")
	expectEqual(t, listing, listRoot(t, target, root), "publishing again must leave nothing behind")
}

// testDeltaOneFile changes one file of many and stages again: the sandbox
// copy equals the source, Sent counts the files that travelled (at least
// the changed one, at most all), and a target that reports Sent below
// Files sent exactly the changed one.
func testDeltaOneFile(t *testing.T, target stage.Target, root string) {
	var specs []spec
	for i := range 40 {
		specs = append(specs, spec{path: fmt.Sprintf("d%d/f%02d.txt", i%4, i), data: strings.Repeat(fmt.Sprint(i), 100)})
	}
	src := source(t, specs...)
	assets := []stage.Asset{{Name: "skills", Source: src}}
	first := stageOK(t, target, root, assets)
	expectEqual(t, 40, first.Assets[0].Sent, "a first stage sends every file")
	mustNoError(t, os.WriteFile(filepath.Join(src, "d1", "f05.txt"), []byte("changed"), 0o644), "changing the source")
	second := stageOK(t, target, root, assets)
	a := second.Assets[0]
	expect(t, !a.Reused, "changed content is reported Reused")
	expect(t, a.Sent >= 1 && a.Sent <= a.Files, "Sent = %d of %d files", a.Sent, a.Files)
	if a.Sent < a.Files {
		expectEqual(t, 1, a.Sent, "a delta publish sends only the changed file")
	}
	expectTree(t, hostTree(t, src), fetch(t, target, root, "skills"), "the sandbox copy after a delta publish")
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
		expect(t, ok, "Runtime.Path(%q) not found", name)
		expectEqual(t, path.Join(root, name), p, "Runtime.Path(%q)", name)
		expectEqual(t, name, rt.Assets[i].Name, "Assets[%d].Name", i)
	}
	_, ok := rt.Path("gamma")
	expect(t, !ok, "Runtime.Path finds an asset never staged")
	expectTree(t, hostTree(t, a), fetch(t, target, root, "alpha"), "alpha")
	expectTree(t, hostTree(t, b), fetch(t, target, root, "beta"), "beta")
	expectTree(t, map[string]node{}, fetch(t, target, root, "empty"), "empty")
	expectEqual(t, 0, rt.Assets[2].Files, "Files of an empty asset")
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
		expectTree(t, hostTree(t, src), fetch(t, target, root, name), "asset %q", name)
	}
	expect(t, !slices.Contains(listRoot(t, target, root), "pwned"), "a name reached a shell unquoted")
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
	expectTree(t, hostTree(t, src), fetch(t, target, root, "m"), "the sandbox copy")
	// Replacing a copy with read-only directories must work too.
	mustNoError(t, os.WriteFile(filepath.Join(src, "exec"), []byte("y"), 0o755), "changing the source")
	again := stageOK(t, target, root, []stage.Asset{{Name: "m", Source: src}}, stage.WithVerify())
	expect(t, rt.Assets[0].Digest != again.Assets[0].Digest, "changed content has the old digest")
	expectTree(t, hostTree(t, src), fetch(t, target, root, "m"), "the replaced copy")
	// Replace it with a writable tree, so that the sandbox can be cleaned up
	// by a user who is not root.
	plain := source(t, spec{path: "f", data: "x"})
	stageOK(t, target, root, []stage.Asset{{Name: "m", Source: plain}})
	expectTree(t, hostTree(t, plain), fetch(t, target, root, "m"), "the writable copy")
}

func testLargeFile(t *testing.T, target stage.Target, root string) {
	rng := rand.New(rand.NewPCG(7, 7))
	big := make([]byte, 3<<20+1)
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	src := source(t, spec{path: "big.bin", data: string(big)}, spec{path: "small", data: "s"})
	rt := stageOK(t, target, root, []stage.Asset{{Name: "big", Source: src}}, stage.WithVerify())
	expectEqual(t, int64(len(big)+1), rt.Assets[0].Bytes, "Bytes")
	expectTree(t, hostTree(t, src), fetch(t, target, root, "big"), "the sandbox copy")
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
	expectEqual(t, []string{"a/b/c/dangling", "a/b/rel", "a/mid", "top"}, rt.Assets[0].Skipped, "Skipped")
	got := fetch(t, target, root, "l")
	expectTree(t, hostTree(t, src), got, "the sandbox copy")
	for p, n := range got {
		expect(t, n.Data != "SECRET", "%s carries the secret", p)
		expect(t, n.Mode&fs.ModeSymlink == 0, "%s is a link in the sandbox", p)
	}
}

func testProgress(t *testing.T, target stage.Target, root string) {
	a := source(t, mixed...)
	b := source(t, spec{path: "x", data: "xx"}, spec{path: "y/z", data: "zzz"})
	var mu sync.Mutex
	var seen []sandbox.Progress
	opt := stage.WithProgress(func(p sandbox.Progress) {
		mu.Lock()
		seen = append(seen, p)
		mu.Unlock()
	})
	assets := []stage.Asset{{Name: "a", Source: a}, {Name: "b", Source: b}}
	stageOK(t, target, root, assets[:1]) // so that one asset is reused below
	stageOK(t, target, root, assets, opt)
	mu.Lock()
	defer mu.Unlock()
	must(t, len(seen) > 0, "no progress was reported")
	for i := 1; i < len(seen); i++ {
		p, q := seen[i-1], seen[i]
		expect(t, q.Files >= p.Files && q.Bytes >= p.Bytes && q.TotalFiles >= p.TotalFiles && q.TotalBytes >= p.TotalBytes,
			"progress went back: %+v then %+v", p, q)
	}
	for _, p := range seen {
		expect(t, p.Files <= p.TotalFiles, "progress %+v: more files than in all", p)
		expect(t, p.Bytes <= p.TotalBytes, "progress %+v: more bytes than in all", p)
	}
	last := seen[len(seen)-1]
	expectEqual(t, 6, last.Files, "Files at the end")
	expectEqual(t, 6, last.TotalFiles, "TotalFiles at the end")
	expectEqual(t, last.TotalBytes, last.Bytes, "Bytes at the end")
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
		mustNoError(t, os.WriteFile(filepath.Join(src, filepath.FromSlash(s.path)), []byte("v2"), 0o644), "changing the source")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := stage.Stage(ctx, target, root, assets, stage.WithProgress(func(p sandbox.Progress) {
		if p.Files >= 1 {
			cancel()
		}
	}))
	must(t, errors.Is(err, context.Canceled), "a cancelled stage returned %v, want an error wrapping context.Canceled", err)
	expectTree(t, want, fetch(t, target, root, "c"), "the previous copy must survive a cancelled stage")
	expectEqual(t, first.Assets[0].Digest, storedDigest(t, target, root, "c"), "the stored manifest after a cancelled stage")
	left := listRoot(t, target, root)
	if extra := slices.DeleteFunc(slices.Clone(left), func(n string) bool { return slices.Contains(listing, n) }); len(extra) > 0 && strings.Contains(fmt.Sprint(err), "is left behind") {
		// The documented exception: a Runner that has not ended within the
		// short grace after the cancellation (an exec whose stop runs a
		// second exec, on a loaded machine) leaves the transfer's
		// temporary directory, named in the error; the next stage sweeps it.
		for _, n := range extra {
			expect(t, strings.Contains(err.Error(), n), "a cancelled stage left %s, which its error (%v) does not name", n, err)
		}
	} else {
		expectEqual(t, listing, left, "a cancelled stage must leave nothing behind")
	}

	again := stageOK(t, target, root, assets)
	expect(t, !again.Assets[0].Reused, "changed content is reported Reused after a cancelled stage")
	expectTree(t, hostTree(t, src), fetch(t, target, root, "c"), "the copy staged after a cancelled stage")
	expectEqual(t, listing, listRoot(t, target, root), "the stage after a cancelled one must leave the root as before (sweeping what that one left)")
}

func testCancelledBeforeStart(t *testing.T, target stage.Target, root string) {
	src := source(t, mixed...)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := stage.Stage(ctx, target, root, []stage.Asset{{Name: "x", Source: src}})
	expect(t, errors.Is(err, context.Canceled), "a stage cancelled before it started returned %v, want an error wrapping context.Canceled", err)
	got, err := target.Probe(context.Background(), root, []string{"x"})
	mustNoError(t, err, "Probe")
	expectEqual(t, [][]byte{nil}, got, "a stage cancelled before it started must publish nothing")
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
		expectNoError(t, err, "stage %d", i)
	}
	got := fetch(t, target, root, "same")
	match := -1
	for i, src := range srcs {
		if diffTrees(hostTree(t, src), got) == "" {
			match = i
		}
	}
	must(t, match >= 0, "the sandbox copy is a mix of concurrent stages")
	rt := stageOK(t, target, root, []stage.Asset{{Name: "same", Source: srcs[match]}}, stage.WithVerify())
	expect(t, rt.Assets[0].Reused, "the stored manifest must describe the copy that won")
}
