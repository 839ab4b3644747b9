package attack_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable"
	"github.com/airlockdev/airlock/internal/faultnet"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/stage/remote"
	"github.com/airlockdev/airlock/workspace"
)

// scenario is one operation prepared to run once: a fresh old state on
// the host and in the sandbox, the operation, and what must hold after it.
type scenario struct {
	sandboxDir string                                  // where the sandbox side lives (quiesced before the retry)
	run        func(ctx context.Context, l link) error // the operation
	intact     func(t *testing.T)                      // after a failed run: the old state is whole (or, where the outcome is unknown, the new one)
	done       func(t *testing.T)                      // after a successful run: the new state, and no leftover of any earlier run
	// rerun: a success whose fault tripped is followed by one more run,
	// on a new, direct connection, before done. The stage operations
	// succeed once their renames are done (stage.Bridge's
	// renameThenDelete): a cut after them kills the command while it
	// deletes what it moved aside, and leaves that to the next run of the
	// operation, which must remove it even with nothing to publish.
	rerun bool
}

// operation makes a fresh scenario for each run of a sweep.
type operation struct {
	name string
	new  func(t *testing.T, sb server) *scenario
}

// operations is every operation the fault sweep attacks.
var operations = []operation{
	{"StageFirst", newStageFirst},
	{"StageDelta", newStageDelta},
	{"Unstage", newUnstage},
	{"Prepare", newPrepare},
	{"Restore", newRestore},
	{"PreparePlain", newPreparePlain},
	{"RestorePlain", newRestorePlain},
	{"Register", newRegister},
}

// errGuard is the cause of the hang guard's expiry: an operation whose
// fault it ends was not ended by the library itself.
var errGuard = errors.New("hang guard of the fault suite expired: the operation did not end on its own")

// TestFaults sweeps a cut (and a few stalls) over every phase of every
// operation, over every sandbox kind. For each fault: the operation fails
// with sandbox.ErrTransport (or succeeds, when the fault came after its
// last byte mattered), the old state is intact, a retry on a new, direct
// connection succeeds, and it leaves no leftover of either run. A stage
// operation that succeeds although its fault tripped is run once more
// first (scenario.rerun).
//
// Bounded by default (about 12 cuts and 2 stalls per operation on
// remotetest, 6 and 1 on sshd; halved by -short); AIRLOCK_FAULT_SWEEP=full
// sweeps every byte-boundary class (see cutPoints).
func TestFaults(t *testing.T) {
	// Subtests run from goroutines of their own (t.Run allows it): the
	// sweeps are mostly waiting for the network and the sandbox, and
	// t.Parallel would hold them to -parallel (GOMAXPROCS) at a time.
	concurrently(t, len(sandboxKinds), func(i int) {
		kind := sandboxKinds[i]
		t.Run(kind.name, func(t *testing.T) {
			sb := kind.start(t)
			cuts, stalls := 12, 2
			if sb.name == "sshd" {
				cuts, stalls = 6, 1
			}
			if testing.Short() {
				cuts, stalls = cuts/2, 1
			}
			concurrently(t, len(operations), func(i int) {
				op := operations[i]
				t.Run(op.name, func(t *testing.T) {
					m := measure(t, sb, op)
					// Cuts near the end too, for every operation: for the
					// stage ones, a publish killed after its renames
					// leaves its sweep marker, which the retry's SFTP
					// probe reads to have the root swept (see SECURITY.md).
					for _, n := range cutPoints(m, cuts) {
						f := faultnet.Fault{After: n, Mode: faultnet.Cut}
						t.Run(f.String(), func(t *testing.T) { faultOnce(t, sb, op, m, f) })
					}
					pts := stallPoints(m, stalls)
					concurrently(t, len(pts), func(i int) {
						f := faultnet.Fault{After: pts[i], Mode: faultnet.Stall}
						t.Run(f.String(), func(t *testing.T) { faultOnce(t, sb, op, m, f) })
					})
				})
			})
		})
	})
}

// concurrently calls fn(0), …, fn(n-1) at once and waits for them all.
func concurrently(t *testing.T, n int, fn func(i int)) {
	t.Helper()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { fn(i) })
	}
	wg.Wait()
}

// measure runs op once through a clean proxy and records the bytes its
// connection moved and where each command began.
func measure(t *testing.T, sb server, op operation) measured {
	t.Helper()
	sc := op.new(t, sb)
	p, err := faultnet.Listen(sb.addr)
	require.NoError(t, err)
	defer p.Close()
	h, err := remote.Dial(t.Context(), p.Addr(), sb.config())
	require.NoError(t, err)
	m := measured{handshake: p.Bytes().Total()}
	rec := &recorder{h: h, p: p}
	require.NoError(t, sc.run(t.Context(), rec.link()), "the clean run")
	m.total = p.Bytes().Total()
	require.NoError(t, h.Close())
	m.marks = rec.marks
	sc.done(t)
	var sb2 strings.Builder
	for _, mk := range m.marks {
		fmt.Fprintf(&sb2, "\n  %7d %s", mk.at, mk.label)
	}
	t.Logf("clean run: %d bytes (handshake %d); commands:%s", m.total, m.handshake, sb2.String())
	return m
}

// faultOnce runs a fresh scenario of op with fault f on its connection,
// checks what the fault left, retries on a new connection and checks the
// outcome.
func faultOnce(t *testing.T, sb server, op operation, m measured, f faultnet.Fault) {
	sc := op.new(t, sb)
	p, err := faultnet.Listen(sb.addr)
	require.NoError(t, err)
	defer p.Close()
	p.Arm(f)
	guard := time.Minute // a cut must end the operation at once; this only stops a hang
	cfg := sb.faultedConfig()
	if f.Mode == faultnet.Stall {
		// A stalled control step ends within controlTimeout (a cleanup
		// may add one more); a stalled data transfer has no deadline of
		// its own, so the Host's keepalive must find the dead connection
		// (one interval, then at most 5 s for the reply).
		cfg.KeepAlive = stallKeepAlive
		guard = max(3*controlTimeout, stallKeepAlive+5*time.Second) + 3*time.Second
	}
	ctx, cancel := context.WithTimeoutCause(t.Context(), guard, errGuard)
	defer cancel()
	start := time.Now()
	result := make(chan error, 1)
	go func() {
		h, err := remote.Dial(ctx, p.Addr(), cfg)
		if err == nil {
			err = sc.run(ctx, hostLink(h))
			_ = h.Close()
		}
		result <- err
	}()
	// An operation that ignores its context is stopped by closing the
	// proxy (both sides of the connection go): a failure of its own.
	hung := false
	select {
	case err = <-result:
	case <-time.After(guard + 3*time.Second):
		hung = true
		require.NoError(t, p.Close())
		select {
		case err = <-result:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: the operation did not end within %v of its context nor when its connection was closed", f, guard+3*time.Second)
		}
	}
	took := time.Since(start)
	guarded := context.Cause(ctx) == errGuard
	require.NoError(t, p.Close()) // releases a stall: the sandbox sees its connection end
	phase := m.phase(f.After)

	if err == nil {
		tripped := p.Tripped() > 0
		t.Logf("%s (%s): the operation succeeded (the fault tripped: %v)", f, phase, tripped)
		if tripped && sc.rerun {
			quiesce(t, sc.sandboxDir)
			require.NoError(t, sc.run(t.Context(), hostLink(sb.dial(t))), "the next run after %s during %q, which succeeded", f, phase)
		}
		sc.done(t)
		return
	}
	t.Logf("%s (%s) after %v: %v", f, phase, took.Round(time.Millisecond), err)
	assert.ErrorIs(t, err, sandbox.ErrTransport, "%s of %s on %s during %q: the error must wrap sandbox.ErrTransport", f, op.name, sb.name, phase)
	assert.False(t, guarded, "%s during %q: the operation did not end by itself within %v (the hang guard's context ended)", f, phase, guard)
	assert.False(t, hung, "%s during %q: the operation ignored its context's end; it returned only when the connection was closed", f, phase)
	// Checked once the sandbox is quiet: a cut command may go on alone
	// (a removal finishes its renames), and a state read while it moves
	// is no state at all (a CI run read a copy, then its missing marker,
	// across the removal's last rename).
	quiesce(t, sc.sandboxDir)
	sc.intact(t)

	err = sc.run(t.Context(), hostLink(sb.dial(t)))
	if !assert.NoError(t, err, "the retry on a new connection after %s during %q", f, phase) {
		return
	}
	sc.done(t)
}

// stageTree is the old source tree of the stage scenarios: a few
// directories of small files and one of 40 KiB, so that the transfer
// spans several SSH packets.
func stageTree(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	kv := []string{"big.bin", strings.Repeat("0123456789abcdef", 40<<10/16)}
	for d := range 3 {
		for f := range 4 {
			kv = append(kv, fmt.Sprintf("d%d/f%d.txt", d, f), strings.Repeat(fmt.Sprintf("line %d.%d\n", d, f), 20+d*f))
		}
	}
	writeFiles(t, src, kv...)
	return src
}

// changeTree makes the delta of a re-stage: one file changed, one added,
// one removed.
func changeTree(t *testing.T, src string) {
	t.Helper()
	writeFiles(t, src, "d1/f1.txt", "changed\n", "d2/new.txt", "added\n")
	require.NoError(t, os.Remove(filepath.Join(src, "d0/f3.txt")))
}

func newStageFirst(t *testing.T, sb server) *scenario {
	src := stageTree(t)
	want := files(t, src)
	base := sb.fresh(t, "stage")
	root := filepath.Join(base, "rt")
	return &scenario{
		sandboxDir: base,
		run: func(ctx context.Context, l link) error {
			_, err := stage.Stage(ctx, l.target, root, []stage.Asset{{Name: "x", Source: src}})
			return err
		},
		intact: func(t *testing.T) {
			if _, err := os.Lstat(filepath.Join(root, "x")); err == nil {
				assertStagedOrMarked(t, root, "x", want) // the publish happened; its answer was lost
			} else {
				assertAbsent(t, root, "x")
			}
		},
		rerun: true,
		done: func(t *testing.T) {
			assertStaged(t, root, "x", want)
			assert.Empty(t, stageTemps(t, root), "temporary directories left in %s", root)
		},
	}
}

func newStageDelta(t *testing.T, sb server) *scenario {
	src, other := stageTree(t), t.TempDir()
	writeFiles(t, other, "y.txt", "deselected\n")
	base := sb.fresh(t, "stage")
	root := filepath.Join(base, "rt")
	_, err := stage.Stage(t.Context(), sb.dial(t), root, []stage.Asset{{Name: "x", Source: src}, {Name: "y", Source: other}})
	require.NoError(t, err)
	old, wantY := files(t, src), files(t, other)
	changeTree(t, src)
	want := files(t, src)
	return &scenario{
		sandboxDir: base,
		run: func(ctx context.Context, l link) error {
			_, err := stage.Stage(ctx, l.target, root, []stage.Asset{{Name: "x", Source: src}}, stage.WithPrune())
			return err
		},
		intact: func(t *testing.T) {
			assertStagedOrMarked(t, root, "x", old, want)
			if _, err := os.Lstat(filepath.Join(root, "y")); err == nil {
				assertStagedOrMarked(t, root, "y", wantY)
			} else {
				assertAbsent(t, root, "y")
			}
		},
		rerun: true,
		done: func(t *testing.T) {
			assertStaged(t, root, "x", want)
			assertAbsent(t, root, "y")
			assert.Empty(t, stageTemps(t, root), "temporary directories left in %s", root)
		},
	}
}

func newUnstage(t *testing.T, sb server) *scenario {
	src, other := stageTree(t), t.TempDir()
	writeFiles(t, other, "y.txt", "kept\n")
	base := sb.fresh(t, "stage")
	root := filepath.Join(base, "rt")
	_, err := stage.Stage(t.Context(), sb.dial(t), root, []stage.Asset{{Name: "x", Source: src}, {Name: "y", Source: other}})
	require.NoError(t, err)
	wantX, wantY := files(t, src), files(t, other)
	return &scenario{
		sandboxDir: base,
		run:        func(ctx context.Context, l link) error { return stage.Unstage(ctx, l.target, root, "x") },
		intact: func(t *testing.T) {
			if _, err := os.Lstat(filepath.Join(root, "x")); err == nil {
				assertStagedOrMarked(t, root, "x", wantX)
			} else {
				assertAbsent(t, root, "x")
			}
			assertStaged(t, root, "y", wantY)
		},
		rerun: true,
		done: func(t *testing.T) {
			assertAbsent(t, root, "x")
			assertStaged(t, root, "y", wantY)
			assert.Empty(t, stageTemps(t, root), "temporary directories left in %s", root)
		},
	}
}

// hostRepo makes a host repository with two commits, an edit, a staged
// change and an untracked file: everything Prepare ships.
func hostRepo(t *testing.T) string {
	t.Helper()
	local := filepath.Join(t.TempDir(), "local")
	require.NoError(t, os.Mkdir(local, 0o755))
	git(t, local, "init", "-q", "-b", "main")
	writeFiles(t, local, "a.txt", "a1\n", "b.txt", "b1\n", "dir/c.txt", strings.Repeat("c\n", 2000))
	git(t, local, "add", "-A")
	git(t, local, "commit", "-q", "-m", "one")
	writeFiles(t, local, "a.txt", "a2\n")
	git(t, local, "commit", "-q", "-am", "two")
	writeFiles(t, local, "b.txt", "b edited\n", "staged.txt", "staged\n", "untracked.txt", "untracked\n")
	git(t, local, "add", "staged.txt")
	return local
}

func newPrepare(t *testing.T, sb server) *scenario {
	local := hostRepo(t)
	base := sb.fresh(t, "ws")
	work := filepath.Join(base, "work")
	before := snapshotRepo(t, local)
	return &scenario{
		sandboxDir: base,
		run: func(ctx context.Context, l link) error {
			_, err := workspace.Prepare(ctx, workspace.Spec{Local: local, Remote: work, Runner: l.runner})
			return err
		},
		intact: func(t *testing.T) {
			assertRepoIntact(t, local, before)
			assertNoHostLeftovers(t, local)
		},
		done: func(t *testing.T) {
			assertRepoIntact(t, local, before)
			assertNoHostLeftovers(t, local)
			assert.Equal(t, before.tree, files(t, work, ".git", sandbox.RuntimeDir), "the sandbox's work tree")
			assert.Equal(t, before.head, strings.TrimSpace(git(t, work, "rev-parse", "HEAD")), "the sandbox's HEAD")
			assertNoSandboxGitLeftovers(t, work)
		},
	}
}

func newRestore(t *testing.T, sb server) *scenario {
	local := hostRepo(t)
	base := sb.fresh(t, "ws")
	work := filepath.Join(base, "work")
	round, err := workspace.Prepare(t.Context(), workspace.Spec{Local: local, Remote: work, Runner: sb.dial(t)})
	require.NoError(t, err)
	id := round.ID()
	// The agent commits an edit and a new file, and leaves an edit and an
	// untracked file uncommitted.
	writeFiles(t, work, "a.txt", "agent\n", "dir/new.txt", "new\n")
	git(t, work, "add", "a.txt", "dir/new.txt")
	git(t, work, "commit", "-q", "-m", "agent")
	writeFiles(t, work, "dir/c.txt", "rewritten\n", "agent-untracked.txt", "u\n")
	agentHead := strings.TrimSpace(git(t, work, "rev-parse", "HEAD"))
	agentTree := files(t, work, ".git", sandbox.RuntimeDir)
	before := snapshotRepo(t, local)
	return &scenario{
		sandboxDir: base,
		run: func(ctx context.Context, l link) error {
			r, err := workspace.Reopen(ctx, workspace.Spec{Local: local, Remote: work, Runner: l.runner}, id)
			if err != nil {
				return err
			}
			_, err = r.Restore(ctx)
			return err
		},
		intact: func(t *testing.T) {
			assertRepoIntact(t, local, before)
			assertNoHostLeftovers(t, local)
		},
		done: func(t *testing.T) {
			assert.Equal(t, agentHead, strings.TrimSpace(git(t, local, "rev-parse", "HEAD")), "the agent's commit, fast-forwarded")
			assert.Equal(t, agentTree, files(t, local, ".git", sandbox.RuntimeDir), "every file the agent left")
			assertFsck(t, local)
			assertNoHostLeftovers(t, local)
			assertNoSandboxGitLeftovers(t, work)
		},
	}
}

// plainDir makes a plain (non-git) host directory.
func plainDir(t *testing.T) string {
	t.Helper()
	local := filepath.Join(t.TempDir(), "plain")
	writeFiles(t, local, "a.txt", "a1\n", "dir/c.txt", strings.Repeat("c\n", 2000), "dir/deep/d.txt", "d\n")
	return local
}

// assertNoTempFiles checks a plain work tree for a restore's temporary
// files.
func assertNoTempFiles(t *testing.T, dir string) {
	t.Helper()
	for p := range files(t, dir, sandbox.RuntimeDir) {
		assert.NotContains(t, filepath.Base(p), ".airlock-", "a temporary file left in the work tree: %s", p)
	}
}

func newPreparePlain(t *testing.T, sb server) *scenario {
	local, state := plainDir(t), t.TempDir()
	base := sb.fresh(t, "plain")
	work := filepath.Join(base, "work")
	before := files(t, local)
	return &scenario{
		sandboxDir: base,
		run: func(ctx context.Context, l link) error {
			_, err := workspace.Prepare(ctx, workspace.Spec{Local: local, Remote: work, Runner: l.runner}, workspace.WithStateDir(state))
			return err
		},
		intact: func(t *testing.T) { assert.Equal(t, before, files(t, local), "the host directory") },
		done: func(t *testing.T) {
			assert.Equal(t, before, files(t, local), "the host directory")
			assert.Equal(t, before, files(t, work, sandbox.RuntimeDir), "the sandbox's copy")
		},
	}
}

func newRestorePlain(t *testing.T, sb server) *scenario {
	local, state := plainDir(t), t.TempDir()
	base := sb.fresh(t, "plain")
	work := filepath.Join(base, "work")
	round, err := workspace.Prepare(t.Context(), workspace.Spec{Local: local, Remote: work, Runner: sb.dial(t)}, workspace.WithStateDir(state))
	require.NoError(t, err)
	id := round.ID()
	// The agent edits, adds and deletes.
	writeFiles(t, work, "a.txt", "agent\n", "dir/new.txt", "new\n")
	require.NoError(t, os.Remove(filepath.Join(work, "dir", "deep", "d.txt")))
	agentTree := files(t, work, sandbox.RuntimeDir)
	before := files(t, local, sandbox.RuntimeDir)
	return &scenario{
		sandboxDir: base,
		run: func(ctx context.Context, l link) error {
			r, err := workspace.Reopen(ctx, workspace.Spec{Local: local, Remote: work, Runner: l.runner}, id, workspace.WithStateDir(state))
			if err != nil {
				return err
			}
			_, err = r.Restore(ctx)
			return err
		},
		intact: func(t *testing.T) {
			assert.Equal(t, before, files(t, local, sandbox.RuntimeDir), "the host directory")
			assertNoTempFiles(t, local)
		},
		done: func(t *testing.T) {
			assert.Equal(t, agentTree, files(t, local, sandbox.RuntimeDir), "every change the agent made")
			assertNoTempFiles(t, local)
		},
	}
}

func newRegister(t *testing.T, sb server) *scenario {
	ws := sb.fresh(t, "deliv")
	content := strings.Repeat("report line\n", 100<<10/12)
	writeFiles(t, ws, "out/report.txt", content)
	sum := sha256.Sum256([]byte(content))
	storeDir := t.TempDir()
	store, err := deliverable.NewFileStore(afero.NewOsFs(), storeDir)
	require.NoError(t, err)
	reg := &deliverable.Registrar{Store: store}
	req := deliverable.Request{ContentRef: "out/report.txt", Filename: "report.txt", ContentType: "text/plain",
		ByteSize: int64(len(content)), SHA256: hex.EncodeToString(sum[:]), Title: "The report", IdempotencyKey: "k-1"}
	key := deliverable.Key{TaskID: "task-1", RunID: "run-1", IdempotencyKey: "k-1"}
	noTemps := func(t *testing.T) {
		left, err := os.ReadDir(filepath.Join(storeDir, "tmp"))
		require.NoError(t, err)
		assert.Empty(t, left, "temporary blobs left in the store")
	}
	return &scenario{
		sandboxDir: ws,
		run: func(ctx context.Context, l link) error {
			_, err := reg.Register(ctx, deliverable.RemoteWorkspace(l.runner, ws), key.TaskID, key.RunID, req)
			return err
		},
		intact: func(t *testing.T) {
			_, _, err := store.Lookup(t.Context(), key)
			assert.ErrorIs(t, err, deliverable.ErrNotFound, "nothing registered")
			for _, d := range []string{"blobs", "attachments"} {
				left, err := os.ReadDir(filepath.Join(storeDir, d))
				require.NoError(t, err)
				assert.Empty(t, left, "nothing stored in %s", d)
			}
			noTemps(t)
		},
		done: func(t *testing.T) {
			rc, _, err := store.Lookup(t.Context(), key)
			require.NoError(t, err)
			_, rd, err := store.Open(t.Context(), rc.AttachmentID)
			require.NoError(t, err)
			defer rd.Close()
			got, err := io.ReadAll(rd)
			require.NoError(t, err)
			assert.Equal(t, content, string(got), "the registered bytes")
			noTemps(t)
		},
	}
}

// TestStalledConnectionHonoursContext: on a connection that stalls right
// after the SSH handshake (the network dies without closing), every call of
// remote.Host returns once its context ends (or its control deadline
// passes), with an error that says so; none waits for the connection to
// close.
func TestStalledConnectionHonoursContext(t *testing.T) {
	concurrently(t, len(sandboxKinds), func(i int) {
		kind := sandboxKinds[i]
		t.Run(kind.name, func(t *testing.T) {
			sb := kind.start(t)
			// The handshake's length, from a clean connection.
			clean, err := faultnet.Listen(sb.addr)
			require.NoError(t, err)
			h, err := remote.Dial(t.Context(), clean.Addr(), sb.config())
			require.NoError(t, err)
			handshake := clean.Bytes().Total()
			require.NoError(t, h.Close())
			require.NoError(t, clean.Close())

			calls := []struct {
				name string
				call func(ctx context.Context, h *remote.Host) error
			}{
				{"Run", func(ctx context.Context, h *remote.Host) error { return h.Run(ctx, sandbox.Command{Script: "true"}) }},
				{"Control", func(ctx context.Context, h *remote.Host) error {
					return h.Control(ctx, sandbox.Command{Script: "true"})
				}},
				{"ReadFile", func(ctx context.Context, h *remote.Host) error {
					_, err := h.ReadFile(ctx, filepath.Join(sb.dir, "missing"), 1<<10)
					return err
				}},
			}
			concurrently(t, len(calls), func(i int) {
				name, call := calls[i].name, calls[i].call
				t.Run(name, func(t *testing.T) {
					p, err := faultnet.Listen(sb.addr)
					require.NoError(t, err)
					defer p.Close()
					p.Arm(faultnet.Fault{After: handshake, Mode: faultnet.Stall})
					h, err := remote.Dial(t.Context(), p.Addr(), sb.faultedConfig())
					require.NoError(t, err)
					defer h.Close()
					ctx, cancel := context.WithTimeout(t.Context(), time.Second)
					defer cancel()
					done := make(chan error, 1)
					go func() { done <- call(ctx, h) }()
					select {
					case err := <-done:
						require.Error(t, err)
						assert.True(t, errors.Is(err, sandbox.ErrTransport) || errors.Is(err, context.DeadlineExceeded),
							"%s on a stalled connection: want ErrTransport or the context's error, got %v", name, err)
					case <-time.After(controlTimeout + 5*time.Second):
						t.Errorf("%s on a stalled connection did not return within %v of its 1 s context (control deadline %v); closing the connection", name, controlTimeout+5*time.Second, controlTimeout)
						require.NoError(t, p.Close())
						<-done
					}
				})
			})
		})
	})
}
