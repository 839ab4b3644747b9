//go:build linux

package stage_test

// Attack tests written from go doc only (no implementation read): the delta
// publish of Bridge whose carry plan travels on the send command's stdin, as
// a tar archive of its own before the tree's stream (GNU tar), while the
// previous copy is hard-linked whole into the new tree in the background.

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/busyboxuser"
	"github.com/airlockdev/airlock/internal/treetest"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
)

// atk28Hook wraps a Runner: before may change the command (its stdin, its
// stdout) before it runs; an error from it is returned without running.
type atk28Hook struct {
	r      sandbox.Runner
	mu     sync.Mutex
	before func(ctx context.Context, cmd *sandbox.Command) error
}

func (h *atk28Hook) set(f func(ctx context.Context, cmd *sandbox.Command) error) {
	h.mu.Lock()
	h.before = f
	h.mu.Unlock()
}

func (h *atk28Hook) Run(ctx context.Context, cmd sandbox.Command) error {
	h.mu.Lock()
	f := h.before
	h.mu.Unlock()
	if f != nil {
		if err := f(ctx, &cmd); err != nil {
			return err
		}
	}
	return h.r.Run(ctx, cmd)
}

// atk28IsSend recognizes the send command: the one whose stdin carries a tar
// stream to be extracted.
func atk28IsSend(c *sandbox.Command) bool {
	return c.Stdin != nil && strings.Contains(c.Script, "tar -x")
}

// atk28Env is one asset of many files staged through a Bridge over a hook.
type atk28Env struct {
	t    *testing.T
	src  string
	sb   string
	root string
	name string
	hook *atk28Hook
	tgt  stage.Target
	gen  int
	base []string // the names under the root after a clean stage
}

func (e *atk28Env) dst() string { return filepath.Join(e.root, e.name) }

// atk28Files writes n small files over 30 directories: the carry plan of a
// delta is then far over 64 KiB.
func atk28Files(t testing.TB, src string, n int) {
	t.Helper()
	for i := range n {
		p := filepath.Join(src, fmt.Sprintf("dir-%02d-with-a-long-directory-name", i%30), fmt.Sprintf("file-%05d-with-a-rather-long-name-to-grow-the-plan-beyond-sixty-four-kib.txt", i))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(fmt.Sprintf("content of file %d\n", i)), 0o644))
	}
	treetest.Write(t, filepath.Join(src, "trig.txt"), "v0", 0o644)
}

func newAtk28(t *testing.T, n int, r func(sb string) sandbox.Runner) *atk28Env {
	sb := t.TempDir()
	src := t.TempDir()
	atk28Files(t, src, n)
	h := &atk28Hook{r: r(sb)}
	e := &atk28Env{t: t, src: src, sb: sb, root: filepath.Join(sb, "rt"), name: "sk", hook: h, tgt: stage.NewBridge(h)}
	e.quiet("first stage")
	e.base = a22Names(t, e.root)
	return e
}

func atk28Local(sb string) sandbox.Runner { return sandbox.Local(sb) }

// bump changes one host file (and a few more), so the next stage is a delta
// that carries almost everything.
func (e *atk28Env) bump() {
	e.gen++
	treetest.Write(e.t, filepath.Join(e.src, "trig.txt"), fmt.Sprintf("v%d", e.gen), 0o644)
	treetest.Write(e.t, filepath.Join(e.src, "dir-03-with-a-long-directory-name", fmt.Sprintf("gen-%d.txt", e.gen)), "new", 0o644)
}

func (e *atk28Env) stage(ctx context.Context, opts ...stage.Option) (stage.StagedAsset, error) {
	rt, err := stage.Stage(ctx, e.tgt, e.root, []stage.Asset{{Name: e.name, Source: e.src}}, opts...)
	if err != nil {
		return stage.StagedAsset{}, err
	}
	require.Len(e.t, rt.Assets, 1)
	return rt.Assets[0], nil
}

// quiet stages with no interference: it must succeed, give an exact copy and
// leave no temporary directory under the root.
func (e *atk28Env) quiet(what string, opts ...stage.Option) stage.StagedAsset {
	e.t.Helper()
	e.hook.set(nil)
	a, err := e.stage(e.t.Context(), opts...)
	require.NoError(e.t, err, "%s: a quiet stage failed", what)
	sameTree(e.t, e.src, e.dst())
	e.noTemp(what)
	return a
}

// noTemp fails t when the root holds a name the clean stage did not leave.
func (e *atk28Env) noTemp(what string) {
	e.t.Helper()
	if e.base == nil {
		return
	}
	assert.ElementsMatch(e.t, e.base, a22Names(e.t, e.root), "%s: names under the stage root (a temporary directory left behind?)", what)
}

// failedNoTemp is noTemp after a stage that failed with err. Where err is
// a failed read of a command's stdin, whose process group the runner then
// killed, the kill may have come between the setup's mkdir and its ready
// line: the new directory (".airlock-new-…", or the temporary name it was
// renamed to) is then left for the next stage's sweep, as the Bridge's
// doc says of a cut transfer; the closing quiet stage of each test checks
// that the sweep removes it.
func (e *atk28Env) failedNoTemp(what string, err error) {
	e.t.Helper()
	if !errors.Is(err, sandbox.ErrTransport) || !strings.Contains(err.Error(), "its process group was killed") {
		e.noTemp(what)
		return
	}
	for _, n := range a22Names(e.t, e.root) {
		if !slices.Contains(e.base, n) && !strings.HasPrefix(n, ".airlock-new-") && !strings.HasPrefix(n, ".airlock-tmp-") {
			e.t.Errorf("%s: %s is left under the stage root", what, n)
		}
	}
}

// atk28Record captures a send command's whole stdin and stdout.
type atk28Record struct {
	mu          sync.Mutex
	stdin, outs bytes.Buffer
}

type atk28Tee struct {
	r   io.Reader
	rec *atk28Record
}

func (t atk28Tee) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	t.rec.mu.Lock()
	t.rec.stdin.Write(p[:n])
	t.rec.mu.Unlock()
	return n, err
}

type atk28OutTee struct {
	w   io.Writer
	rec *atk28Record
}

func (t atk28OutTee) Write(p []byte) (int, error) {
	t.rec.mu.Lock()
	t.rec.outs.Write(p)
	t.rec.mu.Unlock()
	return t.w.Write(p)
}

// record runs one delta and returns what its send command read and printed.
func (e *atk28Env) record() *atk28Record {
	e.t.Helper()
	rec := &atk28Record{}
	e.bump()
	e.hook.set(func(_ context.Context, c *sandbox.Command) error {
		if atk28IsSend(c) {
			c.Stdin = atk28Tee{r: c.Stdin, rec: rec}
			if c.Stdout != nil {
				c.Stdout = atk28OutTee{w: c.Stdout, rec: rec}
			}
		}
		return nil
	})
	_, err := e.stage(e.t.Context())
	e.hook.set(nil)
	require.NoError(e.t, err)
	sameTree(e.t, e.src, e.dst())
	return rec
}

// atk28PlanEnd returns the offset where the first tar archive on the send
// command's stdin (the plan) ends, padded to a 10240-byte record, or -1.
func atk28PlanEnd(t testing.TB, in []byte) int {
	t.Helper()
	cr := &atk28Count{r: bytes.NewReader(in)}
	tr := tar.NewReader(cr)
	n := 0
	for {
		_, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return -1
		}
		n++
	}
	end := cr.n
	return (end + 10239) / 10240 * 10240
}

type atk28Count struct {
	r io.Reader
	n int
}

func (c *atk28Count) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// atk28Cut ends (err == nil: a clean end of input) or fails its reader
// after n bytes; at n it may also call at.
type atk28Cut struct {
	r   io.Reader
	n   int
	err error
	at  func()
}

func (c *atk28Cut) Read(p []byte) (int, error) {
	if c.n <= 0 {
		if c.at != nil {
			c.at()
			c.at = nil
			return c.r.Read(p)
		}
		if c.err == nil {
			return 0, io.EOF
		}
		return 0, c.err
	}
	if len(p) > c.n {
		p = p[:c.n]
	}
	n, err := c.r.Read(p)
	c.n -= n
	return n, err
}

// atk28Few says whether the failed reads and cancellations also cut at off.
func atk28Few(off, planEnd, total int) bool {
	for _, o := range []int{1, 65536, planEnd - 1, planEnd, planEnd + 1, (planEnd + total) / 2, total - 17, total - 16, total - 15, total - 1} {
		if o == off {
			return true
		}
	}
	return false
}

var errAtk28Cut = errors.New("atk28: stdin cut")

// atk28Offsets are the offsets into a send command's stdin at which it is
// cut: around the plan archive's records, its end, the tree stream's end and
// the publish line.
func atk28Offsets(planEnd, total int) []int {
	offs := []int{0, 1, 512, 513, 10240, 65536, 70001,
		planEnd - 1024, planEnd - 513, planEnd - 1, planEnd, planEnd + 1, planEnd + 512, planEnd + 10240,
		(planEnd + total) / 2, total - 17, total - 16, total - 15, total - 8, total - 1}
	var out []int
	for _, o := range offs {
		if o >= 0 && o < total {
			out = append(out, o)
		}
	}
	return out
}

// atk28Unpublished passes a send command's stdin through, recording it, and
// fails the read that would deliver the publish line: the stage fails and
// nothing is published.
type atk28Unpublished struct {
	r   io.Reader
	buf *bytes.Buffer
}

func (u atk28Unpublished) Read(p []byte) (int, error) {
	n, err := u.r.Read(p)
	if bytes.HasPrefix(p[:n], []byte("airlock-publish")) {
		return 0, errAtk28Cut
	}
	u.buf.Write(p[:n])
	return n, err
}

// sendSize changes the host tree and runs a delta that is not published,
// returning the size of its send command's stdin (publish line included)
// and where the plan archive in it ends.
func (e *atk28Env) sendSize() (planEnd, total int) {
	e.t.Helper()
	e.bump()
	var buf bytes.Buffer
	e.hook.set(func(_ context.Context, c *sandbox.Command) error {
		if atk28IsSend(c) {
			c.Stdin = atk28Unpublished{r: c.Stdin, buf: &buf}
		}
		return nil
	})
	_, err := e.stage(e.t.Context())
	e.hook.set(nil)
	require.ErrorIs(e.t, err, errAtk28Cut)
	return atk28PlanEnd(e.t, buf.Bytes()), buf.Len() + len("airlock-publish\n")
}

// Cut the send command's stdin (plan archive, tree stream, publish line) of
// a delta of 600 files at many offsets, ending it cleanly or failing the
// read, or cancel the stage's context there: each stage fails leaving the
// previous copy whole and no temporary directory (see failedNoTemp), or
// succeeds with an exact copy; a quiet stage then succeeds. (A read that fails inside the publish
// line is TestAtk28PublishLineReadFailsLeavesTempDir.)
func TestAtk28CutSendStdin(t *testing.T) {
	e := newAtk28(t, 600, atk28Local)
	planEnd, total := e.sendSize()
	require.Greater(t, planEnd, 64<<10, "the plan archive should be over 64 KiB for this test")
	prev := treetest.Snapshot(t, e.dst())
	for _, mode := range []string{"eof", "error", "cancel"} {
		for _, off := range atk28Offsets(planEnd, total) {
			if mode != "eof" && !atk28Few(off, planEnd, total) {
				continue // fewer: each failure after the plan costs most of a second
			}
			if mode == "error" && off > total-len("airlock-publish\n") {
				continue
			}
			what := fmt.Sprintf("%s at %d (plan ends at %d, stdin is %d)", mode, off, planEnd, total)
			ctx, cancel := context.WithCancel(t.Context())
			e.hook.set(func(_ context.Context, c *sandbox.Command) error {
				if atk28IsSend(c) {
					cut := &atk28Cut{r: c.Stdin, n: off}
					switch mode {
					case "error":
						cut.err = errAtk28Cut
					case "cancel":
						cut.at = cancel
					}
					c.Stdin = cut
				}
				return nil
			})
			start := time.Now()
			a, err := e.stage(ctx)
			cancel()
			e.hook.set(nil)
			took := time.Since(start)
			assert.Less(t, took, 20*time.Second, "%s: the stage took %s", what, took)
			if err == nil {
				require.Empty(t, treetest.Diff(treetest.Snapshot(t, e.src), treetest.Snapshot(t, e.dst())), "%s: the stage succeeded but the copy differs from the source", what)
				t.Logf("%s: succeeded, sent %d", what, a.Sent)
				e.noTemp(what)
				planEnd, total = e.sendSize()
				prev = treetest.Snapshot(t, e.dst())
				continue
			}
			switch mode {
			case "error":
				assert.ErrorIs(t, err, sandbox.ErrTransport, "%s", what)
				assert.ErrorIs(t, err, errAtk28Cut, "%s", what)
			case "cancel":
				assert.ErrorIs(t, err, context.Canceled, "%s", what)
			}
			require.Empty(t, treetest.Diff(prev, treetest.Snapshot(t, e.dst())), "%s: the previous copy changed after a failed stage: %v", what, err)
			e.failedNoTemp(what, err)
			if testing.Verbose() {
				t.Logf("%s (%s): %v", what, took, err)
			}
		}
	}
	e.quiet("after the cuts")
}

// A Runner's read of the send command's stdin fails after part of the
// publish line went through (a transport failure: sandbox.Local kills the
// command's process group and returns). The publish's outcome is unknown to
// the host, so no cleanup runs; the previous copy stays whole, and the
// error names the temporary directory left under the root (before 586aed7
// it did not), which the next quiet stage sweeps. (The same cut one byte
// earlier, before the publish line, removes it.)
func TestAtk28PublishLineReadFailsLeavesTempDir(t *testing.T) {
	e := newAtk28(t, 50, atk28Local)
	_, total := e.sendSize()
	prev := treetest.Snapshot(t, e.dst())
	for _, back := range []int{15, 8, 1} {
		off := total - back
		what := fmt.Sprintf("stdin read fails after %d of %d bytes (%d bytes of the publish line through)", off, total, len("airlock-publish\n")-back)
		e.hook.set(func(_ context.Context, c *sandbox.Command) error {
			if atk28IsSend(c) {
				c.Stdin = &atk28Cut{r: c.Stdin, n: off, err: errAtk28Cut}
			}
			return nil
		})
		_, err := e.stage(t.Context())
		e.hook.set(nil)
		require.ErrorIs(t, err, errAtk28Cut, "%s", what)
		require.Empty(t, treetest.Diff(prev, treetest.Snapshot(t, e.dst())), "%s: the previous copy changed", what)
		var left []string
		for _, n := range a22Names(t, e.root) {
			if strings.HasPrefix(n, ".airlock-tmp-") {
				left = append(left, n)
			}
		}
		for _, n := range left {
			assert.Contains(t, err.Error(), n, "%s: the failed stage left temporary directory %s under the root and its error does not name it: %v", what, n, err)
		}
		// the next quiet stage sweeps it
		e.quiet(what + ", then a quiet stage")
		e.bump()
		_, total = e.sendSize()
		prev = treetest.Snapshot(t, e.dst())
	}
}

// atk28User runs each script with the machine's GNU tools as the busybox
// test user (uid busyboxuser.UID), through sandbox.Local: a non-root sandbox
// where modes bind.
type atk28User struct {
	r   sandbox.Runner
	tmp string
}

func (u *atk28User) Run(ctx context.Context, cmd sandbox.Command) error {
	f, err := os.CreateTemp(u.tmp, "script-*.sh")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(cmd.Script); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return err
	}
	cmd.Script = fmt.Sprintf("exec setpriv --reuid=%d --regid=%d --clear-groups /bin/sh %s", busyboxuser.UID, busyboxuser.GID, f.Name())
	return u.r.Run(ctx, cmd)
}

// atk28UserRunner returns a maker of non-root GNU sandboxes, or skips t.
func atk28UserRunner(t *testing.T) func(sb string) sandbox.Runner {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run scripts as another user")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("needs setpriv (util-linux)")
	}
	tmp := busyboxuser.Dir(t)
	return func(string) sandbox.Runner { return &atk28User{r: sandbox.Local(tmp), tmp: tmp} }
}

// newAtk28User is newAtk28 with a sandbox directory the user owns.
func newAtk28User(t *testing.T, n int) *atk28Env {
	mk := atk28UserRunner(t)
	sb := busyboxuser.Dir(t)
	src := t.TempDir()
	atk28Files(t, src, n)
	require.NoError(t, os.Chmod(src, 0o755))
	h := &atk28Hook{r: mk(sb)}
	e := &atk28Env{t: t, src: src, sb: sb, root: filepath.Join(sb, "rt"), name: "sk", hook: h, tgt: stage.NewBridge(h)}
	e.quiet("first stage")
	e.base = a22Names(t, e.root)
	return e
}

// atk28Tamper is something an agent does to the previous copy before a delta.
type atk28Tamper struct {
	name string
	do   func(t *testing.T, e *atk28Env)
}

func atk28Walk(t *testing.T, dir string, f func(p string, d fs.DirEntry)) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			f(p, d)
		}
		return nil
	}))
}

// atk28ReadOnlyDirs makes every directory of the copy at dst, its top
// too, mode 0555.
func atk28ReadOnlyDirs(t *testing.T, dst string) {
	t.Helper()
	atk28Walk(t, dst, func(p string, d fs.DirEntry) {
		if d.IsDir() {
			require.NoError(t, os.Chmod(p, 0o555))
		}
	})
	require.NoError(t, os.Chmod(dst, 0o555))
}

// atk28TouchFiles gives every file of the copy at dst the time now.
func atk28TouchFiles(t *testing.T, dst string) {
	t.Helper()
	now := time.Now()
	atk28Walk(t, dst, func(p string, d fs.DirEntry) {
		if !d.IsDir() {
			require.NoError(t, os.Chtimes(p, now, now))
		}
	})
}

var atk28Tampers = []atk28Tamper{
	{"DirReadOnly", func(t *testing.T, e *atk28Env) {
		require.NoError(t, os.Chmod(filepath.Join(e.dst(), "dir-03-with-a-long-directory-name"), 0o555))
	}},
	{"AllDirsReadOnly", func(t *testing.T, e *atk28Env) { atk28ReadOnlyDirs(t, e.dst()) }},
	{"AllDirsReadOnlyEveryFileTouched", func(t *testing.T, e *atk28Env) {
		atk28TouchFiles(t, e.dst())
		require.NoError(t, os.WriteFile(filepath.Join(e.dst(), "dir-04-with-a-long-directory-name", "agent-notes.txt"), []byte("mine"), 0o644))
		atk28ReadOnlyDirs(t, e.dst())
	}},
	{"TouchEveryFile", func(t *testing.T, e *atk28Env) { atk28TouchFiles(t, e.dst()) }},
	{"ChmodEveryFile", func(t *testing.T, e *atk28Env) {
		atk28Walk(t, e.dst(), func(p string, d fs.DirEntry) {
			if !d.IsDir() {
				require.NoError(t, os.Chmod(p, 0o600))
			}
		})
	}},
	{"EveryFileUnreadable", func(t *testing.T, e *atk28Env) {
		atk28Walk(t, e.dst(), func(p string, d fs.DirEntry) {
			if !d.IsDir() {
				require.NoError(t, os.Chmod(p, 0))
			}
		})
	}},
	{"RewriteHalfSameSize", func(t *testing.T, e *atk28Env) {
		i := 0
		atk28Walk(t, e.dst(), func(p string, d fs.DirEntry) {
			if !d.IsDir() && i%2 == 0 {
				fi, err := os.Stat(p)
				require.NoError(t, err)
				// a new inode of the same size, as an editor's save makes
				tmp := p + ".swp"
				require.NoError(t, os.WriteFile(tmp, bytes.Repeat([]byte("X"), int(fi.Size())), fi.Mode().Perm()))
				require.NoError(t, os.Rename(tmp, p))
			}
			i++
		})
	}},
	{"ExtraEntries", func(t *testing.T, e *atk28Env) {
		d := filepath.Join(e.dst(), "dir-04-with-a-long-directory-name")
		require.NoError(t, os.WriteFile(filepath.Join(d, "agent-notes.txt"), []byte("mine"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(d, "new\nline.txt"), []byte("nl"), 0o644))
		require.NoError(t, os.Mkdir(filepath.Join(e.dst(), "agent-dir"), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(e.dst(), "agent-dir", "x"), []byte("x"), 0o644))
		require.NoError(t, syscall.Mkfifo(filepath.Join(d, "fifo"), 0o644))
		require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(d, "passwd-link")))
		require.NoError(t, os.Symlink("..", filepath.Join(d, "up")))
	}},
	{"FileReplacedByFifoAndDir", func(t *testing.T, e *atk28Env) {
		var files []string
		atk28Walk(t, e.dst(), func(p string, d fs.DirEntry) {
			if d.Type().IsRegular() && len(files) < 3 {
				files = append(files, p)
			}
		})
		require.NoError(t, os.Remove(files[0]))
		require.NoError(t, syscall.Mkfifo(files[0], 0o644))
		require.NoError(t, os.Remove(files[1]))
		require.NoError(t, os.Mkdir(files[1], 0o755))
		require.NoError(t, os.Remove(files[2]))
		require.NoError(t, os.Symlink("/etc/passwd", files[2]))
	}},
}

// atk28TamperedDelta: after each agent tamper with the previous copy (done
// as the sandbox's user), a delta that also adds a file in dir-03 and
// removes one elsewhere gives an exact copy, or fails leaving the previous
// copy as it was; either way a second, quiet delta gives an exact copy,
// with no temporary directory left and each file with one link.
func atk28TamperedDelta(t *testing.T, newEnv func(t *testing.T) *atk28Env, chown bool) {
	for _, tm := range atk28Tampers {
		t.Run(tm.name, func(t *testing.T) {
			e := newEnv(t)
			time.Sleep(10 * time.Millisecond)
			tm.do(t, e)
			if chown {
				out, err := exec.Command("chown", "-hR", fmt.Sprint(busyboxuser.UID), e.root).CombinedOutput()
				require.NoError(t, err, "%s", out)
			}
			prev := treetest.Snapshot(t, e.dst())
			e.bump()
			require.NoError(t, os.Remove(filepath.Join(e.src, "dir-07-with-a-long-directory-name", fmt.Sprintf("file-%05d-with-a-rather-long-name-to-grow-the-plan-beyond-sixty-four-kib.txt", 7))))
			a, err := e.stage(t.Context())
			if err != nil {
				t.Logf("tampered delta failed: %v", err)
				require.Empty(t, treetest.Diff(prev, treetest.Snapshot(t, e.dst())), "the previous copy changed after a failed delta: %v", err)
			} else {
				require.Empty(t, treetest.Diff(treetest.Snapshot(t, e.src), treetest.Snapshot(t, e.dst())), "the tampered delta succeeded (sent %d) but the copy differs from the source", a.Sent)
				t.Logf("tampered delta sent %d of %d", a.Sent, a.Files)
			}
			e.noTemp("after the tampered delta")
			e.bump()
			e.quiet("a quiet delta after the tampered one")
			a22OneLink(t, e.dst())
		})
	}
}

func TestAtk28TamperedPreviousCopyRoot(t *testing.T) {
	atk28TamperedDelta(t, func(t *testing.T) *atk28Env { return newAtk28(t, 120, atk28Local) }, false)
}

func TestAtk28TamperedPreviousCopyUser(t *testing.T) {
	atk28TamperedDelta(t, func(t *testing.T) *atk28Env { return newAtk28User(t, 120) }, true)
}

// atk28Swapper, started when the send command starts, waits d and then
// replaces every regular file of the previous copy by a new inode of the
// same size, mode and times holding other bytes (an agent's editor saving),
// through a descriptor of the previous copy's directory, so that it follows
// that copy wherever the publish moves it and never touches the new copy.
func atk28Swapper(t *testing.T, dir string, d time.Duration, stop <-chan struct{}) (wait func() int) {
	t.Helper()
	var rels []string
	atk28Walk(t, dir, func(p string, de fs.DirEntry) {
		if de.Type().IsRegular() {
			rel, err := filepath.Rel(dir, p)
			require.NoError(t, err)
			rels = append(rels, rel)
		}
	})
	f, err := os.Open(dir)
	require.NoError(t, err)
	base := fmt.Sprintf("/proc/self/fd/%d", f.Fd())
	done := make(chan int, 1)
	go func() {
		defer f.Close()
		n := 0
		select {
		case <-time.After(d):
		case <-stop:
			done <- n
			return
		}
		// last files first: the order a link of the whole tree is least
		// likely to follow
		for i := len(rels) - 1; i >= 0; i-- {
			select {
			case <-stop:
				done <- n
				return
			default:
			}
			p := filepath.Join(base, rels[i])
			fi, err := os.Stat(p)
			if err != nil {
				continue
			}
			tmp := p + ".swp"
			if os.WriteFile(tmp, bytes.Repeat([]byte("X"), int(fi.Size())), fi.Mode().Perm()) != nil {
				continue
			}
			if os.Chtimes(tmp, fi.ModTime(), fi.ModTime()) != nil || os.Rename(tmp, p) != nil {
				_ = os.Remove(tmp)
				continue
			}
			n++
		}
		done <- n
	}()
	return func() int { return <-done }
}

// While a delta runs, an agent process swaps the previous copy's files for
// new inodes of the same size (other bytes), starting at several delays
// into the send command. A delta that succeeds must publish exactly the
// source: a file linked from the previous copy after its swap would hold the
// agent's bytes in the new copy under a manifest that says otherwise.
func TestAtk28RaceSwapPreviousCopy(t *testing.T) {
	e := newAtk28(t, 500, atk28Local)
	wrong := 0
	for _, d := range []time.Duration{0, 6, 32} {
		for _, verify := range []bool{false, true} {
			what := fmt.Sprintf("swap from %s into the send command (verify %v)", d*time.Millisecond, verify)
			e.bump()
			stop := make(chan struct{})
			var wait func() int
			e.hook.set(func(_ context.Context, c *sandbox.Command) error {
				if atk28IsSend(c) && wait == nil {
					wait = atk28Swapper(t, e.dst(), d*time.Millisecond, stop)
				}
				return nil
			})
			var opts []stage.Option
			if verify {
				opts = append(opts, stage.WithVerify())
			}
			a, err := e.stage(t.Context(), opts...)
			close(stop)
			e.hook.set(nil)
			swapped := -1
			if wait != nil {
				swapped = wait()
			}
			if err != nil {
				t.Logf("%s: %d swapped, failed: %v", what, swapped, err)
				if verify {
					assert.NotErrorIs(t, err, sandbox.ErrTransport, "%s", what)
				}
				continue
			}
			diff := treetest.Diff(treetest.Snapshot(t, e.src), treetest.Snapshot(t, e.dst()))
			if len(diff) > 0 {
				wrong++
				t.Errorf("%s: %d swapped; the delta succeeded (sent %d of %d) but the new copy differs from the source in %d entries, e.g. %s", what, swapped, a.Sent, a.Files, len(diff), diff[0])
			} else {
				t.Logf("%s: %d swapped, exact (sent %d)", what, swapped, a.Sent)
			}
		}
	}
	t.Logf("%d wrong copies published", wrong)
	e.bump()
	e.quiet("a quiet delta after the races", stage.WithVerify())
}

// atk28Bin makes a PATH directory holding every tool of /usr/bin and
// /usr/sbin except those in drop, and the shell scripts in wrap (name ->
// script body; the real tool is /usr/bin/<name>).
func atk28Bin(t *testing.T, drop []string, wrap map[string]string) string {
	t.Helper()
	bin := t.TempDir()
	require.NoError(t, os.Chmod(bin, 0o755))
	skip := map[string]bool{}
	for _, d := range drop {
		skip[d] = true
	}
	for _, dir := range []string{"/usr/bin", "/usr/sbin"} {
		ents, err := os.ReadDir(dir)
		require.NoError(t, err)
		for _, de := range ents {
			n := de.Name()
			if skip[n] || wrap[n] != "" {
				continue
			}
			if _, err := os.Lstat(filepath.Join(bin, n)); err == nil {
				continue
			}
			require.NoError(t, os.Symlink(filepath.Join(dir, n), filepath.Join(bin, n)))
		}
	}
	for n, body := range wrap {
		require.NoError(t, os.WriteFile(filepath.Join(bin, n), []byte("#!/bin/sh\n"+body+"\n"), 0o755))
	}
	return bin
}

func atk28WithPath(bin string) func(sb string) sandbox.Runner {
	return func(sb string) sandbox.Runner {
		return sandbox.Local(sb, sandbox.WithEnviron([]string{"PATH=" + bin, "HOME=/root", "LANG=C"}))
	}
}

// cp -al is wrapped: the link of the whole previous copy fails at once,
// fails after linking part of the tree, is slow, or the PATH has no wc. A
// delta after an agent touched every file (so that the background link must
// be undone) and left files of its own gives an exact copy or fails leaving
// the previous copy; then a quiet delta gives an exact copy.
func TestAtk28SandboxTools(t *testing.T) {
	const partial = `case "$1" in -al|-la|-a|-l) /usr/bin/cp "$@" & p=$!; sleep 0.005; kill $p; wait $p; exit 1;; esac
exec /usr/bin/cp "$@"`
	for _, c := range []struct {
		name string
		drop []string
		wrap map[string]string
	}{
		{"NoWc", []string{"wc"}, nil},
		{"CpLinkFails", nil, map[string]string{"cp": `case "$*" in *-*l*) echo "cp: cannot create hard link" >&2; exit 1;; esac
exec /usr/bin/cp "$@"`}},
		{"CpLinkPartial", nil, map[string]string{"cp": partial}},
		{"CpSlow", nil, map[string]string{"cp": `sleep 0.2; exec /usr/bin/cp "$@"`}},
		{"CpLinkSlowLate", nil, map[string]string{"cp": `case "$*" in *-*l*) /usr/bin/cp "$@"; s=$?; sleep 0.2; exit $s;; esac
exec /usr/bin/cp "$@"`}},
		{"CpAlwaysFails", nil, map[string]string{"cp": `exit 1`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			bin := atk28Bin(t, c.drop, c.wrap)
			e := newAtk28(t, 100, atk28WithPath(bin))
			for _, touch := range []bool{true} {
				if touch {
					time.Sleep(10 * time.Millisecond)
					now := time.Now()
					atk28Walk(t, e.dst(), func(p string, d fs.DirEntry) {
						if !d.IsDir() {
							require.NoError(t, os.Chtimes(p, now, now))
						}
					})
					require.NoError(t, os.WriteFile(filepath.Join(e.dst(), "dir-02-with-a-long-directory-name", "agent.txt"), []byte("mine"), 0o644))
				}
				prev := treetest.Snapshot(t, e.dst())
				e.bump()
				a, err := e.stage(t.Context())
				if err != nil {
					t.Logf("touch %v: delta failed: %v", touch, err)
					require.Empty(t, treetest.Diff(prev, treetest.Snapshot(t, e.dst())), "touch %v: the previous copy changed after a failed delta: %v", touch, err)
				} else {
					require.Empty(t, treetest.Diff(treetest.Snapshot(t, e.src), treetest.Snapshot(t, e.dst())), "touch %v: the delta succeeded (sent %d of %d) but the copy differs from the source", touch, a.Sent, a.Files)
					t.Logf("touch %v: delta sent %d of %d", touch, a.Sent, a.Files)
				}
				e.noTemp(fmt.Sprintf("touch %v", touch))
				if strings.Contains(c.name, "Slow") {
					time.Sleep(250 * time.Millisecond) // a slow cp left running in the background would show now
				}
				e.noTemp(fmt.Sprintf("touch %v, 250 ms later", touch))
				if err == nil {
					require.Empty(t, treetest.Diff(treetest.Snapshot(t, e.src), treetest.Snapshot(t, e.dst())), "touch %v: the copy changed after the delta returned (a background cp still running?)", touch)
				}
			}
			e.bump()
			e.quiet("a quiet delta")
			a22OneLink(t, e.dst())
		})
	}
}

// atk28Lines rewrites what a command prints, line by line: each whole line
// (without its newline) becomes the lines f returns.
type atk28Lines struct {
	w   io.Writer
	f   func(line string) []string
	buf []byte
}

func (l *atk28Lines) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(l.buf[:i])
		l.buf = l.buf[i+1:]
		for _, o := range l.f(line) {
			if _, err := io.WriteString(l.w, o+"\n"); err != nil {
				return 0, err
			}
		}
	}
}

// A hostile sandbox adds, drops and rewrites the send command's report lines
// of a delta: a stage either fails with ErrProtocol (leaving the previous
// copy) or publishes exactly the source, and never outlives its context.
// Most important: a forged "airlock-linked" for a file the host changed
// (trig.txt) or added must not make the host skip sending it.
func TestAtk28HostileReport(t *testing.T) {
	after := func(trigger, extra string) func(int, string) []string {
		return func(_ int, l string) []string {
			if l == trigger {
				return []string{l, extra}
			}
			return []string{l}
		}
	}
	firstLinked := func(g func(gen int, l string) []string) func(int, string) []string {
		done := false
		return func(gen int, l string) []string {
			if !done && strings.HasPrefix(l, "airlock-linked ") {
				done = true
				return g(gen, l)
			}
			return []string{l}
		}
	}
	for _, c := range []struct {
		name string
		f    func(gen int, line string) []string
	}{
		{"LinkedChangedFile", firstLinked(func(_ int, l string) []string { return []string{"airlock-linked trig.txt", l} })},
		{"LinkedNewFile", firstLinked(func(gen int, l string) []string {
			return []string{fmt.Sprintf("airlock-linked dir-03-with-a-long-directory-name/gen-%d.txt", gen), l}
		})},
		{"LinkedRemovedFile", firstLinked(func(_ int, l string) []string {
			return []string{"airlock-linked dir-07-with-a-long-directory-name/file-00007-with-a-rather-long-name-to-grow-the-plan-beyond-sixty-four-kib.txt", l}
		})},
		{"LinkedOutside", firstLinked(func(_ int, l string) []string { return []string{"airlock-linked ../../../etc/passwd", l} })},
		{"LinkedDropped", firstLinked(func(_ int, l string) []string { return nil })},
		{"AllLinkedDropped", func(_ int, l string) []string {
			if strings.HasPrefix(l, "airlock-linked ") {
				return nil
			}
			return []string{l}
		}},
		{"LinkedAsWrongHash", firstLinked(func(_ int, l string) []string {
			return []string{strings.Repeat("0", 64) + "  " + strings.TrimPrefix(l, "airlock-linked ")}
		})},
		{"ReadyTwice", after("airlock-ready", "airlock-ready")},
		{"CarriedEarly", after("airlock-ready", "airlock-carried")},
		{"CarriedTwice", after("airlock-carried", "airlock-carried")},
		{"ExtractedEarly", after("airlock-ready", "airlock-extracted")},
		{"PublishedEarly", after("airlock-ready", "airlock-published")},
		{"PublishedAfterExtracted", after("airlock-extracted", "airlock-published")},
		{"UnknownLine", after("airlock-ready", "airlock-bogus")},
		{"LinkedEmpty", after("airlock-ready", "airlock-linked ")},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newAtk28(t, 150, atk28Local)
			e.bump()
			prev := treetest.Snapshot(t, e.dst())
			gen := e.gen
			e.hook.set(func(_ context.Context, cmd *sandbox.Command) error {
				if atk28IsSend(cmd) && cmd.Stdout != nil {
					cmd.Stdout = &atk28Lines{w: cmd.Stdout, f: func(l string) []string { return c.f(gen, l) }}
				}
				return nil
			})
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			start := time.Now()
			a, err := e.stage(ctx)
			e.hook.set(nil)
			require.Less(t, time.Since(start), 19*time.Second, "the stage ran until its context ended")
			if err != nil {
				t.Logf("failed: %v", err)
				assert.ErrorIs(t, err, sandbox.ErrProtocol, "a report that breaks the protocol")
				assert.NotErrorIs(t, err, context.DeadlineExceeded)
				require.Empty(t, treetest.Diff(prev, treetest.Snapshot(t, e.dst())), "the previous copy changed after a failed delta: %v", err)
				e.noTemp("after the failed delta")
			} else {
				t.Logf("succeeded, sent %d of %d", a.Sent, a.Files)
				require.Empty(t, treetest.Diff(treetest.Snapshot(t, e.src), treetest.Snapshot(t, e.dst())), "the delta with a rewritten report succeeded (sent %d of %d) but the copy differs from the source", a.Sent, a.Files)
			}
			e.bump()
			e.quiet("a quiet delta")
		})
	}
}

// A sandbox whose send command never reads its stdin (and says it is
// ready) holds the transfer only until the caller's context ends.
func TestAtk28SendNeverReads(t *testing.T) {
	e := newAtk28(t, 900, atk28Local)
	e.bump()
	prev := treetest.Snapshot(t, e.dst())
	e.hook.set(func(_ context.Context, cmd *sandbox.Command) error {
		if atk28IsSend(cmd) {
			cmd.Script = "echo airlock-ready; exec sleep 60"
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err := e.stage(ctx)
	took := time.Since(start)
	e.hook.set(nil)
	require.Error(t, err)
	t.Logf("after %s: %v", took, err)
	assert.Less(t, took, 4*time.Second, "the stage outlived its 2 s context by far")
	assert.True(t, errors.Is(err, context.DeadlineExceeded) || errors.Is(err, sandbox.ErrProtocol), "want the context's end or a protocol error: %v", err)
	require.Empty(t, treetest.Diff(prev, treetest.Snapshot(t, e.dst())), "the previous copy changed")
	e.quiet("a quiet delta")
}

// The send command's report is held to the protocol: a sandbox that
// breaks it fails the stage with sandbox.ErrProtocol and keeps the
// previous copy. A line no script prints ("airlock-bogus"),
// "airlock-extracted" before the carry's end, and "airlock-published"
// before the host has written its publish line were all accepted before;
// and with the publish line lost on the way (the stdin ends before it), a
// forged "airlock-published" was the only report of a publish: the send
// command exited 96 (it moved nothing), yet the stage succeeded with the
// old copy in place.
func TestAtk28OutOfOrderReportRefused(t *testing.T) {
	for _, c := range []struct {
		name, trigger, extra string
		dropPublish          bool
	}{
		{"UnknownLine", "airlock-ready", "airlock-bogus", false},
		{"ExtractedBeforeCarried", "airlock-ready", "airlock-extracted", false},
		{"PublishedBeforePublishLine", "airlock-ready", "airlock-published", false},
		{"PublishedForgedExit96OldCopyKept", "airlock-extracted", "airlock-published", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var sendErr []error
			var mu sync.Mutex
			e := newAtk28(t, 200, func(sb string) sandbox.Runner {
				return a23Runner(func(ctx context.Context, cmd sandbox.Command) error {
					err := sandbox.Local(sb).Run(ctx, cmd)
					if atk28IsSend(&cmd) {
						mu.Lock()
						sendErr = append(sendErr, err)
						mu.Unlock()
					}
					return err
				})
			})
			e.bump()
			prev := treetest.Snapshot(t, e.dst())
			mu.Lock()
			sendErr = nil
			mu.Unlock()
			e.hook.set(func(_ context.Context, cmd *sandbox.Command) error {
				if atk28IsSend(cmd) && cmd.Stdout != nil {
					cmd.Stdout = &atk28Lines{w: cmd.Stdout, f: func(l string) []string {
						if l == c.trigger {
							return []string{l, c.extra}
						}
						return []string{l}
					}}
					if c.dropPublish {
						cmd.Stdin = atk28DropPublish{r: cmd.Stdin}
					}
				}
				return nil
			})
			a, err := e.stage(t.Context())
			e.hook.set(nil)
			if err == nil {
				diff := treetest.Diff(treetest.Snapshot(t, e.src), treetest.Snapshot(t, e.dst()))
				assert.Empty(t, diff, "the stage succeeded and the sandbox holds a copy that is not the source (the old one?)")
				mu.Lock()
				defer mu.Unlock()
				t.Errorf("a report with %q printed after %q was accepted (sent %d of %d; the send command returned %v): want an error wrapping sandbox.ErrProtocol", c.extra, c.trigger, a.Sent, a.Files, sendErr)
				return
			}
			assert.ErrorIs(t, err, sandbox.ErrProtocol)
			require.Empty(t, treetest.Diff(prev, treetest.Snapshot(t, e.dst())), "the previous copy changed: %v", err)
		})
	}
}

// atk28DropPublish ends the stdin where the publish line would start.
type atk28DropPublish struct{ r io.Reader }

func (d atk28DropPublish) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	if bytes.HasPrefix(p[:n], []byte("airlock-publish")) {
		return 0, io.EOF
	}
	return n, err
}

// Source names holding newlines and protocol words never reach the send
// command's report as lines of their own.
func TestAtk28NewlineNamesInjectNoReportLine(t *testing.T) {
	e := newAtk28(t, 150, atk28Local)
	treetest.Write(t, filepath.Join(e.src, "dir-01-with-a-long-directory-name", "z\nairlock-published"), "evil", 0o644)
	treetest.Write(t, filepath.Join(e.src, "dir-01-with-a-long-directory-name", "airlock-published\n"), "evil", 0o644)
	treetest.Write(t, filepath.Join(e.src, "\nairlock-extracted\n"), "evil", 0o644)
	e.bump()
	e.quiet("with newline names")
	rec := e.record()
	var others []string
	for _, l := range strings.Split(strings.TrimSuffix(rec.outs.String(), "\n"), "\n") {
		if !strings.HasPrefix(l, "airlock-linked dir-") {
			others = append(others, l)
		}
	}
	assert.Equal(t, []string{"airlock-ready", "airlock-carried", "airlock-extracted", "airlock-published"}, others, "the send command's report lines besides the linked ones")
}

// atk28Racer, started when the send command starts, waits d and then does
// act on the previous copy (through a descriptor of its directory, so it
// follows that copy wherever the publish moves it).
func atk28Racer(t *testing.T, dir string, d time.Duration, stop <-chan struct{}, act func(base string, stop <-chan struct{})) (wait func()) {
	t.Helper()
	f, err := os.Open(dir)
	require.NoError(t, err)
	base := fmt.Sprintf("/proc/self/fd/%d", f.Fd())
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer f.Close()
		select {
		case <-time.After(d):
		case <-stop:
			return
		}
		act(base, stop)
	}()
	return func() { <-done }
}

// While a delta that must copy and hash files (the agent touched them all)
// runs, an agent process races it on the previous copy: it replaces files by
// fifos (a copy that opens one would block forever), deletes the whole copy,
// or makes its directories read-only. The stage ends well within its
// context, exact or failed with the previous copy's directory not half
// published, and a quiet stage after it is exact.
func TestAtk28RacePreviousCopy(t *testing.T) {
	acts := map[string]func(base string, stop <-chan struct{}){
		"Fifos": func(base string, stop <-chan struct{}) {
			_ = filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
				select {
				case <-stop:
					return fs.SkipAll
				default:
				}
				if err == nil && d.Type().IsRegular() {
					_ = os.Remove(p)
					_ = syscall.Mkfifo(p, 0o644)
				}
				return nil
			})
		},
		"DeleteAll": func(base string, _ <-chan struct{}) {
			ents, err := os.ReadDir(base)
			if err != nil {
				return
			}
			for _, e := range ents {
				_ = os.RemoveAll(filepath.Join(base, e.Name()))
			}
		},
		"DirsReadOnly": func(base string, stop <-chan struct{}) {
			_ = filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					_ = os.Chmod(p, 0o555)
				}
				return nil
			})
		},
	}
	for _, name := range []string{"Fifos", "DeleteAll", "DirsReadOnly"} {
		t.Run(name, func(t *testing.T) {
			e := newAtk28(t, 300, atk28Local)
			for _, d := range []time.Duration{0, 10} {
				what := fmt.Sprintf("%s from %s into the send command", name, d*time.Millisecond)
				time.Sleep(10 * time.Millisecond)
				now := time.Now()
				atk28Walk(t, e.dst(), func(p string, de fs.DirEntry) {
					if !de.IsDir() {
						require.NoError(t, os.Chtimes(p, now, now))
					}
				})
				e.bump()
				stop := make(chan struct{})
				var wait func()
				e.hook.set(func(_ context.Context, c *sandbox.Command) error {
					if atk28IsSend(c) && wait == nil {
						wait = atk28Racer(t, e.dst(), d*time.Millisecond, stop, acts[name])
					}
					return nil
				})
				ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
				start := time.Now()
				a, err := e.stage(ctx)
				took := time.Since(start)
				cancel()
				close(stop)
				e.hook.set(nil)
				if wait != nil {
					wait()
				}
				assert.Less(t, took, 10*time.Second, "%s: the stage took %s: %v", what, took, err)
				assert.NotErrorIs(t, err, context.DeadlineExceeded, "%s: the stage ran until its context ended", what)
				if err == nil {
					require.Empty(t, treetest.Diff(treetest.Snapshot(t, e.src), treetest.Snapshot(t, e.dst())), "%s: the delta succeeded (sent %d of %d) but the copy differs from the source", what, a.Sent, a.Files)
					t.Logf("%s: exact, sent %d", what, a.Sent)
				} else {
					t.Logf("%s: failed after %s: %v", what, took, err)
				}
				out, cerr := exec.Command("chmod", "-R", "u+w", e.root).CombinedOutput()
				require.NoError(t, cerr, "%s", out)
				e.bump()
				e.quiet(what + ", then a quiet delta")
			}
		})
	}
}

// newAtk28Busybox is newAtk28 in a busybox sandbox (busybox's applets only,
// a non-root user), where tar reads to the end of its input: the plan then
// travels the old ways (in the script, or a carry command of its own).
func newAtk28Busybox(t *testing.T, n int) *atk28Env {
	bb := busyboxuser.New(t)
	sb := busyboxuser.Dir(t)
	src := t.TempDir()
	atk28Files(t, src, n)
	require.NoError(t, os.Chmod(src, 0o755))
	h := &atk28Hook{r: bb.Runner(sb)}
	e := &atk28Env{t: t, src: src, sb: sb, root: filepath.Join(sb, "rt"), name: "sk", hook: h, tgt: stage.NewBridge(h)}
	e.quiet("first stage")
	e.base = a22Names(t, e.root)
	return e
}

func TestAtk28TamperedPreviousCopyBusybox(t *testing.T) {
	atk28TamperedDelta(t, func(t *testing.T) *atk28Env { return newAtk28Busybox(t, 120) }, true)
}

// In a busybox sandbox, cut the stdin of the k-th command of a delta that
// has one (the carry command's plan, the send command's stream) at several
// offsets, ending it or failing the read: the stage fails leaving the
// previous copy and no temporary directory (see failedNoTemp for the one
// a killed setup may leave to the next sweep), or is exact; a quiet stage
// then is exact.
func TestAtk28BusyboxCutStdin(t *testing.T) {
	e := newAtk28Busybox(t, 600)
	prev := treetest.Snapshot(t, e.dst())
	var scripts []string
	for k := 1; k <= 2; k++ {
		for _, mode := range []string{"eof", "error"} {
			for _, off := range []int{0, 512, 65536, 200000} {
				what := fmt.Sprintf("command %d with stdin, %s at %d", k, mode, off)
				n := 0
				hit := false
				e.hook.set(func(_ context.Context, c *sandbox.Command) error {
					if c.Stdin == nil {
						return nil
					}
					n++
					if n == k {
						hit = true
						cut := &atk28Cut{r: c.Stdin, n: off}
						if mode == "error" {
							cut.err = errAtk28Cut
						}
						c.Stdin = cut
						if len(scripts) < k {
							scripts = append(scripts, c.Script[:min(len(c.Script), 40)])
						}
					}
					return nil
				})
				a, err := e.stage(t.Context())
				e.hook.set(nil)
				if !hit {
					t.Logf("%s: no such command", what)
				}
				if err == nil {
					require.Empty(t, treetest.Diff(treetest.Snapshot(t, e.src), treetest.Snapshot(t, e.dst())), "%s: the delta succeeded (sent %d of %d) but the copy differs from the source", what, a.Sent, a.Files)
					e.noTemp(what)
					e.bump()
					prev = treetest.Snapshot(t, e.dst())
					continue
				}
				if mode == "error" {
					assert.ErrorIs(t, err, errAtk28Cut, "%s", what)
				}
				require.Empty(t, treetest.Diff(prev, treetest.Snapshot(t, e.dst())), "%s: the previous copy changed after a failed delta: %v", what, err)
				e.failedNoTemp(what, err)
				if testing.Verbose() {
					t.Logf("%s: %v", what, err)
				}
			}
		}
	}
	t.Logf("commands with stdin: %q", scripts)
	e.bump()
	e.quiet("a quiet delta after the cuts")
}

// An agent touches a growing share of the previous copy's files (and adds
// one of its own), so that the delta vouches for fewer and fewer by stamps
// and at some point deletes the background link and copies instead: every
// share gives an exact copy.
func TestAtk28TouchedShares(t *testing.T) {
	e := newAtk28(t, 300, atk28Local)
	for _, pct := range []int{5, 20, 35, 50, 65, 80, 95} {
		time.Sleep(10 * time.Millisecond)
		now := time.Now()
		i := 0
		atk28Walk(t, e.dst(), func(p string, d fs.DirEntry) {
			if d.Type().IsRegular() {
				if i*7919%100 < pct {
					require.NoError(t, os.Chtimes(p, now, now))
				}
				i++
			}
		})
		require.NoError(t, os.WriteFile(filepath.Join(e.dst(), "dir-05-with-a-long-directory-name", "agent.txt"), []byte("mine"), 0o644))
		e.bump()
		a := e.quiet(fmt.Sprintf("%d%% touched", pct))
		t.Logf("%d%% touched: sent %d of %d", pct, a.Sent, a.Files)
		a22OneLink(t, e.dst())
	}
}

// The background link of the previous copy is slow (cp sleeps, then links);
// the stage is cancelled, or its stdin fails, while it runs: once the stage
// has returned, nothing keeps writing under the root (no temporary directory
// appears or stays there, but for what failedNoTemp and an unknown publish
// outcome leave to the next sweep), the previous copy is whole (or, after
// an unknown outcome, the new one is), and a quiet stage is exact.
func TestAtk28CancelWhileLinking(t *testing.T) {
	bin := atk28Bin(t, nil, map[string]string{"cp": `sleep 0.3; exec /usr/bin/cp "$@"`})
	e := newAtk28(t, 600, atk28WithPath(bin))
	e.bump()
	prev := treetest.Snapshot(t, e.dst())
	for _, mode := range []string{"cancel", "error"} {
		for _, d := range []time.Duration{20, 250} {
			what := fmt.Sprintf("%s %s into the send command", mode, d*time.Millisecond)
			ctx, cancel := context.WithCancel(t.Context())
			e.hook.set(func(_ context.Context, c *sandbox.Command) error {
				if atk28IsSend(c) {
					if mode == "cancel" {
						time.AfterFunc(d*time.Millisecond, cancel)
					} else {
						c.Stdin = &atk28SlowFail{r: c.Stdin, at: time.Now().Add(d * time.Millisecond)}
					}
				}
				return nil
			})
			a, err := e.stage(ctx)
			cancel()
			e.hook.set(nil)
			if err == nil {
				require.Empty(t, treetest.Diff(treetest.Snapshot(t, e.src), treetest.Snapshot(t, e.dst())), "%s: succeeded (sent %d) but the copy differs", what, a.Sent)
				e.bump()
				prev = treetest.Snapshot(t, e.dst())
				continue
			}
			t.Logf("%s: %v", what, err)
			if errors.Is(err, stage.ErrTransport) && strings.Contains(err.Error(), "may be left behind") {
				// The stdin failed after the publish line went: whether the
				// renames happened is unknown, so nothing more was sent (the
				// error names the directory; the quiet stage below sweeps it).
				// Either copy is whole.
				cur := treetest.Snapshot(t, e.dst())
				if len(treetest.Diff(prev, cur)) > 0 {
					require.Empty(t, treetest.Diff(treetest.Snapshot(t, e.src), cur), "%s: the copy is neither the previous one nor the new one: %v", what, err)
					e.bump()
					prev = treetest.Snapshot(t, e.dst())
				}
				continue
			}
			e.failedNoTemp(what, err)
			time.Sleep(400 * time.Millisecond)
			e.failedNoTemp(what+", 400 ms after the stage returned", err)
			require.Empty(t, treetest.Diff(prev, treetest.Snapshot(t, e.dst())), "%s: the previous copy changed: %v", what, err)
		}
	}
	e.quiet("a quiet delta")
}

// atk28SlowFail passes its reader through until at, then fails.
type atk28SlowFail struct {
	r  io.Reader
	at time.Time
}

func (s *atk28SlowFail) Read(p []byte) (int, error) {
	if !time.Now().Before(s.at) {
		return 0, errAtk28Cut
	}
	n, err := s.r.Read(p)
	if err == nil && !time.Now().Before(s.at) {
		time.Sleep(time.Until(s.at))
	}
	return n, err
}
