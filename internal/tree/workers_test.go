package tree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// workerCounts are the Options.Workers every schedule test compares.
var workerCounts = []int{1, 2, 3, 8}

// scheduleTree builds a tree that exercises every path of the walk: nested
// and read-only directories, modes, empty, small, chunked and pipelined
// (large) files, links of every kind, a FIFO, excluded entries.
func scheduleTree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	build(t, dir, "a/", "a/b/", "a/b/c/", "ro/", "x/", "x/y/", "p|", "skip.log", "x/skip.log")
	for i := range 60 {
		d := []string{"", "a/", "a/b/", "a/b/c/", "x/", "x/y/"}[i%6]
		content := strings.Repeat(fmt.Sprint(i), i*37)
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("%sf%02d", d, i)), []byte(content), fs.FileMode(0o600|(i%8)<<3|(i%3)*0o104)))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a/big"), bytes.Repeat([]byte("0123456789abcdef"), (3<<20)/16+7), 0o640))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a/mid"), bytes.Repeat([]byte("m"), 700<<10), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ro/f"), []byte("read-only"), 0o444))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "empty"), nil, 0o644))
	build(t, dir, "la => a", "lf => a/f01", "x/up => ../a/b", "dangling => nowhere", "loop => loop", "lp => p")
	require.NoError(t, os.Chmod(filepath.Join(dir, "ro"), 0o555))
	require.NoError(t, os.Chmod(filepath.Join(dir, "x/y"), 0o750))
	t.Cleanup(func() { os.Chmod(filepath.Join(dir, "ro"), 0o755) })
	return dir
}

func excludeLogs(rel string, isDir bool) bool { return strings.HasSuffix(rel, ".log") }

func TestWorkersDoNotChangeTheResult(t *testing.T) {
	src := scheduleTree(t)
	for _, links := range []LinkPolicy{SkipLinks, FollowLinksWithin} {
		t.Run(links.String(), func(t *testing.T) {
			modes(t, func(t *testing.T, force bool, _ Mode) {
				opts := func(n int) Options {
					return Options{Links: links, ForceFallback: force, Exclude: excludeLogs, Workers: n}
				}
				want, err := Walk(context.Background(), src, opts(1), nil)
				require.NoError(t, err)
				withFn, err := Walk(context.Background(), src, opts(8), func(*Item) error { return nil })
				require.NoError(t, err)
				assert.Equal(t, want, withFn, "a Walk with a callback")
				canon := want.Manifest.Canonical()
				for _, n := range workerCounts {
					got, err := Walk(context.Background(), src, opts(n), nil)
					require.NoError(t, err)
					assert.Equal(t, want, got, "Walk, %d workers", n)

					dst := filepath.Join(t.TempDir(), "copy")
					cp, err := Copy(context.Background(), src, dst, opts(n))
					require.NoError(t, err)
					assert.Equal(t, want, cp, "Copy, %d workers", n)
					assert.Equal(t, canon, cp.Manifest.Canonical())
					// The copy on disk is what the manifest says, modes included.
					back, err := Walk(context.Background(), dst, Options{Links: RejectLinks, Workers: 1}, nil)
					require.NoError(t, err)
					assert.Equal(t, want.Manifest, back.Manifest, "the copy's own walk, %d workers", n)
					fi, err := os.Stat(dst)
					require.NoError(t, err)
					assert.Equal(t, want.RootMode, fi.Mode().Perm())
					require.NoError(t, RemoveAll(dst))
				}
			})
		})
	}
}

// TestWorkersReportTheFirstError: whatever the schedule, a failing walk
// reports the entry a single worker would have stopped at.
func TestWorkersReportTheFirstError(t *testing.T) {
	src := scheduleTree(t)
	for _, lim := range []Limits{{MaxFiles: 30}, {MaxBytes: 40 << 10}, {MaxFileBytes: 1 << 20}, {MaxDepth: 3}} {
		t.Run(fmt.Sprintf("%+v", lim), func(t *testing.T) {
			_, want := Copy(context.Background(), src, filepath.Join(t.TempDir(), "c"), Options{Limits: lim, Workers: 1})
			var wantLE *LimitError
			require.ErrorAs(t, want, &wantLE)
			for _, n := range workerCounts {
				dst := filepath.Join(t.TempDir(), "c")
				_, err := Copy(context.Background(), src, dst, Options{Limits: lim, Workers: n})
				var le *LimitError
				require.ErrorAs(t, err, &le)
				assert.Equal(t, *wantLE, *le, "%d workers", n)
				_, err = os.Lstat(dst)
				assert.ErrorIs(t, err, fs.ErrNotExist, "a failed copy is removed")
				_, err = Walk(context.Background(), src, Options{Limits: lim, Workers: n}, nil)
				require.ErrorAs(t, err, &le)
				assert.Equal(t, *wantLE, *le, "Walk, %d workers", n)
			}
		})
	}
}

// TestCopyModesAtCreation: under any umask, the copy has the source's
// modes (created with them where the umask allows, chmod'ed otherwise).
func TestCopyModesAtCreation(t *testing.T) {
	src := t.TempDir()
	perms := []fs.FileMode{0o777, 0o775, 0o755, 0o700, 0o644, 0o664, 0o600, 0o444, 0o400, 0o000, 0o070, 0o711}
	for i, p := range perms {
		f := filepath.Join(src, fmt.Sprintf("f%02d", i))
		d := filepath.Join(src, fmt.Sprintf("d%02d", i))
		require.NoError(t, os.WriteFile(f, []byte("x"), 0o600))
		require.NoError(t, os.Chmod(f, p))
		require.NoError(t, os.Mkdir(d, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(d, "in"), []byte("y"), 0o600))
		require.NoError(t, os.Chmod(d, p|0o500)) // readable, so the walk can enter it
	}
	t.Cleanup(func() {
		filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error { os.Chmod(p, 0o755); return nil })
	})
	want, err := Walk(context.Background(), src, Options{}, nil)
	require.NoError(t, err)
	for _, mask := range []int{0o022, 0o077, 0o000, 0o002} {
		t.Run(fmt.Sprintf("umask %03o", mask), func(t *testing.T) {
			old := syscall.Umask(mask) // the tests of this package do not run in parallel
			defer syscall.Umask(old)
			dst := filepath.Join(t.TempDir(), "copy")
			t.Cleanup(func() { RemoveAll(dst) })
			_, err = Copy(context.Background(), src, dst, Options{})
			require.NoError(t, err)
			got, err := Walk(context.Background(), dst, Options{}, nil)
			require.NoError(t, err)
			assert.Equal(t, want.Manifest, got.Manifest)
		})
	}
}

// TestCopyIntoHooks: Done reports every file on the calling goroutine (the
// race detector sees its unguarded slice), and a carried file is not
// written by the copier but still hashed from the source.
func TestCopyIntoHooks(t *testing.T) {
	src := scheduleTree(t)
	want, err := Walk(context.Background(), src, Options{}, nil)
	require.NoError(t, err)
	dstDir := filepath.Join(t.TempDir(), "copy")
	require.NoError(t, os.Mkdir(dstDir, 0o700))
	t.Cleanup(func() { RemoveAll(dstDir) })
	dst, err := os.Open(dstDir)
	require.NoError(t, err)
	defer dst.Close()
	var done []string // no lock: Done runs on this goroutine
	me := goroutineID()
	res, err := CopyInto(context.Background(), src, dst, Options{Workers: 4}, CopyHooks{
		Done: func(e Entry) {
			assert.Equal(t, me, goroutineID(), "Done runs on the goroutine that called CopyInto")
			done = append(done, e.Path)
		},
		Carry: func(e Entry, d Dest) (bool, error) {
			if e.Path != "a/f01" {
				return false, nil
			}
			f, err := d.Create()
			if err != nil {
				return false, err
			}
			_, err = f.WriteString("carried")
			return true, errors.Join(err, f.Close())
		},
	})
	require.NoError(t, err)
	assert.Equal(t, want.Manifest, res.Manifest, "the result describes the source")
	var files []string
	for _, e := range want.Manifest.Entries {
		if e.Type == File {
			files = append(files, e.Path)
		}
	}
	slices.Sort(done)
	assert.Equal(t, files, done)
	b, err := os.ReadFile(filepath.Join(dstDir, "a/f01"))
	require.NoError(t, err)
	assert.Equal(t, "carried", string(b))
}

// goroutineID reads the current goroutine's number from its stack header
// ("goroutine 7 [running]:"), for the test above only.
func goroutineID() string {
	var b [64]byte
	n := runtime.Stack(b[:], false)
	id, _, _ := strings.Cut(strings.TrimPrefix(string(b[:n]), "goroutine "), " ")
	return id
}
