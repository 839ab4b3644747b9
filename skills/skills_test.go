package skills

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/tree"
	"github.com/airlockdev/airlock/internal/treetest"
)

const secret = "TOPSECRET-7c1f"

// skillDir writes a skill named name under parent with a valid SKILL.md and
// the extra files given as "path:content" ("dir/" for a directory).
func skillDir(t *testing.T, parent, name string, extra ...string) string {
	t.Helper()
	dir := filepath.Join(parent, name)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	md := fmt.Sprintf("---\nname: %s\ndescription: |\n  Does %s things.\n  Carefully.\n---\n# %s\n", name, name, name)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte(md), 0o644))
	for _, e := range extra {
		if strings.HasSuffix(e, "/") {
			require.NoError(t, os.MkdirAll(filepath.Join(dir, e), 0o755))
			continue
		}
		p, content, _ := strings.Cut(e, ":")
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, p), []byte(content), 0o644))
	}
	return dir
}

func secretDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(d, "secret.txt"), []byte(secret), 0o600))
	return d
}

func TestMaterializeCopiesWithoutLinks(t *testing.T) {
	src, state, out := t.TempDir(), t.TempDir(), secretDir(t)
	dir := skillDir(t, src, "pdf", "scripts/run.sh:#!/bin/sh\necho hi\n", "a/b/c/deep.txt:deep")
	require.NoError(t, os.Chmod(filepath.Join(dir, "scripts/run.sh"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(out, "secret.txt"), filepath.Join(dir, "leak.txt")))
	require.NoError(t, os.Symlink(out, filepath.Join(dir, "a/b/c/leakdir")))
	require.NoError(t, os.Symlink("../../../SKILL.md", filepath.Join(dir, "a/b/inner")))
	require.NoError(t, os.Link(filepath.Join(dir, "a/b/c/deep.txt"), filepath.Join(dir, "hard.txt")))

	b, err := Materialize(context.Background(), state, []Source{{Key: "k/pdf", Name: "pdf", Dir: dir}})
	require.NoError(t, err)
	require.Len(t, b.Skills, 1)
	s := b.Skills[0]
	assert.Equal(t, []string{"a/b/c/leakdir", "a/b/inner", "leak.txt"}, s.Skipped)
	assert.Equal(t, "Does pdf things. Carefully.", s.Description)
	assert.Equal(t, 4, s.Files)
	assert.Equal(t, filepath.Join(state, strings.TrimPrefix(b.Identity.Digest, "sha256:")[:32]), b.Dir)
	treetest.NoLinkNoSecret(t, b.Dir, secret)

	fi, err := os.Stat(filepath.Join(b.Dir, "pdf/scripts/run.sh"))
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o755), fi.Mode().Perm(), "exec bit kept")
	hard, err := os.ReadFile(filepath.Join(b.Dir, "pdf/hard.txt"))
	require.NoError(t, err)
	assert.Equal(t, "deep", string(hard), "a hard link is copied as a regular file")
	assert.NotContains(t, b.Identity.Digest, state)
}

func TestMaterializeFIFO(t *testing.T) {
	src, state := t.TempDir(), t.TempDir()
	dir := skillDir(t, src, "fifo", "sub/")
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "sub/pipe"), 0o644))
	done := make(chan struct{})
	var b *Bundle
	var err error
	go func() {
		defer close(done)
		b, err = Materialize(context.Background(), state, []Source{{Key: "k", Name: "fifo", Dir: dir}})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Materialize hung on a FIFO")
	}
	require.NoError(t, err)
	assert.Equal(t, []string{"sub/pipe"}, b.Skills[0].Skipped)
	_, err = os.Lstat(filepath.Join(b.Dir, "fifo/sub/pipe"))
	require.ErrorIs(t, err, fs.ErrNotExist)
}

func TestMaterializeDrops(t *testing.T) {
	out := secretDir(t)
	for _, tc := range []struct {
		name   string
		setup  func(t *testing.T, dir string) // dir: the skill directory path (not yet created)
		reason string
		strict bool
	}{
		{"dir missing", func(t *testing.T, dir string) {}, "does not exist", false},
		{"dir is a link", func(t *testing.T, dir string) {
			real := skillDir(t, t.TempDir(), "x")
			require.NoError(t, os.Symlink(real, dir))
		}, "is a symbolic link", false},
		{"dir is a file", func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(dir, []byte("x"), 0o644))
		}, "is not a directory", false},
		{"SKILL.md missing", func(t *testing.T, dir string) {
			require.NoError(t, os.MkdirAll(filepath.Join(dir, "other"), 0o755))
		}, "SKILL.md is missing", false},
		{"SKILL.md is a link", func(t *testing.T, dir string) {
			require.NoError(t, os.MkdirAll(dir, 0o755))
			require.NoError(t, os.Symlink(filepath.Join(out, "secret.txt"), filepath.Join(dir, "SKILL.md")))
		}, "SKILL.md is a symbolic link", false},
		{"SKILL.md is a directory", func(t *testing.T, dir string) {
			require.NoError(t, os.MkdirAll(filepath.Join(dir, "SKILL.md"), 0o755))
		}, "SKILL.md is a directory", false},
		{"SKILL.md is a FIFO", func(t *testing.T, dir string) {
			require.NoError(t, os.MkdirAll(dir, 0o755))
			require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "SKILL.md"), 0o644))
		}, "SKILL.md is not a regular file", false},
		{"SKILL.md empty", func(t *testing.T, dir string) { writeMD(t, dir, "") }, "SKILL.md is empty", false},
		{"SKILL.md too large", func(t *testing.T, dir string) {
			writeMD(t, dir, "---\nname: x\n---\n"+strings.Repeat("a", MaxSkillMD))
		}, "SKILL.md is 1048592 bytes; the limit is 1048576", false},
		{"SKILL.md bad UTF-8", func(t *testing.T, dir string) { writeMD(t, dir, "---\nname: \xff\n---\n") }, "not valid UTF-8", false},
		{"bad frontmatter", func(t *testing.T, dir string) { writeMD(t, dir, "---\nname: [unclosed\n---\n") }, "frontmatter does not parse", false},
		{"unterminated frontmatter", func(t *testing.T, dir string) { writeMD(t, dir, "---\nname: bad\n") }, "no closing --- line", false},
		{"strict spec", func(t *testing.T, dir string) { writeMD(t, dir, "---\nname: Other_Name\ndescription: d\n---\n") }, "violates the Agent Skills spec", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, state := t.TempDir(), t.TempDir()
			good := skillDir(t, src, "good")
			bad := filepath.Join(src, "bad")
			tc.setup(t, bad)
			var logs bytes.Buffer
			opts := []Option{WithLogger(slog.New(slog.NewJSONHandler(&logs, nil)))}
			if tc.strict {
				opts = append(opts, WithStrictSpec())
			}
			sources := []Source{{Key: "k/bad", Name: "bad", Dir: bad}, {Key: "k/good", Name: "good", Dir: good}}
			b, err := Materialize(context.Background(), state, sources, opts...)
			require.NoError(t, err)
			require.Len(t, b.Dropped, 1)
			assert.Equal(t, "k/bad", b.Dropped[0].Key)
			assert.Equal(t, "bad", b.Dropped[0].Name)
			assert.Contains(t, b.Dropped[0].Reason, tc.reason)

			// Absent from the bundle, the prompt and the identity.
			require.Len(t, b.Skills, 1)
			assert.Equal(t, "good", b.Skills[0].Name)
			assert.NotContains(t, b.Prompt("/sandbox/skills"), "bad")
			_, err = os.Lstat(filepath.Join(b.Dir, "bad"))
			require.ErrorIs(t, err, fs.ErrNotExist)
			alone, err := Materialize(context.Background(), t.TempDir(), sources[1:])
			require.NoError(t, err)
			assert.Equal(t, alone.Identity, b.Identity)
			treetest.NoLinkNoSecret(t, b.Dir, secret)

			// Logged once at Warn with the stable attributes.
			var rec map[string]any
			line, _, _ := bytes.Cut(logs.Bytes(), []byte("\n"))
			require.NoError(t, jsonUnmarshal(line, &rec), logs.String())
			assert.Equal(t, "WARN", rec["level"])
			assert.Equal(t, "skill dropped", rec["msg"])
			assert.Equal(t, "k/bad", rec["skill.key"])
			assert.Equal(t, "bad", rec["skill.name"])
			assert.Equal(t, b.Dropped[0].Reason, rec["reason"])
		})
	}
}

func writeMD(t *testing.T, dir, content string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte(content), 0o644))
}

func TestMaterializeSpecViolationOnlyLoggedByDefault(t *testing.T) {
	src := t.TempDir()
	dir := filepath.Join(src, "tool")
	writeMD(t, dir, "---\nname: other\ndescription: d\nextra: 1\n---\n")
	var logs bytes.Buffer
	b, err := Materialize(context.Background(), t.TempDir(), []Source{{Key: "k", Name: "tool", Dir: dir}},
		WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	require.NoError(t, err)
	require.Len(t, b.Skills, 1)
	assert.Empty(t, b.Dropped)
	assert.Contains(t, logs.String(), `name \"other\" differs from the directory name \"tool\"`)
	assert.Contains(t, logs.String(), `key \"extra\" is not in the spec`)
}

func TestMaterializeCallerErrors(t *testing.T) {
	dir := skillDir(t, t.TempDir(), "x")
	for name, sources := range map[string][]Source{
		"empty name":     {{Key: "k", Name: "", Dir: dir}},
		"dot dot":        {{Key: "k", Name: "..", Dir: dir}},
		"slash":          {{Key: "k", Name: "a/b", Dir: dir}},
		"backslash":      {{Key: "k", Name: `a\b`, Dir: dir}},
		"hidden":         {{Key: "k", Name: ".x", Dir: dir}},
		"control":        {{Key: "k", Name: "a\nb", Dir: dir}},
		"line separator": {{Key: "k", Name: "a\u2028b", Dir: dir}},
		"bidi override":  {{Key: "k", Name: "a\u202eb", Dir: dir}},
		"C1 control":     {{Key: "k", Name: "a\u0085b", Dir: dir}},
		"blank key":      {{Key: " ", Name: "x", Dir: dir}},
		"duplicate name": {{Key: "k1", Name: "x", Dir: dir}, {Key: "k2", Name: "x", Dir: dir}},
	} {
		t.Run(name, func(t *testing.T) {
			state := filepath.Join(t.TempDir(), "state")
			_, err := Materialize(context.Background(), state, sources)
			require.ErrorIs(t, err, ErrInvalidSource)
			_, err = os.Lstat(state)
			require.ErrorIs(t, err, fs.ErrNotExist, "nothing written on a caller error")
		})
	}
}

func TestMaterializeLimits(t *testing.T) {
	for _, tc := range []struct {
		lim   Limits
		err   error
		field string
		path  string
		limit string
		max   int64
	}{
		{Limits{MaxFiles: 2}, tree.ErrTooManyFiles, "MaxFiles", "b/c/d.txt", "files", 2},
		{Limits{MaxBytes: 100}, tree.ErrTooManyBytes, "MaxBytes", "a.txt", "bytes", 100},
		{Limits{MaxFileBytes: 150}, tree.ErrFileTooLarge, "MaxFileBytes", "a.txt", "file bytes", 150},
		{Limits{MaxDepth: 2}, tree.ErrTooDeep, "MaxDepth", "b/c/d.txt", "depth", 2},
		{Limits{MaxPathLen: 8}, tree.ErrPathTooLong, "MaxPathLen", "b/c/d.txt", "path length", 8},
	} {
		t.Run(tc.field, func(t *testing.T) {
			dir := skillDir(t, t.TempDir(), "lim", "a.txt:"+strings.Repeat("a", 200), "b/c/d.txt:dd")
			_, err := Materialize(context.Background(), t.TempDir(), []Source{{Key: "k", Name: "lim", Dir: dir}}, WithLimits(tc.lim))
			require.ErrorIs(t, err, ErrLimit)
			require.ErrorIs(t, err, tc.err)
			var le *LimitError
			require.ErrorAs(t, err, &le)
			assert.Equal(t, "lim", le.Skill)
			assert.Equal(t, tc.path, le.Path)
			assert.Equal(t, tc.limit, le.Limit)
			assert.Equal(t, tc.max, le.Max)
			assert.Contains(t, err.Error(), tc.field)
			assert.Contains(t, err.Error(), tc.path)
		})
	}
}

func TestIdentity(t *testing.T) {
	src := t.TempDir()
	a := skillDir(t, src, "alpha", "x.txt:one")
	b := skillDir(t, src, "beta")
	sel := []Source{{Key: "k/alpha", Name: "alpha", Dir: a}, {Key: "k/beta", Name: "beta", Dir: b}}
	ctx := context.Background()
	base, err := Materialize(ctx, t.TempDir(), sel)
	require.NoError(t, err)

	t.Run("stable across state dirs, prompt roots and source order", func(t *testing.T) {
		other, err := Materialize(ctx, filepath.Join(t.TempDir(), "elsewhere"), []Source{sel[1], sel[0]})
		require.NoError(t, err)
		assert.Equal(t, base.Identity, other.Identity)
		assert.NotEqual(t, base.Prompt("/a"), base.Prompt("/b"))
	})
	change := func(name string, mutate func(t *testing.T), sources []Source) {
		t.Run(name, func(t *testing.T) {
			if mutate != nil {
				mutate(t)
			}
			got, err := Materialize(ctx, t.TempDir(), sources)
			require.NoError(t, err)
			assert.NotEqual(t, base.Identity, got.Identity)
		})
	}
	change("removed skill", nil, sel[:1])
	change("renamed key", nil, []Source{{Key: "k/other", Name: "alpha", Dir: a}, sel[1]})
	// The mutations below change the tree and then restore it.
	change("one byte", func(t *testing.T) {
		restore(t, filepath.Join(a, "x.txt"))
		require.NoError(t, os.WriteFile(filepath.Join(a, "x.txt"), []byte("onf"), 0o644))
	}, sel)
	change("mode", func(t *testing.T) {
		require.NoError(t, os.Chmod(filepath.Join(a, "x.txt"), 0o755))
		t.Cleanup(func() { require.NoError(t, os.Chmod(filepath.Join(a, "x.txt"), 0o644)) })
	}, sel)
	change("added file", func(t *testing.T) {
		p := filepath.Join(b, "new.txt")
		require.NoError(t, os.WriteFile(p, nil, 0o644))
		t.Cleanup(func() { require.NoError(t, os.Remove(p)) })
	}, sel)
	change("removed file", func(t *testing.T) {
		restore(t, filepath.Join(a, "x.txt"))
		require.NoError(t, os.Remove(filepath.Join(a, "x.txt")))
	}, sel)
	t.Run("restored tree is identical again", func(t *testing.T) {
		got, err := Materialize(ctx, t.TempDir(), sel)
		require.NoError(t, err)
		assert.Equal(t, base.Identity, got.Identity)
	})
}

// restore puts the file at p back as it is now when the test ends.
func restore(t *testing.T, p string) {
	t.Helper()
	data, err := os.ReadFile(p)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, os.WriteFile(p, data, 0o644)) })
}

func TestMaterializeReusesBundle(t *testing.T) {
	state := t.TempDir()
	dir := skillDir(t, t.TempDir(), "reuse", "f.txt:data")
	sel := []Source{{Key: "k", Name: "reuse", Dir: dir}}
	first, err := Materialize(context.Background(), state, sel)
	require.NoError(t, err)
	marker := filepath.Join(first.Dir, "reuse", "f.txt")
	before, err := os.Stat(marker)
	require.NoError(t, err)
	second, err := Materialize(context.Background(), state, sel)
	require.NoError(t, err)
	assert.Equal(t, first, second)
	after, err := os.Stat(marker)
	require.NoError(t, err)
	assert.True(t, os.SameFile(before, after), "an unchanged bundle is not copied again")
	entries, err := os.ReadDir(state)
	require.NoError(t, err)
	for _, e := range entries {
		assert.False(t, strings.HasPrefix(e.Name(), ".tmp-"), "temporary directory left: %s", e.Name())
	}
}

func TestMaterializeConcurrent(t *testing.T) {
	state := t.TempDir()
	src := t.TempDir()
	var sel []Source
	for i := range 4 {
		name := fmt.Sprintf("s%d", i)
		sel = append(sel, Source{Key: name, Name: name, Dir: skillDir(t, src, name, "big.bin:"+strings.Repeat("x", 200_000))})
	}
	var wg sync.WaitGroup
	results := make([]*Bundle, 8)
	errs := make([]error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = Materialize(context.Background(), state, sel)
		}()
	}
	wg.Wait()
	for i := range 8 {
		require.NoError(t, errs[i])
		assert.Equal(t, results[0], results[i])
	}
	entries, err := os.ReadDir(state)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	id := strings.TrimPrefix(results[0].Identity.Digest, "sha256:")[:32]
	assert.Equal(t, []string{"." + id + ".lock", id}, names, "one bundle, no temporary directory")
	for _, s := range sel {
		got, err := os.ReadFile(filepath.Join(results[0].Dir, s.Name, "big.bin"))
		require.NoError(t, err)
		assert.Len(t, got, 200_000, "no torn copy")
	}
}

// TestMaterializeRaceLinkSwap keeps swapping a directory inside a skill with
// a link to a secret directory while Materialize runs in a loop for 2 s.
func TestMaterializeRaceLinkSwap(t *testing.T) {
	out := secretDir(t)
	dir := skillDir(t, t.TempDir(), "racy", "sub/ordinary.txt:plain")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(stop)
	wg.Add(1)
	go func() {
		defer wg.Done()
		sub, tmp, link := filepath.Join(dir, "sub"), filepath.Join(dir, "sub.tmp"), filepath.Join(dir, "sub.link")
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = os.Symlink(out, link)
			_ = os.Rename(sub, tmp)
			_ = os.Rename(link, sub)
			_ = os.Rename(sub, link)
			_ = os.Rename(tmp, sub)
		}
	}()
	state := t.TempDir()
	deadline := time.Now().Add(2 * time.Second)
	runs, failed := 0, 0
	for ; time.Now().Before(deadline); runs++ {
		// A fresh state directory each time, so every run copies.
		b, err := Materialize(context.Background(), filepath.Join(state, fmt.Sprint(runs)), []Source{{Key: "k", Name: "racy", Dir: dir}})
		if err != nil {
			require.ErrorIs(t, err, ErrChanged)
			failed++
			continue
		}
		require.Len(t, b.Skills, 1)
	}
	treetest.NoLinkNoSecret(t, state, secret)
	t.Logf("%d runs, %d failed with ErrChanged", runs, failed)
}

func TestPrompt(t *testing.T) {
	b := &Bundle{Skills: []Skill{{Name: "alpha", Description: "Alpha things."}, {Name: "beta"}}}
	want := "The following skills were materialized for this run.\n" +
		"Skill root: /sandbox/skills\n" +
		"Selected skills: alpha, beta\n" +
		"- alpha: Alpha things. (file: /sandbox/skills/alpha/SKILL.md)\n" +
		"- beta (file: /sandbox/skills/beta/SKILL.md)\n" +
		"Read a skill's SKILL.md from the skill root when the task calls for it.\n"
	assert.Equal(t, want, b.Prompt("/sandbox/skills"))
	assert.Equal(t, want, b.Prompt("/sandbox/skills/"))
	assert.Contains(t, b.Prompt("/"), "(file: /alpha/SKILL.md)")
	assert.Equal(t, "", (&Bundle{}).Prompt("/x"))
	assert.Equal(t, "", (*Bundle)(nil).Prompt("/x"))
}

func TestMaterializeNoSurvivor(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	b, err := Materialize(context.Background(), state, []Source{{Key: "k", Name: "gone", Dir: filepath.Join(state, "nope")}})
	require.NoError(t, err)
	assert.Equal(t, "", b.Dir)
	assert.Empty(t, b.Skills)
	assert.Len(t, b.Dropped, 1)
	assert.Equal(t, "", b.Prompt("/x"))
	_, err = os.Lstat(state)
	require.ErrorIs(t, err, fs.ErrNotExist)
}

func TestMaterializeCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Materialize(ctx, t.TempDir(), []Source{{Key: "k", Name: "x", Dir: skillDir(t, t.TempDir(), "x")}})
	require.ErrorIs(t, err, context.Canceled)
}

func TestMaterializeIndex(t *testing.T) {
	state := t.TempDir()
	src := t.TempDir()
	a := skillDir(t, src, "alpha", "f.txt:data")
	sel := []Source{{Key: "k/a", Name: "alpha", Dir: a}, {Key: "k/gone", Name: "gone", Dir: filepath.Join(src, "gone")}}
	var copies []string
	spy := func(o *options) {
		o.racy = 0 // the tree is fresh; let its metadata count at once
		o.copied = func(name string) { copies = append(copies, name) }
	}
	ctx := context.Background()
	first, err := Materialize(ctx, state, sel, spy)
	require.NoError(t, err)
	assert.Equal(t, []string{"alpha"}, copies)
	idx, err := filepath.Glob(filepath.Join(state, ".index-*.json"))
	require.NoError(t, err)
	require.Len(t, idx, 1)

	t.Run("unchanged: served from the index, nothing copied, drop logged again", func(t *testing.T) {
		copies = nil
		var logs bytes.Buffer
		again, err := Materialize(ctx, state, sel, spy, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		require.NoError(t, err)
		assert.Equal(t, first, again)
		assert.Empty(t, copies)
		assert.Contains(t, logs.String(), "skill.name=gone")
	})
	t.Run("recent changes are not trusted", func(t *testing.T) {
		copies = nil
		_, err := Materialize(ctx, state, sel) // default racy window: the tree is too fresh
		require.NoError(t, err)
		_, err = Materialize(ctx, state, sel, func(o *options) { o.copied = func(n string) { copies = append(copies, n) } })
		require.NoError(t, err)
		assert.Equal(t, []string{"alpha"}, copies)
	})
	t.Run("corrupt index entry: rebuilt", func(t *testing.T) {
		require.NoError(t, os.WriteFile(idx[0], []byte(`{"schema":"x"}`), 0o600))
		copies = nil
		again, err := Materialize(ctx, state, sel, spy)
		require.NoError(t, err)
		assert.Equal(t, first, again)
		assert.Equal(t, []string{"alpha"}, copies)
	})
	t.Run("bundle removed: rebuilt", func(t *testing.T) {
		require.NoError(t, os.RemoveAll(first.Dir))
		copies = nil
		again, err := Materialize(ctx, state, sel, spy)
		require.NoError(t, err)
		assert.Equal(t, first, again)
		assert.Equal(t, []string{"alpha"}, copies)
		treetest.NoLinkNoSecret(t, again.Dir, secret)
	})
	t.Run("content changed: a new bundle", func(t *testing.T) {
		require.NoError(t, os.WriteFile(filepath.Join(a, "f.txt"), []byte("datb"), 0o644))
		copies = nil
		again, err := Materialize(ctx, state, sel, spy)
		require.NoError(t, err)
		assert.NotEqual(t, first.Identity, again.Identity)
		assert.Equal(t, []string{"alpha"}, copies)
	})
	t.Run("other options: not served from the index", func(t *testing.T) {
		copies = nil
		_, err := Materialize(ctx, state, sel, spy, WithStrictSpec())
		require.NoError(t, err)
		assert.Equal(t, []string{"alpha"}, copies)
	})
}

func TestMaterializeNilLogger(t *testing.T) {
	b, err := Materialize(context.Background(), t.TempDir(), []Source{{Key: "k", Name: "gone", Dir: filepath.Join(t.TempDir(), "gone")}}, WithLogger(nil))
	require.NoError(t, err)
	assert.Len(t, b.Dropped, 1)
}

func TestMaterializeReadOnlySkill(t *testing.T) {
	src := t.TempDir()
	ro := skillDir(t, src, "ro", "sub/README:read me")
	bad := filepath.Join(src, "bad")
	require.NoError(t, os.MkdirAll(filepath.Join(bad, "sub"), 0o755))
	for _, d := range []string{filepath.Join(ro, "sub"), ro, filepath.Join(bad, "sub"), bad} {
		require.NoError(t, os.Chmod(d, 0o555))
		t.Cleanup(func() { os.Chmod(d, 0o755) })
	}
	state := t.TempDir()
	sel := []Source{{Key: "k/ro", Name: "ro", Dir: ro}, {Key: "k/bad", Name: "bad", Dir: bad}}
	for range 3 { // the second and third calls copy again and discard
		b, err := Materialize(context.Background(), state, sel)
		require.NoError(t, err)
		require.Len(t, b.Skills, 1)
		require.Len(t, b.Dropped, 1)
	}
	tmps, err := filepath.Glob(filepath.Join(state, ".tmp-*"))
	require.NoError(t, err)
	assert.Empty(t, tmps, "no temporary copy left behind")
}

// TestMaterializeRefusesRelativePaths: a relative skill directory or state
// directory is refused before anything is read, as stage.Stage refuses a
// relative Source.
func TestMaterializeRefusesRelativePaths(t *testing.T) {
	abs := t.TempDir()
	_, err := Materialize(t.Context(), "state", []Source{{Key: "k", Name: "n", Dir: abs}})
	require.ErrorIs(t, err, ErrInvalidSource)
	assert.ErrorContains(t, err, `state directory "state" is not an absolute host path`)
	_, err = Materialize(t.Context(), abs, []Source{{Key: "k", Name: "n", Dir: "skills/n"}})
	require.ErrorIs(t, err, ErrInvalidSource)
	assert.ErrorContains(t, err, `directory "skills/n" is not an absolute host path`)
}

// TestMaterializeIndexAllDropped: a selection of which every skill is
// dropped is indexed like any other, so calling again with it unchanged
// copies and hashes nothing (it once copied every skill on every call),
// and still logs each drop; a change to a source is noticed.
func TestMaterializeIndexAllDropped(t *testing.T) {
	state, src := t.TempDir(), t.TempDir()
	writeMD(t, filepath.Join(src, "a"), "---\nname: not-a\ndescription: d\n---\n")
	writeMD(t, filepath.Join(src, "b"), "---\nname: b\n---\n")
	require.NoError(t, os.MkdirAll(filepath.Join(src, "c"), 0o755)) // no SKILL.md
	var sel []Source
	for _, n := range []string{"a", "b", "c"} {
		sel = append(sel, Source{Key: "k/" + n, Name: n, Dir: filepath.Join(src, n)})
	}
	var copies []string
	spy := func(o *options) {
		o.racy = 0
		o.copied = func(name string) { copies = append(copies, name) }
	}
	ctx := context.Background()
	first, err := Materialize(ctx, state, sel, spy, WithStrictSpec())
	require.NoError(t, err)
	assert.Empty(t, first.Skills)
	assert.Len(t, first.Dropped, 3)
	assert.Equal(t, "", first.Dir)
	assert.Equal(t, []string{"a", "b", "c"}, copies)

	copies = nil
	var logs bytes.Buffer
	again, err := Materialize(ctx, state, sel, spy, WithStrictSpec(), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	require.NoError(t, err)
	assert.Empty(t, copies, "an unchanged all-dropped selection is an index hit: nothing copied or hashed")
	assert.Equal(t, first, again)
	for _, n := range []string{"a", "b", "c"} {
		assert.Contains(t, logs.String(), "skill.name="+n, "each drop is logged on an index hit too")
	}
	entries, err := os.ReadDir(state)
	require.NoError(t, err)
	for _, e := range entries {
		assert.True(t, strings.HasPrefix(e.Name(), ".index-"), "nothing but the index entry is left: %s", e.Name())
	}

	writeMD(t, filepath.Join(src, "b"), "---\nname: b\ndescription: Now usable.\n---\n")
	copies = nil
	changed, err := Materialize(ctx, state, sel, spy, WithStrictSpec())
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b", "c"}, copies, "a changed source is copied again")
	require.Len(t, changed.Skills, 1)
	assert.Equal(t, "b", changed.Skills[0].Name)
}

// TestMaterializeChangedAfterFingerprint: the copy takes its listing and
// lstat from the fingerprint pass (tree.Seen) and is checked against it
// by a second pass (copyStill). A file added between the pass and the copy
// makes the copy over from a fresh pass, so the bundle holds it; that
// bundle is not indexed under the first pass's key, which a tree that
// loses the file again would match. A file rewritten in between fails
// that copy with ErrChanged, and Materialize copies the skill again as it
// now is.
func TestMaterializeChangedAfterFingerprint(t *testing.T) {
	ctx := context.Background()
	t.Run("added", func(t *testing.T) {
		state, src := t.TempDir(), t.TempDir()
		dir := skillDir(t, src, "a", "notes.txt:old")
		sel := []Source{{Key: "k/a", Name: "a", Dir: dir}}
		var copies int
		hook := func(o *options) {
			o.racy = 0
			o.copied = func(string) {
				if copies++; copies == 1 {
					require.NoError(t, os.WriteFile(filepath.Join(dir, "added.txt"), []byte("new"), 0o644))
				}
			}
		}
		first, err := Materialize(ctx, state, sel, hook)
		require.NoError(t, err)
		require.Len(t, first.Skills, 1)
		assert.Equal(t, 3, first.Skills[0].Files, "SKILL.md, notes.txt and added.txt: the tree as it was after the copy")
		b, err := os.ReadFile(filepath.Join(first.Dir, "a", "added.txt"))
		require.NoError(t, err)
		assert.Equal(t, "new", string(b))

		require.NoError(t, os.Remove(filepath.Join(dir, "added.txt")))
		again, err := Materialize(ctx, state, sel, hook)
		require.NoError(t, err)
		assert.Equal(t, 2, copies, "the first pass's key was not indexed: copied again")
		require.Len(t, again.Skills, 1)
		assert.Equal(t, 2, again.Skills[0].Files, "the file removed again is not in the bundle")
		_, err = os.Lstat(filepath.Join(again.Dir, "a", "added.txt"))
		require.ErrorIs(t, err, fs.ErrNotExist)

		third, err := Materialize(ctx, state, sel, hook)
		require.NoError(t, err)
		assert.Equal(t, 2, copies, "a quiet copy is indexed: the next call is a hit")
		assert.Equal(t, again, third)
	})
	t.Run("rewritten", func(t *testing.T) {
		state, src := t.TempDir(), t.TempDir()
		dir := skillDir(t, src, "a", "notes.txt:old")
		sel := []Source{{Key: "k/a", Name: "a", Dir: dir}}
		hook := func(o *options) {
			o.copied = func(string) {
				require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("rewritten"), 0o644))
			}
		}
		b, err := Materialize(ctx, state, sel, hook)
		require.NoError(t, err)
		require.Len(t, b.Skills, 1)
		got, err := os.ReadFile(filepath.Join(b.Dir, "a", "notes.txt"))
		require.NoError(t, err)
		assert.Equal(t, "rewritten", string(got))
		want, err := tree.Walk(ctx, dir, tree.Options{}, nil)
		require.NoError(t, err)
		assert.Equal(t, want.Manifest.Digest(), b.Skills[0].Digest, "the digest is the copy's")
	})
}

// TestMaterializeSeenBudget: the fingerprint pass keeps what it saw for
// the copies (tree.Seen) up to maxSeen entries over the whole selection,
// each source its share; what a share does not hold is listed again by
// the copy, to the same bundle.
func TestMaterializeSeenBudget(t *testing.T) {
	src := t.TempDir()
	var sel []Source
	for _, n := range []string{"a", "b", "c"} {
		sel = append(sel, Source{Key: "k/" + n, Name: n, Dir: skillDir(t, src, n, "x.txt:"+n, "d/y.txt:y")})
	}
	ctx := context.Background()
	full := fingerprint(ctx, sel, options{}, time.Now())
	for _, n := range []string{"a", "b", "c"} {
		assert.Equal(t, 4, full.passes[n].seen.Len(), "%s: SKILL.md, x.txt and d; d/y.txt", n)
	}
	defer func(m int) { maxSeen = m }(maxSeen)
	maxSeen = 9 // 3 a source: d (1 entry) is kept, the root (3 more) is not
	capped := fingerprint(ctx, sel, options{}, time.Now())
	assert.Equal(t, full.sum, capped.sum, "the same fingerprint")
	for _, n := range []string{"a", "b", "c"} {
		assert.Equal(t, 1, capped.passes[n].seen.Len(), n)
	}

	b1, err := Materialize(ctx, t.TempDir(), sel)
	require.NoError(t, err)
	maxSeen = 1 << 15
	b2, err := Materialize(ctx, t.TempDir(), sel)
	require.NoError(t, err)
	assert.Equal(t, b2.Identity, b1.Identity)
	assert.Equal(t, b2.Skills, b1.Skills)
}
