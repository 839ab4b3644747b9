package stage_test

// Adversarial tests of the Bridge's inline publish (the send command that
// also publishes, where the sandbox's tar is GNU tar), written from the
// public API and the package docs only. Every Runner here wraps
// sandbox.Local and breaks something: the caller's context, the stdin
// stream, the stdout stream, the Runner's own return.

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
)

// The lines the send command prints, learnt by watching it.
const (
	iaExtracted = "airlock-extracted\n"
	iaPublished = "airlock-published\n"
	iaReady     = "airlock-ready\n"
	iaCarried   = "airlock-carried\n"
)

// iaIsSend recognises the send command: it takes a stream on stdin and
// extracts it with tar.
func iaIsSend(c sandbox.Command) bool { return c.Stdin != nil && strings.Contains(c.Script, "tar -x") }

// iaRunner passes every command to next, except the send commands, which
// go through send (when set). It counts commands.
type iaRunner struct {
	next  sandbox.Runner
	send  func(ctx context.Context, cmd sandbox.Command, next sandbox.Runner) error
	all   atomic.Int32
	sends atomic.Int32
	off   atomic.Bool // the attack is over: every command runs unchanged
}

func (a *iaRunner) Run(ctx context.Context, cmd sandbox.Command) error {
	a.all.Add(1)
	if iaIsSend(cmd) {
		a.sends.Add(1)
		if a.send != nil && !a.off.Load() {
			return a.send(ctx, cmd, a.next)
		}
	}
	return a.next.Run(ctx, cmd)
}

// iaWatch is a stdout that calls at once when what passed through it
// contains text (before forwarding the write that completed it).
type iaWatch struct {
	w    io.Writer
	text string
	at   func()
	mu   sync.Mutex
	seen bytes.Buffer
	done bool
}

func (a *iaWatch) Write(p []byte) (int, error) {
	a.mu.Lock()
	if !a.done {
		a.seen.Write(p)
		if strings.Contains(a.seen.String(), a.text) {
			a.done = true
			a.mu.Unlock()
			a.at()
			return a.fwd(p)
		}
	}
	a.mu.Unlock()
	return a.fwd(p)
}

func (a *iaWatch) fwd(p []byte) (int, error) {
	if a.w == nil {
		return len(p), nil
	}
	return a.w.Write(p)
}

// iaCountReader calls at once after n bytes were read through it.
type iaCountReader struct {
	r    io.Reader
	n    int64
	got  int64
	at   func()
	once sync.Once
}

func (c *iaCountReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.got += int64(k)
	if c.got >= c.n {
		c.once.Do(c.at)
	}
	return k, err
}

// iaCutReader ends (EOF) after n bytes.
type iaCutReader struct {
	r io.Reader
	n int64
}

func (c *iaCutReader) Read(p []byte) (int, error) {
	if c.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > c.n {
		p = p[:c.n]
	}
	k, err := c.r.Read(p)
	c.n -= int64(k)
	return k, err
}

// iaFixture is a sandbox directory, a source and a root holding the
// source's first version, staged through a plain Bridge; then the source
// changes (a file changes, one is added, one removed, a mode changes).
type iaFixture struct {
	dir, src, root string
	oldSrc         string             // a second source holding the old version
	old            map[string]iaEntry // the staged copy before the attack
}

type iaEntry struct {
	mode fs.FileMode
	data string
}

func iaSetup(t *testing.T) *iaFixture {
	t.Helper()
	f := &iaFixture{dir: t.TempDir(), src: t.TempDir()}
	f.root = filepath.Join(f.dir, "rt")
	build(t, f.src, "a=old", "b=same", "sub/c=gone", "sub/d=keep", "exec.sh=#!/bin/sh\n")
	require.NoError(t, os.Chmod(filepath.Join(f.src, "exec.sh"), 0o755))
	_, err := stage.Stage(t.Context(), stage.NewBridge(sandbox.Local(f.dir)), f.root, f.assets())
	require.NoError(t, err)
	f.old = iaSnap(t, f.src)
	iaSame(t, f.old, iaSnap(t, f.copyPath()))
	f.oldSrc = t.TempDir()
	build(t, f.oldSrc, "a=old", "b=same", "sub/c=gone", "sub/d=keep", "exec.sh=#!/bin/sh\n")
	require.NoError(t, os.Chmod(filepath.Join(f.oldSrc, "exec.sh"), 0o755))
	iaSame(t, f.old, iaSnap(t, f.oldSrc))
	build(t, f.src, "a=new content", "e/f=added")
	require.NoError(t, os.Remove(filepath.Join(f.src, "sub", "c")))
	require.NoError(t, os.Chmod(filepath.Join(f.src, "b"), 0o600))
	return f
}

func (f *iaFixture) assets() []stage.Asset { return []stage.Asset{{Name: "x", Source: f.src}} }
func (f *iaFixture) copyPath() string      { return filepath.Join(f.root, "x") }

// iaSnap reads a tree: every entry's relative path, mode and content.
func iaSnap(t testing.TB, dir string) map[string]iaEntry {
	t.Helper()
	m := map[string]iaEntry{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		e := iaEntry{mode: info.Mode()}
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			e.data = string(b)
		}
		m[filepath.ToSlash(rel)] = e
		return nil
	}))
	return m
}

func iaSame(t testing.TB, want, got map[string]iaEntry) {
	t.Helper()
	require.Equal(t, len(want), len(got), "entries: want %v got %v", iaKeys(want), iaKeys(got))
	for k, w := range want {
		g, ok := got[k]
		require.True(t, ok, "%s missing", k)
		// Directory modes: only the permission bits that matter for files
		// are compared for regular files; directories must be directories.
		if w.mode.IsDir() {
			require.True(t, g.mode.IsDir(), "%s: %v", k, g.mode)
			continue
		}
		require.Equal(t, w.mode, g.mode, "%s mode", k)
		require.Equal(t, w.data, g.data, "%s content", k)
	}
}

func iaKeys(m map[string]iaEntry) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// iaIsOldOrNew says which complete copy the sandbox holds: "old", "new"
// or fails the test (a partial or mixed copy, or none).
func (f *iaFixture) oldOrNew(t *testing.T) string {
	t.Helper()
	got := iaSnap(t, f.copyPath())
	if iaEqual(f.old, got) {
		return "old"
	}
	if iaEqual(iaSnap(t, f.src), got) {
		return "new"
	}
	t.Fatalf("the sandbox copy is neither the old nor the new source: %v", got)
	return ""
}

func iaEqual(a, b map[string]iaEntry) bool {
	if len(a) != len(b) {
		return false
	}
	for k, x := range a {
		y, ok := b[k]
		if !ok || x.mode.IsDir() != y.mode.IsDir() || (!x.mode.IsDir() && x != y) {
			return false
		}
	}
	return true
}

// retry stages again through an honest Bridge, without WithVerify (the
// stored manifest must describe the copy): it must succeed, leave the
// exact source and no temporary directory (the sweep takes what the attack
// left).
func (f *iaFixture) retry(t *testing.T) {
	t.Helper()
	_, err := stage.Stage(t.Context(), stage.NewBridge(sandbox.Local(f.dir)), f.root, f.assets())
	require.NoError(t, err)
	iaSame(t, iaSnap(t, f.src), iaSnap(t, f.copyPath()))
	iaNoTemp(t, f.root)
}

// retrySame turns the attack off and stages again through the same
// Bridge (whatever it learnt from the attack): it must publish the exact
// source.
func (f *iaFixture) retrySame(t *testing.T, b *stage.Bridge, r *iaRunner) {
	t.Helper()
	r.off.Store(true)
	_, err := stage.Stage(t.Context(), b, f.root, f.assets())
	require.NoError(t, err)
	iaSame(t, iaSnap(t, f.src), iaSnap(t, f.copyPath()))
	iaNoTemp(t, f.root)
}

// iaNoTemp fails when anything but the copies and their own files are
// under root.
func iaNoTemp(t testing.TB, root string) {
	t.Helper()
	ents, err := os.ReadDir(root)
	require.NoError(t, err)
	for _, e := range ents {
		assert.False(t, strings.HasPrefix(e.Name(), ".airlock-tmp"), "left behind: %s", e.Name())
	}
}

// TestInlAtkCancelAtEachLine cancels the caller's context when the send
// command prints each of its report lines (and at its start, before it
// prints anything). Before the publish line is written, nothing may be
// published; after, the copy is new or old, never partial; a nil error
// only with the new copy; a retry succeeds.
func TestInlAtkCancelAtEachLine(t *testing.T) {
	for _, line := range []string{"", iaReady, iaCarried, iaExtracted, iaPublished} {
		t.Run(strings.TrimSpace(line+"start"), func(t *testing.T) {
			f := iaSetup(t)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			r := &iaRunner{next: sandbox.Local(f.dir), send: func(ctx context.Context, cmd sandbox.Command, next sandbox.Runner) error {
				if line == "" {
					cancel()
				} else {
					cmd.Stdout = &iaWatch{w: cmd.Stdout, text: line, at: cancel}
				}
				return next.Run(ctx, cmd)
			}}
			start := time.Now()
			b := stage.NewBridge(r, stage.WithControlTimeout(3*time.Second))
			_, err := stage.Stage(ctx, b, f.root, f.assets())
			assert.Less(t, time.Since(start), 5*time.Second)
			got := f.oldOrNew(t)
			if err == nil {
				assert.Equal(t, "new", got, "a nil error with the old copy")
			} else {
				assert.ErrorIs(t, err, context.Canceled)
				assert.False(t, sandbox.Retryable(err) && !errors.Is(err, stage.ErrTransport), "%v", err)
			}
			if line != iaPublished && line != "" {
				assert.Equal(t, "old", got, "cancelled before the publish line: nothing may be published")
			}
			f.retrySame(t, b, r)
		})
	}
}

// TestInlAtkCancelMidStream cancels after a number of bytes of the stream
// were read by the command, over a large tree (2,000 files) and a 50 MB
// file: the old copy stays, the error is the cancellation.
func TestInlAtkCancelMidStream(t *testing.T) {
	f := iaSetup(t)
	for i := range 2000 {
		build(t, f.src, fmt.Sprintf("many/%02d/f%04d=%d", i%37, i, i))
	}
	big := make([]byte, 50<<20)
	_, _ = rand.Read(big)
	require.NoError(t, os.WriteFile(filepath.Join(f.src, "big.bin"), big, 0o644))
	for _, at := range []int64{1, 512, 300 << 10, 25 << 20} {
		t.Run(fmt.Sprint(at), func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			r := &iaRunner{next: sandbox.Local(f.dir), send: func(ctx context.Context, cmd sandbox.Command, next sandbox.Runner) error {
				cmd.Stdin = &iaCountReader{r: cmd.Stdin, n: at, at: cancel}
				return next.Run(ctx, cmd)
			}}
			_, err := stage.Stage(ctx, stage.NewBridge(r, stage.WithControlTimeout(3*time.Second)), f.root, f.assets())
			require.Error(t, err)
			assert.ErrorIs(t, err, context.Canceled)
			assert.Equal(t, "old", f.oldOrNew(t))
		})
	}
	f.retry(t)
}

// TestInlAtkStdinCut ends the command's stdin after n bytes (a connection
// that loses the rest of the stream, the padding, or only the publish
// line). Nothing may be published; the stage fails as a transport
// failure; a retry succeeds.
func TestInlAtkStdinCut(t *testing.T) {
	// Measure the stream first.
	f0 := iaSetup(t)
	var total atomic.Int64
	r0 := &iaRunner{next: sandbox.Local(f0.dir), send: func(ctx context.Context, cmd sandbox.Command, next sandbox.Runner) error {
		cr := &iaCountReader{r: cmd.Stdin, n: 1 << 62, at: func() {}}
		cmd.Stdin = cr
		err := next.Run(ctx, cmd)
		total.Store(cr.got)
		return err
	}}
	_, err := stage.Stage(t.Context(), stage.NewBridge(r0), f0.root, f0.assets())
	require.NoError(t, err)
	n := total.Load()
	pub := int64(len("airlock-publish\n"))
	require.Greater(t, n, pub+1024)
	for _, cut := range []int64{0, 100, 512, 1024, n - pub - 1024, n - pub - 512, n - pub - 1, n - pub, n - 1} {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			f := iaSetup(t)
			r := &iaRunner{next: sandbox.Local(f.dir), send: func(ctx context.Context, cmd sandbox.Command, next sandbox.Runner) error {
				cmd.Stdin = &iaCutReader{r: cmd.Stdin, n: cut}
				return next.Run(ctx, cmd)
			}}
			start := time.Now()
			b := stage.NewBridge(r, stage.WithControlTimeout(2*time.Second))
			_, err := stage.Stage(t.Context(), b, f.root, f.assets())
			assert.Less(t, time.Since(start), 6*time.Second)
			got := f.oldOrNew(t)
			if err == nil {
				assert.Equal(t, "new", got)
			} else {
				assert.Equal(t, "old", got, "%v", err)
			}
			require.Error(t, err, "the command never got the whole stream and publish line")
			f.retrySame(t, b, r)
		})
	}
}

// TestInlAtkRunnerErrorsAfterRun: the command ran to its end (published), but
// the Runner reports a transport failure. The stage may succeed (it saw the
// command report the publish) only with the new copy; otherwise it fails
// retryably; a retry succeeds.
func TestInlAtkRunnerErrorsAfterRun(t *testing.T) {
	f := iaSetup(t)
	r := &iaRunner{next: sandbox.Local(f.dir), send: func(ctx context.Context, cmd sandbox.Command, next sandbox.Runner) error {
		_ = next.Run(ctx, cmd)
		return fmt.Errorf("connection reset after the command: %w", sandbox.ErrTransport)
	}}
	_, err := stage.Stage(t.Context(), stage.NewBridge(r, stage.WithControlTimeout(2*time.Second)), f.root, f.assets())
	got := f.oldOrNew(t)
	if err == nil {
		// The host saw the command report the publish: a truthful success.
		assert.Equal(t, "new", got)
	} else {
		assert.ErrorIs(t, err, stage.ErrTransport)
		assert.True(t, sandbox.Retryable(err))
	}
	f.retry(t)
}

// TestInlAtkRunTwice: a Runner that runs the send command twice (a provider
// retrying on its own): first with an empty stdin, then with the real one;
// and first with the real one, then again with what is left (nothing).
func TestInlAtkRunTwice(t *testing.T) {
	for _, order := range []string{"empty-then-real", "real-then-empty"} {
		t.Run(order, func(t *testing.T) {
			f := iaSetup(t)
			r := &iaRunner{next: sandbox.Local(f.dir), send: func(ctx context.Context, cmd sandbox.Command, next sandbox.Runner) error {
				empty := cmd
				empty.Stdin = strings.NewReader("")
				if order == "empty-then-real" {
					_ = next.Run(ctx, empty)
					return next.Run(ctx, cmd)
				}
				_ = next.Run(ctx, cmd)
				return next.Run(ctx, cmd) // stdin already drained
			}}
			start := time.Now()
			_, err := stage.Stage(t.Context(), stage.NewBridge(r, stage.WithControlTimeout(2*time.Second)), f.root, f.assets())
			assert.Less(t, time.Since(start), 8*time.Second)
			got := f.oldOrNew(t)
			if err == nil {
				assert.Equal(t, "new", got)
			}
			t.Logf("%s: err=%v copy=%s", order, err, got)
			f.retry(t)
		})
	}
}

// TestInlAtkBufferedStdin: a Runner that reads the whole stdin before it
// starts the command (an exec API taking the input as one body). The send
// command must report its temporary directory within the control deadline
// (a documented control step), which such a Runner cannot do: the stage
// fails as a transport failure within about the deadline, and the command
// that the Runner starts later, with a stream the host cut, publishes
// nothing; an honest Runner then publishes.
func TestInlAtkBufferedStdin(t *testing.T) {
	f := iaSetup(t)
	var ran sync.WaitGroup
	r := &iaRunner{next: sandbox.Local(f.dir), send: func(ctx context.Context, cmd sandbox.Command, next sandbox.Runner) error {
		ran.Add(1)
		defer ran.Done()
		b, err := io.ReadAll(cmd.Stdin)
		if err != nil {
			return fmt.Errorf("%w: %v", sandbox.ErrTransport, err)
		}
		cmd.Stdin = bytes.NewReader(b)
		return next.Run(context.WithoutCancel(ctx), cmd) // the late command runs to its end
	}}
	iaBufferedCase(t, f, r, &ran)
}

// TestInlAtkBufferedStdout: a Runner that hands the command's stdout over
// only when it ended (an exec API returning the output as one body): as
// above, the stage fails within about the control deadline and nothing is
// published by the late command.
func TestInlAtkBufferedStdout(t *testing.T) {
	f := iaSetup(t)
	var ran sync.WaitGroup
	r := &iaRunner{next: iaBufferOut{sandbox.Local(f.dir)}, send: func(ctx context.Context, cmd sandbox.Command, next sandbox.Runner) error {
		ran.Add(1)
		defer ran.Done()
		return next.Run(ctx, cmd)
	}}
	iaBufferedCase(t, f, r, &ran)
}

func iaBufferedCase(t *testing.T, f *iaFixture, r *iaRunner, ran *sync.WaitGroup) {
	b := stage.NewBridge(r, stage.WithControlTimeout(1*time.Second))
	start := time.Now()
	_, err := stage.Stage(t.Context(), b, f.root, f.assets())
	assert.Less(t, time.Since(start), 4*time.Second)
	ran.Wait() // the Runner's command has ended
	got := f.oldOrNew(t)
	if err == nil {
		assert.Equal(t, "new", got)
	} else {
		assert.ErrorIs(t, err, stage.ErrTransport)
		assert.True(t, sandbox.Retryable(err), "%v", err)
		assert.Equal(t, "old", got, "the late command published: %v", err)
	}
	f.retry(t)
}

// iaBufferOut runs commands with stdout held until the command ends.
type iaBufferOut struct{ next sandbox.Runner }

func (a iaBufferOut) Run(ctx context.Context, cmd sandbox.Command) error {
	var buf bytes.Buffer
	out := cmd.Stdout
	cmd.Stdout = &buf
	err := a.next.Run(ctx, cmd)
	if out != nil {
		if _, werr := out.Write(buf.Bytes()); werr != nil && err == nil {
			err = werr
		}
	}
	return err
}

// TestInlAtkHostile: a sandbox that lies (fake report lines, an early exit,
// dropped stdin, a flood, a Runner that never returns) cannot hold the
// host past its deadlines; honest staging afterwards (with WithVerify)
// repairs whatever it spoiled.
func TestInlAtkHostile(t *testing.T) {
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	cases := []struct {
		name   string
		send   func(ctx context.Context, cmd sandbox.Command, next sandbox.Runner) error
		fail   bool // the stage must fail
		honest bool // the command itself ran unchanged: a nil error means the exact source
	}{
		{"fake-extracted-first", func(ctx context.Context, cmd sandbox.Command, next sandbox.Runner) error {
			_, _ = io.WriteString(cmd.Stdout, iaReady+iaCarried+iaExtracted)
			return next.Run(ctx, cmd)
		}, false, true},
		{"fake-all-lines-no-run", func(ctx context.Context, cmd sandbox.Command, next sandbox.Runner) error {
			_, _ = io.WriteString(cmd.Stdout, iaReady+iaCarried+iaExtracted+iaPublished)
			return nil
		}, false, false},
		{"fake-lines-read-stdin-no-run", func(ctx context.Context, cmd sandbox.Command, next sandbox.Runner) error {
			_, _ = io.WriteString(cmd.Stdout, iaReady+iaCarried)
			_, _ = io.Copy(io.Discard, &iaCutReader{r: cmd.Stdin, n: 1 << 40})
			_, _ = io.WriteString(cmd.Stdout, iaExtracted+iaPublished)
			return nil
		}, false, false},
		{"exit-early-no-read", func(ctx context.Context, cmd sandbox.Command, next sandbox.Runner) error {
			return nil
		}, true, false},
		{"exit-early-status", func(ctx context.Context, cmd sandbox.Command, next sandbox.Runner) error {
			cmd.Script = "exit 0"
			return next.Run(ctx, cmd)
		}, true, false},
		{"drop-stdin", func(ctx context.Context, cmd sandbox.Command, next sandbox.Runner) error {
			cmd.Stdin = strings.NewReader("")
			return next.Run(ctx, cmd)
		}, true, false},
		{"flood-stdout", func(ctx context.Context, cmd sandbox.Command, next sandbox.Runner) error {
			line := bytes.Repeat([]byte("airlock-linked x\n"), 4096)
			for range 2000 { // 140 MB
				if _, err := cmd.Stdout.Write(line); err != nil {
					return err
				}
			}
			return next.Run(ctx, cmd)
		}, true, false},
		{"flood-one-line", func(ctx context.Context, cmd sandbox.Command, next sandbox.Runner) error {
			chunk := bytes.Repeat([]byte("a"), 1<<20)
			for range 200 {
				if _, err := cmd.Stdout.Write(chunk); err != nil {
					return err
				}
			}
			return next.Run(ctx, cmd)
		}, true, false},
		{"flood-stderr", func(ctx context.Context, cmd sandbox.Command, next sandbox.Runner) error {
			if cmd.Stderr != nil {
				chunk := bytes.Repeat([]byte("e\n"), 1<<19)
				for range 100 { // 100 MB
					if _, err := cmd.Stderr.Write(chunk); err != nil {
						break
					}
				}
			}
			return next.Run(ctx, cmd)
		}, false, true},
		{"garbled-extracted", func(ctx context.Context, cmd sandbox.Command, next sandbox.Runner) error {
			cmd.Stdout = &iaRewrite{w: cmd.Stdout, from: iaExtracted, to: "airlock-extracted junk\n"}
			return next.Run(ctx, cmd)
		}, true, false},
		{"published-twice", func(ctx context.Context, cmd sandbox.Command, next sandbox.Runner) error {
			cmd.Stdout = &iaWatch{w: cmd.Stdout, text: iaPublished, at: func() { _, _ = io.WriteString(cmd.Stdout, iaPublished) }}
			return next.Run(ctx, cmd)
		}, false, true},
		{"never-returns-after-run", func(ctx context.Context, cmd sandbox.Command, next sandbox.Runner) error {
			_ = next.Run(ctx, cmd)
			<-hold
			return nil
		}, false, true},
		{"never-returns-after-extracted", func(ctx context.Context, cmd sandbox.Command, next sandbox.Runner) error {
			go func() { _ = next.Run(ctx, cmd) }()
			<-hold
			return nil
		}, false, true},
		{"hang-no-read", func(ctx context.Context, cmd sandbox.Command, next sandbox.Runner) error {
			<-hold
			return nil
		}, true, false},
		{"swap-two-blocks", func(ctx context.Context, cmd sandbox.Command, next sandbox.Runner) error {
			b, _ := io.ReadAll(cmd.Stdin)
			if len(b) > 3072 {
				x := append([]byte(nil), b[1024:1536]...)
				copy(b[1024:1536], b[2048:2560])
				copy(b[2048:2560], x)
			}
			cmd.Stdin = bytes.NewReader(b)
			return next.Run(ctx, cmd)
		}, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := iaSetup(t)
			r := &iaRunner{next: sandbox.Local(f.dir), send: c.send}
			ctx, cancel := context.WithTimeout(t.Context(), 8*time.Second)
			defer cancel()
			start := time.Now()
			var err error
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, err = stage.Stage(ctx, stage.NewBridge(r, stage.WithControlTimeout(time.Second)), f.root, f.assets())
			}()
			select {
			case <-done:
			case <-time.After(12 * time.Second):
				t.Fatalf("Stage held the host past its deadlines")
			}
			t.Logf("%s: %v after %v", c.name, err, time.Since(start).Round(time.Millisecond))
			if c.fail {
				require.Error(t, err)
				assert.Equal(t, "old", f.oldOrNew(t), "%v", err)
			}
			if c.honest && err == nil {
				iaSame(t, iaSnap(t, f.src), iaSnap(t, f.copyPath()))
			}
			if err != nil && (errors.Is(err, sandbox.ErrProtocol)) {
				assert.False(t, sandbox.Retryable(err), "%v", err)
			}
			// Give abandoned commands a moment, then repair.
			time.Sleep(100 * time.Millisecond)
			_, err = stage.Stage(t.Context(), stage.NewBridge(sandbox.Local(f.dir)), f.root, f.assets(), stage.WithVerify())
			require.NoError(t, err)
			iaSame(t, iaSnap(t, f.src), iaSnap(t, f.copyPath()))
		})
	}
}

// TestInlAtkConcurrentOneBridge stages two versions of one asset at once
// through one Bridge, many times: every call ends, the copy is exactly one
// of the versions, nothing is left.
func TestInlAtkConcurrentOneBridge(t *testing.T) {
	iaConcurrent(t, true)
}

// TestInlAtkConcurrentTwoBridges does the same through two Bridges over one
// sandbox (not coordinated): calls may fail, but the copy is always exactly
// one of the versions, and a final stage succeeds.
func TestInlAtkConcurrentTwoBridges(t *testing.T) {
	iaConcurrent(t, false)
}

func iaConcurrent(t *testing.T, one bool) {
	dir := t.TempDir()
	root := filepath.Join(dir, "rt")
	srcs := [2]string{t.TempDir(), t.TempDir()}
	for i, s := range srcs {
		for j := range 40 {
			build(t, s, fmt.Sprintf("d%d/f%d=shared %d", j%4, j, j))
		}
		build(t, s, fmt.Sprintf("own=version %d", i), fmt.Sprintf("only%d=x", i))
	}
	snaps := [2]map[string]iaEntry{iaSnap(t, srcs[0]), iaSnap(t, srcs[1])}
	b0 := stage.NewBridge(sandbox.Local(dir))
	b1 := b0
	if !one {
		b1 = stage.NewBridge(sandbox.Local(dir))
	}
	bs := [2]*stage.Bridge{b0, b1}
	var fails atomic.Int32
	for range 5 {
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for g := range 4 {
			wg.Go(func() {
				_, errs[g] = stage.Stage(t.Context(), bs[g%2], root, []stage.Asset{{Name: "x", Source: srcs[g%2]}})
			})
		}
		wg.Wait()
		for g, err := range errs {
			if err != nil {
				fails.Add(1)
				t.Logf("stage %d: %v (retryable %v)", g, err, sandbox.Retryable(err))
				if one {
					t.Errorf("one Bridge serialises its calls: %v", err)
				}
			}
		}
		got := iaSnap(t, filepath.Join(root, "x"))
		require.True(t, iaEqual(got, snaps[0]) || iaEqual(got, snaps[1]), "a mixed copy: %v", got)
		// The manifest must describe the copy: a verified stage of the
		// version it holds is reused.
		which := 0
		if iaEqual(got, snaps[1]) {
			which = 1
		}
		rt, err := stage.Stage(t.Context(), stage.NewBridge(sandbox.Local(dir)), root, []stage.Asset{{Name: "x", Source: srcs[which]}}, stage.WithVerify())
		require.NoError(t, err)
		assert.True(t, rt.Assets[0].Reused, "the manifest does not describe the copy")
	}
	t.Logf("failed calls: %d", fails.Load())
	_, err := stage.Stage(t.Context(), stage.NewBridge(sandbox.Local(dir)), root, []stage.Asset{{Name: "x", Source: srcs[0]}})
	require.NoError(t, err)
	iaSame(t, snaps[0], iaSnap(t, filepath.Join(root, "x")))
	iaNoTemp(t, root)
}

// TestInlAtkCancelAfterPublishLine cancels the caller's context once the
// publish line was written, and kills the command (SIGKILL of its group)
// a moment later,
// while it moves the tree and the manifest into place. Whatever the
// moment, the copy is old or new whole (or, where the sandbox's mv has no
// --exchange, absent: see TestInlAtkFailKilledMidRename), and its stored
// manifest describes it: staging either version without WithVerify
// leaves exactly that version.
func TestInlAtkCancelAfterPublishLine(t *testing.T) {
	for _, d := range []time.Duration{0, 8 * time.Millisecond, 15 * time.Millisecond, 25 * time.Millisecond, 60 * time.Millisecond} {
		for _, then := range []string{"old", "new"} {
			t.Run(fmt.Sprint(d, then), func(t *testing.T) {
				f := iaSetup(t)
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				r := &iaRunner{next: sandbox.Local(f.dir), send: func(ctx context.Context, cmd sandbox.Command, next sandbox.Runner) error {
					// The command's own context: the connection dies (the
					// command is killed) d after the publish line reached it,
					// whether or not the host still cares.
					cctx, kill := context.WithCancel(context.WithoutCancel(ctx))
					defer kill()
					cmd.Stdin = &iaLineReader{r: cmd.Stdin, line: "airlock-publish\n", at: func() {
						cancel()
						time.AfterFunc(d, kill)
					}}
					return next.Run(cctx, cmd)
				}}
				_, err := stage.Stage(ctx, stage.NewBridge(r, stage.WithControlTimeout(2*time.Second)), f.root, f.assets())
				time.Sleep(50 * time.Millisecond)
				got := "absent"
				if _, serr := os.Lstat(f.copyPath()); serr == nil {
					got = f.oldOrNew(t)
				} else {
					// Without mv --exchange the asset is absent for an
					// instant between two renames; a kill in that instant
					// leaves it absent (TestInlAtkFailKilledMidRename).
					require.ErrorIs(t, serr, fs.ErrNotExist)
					require.Error(t, err)
				}
				if err == nil {
					assert.Equal(t, "new", got)
				}
				t.Logf("err=%v copy=%s", err, got)
				src := f.src
				if then == "old" {
					src = f.oldSrc
				}
				_, err = stage.Stage(t.Context(), stage.NewBridge(sandbox.Local(f.dir)), f.root, []stage.Asset{{Name: "x", Source: src}})
				require.NoError(t, err)
				iaSame(t, iaSnap(t, src), iaSnap(t, f.copyPath()))
				iaNoTemp(t, f.root)
			})
		}
	}
}

// iaLineReader calls at once when what was read through it contains line.
type iaLineReader struct {
	r    io.Reader
	line string
	at   func()
	tail []byte
	done bool
}

func (l *iaLineReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	if !l.done && n > 0 {
		l.tail = append(l.tail, p[:n]...)
		if bytes.Contains(l.tail, []byte(l.line)) {
			l.done = true
			l.at()
		}
		if len(l.tail) > 64 {
			l.tail = append([]byte(nil), l.tail[len(l.tail)-64:]...)
		}
	}
	return n, err
}

// TestInlAtkExtractedLost: the Runner loses the command's stdout from the
// extraction report on (or delays it past the control deadline), while
// stdin flows. The host must not hang: it fails (old copy) or publishes
// the exact source; a later publish through the same Bridge works.
func TestInlAtkExtractedLost(t *testing.T) {
	for _, how := range []string{"lost", "late"} {
		t.Run(how, func(t *testing.T) {
			f := iaSetup(t)
			var mode, ended atomic.Value
			mode.Store(how)
			r := &iaRunner{next: sandbox.Local(f.dir), send: func(ctx context.Context, cmd sandbox.Command, next sandbox.Runner) error {
				if mode.Load() == how {
					cmd.Stdout = &iaHoldFrom{w: cmd.Stdout, text: iaExtracted, late: how == "late", d: 2500 * time.Millisecond}
					defer func() { ended.Store(time.Now()) }()
				}
				return next.Run(ctx, cmd)
			}}
			b := stage.NewBridge(r, stage.WithControlTimeout(time.Second))
			start := time.Now()
			_, err := stage.Stage(t.Context(), b, f.root, f.assets())
			assert.Less(t, time.Since(start), 6*time.Second)
			time.Sleep(100 * time.Millisecond)
			got := f.oldOrNew(t)
			t.Logf("err=%v copy=%s after %v", err, got, time.Since(start))
			if err == nil {
				assert.Equal(t, "new", got)
			} else {
				assert.Equal(t, "old", got)
				assert.True(t, sandbox.Retryable(err), "%v", err)
			}
			// The command the host gave up on must end (its stdin closed),
			// not wait in the sandbox for a publish line forever.
			stop := time.Now()
			for ended.Load() == nil && time.Since(stop) < 5*time.Second {
				time.Sleep(10 * time.Millisecond)
			}
			require.NotNil(t, ended.Load(), "the abandoned send command still runs 5s after the stage returned")
			mode.Store("honest")
			build(t, f.src, "a=third")
			before := r.all.Load()
			_, err = stage.Stage(t.Context(), b, f.root, f.assets())
			require.NoError(t, err)
			if how == "lost" {
				// Documented: later publishes of this Bridge use two commands.
				assert.GreaterOrEqual(t, r.all.Load()-before, int32(3), "probe, send, publish")
			}
			iaSame(t, iaSnap(t, f.src), iaSnap(t, f.copyPath()))
			iaNoTemp(t, f.root)
		})
	}
}

// iaHoldFrom forwards writes until text appears; from then on it drops
// them (late false) or delivers them after d (late true).
type iaHoldFrom struct {
	w    io.Writer
	text string
	late bool
	d    time.Duration
	seen bytes.Buffer
	held bool
}

func (h *iaHoldFrom) Write(p []byte) (int, error) {
	if !h.held {
		h.seen.Write(p)
		if !strings.Contains(h.seen.String(), h.text) {
			return h.w.Write(p)
		}
		h.held = true
		// Forward what came before the report.
		s := string(p)
		if i := strings.Index(s, "airlock-extracted"); i > 0 {
			if _, err := h.w.Write(p[:i]); err != nil {
				return 0, err
			}
			p2 := p[i:]
			if h.late {
				time.Sleep(h.d)
				_, err := h.w.Write(p2)
				return len(p), err
			}
			return len(p), nil
		}
	}
	if h.late {
		time.Sleep(h.d)
		return h.w.Write(p)
	}
	return len(p), nil
}

// TestInlAtkHostKilled kills (SIGKILL) a child process running a stage at a
// point of the send command: mid-stream, when the command reports the
// stream extracted (the host holds the publish line), and after the
// publish. The copy is old or new, whole; the next stage sweeps the
// leftovers and publishes.
func TestInlAtkHostKilled(t *testing.T) {
	if os.Getenv("ATK_CHILD") != "" {
		t.Skip("the child")
	}
	for _, at := range []string{"stream", "extracted", "published"} {
		t.Run(at, func(t *testing.T) {
			f := iaSetup(t)
			big := make([]byte, 8<<20)
			_, _ = rand.Read(big)
			require.NoError(t, os.WriteFile(filepath.Join(f.src, "big.bin"), big, 0o644))
			mark := filepath.Join(t.TempDir(), "mark")
			cmd := exec.Command(os.Args[0], "-test.run=^TestInlAtkChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), "ATK_CHILD="+at, "ATK_DIR="+f.dir, "ATK_SRC="+f.src, "ATK_ROOT="+f.root, "ATK_MARK="+mark)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			require.NoError(t, cmd.Start())
			deadline := time.Now().Add(20 * time.Second)
			for {
				if _, err := os.Stat(mark); err == nil {
					break
				}
				if time.Now().After(deadline) {
					_ = cmd.Process.Kill()
					_ = cmd.Wait()
					t.Fatalf("the child never reached %s: %s", at, out.String())
				}
				time.Sleep(5 * time.Millisecond)
			}
			require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
			_ = cmd.Wait()
			// The sandbox's command sees its stdin end; let it finish.
			time.Sleep(300 * time.Millisecond)
			got := f.oldOrNew(t)
			if at != "published" {
				assert.Equal(t, "old", got)
			}
			f.retry(t)
		})
	}
}

// TestInlAtkChild is the child of TestInlAtkHostKilled: it stages and stops
// (blocks) at the point named by ATK_CHILD, after writing ATK_MARK.
func TestInlAtkChild(t *testing.T) {
	at := os.Getenv("ATK_CHILD")
	if at == "" {
		t.Skip("run by TestInlAtkHostKilled")
	}
	block := func() {
		_ = os.WriteFile(os.Getenv("ATK_MARK"), nil, 0o644)
		select {}
	}
	r := &iaRunner{next: sandbox.Local(os.Getenv("ATK_DIR")), send: func(ctx context.Context, cmd sandbox.Command, next sandbox.Runner) error {
		switch at {
		case "stream":
			cmd.Stdin = &iaCountReader{r: cmd.Stdin, n: 4 << 20, at: block}
		case "extracted":
			cmd.Stdout = &iaWatch{w: cmd.Stdout, text: iaExtracted, at: block}
		case "published":
			cmd.Stdout = &iaWatch{w: cmd.Stdout, text: iaPublished, at: block}
		}
		return next.Run(ctx, cmd)
	}}
	_, err := stage.Stage(context.Background(), stage.NewBridge(r), os.Getenv("ATK_ROOT"), []stage.Asset{{Name: "x", Source: os.Getenv("ATK_SRC")}})
	t.Fatalf("the child was not killed: %v", err)
}

// iaBusybox returns a Runner whose PATH holds busybox's applets only.
func iaBusybox(t *testing.T, dir string) sandbox.Runner {
	t.Helper()
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("no busybox")
	}
	out, err := exec.Command(bb, "--list").Output()
	require.NoError(t, err)
	bin := t.TempDir()
	for _, name := range strings.Fields(string(out)) {
		require.NoError(t, os.Symlink(bb, filepath.Join(bin, name)))
	}
	return sandbox.Local(dir, sandbox.WithEnviron([]string{"PATH=" + bin, "HOME=/"}))
}

// TestInlAtkBusyboxTwoCommands: a busybox sandbox (its tar reads to the end
// of its input) gets the two-command publish; a cancellation at the end of
// the stream and a cut stdin leave the old copy; a retry publishes the
// exact source.
func TestInlAtkBusyboxTwoCommands(t *testing.T) {
	for _, attack := range []string{"none", "cancel-at-stream-end", "cut-stdin", "cancel-at-publish"} {
		t.Run(attack, func(t *testing.T) {
			f := iaSetup(t)
			bb := iaBusybox(t, f.dir)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			r := &iaRunner{next: bb}
			r.send = func(ctx context.Context, cmd sandbox.Command, next sandbox.Runner) error {
				switch attack {
				case "cancel-at-stream-end":
					cmd.Stdin = &iaEOFReader{r: cmd.Stdin, at: cancel}
				case "cut-stdin":
					cmd.Stdin = &iaCutReader{r: cmd.Stdin, n: 1024}
				}
				err := next.Run(ctx, cmd)
				if attack == "cancel-at-publish" {
					cancel() // the next command is the publish
				}
				return err
			}
			_, err := stage.Stage(ctx, stage.NewBridge(r, stage.WithControlTimeout(3*time.Second)), f.root, f.assets())
			got := f.oldOrNew(t)
			switch attack {
			case "none":
				require.NoError(t, err)
				assert.Equal(t, "new", got)
				// The two-command path: the send and a separate publish.
				assert.Equal(t, int32(1), r.sends.Load())
				assert.GreaterOrEqual(t, r.all.Load(), int32(3), "probe, send, publish")
			default:
				require.Error(t, err)
				assert.Equal(t, "old", got, "%v", err)
			}
			_, err = stage.Stage(t.Context(), stage.NewBridge(bb), f.root, f.assets(), stage.WithVerify())
			require.NoError(t, err)
			iaSame(t, iaSnap(t, f.src), iaSnap(t, f.copyPath()))
			iaNoTemp(t, f.root)
		})
	}
}

// iaEOFReader calls at once when its reader reports the end.
type iaEOFReader struct {
	r    io.Reader
	at   func()
	once sync.Once
}

func (e *iaEOFReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		e.once.Do(e.at)
	}
	return n, err
}

// TestInlAtkChoppedIO: a Runner that delivers the command's stdout one byte
// a write and its stdin one byte a read is a valid Runner: the stage
// publishes the exact source in one command.
func TestInlAtkChoppedIO(t *testing.T) {
	f := iaSetup(t)
	r := &iaRunner{next: sandbox.Local(f.dir), send: func(ctx context.Context, cmd sandbox.Command, next sandbox.Runner) error {
		cmd.Stdout = iaByteWriter{cmd.Stdout}
		cmd.Stdin = iaByteReader{cmd.Stdin}
		return next.Run(ctx, cmd)
	}}
	_, err := stage.Stage(t.Context(), stage.NewBridge(r, stage.WithControlTimeout(3*time.Second)), f.root, f.assets())
	require.NoError(t, err)
	iaSame(t, iaSnap(t, f.src), iaSnap(t, f.copyPath()))
	assert.Equal(t, int32(2), r.all.Load(), "probe and send")
	iaNoTemp(t, f.root)
}

type iaByteWriter struct{ w io.Writer }

func (b iaByteWriter) Write(p []byte) (int, error) {
	for i := range p {
		if _, err := b.w.Write(p[i : i+1]); err != nil {
			return i, err
		}
	}
	return len(p), nil
}

type iaByteReader struct{ r io.Reader }

func (b iaByteReader) Read(p []byte) (int, error) {
	if len(p) > 1 {
		p = p[:1]
	}
	return b.r.Read(p)
}

// TestInlAtkDeadlineSlowLink: the caller's deadline expires while a slow
// link (stdin trickles) carries a 4 MB file: the error is the deadline's,
// the old copy stays, the same Bridge then publishes.
func TestInlAtkDeadlineSlowLink(t *testing.T) {
	f := iaSetup(t)
	big := make([]byte, 4<<20)
	_, _ = rand.Read(big)
	require.NoError(t, os.WriteFile(filepath.Join(f.src, "big.bin"), big, 0o644))
	r := &iaRunner{next: sandbox.Local(f.dir), send: func(ctx context.Context, cmd sandbox.Command, next sandbox.Runner) error {
		cmd.Stdin = iaSlowReader{cmd.Stdin}
		return next.Run(ctx, cmd)
	}}
	b := stage.NewBridge(r, stage.WithControlTimeout(2*time.Second))
	ctx, cancel := context.WithTimeout(t.Context(), 400*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := stage.Stage(ctx, b, f.root, f.assets())
	require.Error(t, err)
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, "old", f.oldOrNew(t))
	f.retrySame(t, b, r)
}

type iaSlowReader struct{ r io.Reader }

func (s iaSlowReader) Read(p []byte) (int, error) {
	time.Sleep(5 * time.Millisecond)
	if len(p) > 4096 {
		p = p[:4096]
	}
	return s.r.Read(p)
}

type iaKey struct{}

// TestInlAtkConcurrentCancelOneBridge: through one Bridge, stage A of an
// asset is cancelled when its send command reports the stream extracted,
// while stage B of the same asset (another version) runs at once. B must
// succeed with its exact version, A fails with the cancellation, and
// nothing is left behind.
func TestInlAtkConcurrentCancelOneBridge(t *testing.T) {
	f := iaSetup(t)
	srcB := t.TempDir()
	build(t, srcB, "a=version B", "z/deep=b")
	for range 4 {
		ctxA, cancelA := context.WithCancel(context.WithValue(t.Context(), iaKey{}, "A"))
		r := &iaRunner{next: sandbox.Local(f.dir), send: func(ctx context.Context, cmd sandbox.Command, next sandbox.Runner) error {
			if ctx.Value(iaKey{}) == "A" {
				cmd.Stdout = &iaWatch{w: cmd.Stdout, text: iaExtracted, at: cancelA}
			}
			return next.Run(ctx, cmd)
		}}
		b := stage.NewBridge(r, stage.WithControlTimeout(3*time.Second))
		var errA, errB error
		var wg sync.WaitGroup
		wg.Go(func() { _, errA = stage.Stage(ctxA, b, f.root, f.assets()) })
		wg.Go(func() {
			_, errB = stage.Stage(t.Context(), b, f.root, []stage.Asset{{Name: "x", Source: srcB}})
		})
		wg.Wait()
		cancelA()
		require.NoError(t, errB)
		if errA != nil {
			assert.ErrorIs(t, errA, context.Canceled)
		}
		got := iaSnap(t, f.copyPath())
		// B's publish ran last, or A's (when A was not cancelled because it
		// ran before its send reported, which it always does): the copy is
		// one version whole.
		require.True(t, iaEqual(got, iaSnap(t, srcB)) || (errA == nil && iaEqual(got, iaSnap(t, f.src))), "copy %v (A: %v)", got, errA)
		iaNoTemp(t, f.root)
	}
	f.retry(t)
}

// iaManifestMatches checks that every regular file of root/name has the
// size and SHA-256 its stored manifest (root/.airlock-manifest-name.json)
// records, and that the manifest lists nothing the copy lacks.
func iaManifestMatches(t *testing.T, root, name string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, ".airlock-manifest-"+name+".json"))
	require.NoError(t, err)
	var m struct {
		Entries []struct {
			Path   string `json:"path"`
			Type   string `json:"type"`
			Size   int64  `json:"size"`
			SHA256 string `json:"sha256"`
		} `json:"entries"`
	}
	require.NoError(t, json.Unmarshal(b, &m))
	files := 0
	for _, e := range m.Entries {
		if e.Type != "file" {
			continue
		}
		files++
		data, err := os.ReadFile(filepath.Join(root, name, filepath.FromSlash(e.Path)))
		require.NoError(t, err)
		sum := sha256.Sum256(data)
		require.Equal(t, e.SHA256, hex.EncodeToString(sum[:]), "%s: the copy differs from its manifest", e.Path)
	}
	n := 0
	for _, e := range iaSnap(t, filepath.Join(root, name)) {
		if e.mode.IsRegular() {
			n++
		}
	}
	require.Equal(t, files, n, "files in the copy vs its manifest")
}

// TestInlAtkSourceRewrittenWhileStreamed rewrites a 1 MB source file while
// the host streams it (the Runner does it once the command has read
// 200 KB): in place with the same size, or replaced by rename. The host
// hashed the old content; it must not publish a copy that differs from
// the manifest: it fails retryably (the previous copy stays) or publishes
// a copy its manifest describes.
func TestInlAtkSourceRewrittenWhileStreamed(t *testing.T) {
	for _, how := range []string{"in-place", "rename"} {
		t.Run(how, func(t *testing.T) {
			f := iaSetup(t)
			big := filepath.Join(f.src, "big.bin")
			v1 := bytes.Repeat([]byte("1"), 1<<20)
			v2 := bytes.Repeat([]byte("2"), 1<<20)
			require.NoError(t, os.WriteFile(big, v1, 0o644))
			var once sync.Once
			r := &iaRunner{next: sandbox.Local(f.dir), send: func(ctx context.Context, cmd sandbox.Command, next sandbox.Runner) error {
				cmd.Stdin = &iaCountReader{r: cmd.Stdin, n: 200 << 10, at: func() {
					once.Do(func() {
						if how == "rename" {
							require.NoError(t, os.WriteFile(big+".tmp", v2, 0o644))
							require.NoError(t, os.Rename(big+".tmp", big))
							return
						}
						fh, err := os.OpenFile(big, os.O_WRONLY, 0)
						require.NoError(t, err)
						_, err = fh.WriteAt(v2, 0)
						require.NoError(t, err)
						require.NoError(t, fh.Close())
					})
				}}
				return next.Run(ctx, cmd)
			}}
			b := stage.NewBridge(r, stage.WithControlTimeout(3*time.Second))
			_, err := stage.Stage(t.Context(), b, f.root, f.assets())
			t.Logf("err=%v", err)
			if err != nil {
				assert.True(t, sandbox.Retryable(err), "%v", err)
				assert.Equal(t, f.old, iaSnap(t, f.copyPath()), "a failed stage changed the copy")
			} else {
				got := readFile(t, filepath.Join(f.copyPath(), "big.bin"))
				assert.True(t, got == string(v1) || got == string(v2), "a torn file")
			}
			iaManifestMatches(t, f.root, "x")
			f.retrySame(t, b, r)
			iaManifestMatches(t, f.root, "x")
		})
	}
}

// iaRewrite replaces from with to in the output (when a write holds it
// whole; the send command's report lines come one a write).
type iaRewrite struct {
	w        io.Writer
	from, to string
}

func (r *iaRewrite) Write(p []byte) (int, error) {
	q := bytes.ReplaceAll(p, []byte(r.from), []byte(r.to))
	if _, err := r.w.Write(q); err != nil {
		return 0, err
	}
	return len(p), nil
}

// TestInlAtkUnstageWhileWaiting unstages the asset (through another
// Bridge) while the send command waits for the publish line. The command's
// temporary directory has a live owner: Unstage must not take it; the
// publish then either puts the whole new copy in place or fails, never a
// partial copy; nothing is left behind.
func TestInlAtkUnstageWhileWaiting(t *testing.T) {
	f := iaSetup(t)
	var unErr error
	r := &iaRunner{next: sandbox.Local(f.dir), send: func(ctx context.Context, cmd sandbox.Command, next sandbox.Runner) error {
		cmd.Stdout = &iaWatch{w: cmd.Stdout, text: iaExtracted, at: func() {
			unErr = stage.Unstage(t.Context(), stage.NewBridge(sandbox.Local(f.dir)), f.root, "x")
		}}
		return next.Run(ctx, cmd)
	}}
	_, err := stage.Stage(t.Context(), stage.NewBridge(r, stage.WithControlTimeout(3*time.Second)), f.root, f.assets())
	require.NoError(t, unErr)
	t.Logf("stage: %v", err)
	if _, serr := os.Lstat(f.copyPath()); serr == nil {
		iaSame(t, iaSnap(t, f.src), iaSnap(t, f.copyPath()))
		iaManifestMatches(t, f.root, "x")
	} else {
		require.Error(t, err, "a nil error with no copy")
	}
	f.retry(t)
}

// TestInlAtkCorruptStreamVerify: the Runner flips bytes of a file's content
// in the stream (a transport that breaks the Runner contract). With
// WithVerify a nil error still means the exact source in the sandbox;
// without it the stage may only publish a copy that is either exact or
// fails (logged); an honest verified stage then repairs the copy.
func TestInlAtkCorruptStreamVerify(t *testing.T) {
	for _, verify := range []bool{true, false} {
		t.Run(fmt.Sprint("verify=", verify), func(t *testing.T) {
			f := iaSetup(t)
			r := &iaRunner{next: sandbox.Local(f.dir), send: func(ctx context.Context, cmd sandbox.Command, next sandbox.Runner) error {
				cmd.Stdin = &iaFlip{r: cmd.Stdin, from: []byte("new content"), to: []byte("nEw content")}
				return next.Run(ctx, cmd)
			}}
			var opts []stage.Option
			if verify {
				opts = append(opts, stage.WithVerify())
			}
			_, err := stage.Stage(t.Context(), stage.NewBridge(r, stage.WithControlTimeout(2*time.Second)), f.root, f.assets(), opts...)
			got := readFile(t, filepath.Join(f.copyPath(), "a"))
			t.Logf("err=%v a=%q", err, got)
			if verify && err == nil {
				iaSame(t, iaSnap(t, f.src), iaSnap(t, f.copyPath()))
			}
			_, err = stage.Stage(t.Context(), stage.NewBridge(sandbox.Local(f.dir)), f.root, f.assets(), stage.WithVerify())
			require.NoError(t, err)
			iaSame(t, iaSnap(t, f.src), iaSnap(t, f.copyPath()))
		})
	}
}

// iaFlip replaces from with to (same length) in what is read, where a read
// holds it whole.
type iaFlip struct {
	r        io.Reader
	from, to []byte
}

func (f *iaFlip) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if i := bytes.Index(p[:n], f.from); i >= 0 {
		copy(p[i:], f.to)
	}
	return n, err
}

// TestInlAtkFreshRootRace stages different assets (no two publish one
// asset) into one fresh root at once, through one Bridge or several (as
// several hosts would; GNU tools): nothing is shared but the root, so every
// stage must succeed with its exact copy. (An attack found the root's mkdir
// racing another stage's. Several busybox Bridges, which fail by the
// Bridge's documented non-guarantee, are TestInlAtkFailFreshRootRace.)
func TestInlAtkFreshRootRace(t *testing.T) {
	for _, c := range []struct {
		name         string
		one, busybox bool
	}{{"bridges", false, false}, {"one-bridge", true, false}, {"busybox-one-bridge", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			iaFreshRootRace(t, c.one, c.busybox)
		})
	}
}

// TestInlAtkOwnSweepBusybox: one Bridge over a busybox sandbox (two
// commands a publish) stages different assets at once into a root that already
// exists. Nothing is shared but the root, and "a Bridge knows only its
// own" transfers: every stage must succeed. Each stage's sweep must not
// take another call's transfer in the instant between its send command and
// its publish command. (It failed about once in three runs: a sweep's
// script, made before another call named its transfer's directory, ran
// after that transfer ended and took it; now such a script leaves alone
// every name the Bridge gave out after it was made, shell.Skip.)
func TestInlAtkOwnSweepBusybox(t *testing.T) {
	src := t.TempDir()
	build(t, src, "f=1", "d/g=2")
	want := iaSnap(t, src)
	dir := t.TempDir()
	root := filepath.Join(dir, "rt")
	b := stage.NewBridge(iaBusybox(t, dir))
	_, err := stage.Stage(t.Context(), b, root, []stage.Asset{{Name: "first", Source: src}})
	require.NoError(t, err)
	for round := range 5 {
		var wg sync.WaitGroup
		errs := make([]error, 6)
		for g := range 6 {
			wg.Go(func() {
				_, errs[g] = stage.Stage(t.Context(), b, root, []stage.Asset{{Name: fmt.Sprint("r", round, "a", g), Source: src}})
			})
		}
		wg.Wait()
		for g, err := range errs {
			require.NoError(t, err, "round %d, asset a%d (retryable %v)", round, g, sandbox.Retryable(err))
			iaSame(t, want, iaSnap(t, filepath.Join(root, fmt.Sprint("r", round, "a", g))))
		}
	}
}

func iaFreshRootRace(t *testing.T, one, busybox bool) {
	src := t.TempDir()
	build(t, src, "f=1", "d/g=2")
	want := iaSnap(t, src)
	for round := range 6 {
		dir := t.TempDir()
		root := filepath.Join(dir, "rt")
		runner := sandbox.Local(dir)
		if busybox {
			runner = iaBusybox(t, dir)
		}
		shared := stage.NewBridge(runner)
		var wg sync.WaitGroup
		errs := make([]error, 6)
		for g := range 6 {
			b := shared
			if !one {
				b = stage.NewBridge(runner)
			}
			wg.Go(func() {
				_, errs[g] = stage.Stage(t.Context(), b, root, []stage.Asset{{Name: fmt.Sprint("a", g), Source: src}})
			})
		}
		wg.Wait()
		for g, err := range errs {
			require.NoError(t, err, "round %d, asset a%d (retryable %v)", round, g, sandbox.Retryable(err))
			iaSame(t, want, iaSnap(t, filepath.Join(root, fmt.Sprint("a", g))))
		}
	}
}

// TestInlAtkExtraFileAfterRename: a source directory where a writer
// repeatedly writes hot.tmp and renames it over hot (an editor's atomic
// save). A stage that returns nil must leave a copy that its manifest
// describes, file for file. (It did not: a stage returned nil with the
// manifest listing keep and hot while the copy still held hot.tmp, carried
// from an earlier publish after it had left the source; now such a stage
// fails with ErrChanged.)
func TestInlAtkExtraFileAfterRename(t *testing.T) {
	for _, bb := range []bool{false, true} {
		t.Run(fmt.Sprint("busybox=", bb), func(t *testing.T) {
			dir, src := t.TempDir(), t.TempDir()
			root := filepath.Join(dir, "rt")
			build(t, src, "keep=k")
			_, stop := iaHotWriter(t, src, "replace")
			defer stop()
			runner := sandbox.Local(dir)
			if bb {
				runner = iaBusybox(t, dir)
			}
			b := stage.NewBridge(runner)
			for i := range 80 {
				rt, err := stage.Stage(t.Context(), b, root, []stage.Asset{{Name: "x", Source: src}})
				if err != nil {
					continue
				}
				m, rerr := os.ReadFile(filepath.Join(root, ".airlock-manifest-x.json"))
				require.NoError(t, rerr)
				_, serr := os.Lstat(filepath.Join(root, "x", "hot.tmp"))
				if serr == nil && !strings.Contains(string(m), `"hot.tmp"`) {
					t.Fatalf("stage %d returned nil (%+v) with hot.tmp in the copy, not in its manifest", i, rt.Assets[0])
				}
			}
		})
	}
}

// TestInlAtkSourceChangesDuringStage rewrites a source file while stages
// run, by replacing it (write hot.tmp, rename it over hot; sizes differ)
// or in place (same size): a stage that succeeds leaves the file holding
// one version whole and a copy its manifest describes, and a stage of the
// quiet tree publishes it exactly. (It failed, replace: a stage returned
// nil with a copy holding hot.tmp, which its manifest did not list; see
// TestInlAtkExtraFileAfterRename. It failed, in place, under load: a write
// under way when the read began tore the copy unseen, until a file changed
// moments before its read was read again; see internal/tree's doc.)
func TestInlAtkSourceChangesDuringStage(t *testing.T) {
	for _, how := range []string{"replace", "in-place"} {
		t.Run(how, func(t *testing.T) {
			dir, src := t.TempDir(), t.TempDir()
			root := filepath.Join(dir, "rt")
			build(t, src, "keep=k")
			v, stop := iaHotWriter(t, src, how)
			b := stage.NewBridge(sandbox.Local(dir))
			var ok, failed int
			for range 8 {
				var before [2]map[string]iaEntry
				for i, name := range []string{"x", "y"} {
					if _, err := os.Lstat(filepath.Join(root, name)); err == nil {
						before[i] = iaSnap(t, filepath.Join(root, name))
					}
				}
				rt, err := stage.Stage(t.Context(), b, root, []stage.Asset{{Name: "x", Source: src}, {Name: "y", Source: src}})
				if err != nil {
					failed++
					assert.True(t, sandbox.Retryable(err), "%v", err)
					// The failing asset keeps its previous copy (the one
					// before it, if any, was published whole).
					for i, name := range []string{"x", "y"} {
						if before[i] != nil && (rt == nil || len(rt.Assets) <= i) && strings.Contains(err.Error(), `"`+name+`"`) {
							require.True(t, iaEqual(before[i], iaSnap(t, filepath.Join(root, name))), "a failed stage of %s changed its copy: %v", name, err)
						}
					}
					continue
				}
				ok++
				for _, name := range []string{"x", "y"} {
					got := readFile(t, filepath.Join(root, name, "hot"))
					require.True(t, got == v[0] || got == v[1], "a torn file: %d bytes", len(got))
					iaManifestMatches(t, root, name)
				}
			}
			stop()
			t.Logf("ok %d failed %d", ok, failed)
			_, err := stage.Stage(t.Context(), b, root, []stage.Asset{{Name: "x", Source: src}, {Name: "y", Source: src}})
			require.NoError(t, err)
			iaSame(t, iaSnap(t, src), iaSnap(t, filepath.Join(root, "x")))
			iaSame(t, iaSnap(t, src), iaSnap(t, filepath.Join(root, "y")))
			iaNoTemp(t, root)
		})
	}
}

// iaHotWriter has a goroutine rewrite src/hot (created here) until stop is
// called, pausing 0 to 120 ms between writes: "replace" writes hot.tmp and
// renames it over hot (an editor's save; the two versions differ in size),
// "in-place" overwrites hot with a version of the same size. It returns
// the two versions.
func iaHotWriter(t *testing.T, src, how string) (v [2]string, stop func()) {
	v = [2]string{strings.Repeat("A", 300<<10), strings.Repeat("B", 100<<10)}
	if how == "in-place" {
		v[1] = strings.Repeat("B", 300<<10)
	}
	hot := filepath.Join(src, "hot")
	require.NoError(t, os.WriteFile(hot, []byte(v[0]), 0o644))
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			if how == "replace" {
				_ = os.WriteFile(hot+".tmp", []byte(v[i%2]), 0o644)
				_ = os.Rename(hot+".tmp", hot)
			} else if fh, err := os.OpenFile(hot, os.O_WRONLY, 0); err == nil {
				_, _ = fh.WriteAt([]byte(v[i%2]), 0)
				_ = fh.Close()
			}
			// Pauses of 0 to 120 ms: a file rewritten back to back fails
			// every stage (retryable); the pauses let some stages read it
			// between writes, and succeed.
			time.Sleep(time.Duration(i%4) * 40 * time.Millisecond)
		}
	})
	return v, func() { close(done); wg.Wait() }
}

// TestInlAtkGarbledReportIsProtocol: the sandbox garbles the send
// command's extraction report (a line the protocol does not know, where
// the report is due). A sandbox breaking the protocol fails the stage at
// once with sandbox.ErrProtocol, not retryable, and the previous copy
// stays. (It failed only after the whole control deadline, as a retryable
// ErrTransport blaming the connection: the report tolerated a little
// output after the carry, and the send command waited for the host's
// publish line.)
func TestInlAtkGarbledReportIsProtocol(t *testing.T) {
	for _, to := range []string{"airlock-extracted junk\n", "zzz\n", "airlock-bogus\n"} {
		t.Run(strings.TrimSpace(to), func(t *testing.T) {
			f := iaSetup(t)
			r := &iaRunner{next: sandbox.Local(f.dir), send: func(ctx context.Context, cmd sandbox.Command, next sandbox.Runner) error {
				cmd.Stdout = &iaRewrite{w: cmd.Stdout, from: iaExtracted, to: to}
				return next.Run(ctx, cmd)
			}}
			start := time.Now()
			_, err := stage.Stage(t.Context(), stage.NewBridge(r, stage.WithControlTimeout(2*time.Second)), f.root, f.assets())
			require.Error(t, err)
			t.Logf("after %v: %v", time.Since(start).Round(time.Millisecond), err)
			assert.Equal(t, "old", f.oldOrNew(t))
			assert.ErrorIs(t, err, sandbox.ErrProtocol)
			assert.False(t, sandbox.Retryable(err), "a garbled reply is not retryable")
			assert.Less(t, time.Since(start), time.Second, "a garbled line needs no deadline to be seen")
		})
	}
}
