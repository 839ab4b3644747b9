package tree

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/treetest"
)

// build makes a tree from a tiny fixture language: "d/" is a directory,
// "f" a file whose content is its own name, "f:content" a file with that
// content, "a => b" a symbolic link a pointing at b, "p|" a FIFO.
func build(t *testing.T, dir string, spec ...string) {
	t.Helper()
	for _, s := range spec {
		switch {
		case strings.Contains(s, " => "):
			link, target, _ := strings.Cut(s, " => ")
			require.NoError(t, os.Symlink(target, filepath.Join(dir, link)))
		case strings.HasSuffix(s, "/"):
			require.NoError(t, os.MkdirAll(filepath.Join(dir, s), 0o755))
		case strings.HasSuffix(s, "|"):
			require.NoError(t, syscall.Mkfifo(filepath.Join(dir, strings.TrimSuffix(s, "|")), 0o644))
		default:
			name, content, ok := strings.Cut(s, ":")
			if !ok {
				content = name
			}
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
		}
	}
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// modes runs f once per reader, so every case covers both.
func modes(t *testing.T, f func(t *testing.T, force bool, want Mode)) {
	t.Run("openat2", func(t *testing.T) { f(t, false, ModeOpenat2) })
	t.Run("osroot", func(t *testing.T) { f(t, true, ModeRoot) })
}

func TestWalkManifest(t *testing.T) {
	modes(t, func(t *testing.T, force bool, mode Mode) {
		dir := t.TempDir()
		build(t, dir, "b/", "b/c/", "b/c/deep:xyz", "a:hello", "b-x", "e/")
		require.NoError(t, os.Chmod(filepath.Join(dir, "a"), 0o751))
		var order []string
		res, err := Walk(context.Background(), dir, Options{ForceFallback: force}, func(it *Item) error {
			order = append(order, it.Path)
			assert.Empty(t, it.SHA256, "hash is filled after the callback")
			return nil
		})
		require.NoError(t, err)
		assert.Equal(t, mode, res.Mode)
		assert.Equal(t, []string{"a", "b", "b/c", "b/c/deep", "b-x", "e"}, order)
		assert.Equal(t, []Entry{
			{Path: "a", Type: File, Mode: 0o751, Size: 5, SHA256: sum("hello")},
			{Path: "b", Type: Dir, Mode: 0o755},
			{Path: "b-x", Type: File, Mode: 0o644, Size: 3, SHA256: sum("b-x")},
			{Path: "b/c", Type: Dir, Mode: 0o755},
			{Path: "b/c/deep", Type: File, Mode: 0o644, Size: 3, SHA256: sum("xyz")},
			{Path: "e", Type: Dir, Mode: 0o755},
		}, res.Manifest.Entries)
		assert.Equal(t, 3, res.Manifest.Files())
		assert.Equal(t, int64(11), res.Manifest.Bytes())
		assert.Empty(t, res.Skipped)
	})
}

func TestWalkPartialReadIsDrained(t *testing.T) {
	dir := t.TempDir()
	big := bytes.Repeat([]byte("0123456789"), 100_000)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "big"), big, 0o644))
	res, err := Walk(context.Background(), dir, Options{}, func(it *Item) error {
		_, err := it.Read(make([]byte, 10))
		return err
	})
	require.NoError(t, err)
	h := sha256.Sum256(big)
	assert.Equal(t, hex.EncodeToString(h[:]), res.Manifest.Entries[0].SHA256)
}

func TestWalkLinks(t *testing.T) {
	secret := t.TempDir()
	build(t, secret, "secret:TOPSECRET")
	for _, tc := range []struct {
		name    string
		spec    []string
		links   LinkPolicy
		paths   []string
		skipped []string
		err     error
	}{
		{"skip at root", []string{"f", "l => " + secret + "/secret"}, SkipLinks, []string{"f"}, []string{"l"}, nil},
		{"skip at depth", []string{"d/", "d/e/", "d/e/l => ../../f", "f"}, SkipLinks, []string{"d", "d/e", "f"}, []string{"d/e/l"}, nil},
		{"skip dir link", []string{"d => " + secret}, SkipLinks, nil, []string{"d"}, nil},
		{"reject", []string{"d/", "d/l => ../f", "f"}, RejectLinks, nil, nil, ErrLink},
		{"follow inside file", []string{"d/", "d/l => ../f", "f"}, FollowLinksWithin, []string{"d", "d/l", "f"}, nil, nil},
		{"follow inside dir", []string{"d/", "d/x", "l => d"}, FollowLinksWithin, []string{"d", "d/x", "l", "l/x"}, nil, nil},
		{"follow outside absolute", []string{"l => " + secret + "/secret"}, FollowLinksWithin, nil, nil, ErrLink},
		{"follow outside relative", []string{"d/", "d/l => ../../../../../../../../" + secret + "/secret"}, FollowLinksWithin, nil, nil, ErrLink},
		{"follow dangling", []string{"l => nowhere", "f"}, FollowLinksWithin, []string{"f"}, []string{"l"}, nil},
		{"follow cycle", []string{"d/", "d/up => .."}, FollowLinksWithin, []string{"d"}, []string{"d/up"}, nil},
		{"follow second link to a dir", []string{"d/", "d/x", "l1 => d", "l2 => d"}, FollowLinksWithin,
			[]string{"d", "d/x", "l1", "l1/x"}, []string{"l2"}, nil},
		{"follow link into a linked dir", []string{"d/", "d/e/", "d/e/x", "a0 => d/e", "a1 => d"}, FollowLinksWithin,
			[]string{"a0", "a0/x", "a1", "d", "d/e", "d/e/x"}, []string{"a1/e"}, nil},
		{"follow link to a dir inside a linked dir", []string{"d/", "d/e/", "d/e/x", "a0 => d", "a1 => d/e"}, FollowLinksWithin,
			[]string{"a0", "a0/e", "a0/e/x", "d", "d/e", "d/e/x"}, []string{"a1"}, nil},
		{"follow loop", []string{"a => b", "b => a", "f"}, FollowLinksWithin, []string{"f"}, []string{"a", "b"}, nil},
		{"follow through a file", []string{"f", "l => f/x"}, FollowLinksWithin, []string{"f"}, []string{"l"}, nil},
		{"follow to the root", []string{"d/", "d/up => ../"}, FollowLinksWithin, []string{"d"}, []string{"d/up"}, nil},
		{"follow dotdot above root", []string{"d/", "d/l => ../../x"}, FollowLinksWithin, nil, nil, ErrLink},
		{"follow file links are not deduplicated", []string{"f", "l1 => f", "l2 => f"}, FollowLinksWithin,
			[]string{"f", "l1", "l2"}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			modes(t, func(t *testing.T, force bool, _ Mode) {
				dir := t.TempDir()
				build(t, dir, tc.spec...)
				res, err := Walk(context.Background(), dir, Options{Links: tc.links, ForceFallback: force}, nil)
				if tc.err != nil {
					require.ErrorIs(t, err, tc.err)
					return
				}
				require.NoError(t, err)
				var got []string
				for _, e := range res.Manifest.Entries {
					got = append(got, e.Path)
				}
				assert.Equal(t, tc.paths, got)
				assert.Equal(t, tc.skipped, res.Skipped)
			})
		})
	}
}

func TestWalkRootChecks(t *testing.T) {
	dir := t.TempDir()
	build(t, dir, "d/", "f", "l => d")
	for _, name := range []string{"f", "l", "missing"} {
		_, err := Walk(context.Background(), filepath.Join(dir, name), Options{}, nil)
		require.ErrorIs(t, err, ErrNotDir, name)
		var pe *fs.PathError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, filepath.Join(dir, name), pe.Path)
	}
}

func TestWalkFIFONeverOpened(t *testing.T) {
	modes(t, func(t *testing.T, force bool, _ Mode) {
		dir := t.TempDir()
		build(t, dir, "d/", "d/pipe|", "f")
		done := make(chan struct{})
		var res *Result
		var err error
		go func() {
			defer close(done)
			res, err = Walk(context.Background(), dir, Options{ForceFallback: force}, nil)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("walk hung on a FIFO")
		}
		require.NoError(t, err)
		assert.Equal(t, []string{"d/pipe"}, res.Skipped)
		assert.Len(t, res.Manifest.Entries, 2)
	})
}

func TestWalkLimits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		lim    Limits
		err    error
		limit  string
		path   string
		inText string
	}{
		{"files", Limits{MaxFiles: 2}, ErrTooManyFiles, "files", "d/c", "MaxFiles"},
		{"bytes", Limits{MaxBytes: 5}, ErrTooManyBytes, "bytes", "d/b", "MaxBytes"},
		{"file bytes", Limits{MaxFileBytes: 3}, ErrFileTooLarge, "file bytes", "d/b", "MaxFileBytes"},
		{"depth", Limits{MaxDepth: 2}, ErrTooDeep, "depth", "d/e/f", "MaxDepth"},
		{"path length", Limits{MaxPathLen: 4}, ErrPathTooLong, "path length", "d/e/f", "MaxPathLen"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			modes(t, func(t *testing.T, force bool, _ Mode) {
				dir := t.TempDir()
				build(t, dir, "d/", "d/a:aaa", "d/b:bbbb", "d/c:c", "d/e/", "d/e/f:f")
				_, err := Walk(context.Background(), dir, Options{Limits: tc.lim, ForceFallback: force}, nil)
				require.ErrorIs(t, err, ErrLimit)
				require.ErrorIs(t, err, tc.err)
				var le *LimitError
				require.ErrorAs(t, err, &le)
				assert.Equal(t, tc.limit, le.Limit)
				assert.Equal(t, tc.path, le.Path)
				assert.Contains(t, err.Error(), "raise Limits."+tc.inText+" or shrink the tree")
				assert.Contains(t, err.Error(), tc.path)

				// A caller whose limits are not these fields says what to do.
				lim := tc.lim
				lim.Advice = "do this instead"
				_, err = Walk(context.Background(), dir, Options{Limits: lim, ForceFallback: force}, nil)
				require.ErrorIs(t, err, tc.err)
				assert.True(t, strings.HasSuffix(err.Error(), "; do this instead"), "%v", err)
				assert.NotContains(t, err.Error(), "raise Limits")
			})
		})
	}
}

func TestWalkDetectsGrowth(t *testing.T) {
	modes(t, func(t *testing.T, force bool, _ Mode) {
		dir := t.TempDir()
		p := filepath.Join(dir, "f")
		require.NoError(t, os.WriteFile(p, []byte("12345"), 0o644))
		_, err := Walk(context.Background(), dir, Options{ForceFallback: force}, func(it *Item) error {
			f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.WriteString("more")
			require.NoError(t, err)
			return f.Close()
		})
		require.ErrorIs(t, err, ErrChanged)
		assert.Contains(t, err.Error(), "f")
	})
}

func TestWalkDetectsShrink(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(p, []byte("1234567890"), 0o644))
	_, err := Walk(context.Background(), dir, Options{}, func(it *Item) error {
		return os.Truncate(p, 2)
	})
	require.ErrorIs(t, err, ErrChanged)
}

func TestWalkCancel(t *testing.T) {
	dir := t.TempDir()
	build(t, dir, "a", "b", "c")
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	_, err := Walk(ctx, dir, Options{}, func(it *Item) error {
		n++
		cancel()
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 1, n)
}

func TestWalkExclude(t *testing.T) {
	dir := t.TempDir()
	build(t, dir, ".git/", ".git/config", "a.log", "keep", "sub/", "sub/x.log")
	res, err := Walk(context.Background(), dir, Options{Exclude: func(rel string, isDir bool) bool {
		return rel == ".git" || strings.HasSuffix(rel, ".log")
	}}, nil)
	require.NoError(t, err)
	var got []string
	for _, e := range res.Manifest.Entries {
		got = append(got, e.Path)
	}
	assert.Equal(t, []string{"keep", "sub"}, got)
	assert.Empty(t, res.Skipped)
}

func TestCopy(t *testing.T) {
	modes(t, func(t *testing.T, force bool, _ Mode) {
		src, outside := t.TempDir(), t.TempDir()
		build(t, outside, "secret:TOPSECRET")
		build(t, src, "run.sh:#!/bin/sh", "d/", "d/e/", "d/e/f:deep", "l => "+outside+"/secret", "d/dl => "+outside, "p|", "h:hard")
		require.NoError(t, os.Chmod(filepath.Join(src, "run.sh"), 0o755))
		require.NoError(t, os.Link(filepath.Join(src, "h"), filepath.Join(src, "d/h2")))
		dst := filepath.Join(t.TempDir(), "copy")
		res, err := Copy(context.Background(), src, dst, Options{ForceFallback: force})
		require.NoError(t, err)
		assert.Equal(t, []string{"d/dl", "l", "p"}, res.Skipped)

		// The copy's own walk agrees with the source walk, and holds no link.
		again, err := Walk(context.Background(), dst, Options{Links: RejectLinks}, nil)
		require.NoError(t, err)
		assert.Equal(t, res.Manifest, again.Manifest)
		fi, err := os.Stat(filepath.Join(dst, "run.sh"))
		require.NoError(t, err)
		assert.Equal(t, fs.FileMode(0o755), fi.Mode().Perm())
		h2, err := os.Lstat(filepath.Join(dst, "d/h2"))
		require.NoError(t, err)
		assert.True(t, h2.Mode().IsRegular())
		assert.Equal(t, uint64(1), uint64(h2.Sys().(*syscall.Stat_t).Nlink), "a hard link is copied as its own file")
		treetest.NoLinkNoSecret(t, dst, "TOPSECRET")
	})
}

func TestCopyExistingDestination(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	_, err := Copy(context.Background(), src, dst, Options{})
	require.ErrorIs(t, err, fs.ErrExist)
	_, err = os.Stat(dst)
	require.NoError(t, err, "an existing destination is left alone")
}

func TestCopyFailureRemovesDestination(t *testing.T) {
	src := t.TempDir()
	build(t, src, "a", "l => a")
	dst := filepath.Join(t.TempDir(), "copy")
	_, err := Copy(context.Background(), src, dst, Options{Links: RejectLinks})
	require.ErrorIs(t, err, ErrLink)
	_, err = os.Lstat(dst)
	require.ErrorIs(t, err, fs.ErrNotExist)
}

// TestCopyRaceLinkSwap swaps a directory inside the source with a link to a
// secret directory while Copy runs in a loop. The secret must never reach a
// copy. The swap is a real race: many copies see the link, many the
// directory, some fail with ErrChanged.
func TestCopyRaceLinkSwap(t *testing.T) {
	modes(t, func(t *testing.T, force bool, _ Mode) {
		src, outside, out := t.TempDir(), t.TempDir(), t.TempDir()
		build(t, outside, "secret:TOPSECRET")
		build(t, src, "keep", "sub/", "sub/file:ordinary")
		stop := make(chan struct{})
		var wg sync.WaitGroup
		defer wg.Wait()
		defer close(stop)
		wg.Add(1)
		go func() {
			defer wg.Done()
			sub, tmp := filepath.Join(src, "sub"), filepath.Join(src, "sub.tmp")
			link := filepath.Join(src, "sub.link")
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				// sub is a directory; swap in a link, then swap back.
				_ = os.Symlink(outside, link)
				_ = os.Rename(sub, tmp)
				_ = os.Rename(link, sub)
				time.Sleep(time.Duration(i%3) * 10 * time.Microsecond)
				_ = os.Rename(sub, link)
				_ = os.Rename(tmp, sub)
			}
		}()
		deadline := time.Now().Add(time.Second)
		n, sawLink, changed := 0, 0, 0
		for ; time.Now().Before(deadline); n++ {
			dst := filepath.Join(out, fmt.Sprint(n))
			res, err := Copy(context.Background(), src, dst, Options{ForceFallback: force})
			if err != nil {
				require.ErrorIs(t, err, ErrChanged)
				changed++
			} else if len(res.Skipped) > 0 {
				sawLink++
			}
		}
		treetest.NoLinkNoSecret(t, out, "TOPSECRET")
		t.Logf("%d copies: %d saw the link, %d failed with ErrChanged", n, sawLink, changed)
	})
}

func TestOpenFile(t *testing.T) {
	for _, tc := range []struct {
		rel string
		err error
	}{
		{"d/f", nil},
		{"f", nil},
		{"../x", ErrEscape},
		{"/etc/passwd", ErrEscape},
		{"d/../f", ErrEscape},
		{".", ErrEscape},
		{"", ErrEscape},
		{"ld/f", ErrLink},
		{"lf", ErrLink},
		{"d/lout", ErrLink},
		{"d", ErrNotRegular},
		{"pipe", ErrNotRegular},
		{"f/x", ErrNotRegular},
		{"missing", fs.ErrNotExist},
	} {
		t.Run(tc.rel, func(t *testing.T) {
			modes(t, func(t *testing.T, force bool, _ Mode) {
				dir, outside := t.TempDir(), t.TempDir()
				build(t, outside, "secret:TOPSECRET")
				build(t, dir, "d/", "d/f:inner", "f:top", "ld => d", "lf => f", "d/lout => "+outside+"/secret", "pipe|")
				f, err := openFile(dir, tc.rel, force)
				if tc.err != nil {
					require.ErrorIs(t, err, tc.err)
					var pe *fs.PathError
					require.ErrorAs(t, err, &pe)
					assert.Equal(t, tc.rel, pe.Path)
					return
				}
				require.NoError(t, err)
				defer f.Close()
				b, err := io.ReadAll(f)
				require.NoError(t, err)
				assert.NotContains(t, string(b), "TOPSECRET")
			})
		})
	}
}

func TestManifestCanonical(t *testing.T) {
	m := Manifest{Entries: []Entry{
		{Path: "a<b>", Type: File, Mode: 0o644, Size: 1, SHA256: sum("x")},
		{Path: "d", Type: Dir, Mode: 0o755},
	}}
	want := `{"entries":[{"path":"a<b>","type":"file","mode":420,"size":1,"sha256":"` + sum("x") + `"},{"path":"d","type":"dir","mode":493,"size":0,"sha256":""}]}`
	assert.Equal(t, want, string(m.Canonical()))
	assert.Equal(t, "sha256:"+sum(want), m.Digest())
	got, err := ParseManifest(m.Canonical())
	require.NoError(t, err)
	assert.Equal(t, m, got)
	empty, err := ParseManifest([]byte(`{"entries":[]}`))
	require.NoError(t, err)
	assert.Equal(t, `{"entries":[]}`, string(empty.Canonical()))
}

func TestParseManifestRejects(t *testing.T) {
	h := sum("x")
	file := func(p string) string {
		return `{"path":"` + p + `","type":"file","mode":420,"size":1,"sha256":"` + h + `"}`
	}
	for name, in := range map[string]string{
		"not json":        `nope`,
		"no entries":      `{}`,
		"null entries":    `{"entries":null}`,
		"unknown field":   `{"entries":[],"x":1}`,
		"wrong case":      `{"Entries":[]}`,
		"duplicate key":   `{"entries":[],"entries":[]}`,
		"space":           `{"entries": []}`,
		"trailing":        `{"entries":[]} {}`,
		"absolute":        `{"entries":[` + file("/etc/passwd") + `]}`,
		"dotdot":          `{"entries":[` + file("../x") + `]}`,
		"unclean":         `{"entries":[` + file("a//b") + `]}`,
		"unsorted":        `{"entries":[` + file("b") + `,` + file("a") + `]}`,
		"duplicate path":  `{"entries":[` + file("a") + `,` + file("a") + `]}`,
		"bad type":        `{"entries":[{"path":"a","type":"link","mode":420,"size":0,"sha256":""}]}`,
		"dir with hash":   `{"entries":[{"path":"a","type":"dir","mode":420,"size":0,"sha256":"` + h + `"}]}`,
		"upper hex":       `{"entries":[{"path":"a","type":"file","mode":420,"size":1,"sha256":"` + strings.ToUpper(h) + `"}]}`,
		"short hex":       `{"entries":[{"path":"a","type":"file","mode":420,"size":1,"sha256":"abc"}]}`,
		"setuid mode":     `{"entries":[{"path":"a","type":"file","mode":8389101,"size":1,"sha256":"` + h + `"}]}`,
		"negative size":   `{"entries":[{"path":"a","type":"file","mode":420,"size":-1,"sha256":"` + h + `"}]}`,
		"invalid utf8":    "{\"entries\":[{\"path\":\"\xff\",\"type\":\"dir\",\"mode\":420,\"size\":0,\"sha256\":\"\"}]}",
		"reordered keys":  `{"entries":[{"type":"file","path":"a","mode":420,"size":1,"sha256":"` + h + `"}]}`,
		"string mode":     `{"entries":[{"path":"a","type":"file","mode":"420","size":1,"sha256":"` + h + `"}]}`,
		"nul in path":     `{"entries":[` + file(`a\u0000b`) + `]}`,
		"escaped letters": `{"entries":[` + file(`\u0061`) + `]}`,
		"leading zero":    `{"entries":[{"path":"a","type":"file","mode":0420,"size":1,"sha256":"` + h + `"}]}`,
		"mode over 32bit": `{"entries":[{"path":"a","type":"file","mode":4294967716,"size":1,"sha256":"` + h + `"}]}`,
		"size over 63bit": `{"entries":[{"path":"a","type":"file","mode":420,"size":9223372036854775808,"sha256":"` + h + `"}]}`,
		"no comma":        `{"entries":[` + file("a") + file("b") + `]}`,
		"trailing comma":  `{"entries":[` + file("a") + `,]}`,
		"cut short":       `{"entries":[` + file("a"),
		"raw U+2028":      `{"entries":[` + file("a\u2028") + `]}`,
		"raw control":     "{\"entries\":[" + file("a\tb") + "]}",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseManifest([]byte(in))
			require.ErrorIs(t, err, ErrBadManifest)
			_, ok := parseCanonical([]byte(in))
			assert.False(t, ok, "the fast path accepted it")
		})
	}
}

func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(`{"entries":[]}`))
	f.Add(Manifest{Entries: []Entry{{Path: "a", Type: Dir, Mode: 0o755}, {Path: "a/b", Type: File, Mode: 0o600, Size: 3, SHA256: sum("abc")}}}.Canonical())
	f.Add(Manifest{Entries: []Entry{{Path: "a", Type: Dir, Mode: 0o755}, {Path: "a/\xff", Type: File, Mode: 0o600, Size: 3, SHA256: sum("abc")}}}.Canonical())
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(data)
		// The fast path accepts what the decoder accepts, as the same manifest, unless a string holds an escape.
		fast, ok := parseCanonical(data)
		slow, slowErr := decodeManifest(data)
		if ok && (slowErr != nil || !reflect.DeepEqual(fast, slow)) || !ok && slowErr == nil && !bytes.Contains(data, []byte(`\\`)) {
			t.Fatalf("parseCanonical %v %+v, decodeManifest %v %+v, for %q", ok, fast.Entries, slowErr, slow.Entries, data)
		}
		if err != nil {
			if !errors.Is(err, ErrBadManifest) {
				t.Fatalf("error does not wrap ErrBadManifest: %v", err)
			}
			return
		}
		// Whatever parses is canonical and valid.
		if !bytes.Equal(m.Canonical(), data) {
			t.Fatalf("accepted non-canonical input %q", data)
		}
		for _, e := range m.Entries {
			if !ValidPath(e.Path) {
				t.Fatalf("accepted invalid path %q", e.Path)
			}
		}
	})
}

// writerBlocked starts a writer opening the FIFO at p, which blocks until
// someone opens it for reading. It returns a function that reports whether
// the writer is still blocked (nobody opened the FIFO) and then releases it.
func writerBlocked(t *testing.T, p string) func() bool {
	t.Helper()
	opened := make(chan struct{})
	go func() {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err == nil {
			close(opened)
			f.Close()
		}
	}()
	return func() bool {
		var blocked bool
		select {
		case <-opened:
			blocked = false
		case <-time.After(200 * time.Millisecond):
			blocked = true
			r, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0) // release the writer
			require.NoError(t, err)
			<-opened
			r.Close()
		}
		return blocked
	}
}

func TestWalkNeverOpensAFIFO(t *testing.T) {
	for _, links := range []LinkPolicy{SkipLinks, FollowLinksWithin} {
		t.Run(links.String(), func(t *testing.T) {
			modes(t, func(t *testing.T, force bool, _ Mode) {
				dir := t.TempDir()
				build(t, dir, "pipe|", "l => pipe")
				check := writerBlocked(t, filepath.Join(dir, "pipe"))
				res, err := Walk(context.Background(), dir, Options{Links: links, ForceFallback: force}, nil)
				require.NoError(t, err)
				assert.Equal(t, []string{"l", "pipe"}, res.Skipped)
				assert.True(t, check(), "the walk opened the FIFO")
			})
		})
	}
}

func TestWalkDetectsRewriteInPlace(t *testing.T) {
	modes(t, func(t *testing.T, force bool, _ Mode) {
		dir := t.TempDir()
		p := filepath.Join(dir, "f")
		require.NoError(t, os.WriteFile(p, bytes.Repeat([]byte("A"), 1<<20), 0o644))
		fi, err := os.Stat(p)
		require.NoError(t, err)
		_, err = Walk(context.Background(), dir, Options{ForceFallback: force}, func(it *Item) error {
			if _, err := io.ReadFull(it, make([]byte, 1<<19)); err != nil {
				return err
			}
			// Same size, same modification time, other bytes.
			require.NoError(t, os.WriteFile(p, bytes.Repeat([]byte("B"), 1<<20), 0o644))
			return os.Chtimes(p, fi.ModTime(), fi.ModTime())
		})
		require.ErrorIs(t, err, ErrChanged)
	})
}

func TestWalkLinkResolution(t *testing.T) {
	chain := []string{"f:target"}
	for i := range 12 { // 12 links in one resolution: more than os.Root's own limit of 8
		next := "f"
		if i < 11 {
			next = fmt.Sprintf("c%02d", i+1)
		}
		chain = append(chain, fmt.Sprintf("c%02d => %s", i, next))
	}
	loop := []string{"f"}
	for i := range maxLinkHops + 1 {
		loop = append(loop, fmt.Sprintf("h%02d => h%02d", i, i+1))
	}
	loop = append(loop, fmt.Sprintf("h%02d => f", maxLinkHops+1))
	for _, tc := range []struct {
		name    string
		spec    []string
		want    map[string]string // path => content
		skipped []string
	}{
		// The kernel resolves x first, then "..": p/q/.. is p, so l is p/y
		// (a lexical join would give y, which does not exist).
		{"dotdot after a link", []string{"p/", "p/q/", "p/y:in p", "x => p/q", "l => x/../y"},
			map[string]string{"l": "in p", "p/y": "in p"}, nil},
		{"link to a link", []string{"f:F", "l1 => f", "l2 => l1"}, map[string]string{"f": "F", "l1": "F", "l2": "F"}, nil},
		{"long chain", chain, map[string]string{"f": "target", "c00": "target", "c11": "target"}, nil},
		{"too many hops", loop, map[string]string{"f": "f", "h41": "f", "h02": "f"}, []string{"h00", "h01"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			modes(t, func(t *testing.T, force bool, _ Mode) {
				dir := t.TempDir()
				build(t, dir, tc.spec...)
				res, err := Walk(context.Background(), dir, Options{Links: FollowLinksWithin, ForceFallback: force}, nil)
				require.NoError(t, err)
				got := map[string]string{}
				for _, e := range res.Manifest.Entries {
					got[e.Path] = e.SHA256
				}
				for p, content := range tc.want {
					assert.Equal(t, sum(content), got[p], p)
				}
				assert.Equal(t, tc.skipped, res.Skipped)
			})
		})
	}
}

// linkDAG builds n directories d00..d(n-1), each but the last holding two
// links, a and b, to the next: 2^(n-1) link paths lead to the last one.
func linkDAG(t *testing.T, dir string, n int) {
	t.Helper()
	for i := range n {
		build(t, dir, fmt.Sprintf("d%02d/", i), fmt.Sprintf("d%02d/f", i))
		if i > 0 {
			build(t, dir, fmt.Sprintf("d%02d/a => ../d%02d", i-1, i), fmt.Sprintf("d%02d/b => ../d%02d", i-1, i))
		}
	}
}

func TestWalkLinkDAGIsLinear(t *testing.T) {
	const n = 22 // 42 links, 2^21 link paths to d21
	modes(t, func(t *testing.T, force bool, _ Mode) {
		src := t.TempDir()
		linkDAG(t, src, n)
		opts := Options{Links: FollowLinksWithin, ForceFallback: force}

		start := time.Now()
		res, err := Walk(context.Background(), src, opts, nil)
		require.NoError(t, err)
		again, err := Copy(context.Background(), src, filepath.Join(t.TempDir(), "copy"), opts)
		require.NoError(t, err)
		assert.Less(t, time.Since(start), 2*time.Second, "a walk and a copy of a %d-directory DAG (this took 75 s before the revisit rule)", n)

		// Every directory once at its real place, and once more through the
		// first link that reaches it: d00/a, d00/a/a, … (d00 has no link to it).
		var wantPaths, wantSkipped []string
		chain := "d00"
		for i := range n {
			d := fmt.Sprintf("d%02d", i)
			wantPaths = append(wantPaths, d, d+"/f")
			if i > 0 {
				chain += "/a"
				wantPaths = append(wantPaths, chain, chain+"/f")
				wantSkipped = append(wantSkipped, chain[:len(chain)-1]+"b") // the later link beside the one followed
				if i < n-1 {
					wantSkipped = append(wantSkipped, d+"/a", d+"/b") // d's own links lead where a link went already
				}
			}
		}
		slices.Sort(wantPaths)
		slices.Sort(wantSkipped)
		var got []string
		for _, e := range res.Manifest.Entries {
			got = append(got, e.Path)
		}
		assert.Equal(t, wantPaths, got)
		assert.Equal(t, wantSkipped, res.Skipped)
		assert.Equal(t, res.Manifest, again.Manifest, "deterministic: Walk and Copy agree")
		assert.Equal(t, res.Skipped, again.Skipped)
		third, err := Walk(context.Background(), src, opts, nil)
		require.NoError(t, err)
		assert.Equal(t, res.Manifest.Canonical(), third.Manifest.Canonical())
	})
}

func TestWalkDirectoriesCountAgainstMaxFiles(t *testing.T) {
	modes(t, func(t *testing.T, force bool, _ Mode) {
		dir := t.TempDir()
		build(t, dir, "a/", "b/", "c/", "d/")
		_, err := Walk(context.Background(), dir, Options{Limits: Limits{MaxFiles: 3}, ForceFallback: force}, nil)
		require.ErrorIs(t, err, ErrTooManyFiles)
		var le *LimitError
		require.ErrorAs(t, err, &le)
		assert.Equal(t, "directories", le.Limit)
		assert.Equal(t, "d", le.Path)
	})
}

func TestRemoveAllReadOnlyTree(t *testing.T) {
	src := t.TempDir()
	build(t, src, "d/", "d/e/", "d/e/f")
	require.NoError(t, os.Chmod(filepath.Join(src, "d/e"), 0o555))
	require.NoError(t, os.Chmod(filepath.Join(src, "d"), 0o555))
	t.Cleanup(func() {
		os.Chmod(filepath.Join(src, "d"), 0o755)
		os.Chmod(filepath.Join(src, "d/e"), 0o755)
	})
	dst := filepath.Join(t.TempDir(), "copy")
	res, err := Copy(context.Background(), src, dst, Options{})
	require.NoError(t, err)
	fi, err := os.Stat(filepath.Join(dst, "d"))
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o555), fi.Mode().Perm(), "the copy keeps the read-only mode")
	rootFI, err := os.Stat(src)
	require.NoError(t, err)
	assert.Equal(t, rootFI.Mode().Perm(), res.RootMode)
	// As root the modes never stop a removal; elsewhere this is the case
	// RemoveAll exists for.
	require.NoError(t, RemoveAll(dst))
	_, err = os.Lstat(dst)
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.NoError(t, RemoveAll(dst), "removing what is gone is not an error")
}

// TestOpenWorkTreeFileBackslash: a backslash is one character of a work
// tree's file name here: OpenWorkTreeFile opens such a file (and refuses
// a link so named, as OpenFile would), where OpenFile refuses the name.
func TestOpenWorkTreeFileBackslash(t *testing.T) {
	dir := t.TempDir()
	build(t, dir, `d\x/`, `d\x/f\y:inner`, `a\b:top`, `l\k => a\b`)
	_, err := OpenFile(dir, `a\b`)
	require.ErrorIs(t, err, ErrEscape)
	for rel, want := range map[string]string{`a\b`: "top", `d\x/f\y`: "inner"} {
		f, err := OpenWorkTreeFile(dir, rel)
		require.NoError(t, err, rel)
		b, err := io.ReadAll(f)
		require.NoError(t, f.Close())
		require.NoError(t, err)
		assert.Equal(t, want, string(b), rel)
	}
	_, err = OpenWorkTreeFile(dir, `l\k`)
	require.ErrorIs(t, err, ErrLink)
	_, err = OpenWorkTreeFile(dir, `d\x/../a\b`)
	require.ErrorIs(t, err, ErrEscape)
}
