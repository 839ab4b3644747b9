package workspace_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/treetest"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

// Ends of a cut stream, as the Runner reports them.
const (
	a24Nil       = iota // the Runner says the command exited 0
	a24Transport        // the Runner says the connection was lost
	a24Exit             // the Runner says the command exited 3
	a24Cancel           // the caller's context is cancelled at the cut; the Runner kills the command
	a24Protocol         // the Runner says the sandbox broke its own protocol (a garbled completion record)
	a24Ends
)

var a24EndNames = [...]string{"nil", "transport", "exit", "cancel", "protocol"}

// a24Cutter runs every command through sandbox.Local for real; when armed,
// the restore's command (the one whose stdout is the tar stream) delivers
// only the first cut bytes of its stdout and then ends as end says.
type a24Cutter struct {
	r sandbox.Runner

	mu      sync.Mutex
	armed   bool
	cut     int64
	end     int
	cancel  context.CancelFunc
	lastLen int64  // bytes of stdout the last restore command wrote in all
	capture []byte // the whole stdout of the last unarmed restore command
}

func (c *a24Cutter) ControlTimeout() time.Duration { return sandbox.ControlDeadline(c.r) }

func (c *a24Cutter) arm(cut int64, end int, cancel context.CancelFunc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed, c.cut, c.end, c.cancel = true, cut, end, cancel
}

func (c *a24Cutter) disarm() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed, c.cancel = false, nil
}

// a24CutWriter passes the first n bytes on, then swallows the rest (the
// sandbox's command keeps writing into a connection that is gone).
type a24CutWriter struct {
	w      io.Writer
	n      int64
	seen   int64
	onCut  func()
	at     int64 // onCut runs once this many bytes passed (n when 0)
	all    *bytes.Buffer
	cutted bool
}

func (w *a24CutWriter) Write(p []byte) (int, error) {
	total := len(p)
	if w.all != nil {
		w.all.Write(p)
	}
	if w.seen < w.n {
		k := min(int64(len(p)), w.n-w.seen)
		if _, err := w.w.Write(p[:k]); err != nil {
			return 0, err
		}
	}
	w.seen += int64(total)
	at := w.n
	if w.at > 0 {
		at = w.at
	}
	if w.seen >= at && !w.cutted {
		w.cutted = true
		if w.onCut != nil {
			w.onCut()
		}
	}
	return total, nil
}

// seen returns how many bytes of output the last restore command gave.
func (c *a24Cutter) seen() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastLen
}

func (c *a24Cutter) Run(ctx context.Context, cmd sandbox.Command) error {
	c.mu.Lock()
	armed, cut, end, cancel := c.armed, c.cut, c.end, c.cancel
	c.mu.Unlock()
	isRestore := strings.Contains(cmd.Script, "airlock-restore")
	if !armed || !isRestore || cmd.Stdout == nil {
		if isRestore && cmd.Stdout != nil {
			var buf bytes.Buffer
			cw := &a24CutWriter{w: io.MultiWriter(cmd.Stdout, &buf), n: 1 << 62}
			cmd.Stdout = cw
			err := c.r.Run(ctx, cmd)
			c.mu.Lock()
			c.lastLen, c.capture = cw.seen, buf.Bytes()
			c.mu.Unlock()
			return err
		}
		return c.r.Run(ctx, cmd)
	}
	var buf bytes.Buffer
	cw := &a24CutWriter{w: cmd.Stdout, n: cut, all: &buf}
	if end == a24Cancel {
		// The caller cancels at the cut; every byte the Runner still
		// reads from the command is delivered, as Local does.
		cw.n = 1 << 62
		cw.onCut = cancel
		cw.at = cut
	}
	cmd.Stdout = cw
	err := c.r.Run(ctx, cmd)
	c.mu.Lock()
	c.lastLen, c.capture = cw.seen, buf.Bytes()
	c.mu.Unlock()
	switch end {
	case a24Nil:
		if cw.seen < cut {
			return err // the stream was shorter than the cut: the real outcome
		}
		return nil
	case a24Transport:
		return errors.Join(fmt.Errorf("%w: connection reset at byte %d", sandbox.ErrTransport, cut), err)
	case a24Exit:
		return &sandbox.ExitError{Status: 3}
	case a24Protocol:
		return fmt.Errorf("%w: garbled completion record", sandbox.ErrProtocol)
	default:
		return err
	}
}

// a24Mode writes a file of mode (its directories made).
func a24File(t *testing.T, dir, rel, data string, mode os.FileMode) {
	t.Helper()
	treetest.Write(t, filepath.Join(dir, filepath.FromSlash(rel)), data, mode)
}

func a24Link(t *testing.T, dir, rel, target string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.Symlink(target, p))
}

func a24Remove(t *testing.T, dir, rel string) {
	t.Helper()
	require.NoError(t, os.RemoveAll(filepath.Join(dir, filepath.FromSlash(rel))))
}

func a24Mkdir(t *testing.T, dir, rel string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, filepath.FromSlash(rel)), 0o755))
}

// a24Round is a plain round whose agent changed entries of every kind and
// whose user edited the host's tree meanwhile.
type a24Round struct {
	local, remote, state string
	cutter               *a24Cutter
	spec                 workspace.Spec
	round                *workspace.Round
	before               map[string]treetest.Node // the host's tree (runtime directory left out) before the restore
	want                 map[string]treetest.Node // the host's tree once everything arrived
}

var a24BigSize = 9<<20 + 123 // over 8 MiB: a tar size field's octal digits run out at 8 GiB, not here, but past every buffer

func a24Setup(t *testing.T, big bool) *a24Round {
	t.Helper()
	return a24SetupIn(t, big, t.TempDir(), "")
}

// a24SetupIn is a24Setup with the host's work tree at top/local (top
// may be a mount point) and the sandbox and state in base.
func a24SetupIn(t *testing.T, big bool, base, top string, runner ...func(t *testing.T, dir string) sandbox.Runner) *a24Round {
	t.Helper()
	if top == "" {
		top = base
	}
	a := &a24Round{local: filepath.Join(top, "local"), remote: filepath.Join(base, "sandbox", "work"), state: filepath.Join(base, "state")}
	require.NoError(t, os.MkdirAll(a.local, 0o755))

	require.NoError(t, os.MkdirAll(filepath.Dir(a.remote), 0o755))
	newRunner := runners[0].new // sandbox.Local
	if len(runner) > 0 {
		newRunner = runner[0]
	}
	a.cutter = &a24Cutter{r: newRunner(t, filepath.Dir(a.remote))}
	a.spec = workspace.Spec{Local: a.local, Remote: a.remote, Runner: a.cutter}

	l := a.local
	a24File(t, l, "keep.txt", "same\n", 0o644)
	a24File(t, l, "keep2.txt", "same2\n", 0o644)
	a24File(t, l, "edit.txt", "old\n", 0o644)
	a24File(t, l, "del.txt", "bye\n", 0o644)
	a24File(t, l, "kept-edit.txt", "base\n", 0o644)
	a24File(t, l, "kept-del.txt", "base\n", 0o644)
	a24File(t, l, "f2d", "file\n", 0o644)
	a24File(t, l, "d2f/x", "x\n", 0o644)
	a24File(t, l, "d2l/y", "y\n", 0o644)
	a24File(t, l, "mode.sh", "#!/bin/sh\n", 0o644)
	a24File(t, l, "mode2.sh", "#!/bin/sh\n", 0o755)
	a24File(t, l, "deep/a/b/c.txt", "c\n", 0o644)
	a24File(t, l, "gone/dir/z", "z\n", 0o644)
	a24File(t, l, "sp ace.txt", "s\n", 0o644)
	a24File(t, l, "emptyfile", "", 0o644)
	a24Mkdir(t, l, "emptydir")
	a24Mkdir(t, l, "keepdir")
	if big {
		a24File(t, l, "bigold.bin", strings.Repeat("o", a24BigSize), 0o644)
	}

	var err error
	a.round, err = workspace.Prepare(ctx(t), a.spec, workspace.WithStateDir(a.state))
	require.NoError(t, err)
	require.Empty(t, treetest.Diff(treeOnly(treetest.Snapshot(t, l)), treeOnly(treetest.Snapshot(t, a.remote))), "prepare")

	// The agent.
	r := a.remote
	a24File(t, r, "edit.txt", "new\n", 0o644)
	a24Remove(t, r, "del.txt")
	a24File(t, r, "kept-edit.txt", "agent\n", 0o644)
	a24Remove(t, r, "kept-del.txt")
	a24Remove(t, r, "f2d")
	a24File(t, r, "f2d/inner", "in\n", 0o644)
	a24Remove(t, r, "d2f")
	a24File(t, r, "d2f", "now a file\n", 0o644)
	a24Remove(t, r, "d2l")
	a24Link(t, r, "d2l", "keep.txt")
	require.NoError(t, os.Chmod(filepath.Join(r, "mode.sh"), 0o755))
	require.NoError(t, os.Chmod(filepath.Join(r, "mode2.sh"), 0o600))
	a24File(t, r, "deep/a/b/c.txt", "c2\n", 0o644)
	a24Remove(t, r, "gone")
	a24Remove(t, r, "emptydir")
	a24File(t, r, "sp ace.txt", "s2\n", 0o644)
	a24File(t, r, "emptyfile", "now full\n", 0o644)
	a24File(t, r, "new/nested/deeper/n.txt", "n\n", 0o644)
	a24File(t, r, "empty", "", 0o644)
	a24File(t, r, "new\nline.txt", "nl\n", 0o644)
	a24File(t, r, "tab\tname", "tab\n", 0o644)
	a24File(t, r, "\u00fcn\u00ef/c\u00f8d\u00e9 \u65e5\u672c.txt", "unicode\n", 0o644)
	a24File(t, r, " lead", "lead\n", 0o644)
	a24File(t, r, "trail ", "trail\n", 0o644)
	a24File(t, r, "exec.sh", "#!/bin/sh\nexit 0\n", 0o755)
	a24File(t, r, "private", "p\n", 0o600)
	a24Link(t, r, "lnk", "keep.txt")
	a24Link(t, r, "sub/lnk2", "../keep.txt")
	a24Link(t, r, "dang", "nothere")
	a24Mkdir(t, r, "newemptydir")
	a24File(t, r, ".airlock/agent-scratch", "never comes back\n", 0o644)
	if big {
		a24File(t, r, "big.bin", a24Pattern(a24BigSize), 0o644)
		a24File(t, r, "bigold.bin", strings.Repeat("n", a24BigSize+1), 0o644)
	}

	// The user, meanwhile.
	a24File(t, l, "kept-edit.txt", "local\n", 0o644)
	a24File(t, l, "kept-del.txt", "local\n", 0o644)
	a24File(t, l, "localnew.txt", "mine\n", 0o644)
	a24Remove(t, l, "keep2.txt")

	a.before = treeOnly(treetest.Snapshot(t, l))
	a.want = treeOnly(treetest.Snapshot(t, r))
	for _, p := range []string{"kept-edit.txt", "kept-del.txt", "localnew.txt"} {
		a.want[p] = a.before[p]
	}
	delete(a.want, "keep2.txt")
	return a
}

// keepD2F undoes the agent's replacement of the directory d2f by a file.
func (a *a24Round) keepD2F(t *testing.T) {
	t.Helper()
	a24Remove(t, a.remote, "d2f")
	a24File(t, a.remote, "d2f/x", "x\n", 0o644)
	delete(a.want, "d2f")
	a.want["d2f"], a.want["d2f/x"] = a.before["d2f"], a.before["d2f/x"]
}

// a24Pattern is n bytes that differ from block to block, so that a block
// out of place shows.
func a24Pattern(n int) string {
	var b strings.Builder
	b.Grow(n + 32)
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "%015d\n", i)
	}
	return b.String()[:n]
}

// a24Check fails t unless the host's tree is exactly as it was.
func (a *a24Round) unchanged(t *testing.T, what string, err error) {
	t.Helper()
	if d := treetest.Diff(a.before, treeOnly(treetest.Snapshot(t, a.local))); len(d) > 0 {
		t.Fatalf("%s: the host's tree changed (restore error %v): %v", what, err, d)
	}
}

// complete restores through a reopened round with nothing cut and checks
// that everything arrived.
func (a *a24Round) complete(t *testing.T) *workspace.Result {
	t.Helper()
	a.cutter.disarm()
	r, err := workspace.Reopen(ctx(t), a.spec, a.round.ID(), workspace.WithStateDir(a.state))
	require.NoError(t, err)
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	if d := treetest.Diff(a.want, treeOnly(treetest.Snapshot(t, a.local))); len(d) > 0 {
		t.Fatalf("a restore that returned nil did not bring everything: %v", d)
	}
	require.Subset(t, res.Kept, []string{"kept-del.txt", "kept-edit.txt"}) // keep2.txt too: see TestAttack24KeptOnlyWhenARemoteChangeLost
	require.Empty(t, res.Refused, "%v", res.Reasons)
	return res
}

// restoreCut runs one Restore of the round whose stream is cut at n and
// ended as end says, and checks that it failed as that end says and left
// the host's tree as it was.
func (a *a24Round) restoreCut(t *testing.T, n int64, end int) (done bool) {
	t.Helper()
	problem, done, changed := a.try(t, n, end)
	require.Empty(t, problem)
	require.False(t, changed)
	return done
}

// try runs one Restore of the round whose stream is cut at n and ended as
// end says, and says what is wrong: a restore that returned nil without
// everything, an error of the wrong class (the cause the Runner gave:
// ErrHostile for a short stream the Runner called a success, ErrTransport
// for a lost connection, the *ExitError of a failed command, the
// cancellation), or a host tree that changed. done: the restore returned
// nil and brought everything (the cancellation came after the command
// ended). changed: the host's tree is no longer as it was.
func (a *a24Round) try(t *testing.T, n int64, end int) (problem string, done, changed bool) {
	t.Helper()
	c, cancel := context.WithCancel(ctx(t))
	defer cancel()
	a.cutter.arm(n, end, cancel)
	_, err := a.round.Restore(c)
	a.cutter.disarm()
	seen := a.cutter.seen() // the Runner may still be ending (a cancelled Restore returns first)
	what := fmt.Sprintf("cut at byte %d of %d, end %s", n, seen, a24EndNames[end])
	got := treeOnly(treetest.Snapshot(t, a.local))
	if err == nil {
		if d := treetest.Diff(a.want, got); len(d) > 0 {
			return fmt.Sprintf("%s: Restore returned nil and not everything arrived: %v", what, d), false, true
		}
		if end == a24Cancel && n > 0 && n <= seen {
			return "", true, true // the command ended before the cancellation reached it
		}
		return fmt.Sprintf("%s: Restore returned nil", what), true, true
	}
	var ee *sandbox.ExitError
	switch {
	case end == a24Nil && (!errors.Is(err, workspace.ErrHostile) || errors.Is(err, sandbox.ErrTransport)),
		end == a24Transport && (!errors.Is(err, sandbox.ErrTransport) || errors.Is(err, workspace.ErrHostile)),
		end == a24Exit && (!errors.As(err, &ee) || errors.Is(err, sandbox.ErrTransport) || errors.Is(err, workspace.ErrHostile)),
		end == a24Cancel && (!errors.Is(err, context.Canceled) || errors.Is(err, workspace.ErrHostile)),
		end == a24Protocol && (!errors.Is(err, sandbox.ErrProtocol) || errors.Is(err, sandbox.ErrTransport)):
		problem = fmt.Sprintf("%s: wrong class: %v", what, err)
	}
	if d := treetest.Diff(a.before, got); len(d) > 0 {
		return fmt.Sprintf("%s: the host's tree changed (restore error %v): %v", what, err, d), false, true
	}
	return problem, false, false
}

func a24Names(m map[string]treetest.Node) []string {
	var s []string
	for k := range m {
		s = append(s, k)
	}
	sort.Strings(s)
	return s
}

// a24TarStart is the offset of the tar stream in a restore's stream:
// "airlock-restore 1\n", "report N\n" and N bytes of report, "tar\n"; -1
// when it is not that.
func a24TarStart(stream []byte) int {
	rest, ok := bytes.CutPrefix(stream, []byte("airlock-restore 1\nreport "))
	if !ok {
		return -1
	}
	nl := bytes.IndexByte(rest, '\n')
	if nl < 0 {
		return -1
	}
	n, err := strconv.Atoi(string(rest[:nl]))
	if err != nil || nl+1+n > len(rest) || !bytes.HasPrefix(rest[nl+1+n:], []byte("tar\n")) {
		return -1
	}
	return len(stream) - len(rest) + nl + 1 + n + len("tar\n")
}

// a24Cuts lists where to cut a stream: every fourth byte up to the first
// member's name, tar block boundaries (every third one also a byte after),
// and every byte of the stream's last 32; every byte when full.
func a24Cuts(stream []byte, full bool) []int64 {
	var cuts []int64
	if full {
		for n := range len(stream) + 1 {
			cuts = append(cuts, int64(n))
		}
		return cuts
	}
	start := a24TarStart(stream)
	for n := 0; n < start+8; n += 4 {
		cuts = append(cuts, int64(n))
	}
	for n, i := start+512, 0; n < len(stream)-32; n, i = n+512, i+1 {
		cuts = append(cuts, int64(n))
		if i%3 == 0 {
			cuts = append(cuts, int64(n+1))
		}
	}
	for n := max(len(stream)-32, 0); n <= len(stream); n++ {
		cuts = append(cuts, int64(n))
	}
	return cuts
}

// TestAttack24PlainCutSweep: a plain round whose agent made changes of
// every kind (edits, deletions, new nested directories, a file replaced by
// a directory and the reverse, a directory replaced by a link, links, mode
// changes, empty files, names with spaces, a newline, a tab and non-ASCII
// letters) while the user edited the host's tree. The restore's live
// stream is cut at many offsets and the Runner then reports success, a
// lost connection, an exit status or a protocol failure, or the caller
// cancels there (the ends take turns). Each restore fails as the end says
// and leaves the host's tree exactly as it was; then a Restore after Reopen
// brings everything. Quick: 129 cuts of the 30 798-byte stream, ~7 s
// (~10 s under -race). AIRLOCK_ATTACK24_FULL=1: every byte, 30 799 cuts,
// 436 s on a shared 2-core machine; it found only the cuts in the body of
// d2f (the file that replaces a local directory, bytes 1594-1604) that a
// Runner calls a success: 1595 and 1600 (every fifth byte has that end),
// which TestAttack24PlainCutInBodyIsHostile pins. No cut changed the host's
// tree and no short stream ended in nil.
func TestAttack24PlainCutSweep(t *testing.T) {
	full := os.Getenv("AIRLOCK_ATTACK24_FULL") == "1"
	a := a24Setup(t, false)
	// The whole stream, and then a failed or cut command: nothing.
	a.restoreCut(t, 1<<40, a24Exit)
	stream := a.cutter.capture
	require.Contains(t, string(stream), "airlock-restore end\n")
	require.Positive(t, a24TarStart(stream))
	a.restoreCut(t, 1<<40, a24Transport)
	cuts := a24Cuts(stream, full)
	t.Logf("stream of %d bytes, %d cuts", len(stream), len(cuts))
	var problems []string
	for i, n := range cuts {
		ends := []int{i % a24Ends}
		if n == int64(len(stream)) {
			ends = []int{a24Transport, a24Exit, a24Protocol}
		}
		for _, end := range ends {
			problem, _, changed := a.try(t, n, end)
			if problem != "" {
				problems = append(problems, problem)
			}
			if changed {
				a = a24Setup(t, false) // it all arrived (a cancellation that came too late), or it went wrong
			}
		}
	}
	for i, p := range problems {
		if i == 30 {
			t.Errorf("... and %d more", len(problems)-i)
			break
		}
		t.Error(p)
	}
	require.Empty(t, problems, "%d of %d cuts", len(problems), len(cuts))
	a.complete(t)
}

// a24RuntimeBytes is the size of everything under the host's runtime
// directory.
func a24RuntimeBytes(t *testing.T, local string) (n int64, names []string) {
	t.Helper()
	root := filepath.Join(local, sandbox.RuntimeDir)
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		names = append(names, rel)
		if fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	require.NoError(t, err)
	return n, names
}

// TestAttack24PlainCutLarge: the same with two files over 8 MiB (one new,
// one replacing a local one), cut before, inside and after their bodies,
// and cancelled while the sandbox's tar still writes them. Failed restores
// leave no spooled file behind, in the runtime directory either.
func TestAttack24PlainCutLarge(t *testing.T) {
	a := a24Setup(t, true)
	a.restoreCut(t, 1<<40, a24Exit)
	stream := a.cutter.capture
	require.Greater(t, len(stream), 2*a24BigSize)
	big := strings.Index(string(stream), "./big.bin\x00")
	old := strings.Index(string(stream), "./bigold.bin\x00")
	require.Positive(t, big)
	require.Positive(t, old)
	for _, c := range []struct {
		at  int
		end int
	}{
		{big, a24Nil}, {big + 513, a24Transport}, {big + a24BigSize/2, a24Cancel}, {big + a24BigSize + 512, a24Exit},
		{old + 1, a24Cancel}, {old + a24BigSize/2, a24Nil}, {old + a24BigSize - 1, a24Transport}, {len(stream) - 1, a24Nil},
	} {
		require.False(t, a.restoreCut(t, int64(c.at), c.end), "cut at %d: the cancellation came too late", c.at)
		size, names := a24RuntimeBytes(t, a.local)
		require.Less(t, size, int64(1<<20), "cut at %d (%s): the host's runtime directory holds %d bytes: %v", c.at, a24EndNames[c.end], size, names)
	}
	a.complete(t)
	size, names := a24RuntimeBytes(t, a.local)
	require.Less(t, size, int64(1<<20), "the host's runtime directory holds %d bytes after the restore: %v", size, names)
}

// TestAttack24ConcurrentRestores: two Restores of the same round, and of
// the round and its Reopen, at once, one of them cut: the cut one fails and
// leaves the tree as the other left it (before or after); the whole one
// brings everything.
func TestAttack24ConcurrentRestores(t *testing.T) {
	t.Run("both whole", func(t *testing.T) {
		a := a24Setup(t, false)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		ress := make([]*workspace.Result, 2)
		r2, err := workspace.Reopen(ctx(t), a.spec, a.round.ID(), workspace.WithStateDir(a.state))
		require.NoError(t, err)
		for i, r := range []*workspace.Round{a.round, r2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ress[i], errs[i] = r.Restore(ctx(t))
			}()
		}
		wg.Wait()
		require.NoError(t, errs[0])
		require.NoError(t, errs[1])
		if d := treetest.Diff(a.want, treeOnly(treetest.Snapshot(t, a.local))); len(d) > 0 {
			t.Fatalf("two whole restores: %v", d)
		}
		// One of them wrote; the other found everything equal.
		require.True(t, len(ress[0].Updated) == 0 || len(ress[1].Updated) == 0, "both updated: %v / %v", ress[0].Updated, ress[1].Updated)
	})
	t.Run("one cut", func(t *testing.T) {
		a := a24Setup(t, false)
		a.restoreCut(t, 1<<40, a24Exit)
		stream := a.cutter.capture
		whole := workspace.Spec{Local: a.local, Remote: a.remote, Runner: sandbox.Local(filepath.Dir(a.remote))}
		for _, n := range []int64{100, int64(len(stream) / 2), int64(len(stream) - 1)} {
			r2, err := workspace.Reopen(ctx(t), whole, a.round.ID(), workspace.WithStateDir(a.state))
			require.NoError(t, err)
			a.cutter.arm(n, a24Transport, nil)
			var wg sync.WaitGroup
			var errCut, errWhole error
			wg.Add(2)
			go func() { defer wg.Done(); _, errCut = a.round.Restore(ctx(t)) }()
			go func() { defer wg.Done(); _, errWhole = r2.Restore(ctx(t)) }()
			wg.Wait()
			a.cutter.disarm()
			require.ErrorIs(t, errCut, sandbox.ErrTransport, "cut at %d", n)
			require.NoError(t, errWhole, "cut at %d", n)
			if d := treetest.Diff(a.want, treeOnly(treetest.Snapshot(t, a.local))); len(d) > 0 {
				t.Fatalf("cut at %d beside a whole restore: %v", n, d)
			}
		}
	})
}

// TestAttack24KeptOnlyWhenARemoteChangeLost: Kept lists "local edits ...
// that beat a remote change or deletion, and nothing else". The sandbox
// changed nothing; the user deleted a and edited b. A git round reports
// Kept empty; a plain round must too.
func TestAttack24KeptOnlyWhenARemoteChangeLost(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, runners[0].new)
			files := map[string]string{"a": "1\n", "b": "2\n", "c": "3\n"}
			seed(t, e.local, kind, files)
			r, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			require.NoError(t, os.Remove(filepath.Join(e.local, "a")))
			write(t, e.local, "b", "local\n")
			res, err := r.Restore(ctx(t))
			require.NoError(t, err)
			require.Empty(t, res.Updated)
			require.Empty(t, res.Deleted)
			require.Empty(t, res.Kept, "the sandbox changed neither a nor b: no remote change lost to a local edit")
			require.False(t, exists(e.local, "a"))
			require.Equal(t, "local\n", read(t, e.local, "b"))
		})
	}
}

// a24TmpNames lists the entries outside the runtime directory whose name
// is a restore's temporary name.
func a24TmpNames(t *testing.T, local string) []string {
	t.Helper()
	var found []string
	for p := range treeOnly(treetest.Snapshot(t, local)) {
		if strings.Contains(path.Base(p), ".airlock-tmp-") {
			found = append(found, p)
		}
	}
	return found
}

// TestAttack24PlainFullDisk: the host's work tree on a small tmpfs that
// fills up while a restore writes two files over 8 MiB. The restore fails
// with ENOSPC naming a path (not retryable), leaves no temporary file in
// the work tree, and, once space is freed, a Restore after Reopen brings
// everything. "spool": the runtime directory is on the same file system,
// so the spool fills it; "copy": the runtime directory is another file
// system (a mount), so the files are copied into place and the work tree
// fills up while they are placed.
func TestAttack24PlainFullDisk(t *testing.T) {
	for _, kind := range []string{"spool", "copy"} {
		t.Run(kind, func(t *testing.T) {
			base := t.TempDir()
			top := filepath.Join(base, "m")
			mountTmpfs(t, top, "40m")
			if kind == "copy" {
				mountTmpfs(t, filepath.Join(top, "local", sandbox.RuntimeDir), "64m")
			}
			a := a24SetupIn(t, true, base, top)
			if kind == "copy" {
				a.keepD2F(t) // TestAttack24PlainDirReplacedByFileOtherFS
			}
			filler := fill(t, top, 12<<20)
			before := treetest.Snapshot(t, a.local)
			_, err := a.round.Restore(ctx(t))
			require.ErrorIs(t, err, syscall.ENOSPC)
			require.False(t, sandbox.Retryable(err), "%v", err)
			require.Contains(t, err.Error(), a.local, "the error names the path")
			t.Logf("full disk: %v", err)
			require.Empty(t, a24TmpNames(t, a.local), "temporary files left in the work tree")
			if d := treetest.Diff(treeOnly(before), treeOnly(treetest.Snapshot(t, a.local))); len(d) > 0 {
				t.Logf("the failed restore changed the work tree (allowed for a full disk): %v", d)
			}
			require.NoError(t, os.Remove(filler))
			a.complete(t)
			require.Empty(t, a24TmpNames(t, a.local))
			size, names := a24RuntimeBytes(t, a.local)
			require.Less(t, size, int64(1<<20), "the host's runtime directory holds %d bytes after the restore: %v", size, names)
		})
	}
}

// TestAttack24PlainRuntimeDirOtherFS: the host's runtime directory is
// another file system than the work tree (a mount at <Local>/.airlock), so
// a spooled file cannot be renamed into place (EXDEV) and must be copied.
// Nothing is full: the restore must bring everything.
func TestAttack24PlainRuntimeDirOtherFS(t *testing.T) {
	base := t.TempDir()
	top := filepath.Join(base, "m")
	mountTmpfs(t, top, "40m")
	mountTmpfs(t, filepath.Join(top, "local", sandbox.RuntimeDir), "64m")
	a := a24SetupIn(t, false, base, top)
	a.complete(t)
}

// TestAttack24PlainDirReplacedByFileOtherFS: the smallest case of
// TestAttack24PlainRuntimeDirOtherFS. The work tree holds d/x; the agent
// replaced the directory d with a file. With the host's runtime directory
// on another file system, the restore fails with EXDEV (renameat of the
// spooled file onto d), every time: no Restore ever brings d. The other
// changes of type, edits, new files and links arrive (copied).
func TestAttack24PlainDirReplacedByFileOtherFS(t *testing.T) {
	base := t.TempDir()
	top := filepath.Join(base, "m")
	mountTmpfs(t, top, "4m")
	mountTmpfs(t, filepath.Join(top, "local", sandbox.RuntimeDir), "4m")
	local, remote := filepath.Join(top, "local"), filepath.Join(base, "sb", "work")
	require.NoError(t, os.MkdirAll(filepath.Dir(remote), 0o755))
	a24File(t, local, "d/x", "x\n", 0o644)
	spec := workspace.Spec{Local: local, Remote: remote, Runner: sandbox.Local(filepath.Dir(remote))}
	r, err := workspace.Prepare(ctx(t), spec)
	require.NoError(t, err)
	a24Remove(t, remote, "d")
	a24File(t, remote, "d", "f\n", 0o644)
	for try := range 2 {
		res, err := r.Restore(ctx(t))
		if err != nil {
			t.Errorf("try %d: %v; the work tree now: %v", try, err, a24Names(treeOnly(treetest.Snapshot(t, local))))
			continue
		}
		require.Empty(t, treetest.Diff(treeOnly(treetest.Snapshot(t, remote)), treeOnly(treetest.Snapshot(t, local))), "try %d: Restore returned nil (%+v)", try, res)
		if try == 0 {
			require.Equal(t, []string{"d"}, res.Updated)
			require.Equal(t, []string{"d/x"}, res.Deleted)
		}
	}
}

// a24Members lists the tar members of a captured restore stream: the
// offset of each header, the member's name and its size.
type a24Member struct {
	at   int
	name string
	size int64
	typ  byte
}

func a24Members(t *testing.T, stream []byte) []a24Member {
	t.Helper()
	start := a24TarStart(stream)
	require.Positive(t, start, "%q", stream[:min(len(stream), 300)])
	var ms []a24Member
	for h := start; h+512 <= len(stream); {
		hdr := stream[h : h+512]
		if bytes.Equal(hdr, make([]byte, 512)) {
			break
		}
		name := string(bytes.TrimRight(hdr[:100], "\x00"))
		size, err := strconv.ParseInt(strings.TrimSpace(strings.TrimRight(string(hdr[124:136]), "\x00")), 8, 64)
		require.NoError(t, err, "header at %d", h)
		ms = append(ms, a24Member{at: h, name: name, size: size, typ: hdr[156]})
		h += 512 + int((size+511)/512*512)
	}
	return ms
}

// TestAttack24PlainCutInBodyIsHostile: a stream that ends inside a
// member's body while the Runner reports success is a tar stream that does
// not parse: ErrHostile (sandbox.ErrProtocol), never a host write failure
// ("fix the cause (free space, make it writable)"). The first body of
// every member is cut, with the Runner reporting success.
func TestAttack24PlainCutInBodyIsHostile(t *testing.T) {
	a := a24Setup(t, false)
	a.restoreCut(t, 1<<40, a24Exit)
	stream := a.cutter.capture
	var bad []string
	for _, m := range a24Members(t, stream) {
		if m.size < 2 {
			continue
		}
		n := int64(m.at + 512 + int(m.size/2))
		c, cancel := context.WithCancel(ctx(t))
		a.cutter.arm(n, a24Nil, cancel)
		_, err := a.round.Restore(c)
		cancel()
		a.cutter.disarm()
		require.Error(t, err)
		a.unchanged(t, fmt.Sprintf("cut at %d, in %q", n, m.name), err)
		if !errors.Is(err, workspace.ErrHostile) || !errors.Is(err, sandbox.ErrProtocol) {
			bad = append(bad, fmt.Sprintf("cut at %d (in the body of %q): %v", n, m.name, err))
		}
	}
	require.Empty(t, bad)
	a.complete(t)
}

// a24FillInodes makes empty files in dir until the file system has no
// inode left, then removes leave of them; it returns the directory that
// holds them.
func a24FillInodes(t *testing.T, dir string, leave int) string {
	t.Helper()
	fd := filepath.Join(dir, "inodes")
	require.NoError(t, os.Mkdir(fd, 0o755))
	var made []string
	for i := 0; ; i++ {
		p := filepath.Join(fd, strconv.Itoa(i))
		f, err := os.Create(p)
		if err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC)
			break
		}
		require.NoError(t, f.Close())
		made = append(made, p)
	}
	for i := 0; i < leave && i < len(made); i++ {
		require.NoError(t, os.Remove(made[len(made)-1-i]))
	}
	return fd
}

// TestAttack24PlainNoInodeThenRetry: the work tree's file system runs out
// of inodes after leave more, at every point of a restore (spooling, the
// directories it makes, the links it writes). The restore fails with
// ENOSPC or succeeds with everything; once inodes are freed, a Restore
// after Reopen brings everything (with no temporary file left in the work
// tree either time). Quick: a few points; AIRLOCK_ATTACK24_FULL=1: every
// point up to 80 (~27 s; all pass: a failure while the stream arrives is
// undone, and the retry brings everything).
func TestAttack24PlainNoInodeThenRetry(t *testing.T) {
	leaves := []int{4, 10, 16, 25, 34}
	if os.Getenv("AIRLOCK_ATTACK24_FULL") == "1" {
		leaves = nil
		for k := 0; k <= 80; k++ {
			leaves = append(leaves, k)
		}
	}
	for _, leave := range leaves {
		t.Run(strconv.Itoa(leave), func(t *testing.T) {
			base := t.TempDir()
			top := filepath.Join(base, "m")
			mountTmpfs(t, top, "40m,nr_inodes=400")
			a := a24SetupIn(t, false, base, top)
			filler := a24FillInodes(t, top, leave)
			res, err := a.round.Restore(ctx(t))
			if err == nil {
				if d := treetest.Diff(a.want, treeOnly(treetest.Snapshot(t, a.local))); len(d) > 0 {
					t.Fatalf("a restore that returned nil did not bring everything: %v (%+v)", d, res)
				}
				return
			}
			require.ErrorIs(t, err, syscall.ENOSPC)
			require.False(t, sandbox.Retryable(err), "%v", err)
			t.Logf("leave %d: %v", leave, err)
			require.Empty(t, a24TmpNames(t, a.local), "temporary files left in the work tree")
			if d := treetest.Diff(a.before, treeOnly(treetest.Snapshot(t, a.local))); len(d) > 0 {
				t.Logf("leave %d: the failed restore changed the work tree (allowed for a full disk): %v", leave, d)
			}
			require.NoError(t, os.RemoveAll(filler))
			a.complete(t)
			require.Empty(t, a24TmpNames(t, a.local))
		})
	}
}

// TestAttack24PlainDirModeChange: the agent's chmod of a directory that
// existed at Prepare (d: 0755 to 0700) does not come back and is not in
// Refused, though a new directory's mode does (n: 0700) and Refused names
// "every sandbox entry that did not arrive as the sandbox left it".
func TestAttack24PlainDirModeChange(t *testing.T) {
	e := newEnv(t, runners[0].new)
	write(t, e.local, "d/x", "1\n")
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	require.NoError(t, os.Chmod(filepath.Join(e.remote, "d"), 0o700))
	write(t, e.remote, "n/x", "1\n")
	require.NoError(t, os.Chmod(filepath.Join(e.remote, "n"), 0o700))
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	d := treetest.Diff(treeOnly(treetest.Snapshot(t, e.remote)), treeOnly(treetest.Snapshot(t, e.local)))
	if len(d) > 0 && !slices.Contains(res.Refused, "d") {
		t.Fatalf("Restore returned nil, the agent's chmod of d did not arrive, and Refused is %v: %v", res.Refused, d)
	}
}

// a24HelperEnv names the helper process's parameters.
const a24HelperEnv = "AIRLOCK_ATTACK24_HELPER"

// TestAttack24Helper is the host process that TestAttack24PlainKilledHost
// kills: it reopens the round and restores it through a Runner that stops
// the stream at a byte and hangs there.
func TestAttack24Helper(t *testing.T) {
	arg := os.Getenv(a24HelperEnv)
	if arg == "" {
		t.Skip("the helper of TestAttack24PlainKilledHost; runs only as its child process")
	}
	var local, remote, state, id, marker string
	var cut int64
	parts := strings.Split(arg, "\n")
	require.Len(t, parts, 6)
	local, remote, state, id, marker = parts[0], parts[1], parts[2], parts[3], parts[4]
	cut, err := strconv.ParseInt(parts[5], 10, 64)
	require.NoError(t, err)
	hang := a24HangRunner{r: sandbox.Local(filepath.Dir(remote)), cut: cut, marker: marker}
	spec := workspace.Spec{Local: local, Remote: remote, Runner: hang}
	r, err := workspace.Reopen(ctx(t), spec, id, workspace.WithStateDir(state))
	require.NoError(t, err)
	_, err = r.Restore(ctx(t))
	t.Fatalf("the restore returned (%v): it should have hung", err)
}

// a24HangRunner delivers cut bytes of the restore's stream, writes marker
// and hangs.
type a24HangRunner struct {
	r      sandbox.Runner
	cut    int64
	marker string
}

func (h a24HangRunner) Run(ctx context.Context, cmd sandbox.Command) error {
	if !strings.Contains(cmd.Script, "airlock-restore") || cmd.Stdout == nil {
		return h.r.Run(ctx, cmd)
	}
	var buf bytes.Buffer
	cmd2 := cmd
	cmd2.Stdout = &buf
	if err := h.r.Run(ctx, cmd2); err != nil {
		return err
	}
	if _, err := cmd.Stdout.Write(buf.Bytes()[:h.cut]); err != nil {
		return err
	}
	if err := os.WriteFile(h.marker, nil, 0o644); err != nil {
		return err
	}
	select {}
}

// TestAttack24PlainKilledHost: the host is killed (SIGKILL) while a plain
// restore reads the stream, after the member that replaces the local file
// f2d by a directory (f2d/inner) arrived and before the stream ended. The
// restore had not succeeded, so the tree should be as it was, or at least
// a later Restore (after Reopen, in another process) must bring
// everything: f2d/inner, the user's other files, no temporary file.
func TestAttack24PlainKilledHost(t *testing.T) {
	for _, edited := range []bool{false, true} {
		t.Run(fmt.Sprintf("f2d edited %v", edited), func(t *testing.T) { a24KilledHost(t, edited, false) })
	}
}

// TestAttack24PlainKilledHostThenPrepare: as TestAttack24PlainKilledHost,
// but the user gives up the round and prepares a new one (the usual next
// run). The user's file f2d, which the killed restore had moved aside to
// make room for the agent's f2d/, must still be in the work tree (and so
// in the new sandbox): the new round's Prepare clears the sandbox, so the
// work tree is the only copy left.
func TestAttack24PlainKilledHostThenPrepare(t *testing.T) {
	t.Run("after f2d/inner", func(t *testing.T) { a24KilledHost(t, false, true) })
	t.Run("before the end line", func(t *testing.T) { a24KilledHostAt(t, false, true, true) })
}

func a24KilledHost(t *testing.T, edited, prepare bool) { a24KilledHostAt(t, edited, prepare, false) }

// a24KilledHostAt kills the restoring host after f2d/inner arrived, or,
// late, one byte before the stream's end.
func a24KilledHostAt(t *testing.T, edited, prepare, late bool) {
	a := a24Setup(t, false)
	a.restoreCut(t, 1<<40, a24Exit)
	stream := a.cutter.capture
	ms := a24Members(t, stream)
	cut := int64(-1)
	for i, m := range ms {
		if m.name == "./f2d/inner" && i+1 < len(ms) {
			cut = int64(ms[i+1].at + 512) // the next member's header too
		}
	}
	require.Positive(t, cut)
	if late {
		cut = int64(len(stream) - 1)
	}
	if edited {
		// The user's edit of f2d wins; the agent's f2d/inner is refused.
		a24File(t, a.local, "f2d", "the user's edit\n", 0o644)
		a.before = treeOnly(treetest.Snapshot(t, a.local))
		a.want["f2d"] = a.before["f2d"]
		delete(a.want, "f2d/inner")
	}
	marker := filepath.Join(t.TempDir(), "marker")
	cmd := exec.Command(os.Args[0], "-test.run=^TestAttack24Helper$", "-test.count=1")
	cmd.Env = append(os.Environ(), a24HelperEnv+"="+strings.Join([]string{a.local, a.remote, a.state, a.round.ID(), marker, strconv.FormatInt(cut, 10)}, "\n"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	deadline := time.Now().Add(20 * time.Second)
	for !exists(filepath.Dir(marker), "marker") {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("the helper never reached the cut: %s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // let the host read what it was given
	during := treetest.Diff(a.before, treeOnly(treetest.Snapshot(t, a.local)))
	require.NoError(t, cmd.Process.Kill())
	require.Error(t, cmd.Wait())
	t.Logf("while the stream hung (killed there) the work tree differed from before by %v", during)
	a.cutter.disarm()
	if prepare {
		_, err := workspace.Prepare(ctx(t), a.spec, workspace.WithStateDir(a.state))
		require.NoError(t, err)
		got := treeOnly(treetest.Snapshot(t, a.local))
		if d := treetest.Diff(a.before, got); len(d) > 0 {
			var copies []string
			for _, dir := range []string{a.local, a.state, a.remote} {
				for p, n := range treetest.Snapshot(t, dir) {
					if n.Mode.IsRegular() && n.Data == a.before["f2d"].Data {
						copies = append(copies, filepath.Join(dir, p))
					}
				}
			}
			t.Errorf("after the killed restore and a new Prepare the work tree is not the user's: %v; copies of the user's f2d left on the host and in the sandbox: %v", d, copies)
		}
		if d := treetest.Diff(a.before, treeOnly(treetest.Snapshot(t, a.remote))); len(d) > 0 {
			t.Errorf("the new sandbox is not the user's tree: %v", d)
		}
		return
	}
	r, err := workspace.Reopen(ctx(t), a.spec, a.round.ID(), workspace.WithStateDir(a.state))
	require.NoError(t, err)
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	t.Logf("%+v", res)
	require.Empty(t, a24TmpNames(t, a.local))
	if d := treetest.Diff(a.want, treeOnly(treetest.Snapshot(t, a.local))); len(d) > 0 {
		t.Fatalf("a restore that returned nil did not bring everything: %v", d)
	}
}

// TestAttack24PlainCutOverSSH: the same cuts through remotetest, the
// in-process SSH server (a remote.Host): a lost connection, a failed
// command, a short stream called a success, and a cancellation while the
// sandbox's tar still writes a file over 8 MiB.
func TestAttack24PlainCutOverSSH(t *testing.T) {
	a := a24SetupIn(t, true, t.TempDir(), "", runners[1].new)
	a.restoreCut(t, 1<<40, a24Exit)
	stream := a.cutter.capture
	big := strings.Index(string(stream), "./big.bin\x00")
	require.Positive(t, big)
	start := a24TarStart(stream)
	require.Positive(t, start)
	for _, c := range []struct {
		at  int
		end int
	}{
		{start, a24Transport}, {start + 512, a24Nil}, {big + a24BigSize/2, a24Cancel}, {big + 1024, a24Exit},
		{len(stream) - 1, a24Nil}, {len(stream), a24Transport}, {len(stream), a24Exit},
	} {
		require.False(t, a.restoreCut(t, int64(c.at), c.end), "cut at %d: the cancellation came too late", c.at)
	}
	a.complete(t)
}

// TestAttack24PlainLocalLinkInTheWay: between Prepare and Restore the user
// made links where the agent made directories: new -> keepdir (inside the
// tree) and sub -> an outside directory. Nothing may be written through
// them, while the stream arrives (cut there: the tree as it was) or after
// (a whole restore refuses new/... and sub/... and brings the rest).
func TestAttack24PlainLocalLinkInTheWay(t *testing.T) {
	a := a24Setup(t, false)
	outside := t.TempDir()
	a24Link(t, a.local, "new", "keepdir")
	a24Link(t, a.local, "sub", outside)
	a.before = treeOnly(treetest.Snapshot(t, a.local))
	a.restoreCut(t, 1<<40, a24Exit)
	stream := a.cutter.capture
	for _, m := range a24Members(t, stream) {
		if strings.HasPrefix(m.name, "./new/") || strings.HasPrefix(m.name, "./sub/") {
			require.False(t, a.restoreCut(t, int64(m.at+512+int((m.size+511)/512*512)), a24Transport), m.name)
			require.Empty(t, treetest.Snapshot(t, outside), "written through the link sub while the stream arrived")
		}
	}
	a.cutter.disarm()
	res, err := a.round.Restore(ctx(t))
	require.NoError(t, err)
	require.Empty(t, treetest.Snapshot(t, outside), "written through the link sub")
	got := treeOnly(treetest.Snapshot(t, a.local))
	for p := range a.want {
		if p == "new" || strings.HasPrefix(p, "new/") || p == "sub" || strings.HasPrefix(p, "sub/") {
			delete(a.want, p)
		}
	}
	a.want["new"], a.want["sub"] = a.before["new"], a.before["sub"]
	require.Empty(t, treetest.Diff(a.want, got))
	require.Subset(t, res.Refused, []string{"new/nested/deeper/n.txt", "sub/lnk2"}, "%v", res.Reasons)
}
