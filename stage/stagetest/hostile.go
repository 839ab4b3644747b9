package stagetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
)

// The hostile cases: the suite plays the sandbox (planting links where a
// Target writes and reads) and the host's adversary (swapping a source
// directory for a link while a stage runs). Each planted link is first
// shown to reach its target, so that a case cannot pass because the link
// was broken.

// sandbox reaches into a Target's sandbox as a process there would.
type sandboxShell struct {
	sh     sandbox.Runner
	prefix string // where sh sees the sandbox's "/"
}

// at returns where sh sees the sandbox path p.
func (s *sandboxShell) at(p string) string { return s.prefix + p }

// run runs script through the sandbox shell and returns its stdout; a
// failure stops the test.
func (s *sandboxShell) run(t *testing.T, script string, env map[string]string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := s.sh.Run(ctx, sandbox.Command{Script: script, Env: env, Stdout: &stdout, Stderr: &stderr})
	mustNoError(t, err, "sandbox shell (WithSandboxShell): %s\nscript:\n%s\nstderr: %s", firstLine(script), script, stderr.String())
	return stdout.String()
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// check makes sure that the shell sees the Target's sandbox at its prefix:
// a file staged through the Target must be where the shell looks. A shell
// that looked elsewhere would let every hostile case pass for the wrong
// reason. It leaves the sandbox as it found it (root removed).
func (s *sandboxShell) check(t *testing.T, target stage.Target, root string) {
	t.Helper()
	tag := rand.Text()
	src := source(t, spec{path: "probe", data: tag})
	stageOK(t, target, root, []stage.Asset{{Name: "stagetest-shell-check", Source: src}})
	f := s.at(path.Join(root, "stagetest-shell-check", "probe"))
	got := s.run(t, `cat "$F" 2>/dev/null || :`, map[string]string{"F": f})
	must(t, got == tag, "WithSandboxShell: its shell does not see %s, just staged through the Target, at %s: "+
		"the shell must run in the Target's sandbox, and hostPrefix must be where it sees the sandbox's \"/\"",
		path.Join(root, "stagetest-shell-check", "probe"), f)
	s.run(t, `rm -rf "$R"`, map[string]string{"R": s.at(root)})
}

// plant replaces whatever is at the sandbox path at with a symbolic link to
// target, creating the parent directories.
func (s *sandboxShell) plant(t *testing.T, at, target string) {
	t.Helper()
	s.run(t, `p=$(dirname "$L") && mkdir -p "$p" && rm -rf "$L" && ln -s "$T" "$L"`, map[string]string{"L": s.at(at), "T": target})
}

// reaches stops the test unless the sandbox path rel below at holds a
// regular file with content want (or, want empty, any regular file).
func (s *sandboxShell) reaches(t *testing.T, at, rel, want string) {
	t.Helper()
	f := s.at(at) + "/" + rel
	got := s.run(t, `if [ -f "$F" ]; then printf 'file:'; cat "$F"; fi`, map[string]string{"F": f})
	content, isFile := strings.CutPrefix(got, "file:")
	must(t, isFile && (want == "" || content == want), "the link planted at %s does not reach %s (got %q): the case would prove nothing", at, rel, got)
}

// isRealDir reports whether the sandbox path p is a directory, not a link.
func (s *sandboxShell) isRealDir(t *testing.T, p string) bool {
	t.Helper()
	return s.run(t, `if [ -d "$P" ] && [ ! -L "$P" ]; then echo yes; fi`, map[string]string{"P": s.at(p)}) == "yes\n"
}

// snapshot describes the directory the shell sees at dir: every name and
// every file's checksum. Two snapshots differ when anything was written,
// created or removed there.
func (s *sandboxShell) snapshot(t *testing.T, dir string) string {
	t.Helper()
	return s.run(t, `cd "$D" && find . -print | LC_ALL=C sort && find . -type f -exec cksum {} + | LC_ALL=C sort`, map[string]string{"D": dir})
}

// victim is a directory outside the stage root, holding the file
// "victim", that planted links point to: whatever a Target writes through
// such a link lands in it.
type victim struct {
	name string
	dir  string                 // where the shell sees it
	link func(at string) string // the target of a link planted at the sandbox path at
}

const victimData = "VICTIM"

// victims returns the victims of one case: a directory of the sandbox
// beside root, linked to by a relative path (which even a Target confined
// to the sandbox, like stage.Dir, could follow), and a directory of this
// machine linked to by its absolute path, when the sandbox sees this
// machine's files (a stage.Dir, a Bridge over LocalRunner, an in-process
// server), and also by a relative path when the sandbox's "/" is a host
// directory.
func (s *sandboxShell) victims(t *testing.T, root string) []victim {
	t.Helper()
	p := path.Join(path.Dir(root), "stagetest-victim-"+rand.Text())
	s.run(t, `mkdir -p "$D" && printf '%s' "$V" > "$D/victim"`, map[string]string{"D": s.at(p), "V": victimData})
	t.Cleanup(func() {
		// Best effort: the sandbox may be gone already.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = s.sh.Run(ctx, sandbox.Command{Script: `rm -rf "$D"`, Env: map[string]string{"D": s.at(p)}})
	})
	vs := []victim{{
		name: "InSandbox",
		dir:  s.at(p),
		link: func(at string) string { return relPath(path.Dir(at), p) },
	}}

	host := t.TempDir()
	mustNoError(t, os.WriteFile(filepath.Join(host, "victim"), []byte(victimData), 0o644), "creating the host victim")
	host = filepath.ToSlash(host)
	if got := s.run(t, `cat "$D/victim" 2>/dev/null || :`, map[string]string{"D": host}); got == victimData {
		vs = append(vs, victim{name: "OnHost", dir: host, link: func(string) string { return host }})
		if s.prefix != "" {
			// A relative link that climbs out of the sandbox's "/".
			other := filepath.ToSlash(t.TempDir())
			mustNoError(t, os.WriteFile(filepath.Join(other, "victim"), []byte(victimData), 0o644), "creating the host victim")
			vs = append(vs, victim{name: "OnHostRelative", dir: other, link: func(at string) string {
				return relPath(s.at(path.Dir(at)), other)
			}})
		}
	} else {
		t.Logf("the sandbox does not see this machine's files: no link to a host directory is planted")
	}
	return vs
}

// relPath returns the relative path from the directory from to to, both
// absolute and clean.
func relPath(from, to string) string {
	split := func(p string) []string {
		if p == "/" {
			return nil
		}
		return strings.Split(p[1:], "/")
	}
	f, g := split(from), split(to)
	i := 0
	for i < len(f) && i < len(g) && f[i] == g[i] {
		i++
	}
	parts := append(slices.Repeat([]string{".."}, len(f)-i), g[i:]...)
	if len(parts) == 0 {
		return "."
	}
	return strings.Join(parts, "/")
}

// testPlantedLinkAtRoot: a link planted at the stage root is replaced by
// a directory, never written through.
func testPlantedLinkAtRoot(t *testing.T, target stage.Target, root string, sb *sandboxShell) {
	src := source(t, mixed...)
	for _, v := range sb.victims(t, root) {
		t.Run(v.name, func(t *testing.T) {
			sb.plant(t, root, v.link(root))
			sb.reaches(t, root, "victim", victimData)
			before := sb.snapshot(t, v.dir)
			stageOK(t, target, root, []stage.Asset{{Name: "skills", Source: src}})
			expect(t, sb.isRealDir(t, root), "the link planted at the root %s must be replaced by a directory", root)
			expectTree(t, hostTree(t, src), fetch(t, target, root, "skills"), "the copy staged under a planted root")
			expectEqual(t, before, sb.snapshot(t, v.dir), "the planted link's target %s must be untouched (nothing written, nothing created)", v.dir)
		})
	}
}

// testPlantedLinkAtAsset: a link planted at <root>/<name> is replaced by
// the published copy, never written through.
func testPlantedLinkAtAsset(t *testing.T, target stage.Target, root string, sb *sandboxShell) {
	src := source(t, mixed...)
	for _, v := range sb.victims(t, root) {
		t.Run(v.name, func(t *testing.T) {
			name := "skills-" + v.name // never staged before
			a := path.Join(root, name)
			sb.plant(t, a, v.link(a))
			sb.reaches(t, a, "victim", victimData)
			before := sb.snapshot(t, v.dir)
			stageOK(t, target, root, []stage.Asset{{Name: name, Source: src}})
			expect(t, sb.isRealDir(t, a), "the link planted at the asset path %s must be replaced by a directory", a)
			expectTree(t, hostTree(t, src), fetch(t, target, root, name), "the copy staged over a planted link")
			expectEqual(t, before, sb.snapshot(t, v.dir), "the planted link's target %s must be untouched (nothing written, nothing created)", v.dir)
		})
	}
}

// testPlantedLinkToCopy replaces a published <root>/<name> by a link to an
// exact copy of it, so that a Target that followed the link would find the
// right content: Fetch must refuse it (ErrMismatch), and WithVerify must
// publish again instead of reusing it.
func testPlantedLinkToCopy(t *testing.T, target stage.Target, root string, sb *sandboxShell) {
	src := source(t, mixed...)
	for _, v := range sb.victims(t, root) {
		t.Run(v.name, func(t *testing.T) {
			name := "skills-" + v.name
			a := path.Join(root, name)
			assets := []stage.Asset{{Name: name, Source: src}}
			stageOK(t, target, root, assets)
			sb.run(t, `cp -Rp "$A" "$C"`, map[string]string{"A": sb.at(a), "C": v.dir + "/copy"})
			sb.plant(t, a, v.link(a)+"/copy")
			sb.reaches(t, a, "SKILL.md", mixed[0].data)
			before := sb.snapshot(t, v.dir)

			err := target.Fetch(context.Background(), root, name, func(e stage.Entry, _ io.Reader) error {
				return errors.New("stagetest: Fetch followed the link at " + a + ": it reported " + e.Path)
			})
			expect(t, errors.Is(err, stage.ErrMismatch), "Fetch of an asset directory that is a link: got %v, want an error wrapping stage.ErrMismatch", err)
			expect(t, err != nil && strings.Contains(err.Error(), a), "the error must name %s: %v", a, err)

			rt := stageOK(t, target, root, assets, stage.WithVerify())
			expect(t, !rt.Assets[0].Reused, "WithVerify took a link at %s to an exact copy for the copy: it must publish again", a)
			expect(t, sb.isRealDir(t, a), "%s must be a directory again", a)
			expectTree(t, hostTree(t, src), fetch(t, target, root, name), "the copy published again")
			expectEqual(t, before, sb.snapshot(t, v.dir), "the planted link's target %s must be untouched (nothing written, nothing created)", v.dir)
		})
	}
}

// testPlantedLinkInCopy plants links inside a published copy, in place of
// a file and of a directory: Fetch reports them as links without following
// them, and WithVerify publishes the asset again.
func testPlantedLinkInCopy(t *testing.T, target stage.Target, root string, sb *sandboxShell) {
	src := source(t, mixed...)
	for _, v := range sb.victims(t, root) {
		t.Run(v.name, func(t *testing.T) {
			name := "skills-" + v.name
			a := path.Join(root, name)
			file, dir := path.Join(a, "SKILL.md"), path.Join(a, "docs")
			assets := []stage.Asset{{Name: name, Source: src}}
			stageOK(t, target, root, assets)
			sb.plant(t, file, v.link(file)+"/victim")
			sb.plant(t, dir, v.link(dir))
			sb.reaches(t, dir, "victim", victimData)
			sb.reaches(t, a, "SKILL.md", victimData)
			before := sb.snapshot(t, v.dir)

			got := fetch(t, target, root, name)
			for _, p := range []string{"SKILL.md", "docs"} {
				expectEqual(t, fs.ModeSymlink, got[p].Mode.Type(), "Fetch must report the link planted at %s as a link", p)
			}
			for p := range got {
				expect(t, !strings.HasPrefix(p, "docs/"), "Fetch followed the link planted at docs: it reported %s", p)
			}

			rt := stageOK(t, target, root, assets, stage.WithVerify())
			expect(t, !rt.Assets[0].Reused, "WithVerify reused a copy with links planted in it: it must publish again")
			expectTree(t, hostTree(t, src), fetch(t, target, root, name), "the copy published again")
			expectEqual(t, before, sb.snapshot(t, v.dir), "the planted links' target %s must be untouched (nothing written, nothing created)", v.dir)
		})
	}
}

// testSourceLinkSwapRace swaps a source directory for a link to a host
// secret directory, over and over, while stages of it run for about a
// second under every link policy: each stage succeeds or fails with
// ErrChanged or ErrLink, and the secret never reaches the sandbox. It
// needs no sandbox shell; with one, it also searches the whole root.
func testSourceLinkSwapRace(t *testing.T, target stage.Target, root string, sb *sandboxShell) {
	secretData := "stagetest-secret-" + rand.Text()
	secret := source(t, spec{path: "f", data: secretData}, spec{path: "g", data: secretData}, spec{path: "deep/h", data: secretData})
	src := source(t, spec{path: "a/f", data: "public"}, spec{path: "a/g", data: "public"}, spec{path: "a/deep/h", data: "public"}, spec{path: "b", data: "public"})
	a, aside := filepath.Join(src, "a"), filepath.Join(src, "a.real")

	ctx, cancel := context.WithCancel(context.Background())
	var swaps atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			// Every step may lose a race with the stage; that is the point.
			// A cycle always ends with the source as it was.
			if os.Rename(a, aside) == nil {
				if os.Symlink(secret, a) == nil {
					swaps.Add(1)
					time.Sleep(50 * time.Microsecond)
					_ = os.Remove(a)
				}
				_ = os.Rename(aside, a)
			}
			time.Sleep(50 * time.Microsecond)
		}
	})
	names := []string{"s0", "s1", "s2"}
	policies := []stage.LinkPolicy{stage.SkipLinks, stage.FollowLinksWithin, stage.RejectLinks}
	var ok, failed int
	for i, start := 0, time.Now(); i < len(policies) || time.Since(start) < time.Second; i++ {
		_, err := stage.Stage(context.Background(), target, root, []stage.Asset{{Name: names[i%len(names)], Source: src, Links: policies[i%len(policies)]}})
		switch {
		case err == nil:
			ok++
		case errors.Is(err, stage.ErrChanged) || errors.Is(err, stage.ErrLink):
			failed++
		default:
			t.Errorf("stage %d (%v) under the race: %v; want success or an error wrapping stage.ErrChanged or stage.ErrLink", i, policies[i%len(policies)], err)
		}
	}
	cancel()
	wg.Wait()
	t.Logf("%d stages succeeded, %d failed with ErrChanged or ErrLink, under %d swaps", ok, failed, swaps.Load())
	must(t, swaps.Load() > 0, "the source directory was never swapped: the race proves nothing")

	for _, name := range names {
		err := walkFetch(context.Background(), target, root, name, func(e stage.Entry, data []byte) {
			expect(t, e.Mode&fs.ModeSymlink == 0, "%s/%s/%s is a link in the sandbox", root, name, e.Path)
			expect(t, !bytes.Contains(data, []byte(secretData)), "%s/%s/%s holds the secret", root, name, e.Path)
		})
		if !errors.Is(err, stage.ErrMismatch) { // never staged: nothing to read
			expectNoError(t, err, "Fetch %s/%s", root, name)
		}
	}
	if sb != nil {
		got := sb.run(t, `cd "$R" || exit 1
find . -type l -print | sed 's/^/link: /'
find . -type f -exec grep -l -F -e "$S" {} + 2>/dev/null | sed 's/^/secret: /'
exit 0`, map[string]string{"R": sb.at(root), "S": secretData})
		expectEqual(t, "", got, "the sandbox under %s holds links or the secret", root)
	}
}

// testDeltaTamperedOldCopy: the sandbox rewrites a file of the published
// copy (same size) and drops another; a change of one other source file is
// then staged. Whatever the target carries over from the old copy, the new
// copy equals the source: the tampered and the missing file are sent
// again, never carried.
func testDeltaTamperedOldCopy(t *testing.T, target stage.Target, root string, sb *sandboxShell) {
	var specs []spec
	for i := range 20 {
		specs = append(specs, spec{path: fmt.Sprintf("d%d/f%02d.txt", i%2, i), data: strings.Repeat(fmt.Sprint(i%10), 50)})
	}
	src := source(t, specs...)
	assets := []stage.Asset{{Name: "skills", Source: src}}
	stageOK(t, target, root, assets)
	sb.run(t, `printf '%s' "$DATA" > "$V" && rm -f "$GONE"`, map[string]string{
		"V":    sb.at(path.Join(root, "skills", "d0", "f04.txt")),
		"DATA": strings.Repeat("X", 50),
		"GONE": sb.at(path.Join(root, "skills", "d1", "f07.txt")),
	})
	mustNoError(t, os.WriteFile(filepath.Join(src, "d0", "f00.txt"), []byte("changed"), 0o644), "changing the source")
	second := stageOK(t, target, root, assets)
	a := second.Assets[0]
	if a.Sent < a.Files {
		expectEqual(t, 3, a.Sent, "the changed file, the tampered one and the missing one")
	}
	expectTree(t, hostTree(t, src), fetch(t, target, root, "skills"), "the sandbox copy after a delta publish over a tampered copy")
}

// testCopyRemoved: the sandbox deletes a published copy's directory (or
// puts a file in its place) and leaves its manifest, as an agent that
// cleans up, or a prune through another connection that raced a publish,
// can. The next stage, with or without an Index that saw the copy
// published, must publish the asset again: reporting it Reused would
// report staged a copy that is not there. (A copy damaged inside, its
// directory still there, is the sandbox's own doing: WithVerify repairs
// it, see PlantedLinkInCopy; so does it a link to a copy put in the
// directory's place, see PlantedLinkToCopy.)
func testCopyRemoved(t *testing.T, target stage.Target, root string, sb *sandboxShell) {
	src := source(t, mixed...)
	ix, err := stage.OpenIndex(t.TempDir())
	mustNoError(t, err, "OpenIndex")
	for _, c := range []struct {
		name, script string
		opts         []stage.Option
	}{
		{"removed", `rm -rf "$A"`, nil},
		{"removed, with an Index", `rm -rf "$A"`, []stage.Option{stage.WithIndex(ix)}},
		{"a file in its place, with an Index", `rm -rf "$A" && echo not-the-copy >"$A"`, []stage.Option{stage.WithIndex(ix)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := "skills-" + strings.ReplaceAll(strings.ReplaceAll(c.name, ",", ""), " ", "-")
			a := path.Join(root, name)
			assets := []stage.Asset{{Name: name, Source: src}}
			first := stageOK(t, target, root, assets, c.opts...)
			again := stageOK(t, target, root, assets, c.opts...)
			must(t, again.Assets[0].Reused, "the unchanged copy was not Reused before the sandbox removed it")
			sb.run(t, c.script, map[string]string{"A": sb.at(a)})
			rt := stageOK(t, target, root, assets, c.opts...)
			expect(t, !rt.Assets[0].Reused, "the stage after %s's copy was %s reported it Reused: nothing was there", a, c.name)
			expectEqual(t, first.Assets[0].Digest, rt.Assets[0].Digest, "Digest")
			expect(t, sb.isRealDir(t, a), "%s must be a directory again", a)
			expectTree(t, hostTree(t, src), fetch(t, target, root, name), "the copy published again")
		})
	}
}
