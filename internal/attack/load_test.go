package attack_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/treegen"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/stage/remote"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
	"github.com/airlockdev/airlock/workspace"
)

// loadSandboxes is how many sandboxes the CI load tests drive at once;
// BenchmarkConcurrentStage50 drives 50.
const loadSandboxes = 10

// resources is a count of what a process holds that a leak would grow.
type resources struct {
	goroutines, fds int
}

func (r resources) String() string {
	return fmt.Sprintf("%d goroutines, %d descriptors", r.goroutines, r.fds)
}

// count counts goroutines and open descriptors (/proc/self/fd).
func count(tb testing.TB) resources {
	tb.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		tb.Skipf("descriptors cannot be counted here: %v", err)
	}
	return resources{goroutines: runtime.NumGoroutine(), fds: len(fds) - 1} // ReadDir's own descriptor
}

// settled counts once the numbers stop falling (up to a second): what the
// tests before left winding down is not counted against this one.
func settled(tb testing.TB) resources {
	tb.Helper()
	r := count(tb)
	for range 20 {
		time.Sleep(50 * time.Millisecond)
		n := count(tb)
		if n.goroutines >= r.goroutines && n.fds >= r.fds {
			return n
		}
		r = n
	}
	return r
}

// leakSlack is what the runtime and the test framework may start or open
// on their own meanwhile.
const leakSlack = 4

// assertNoLeak waits up to 5 s for the counts to come back to before
// (plus leakSlack) and fails with both counts when they do not.
func assertNoLeak(tb testing.TB, before resources) {
	tb.Helper()
	var now resources
	deadline := time.Now().Add(5 * time.Second)
	for {
		now = count(tb)
		if now.goroutines <= before.goroutines+leakSlack && now.fds <= before.fds+leakSlack {
			tb.Logf("before: %v; after: %v", before, now)
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	tb.Errorf("leak: before %v, after %v (slack %d); goroutines:\n%s", before, now, leakSlack, buf)
}

// loadSandbox is one remotetest server and a Host connected to it, closed
// by close (not by the test's cleanup, so that a leak check can follow).
type loadSandbox struct {
	srv  *remotetest.Server
	host *remote.Host
	dir  string
}

func startSandboxes(tb testing.TB, n int) []*loadSandbox {
	tb.Helper()
	out := make([]*loadSandbox, n)
	for i := range out {
		dir := tb.TempDir()
		srv, err := remotetest.Start(remotetest.WithDir(dir))
		require.NoError(tb, err)
		cfg := srv.Config()
		h, err := remote.Dial(context.Background(), srv.Addr(), cfg)
		if err != nil {
			_ = srv.Close()
			require.NoError(tb, err)
		}
		out[i] = &loadSandbox{srv: srv, host: h, dir: dir}
	}
	return out
}

func closeSandboxes(tb testing.TB, sbs []*loadSandbox) {
	tb.Helper()
	for _, s := range sbs {
		if s == nil {
			continue
		}
		if err := s.host.Close(); err != nil {
			tb.Errorf("closing the host of %s: %v", s.dir, err)
		}
		if err := s.srv.Close(); err != nil {
			tb.Errorf("closing the server of %s: %v", s.dir, err)
		}
	}
}

// stageCycle stages src into the sandbox three times: first, unchanged
// (Reused), and after changing one file (one file sent). It returns the
// first failure.
func stageCycle(ctx context.Context, s *loadSandbox, src string) error {
	root := filepath.Join(s.dir, "rt")
	assets := []stage.Asset{{Name: "skills", Source: src}}
	rt, err := stage.Stage(ctx, s.host, root, assets)
	if err != nil {
		return fmt.Errorf("first stage: %w", err)
	}
	if rt.Assets[0].Reused {
		return errors.New("first stage: reported Reused")
	}
	if rt, err = stage.Stage(ctx, s.host, root, assets); err != nil {
		return fmt.Errorf("unchanged re-stage: %w", err)
	}
	if !rt.Assets[0].Reused {
		return errors.New("unchanged re-stage: not Reused")
	}
	changed := filepath.Join(src, "changed-by-the-load-test.txt")
	if err := os.WriteFile(changed, []byte("one change\n"), 0o644); err != nil {
		return err
	}
	if rt, err = stage.Stage(ctx, s.host, root, assets); err != nil {
		return fmt.Errorf("one-change re-stage: %w", err)
	}
	if rt.Assets[0].Reused || rt.Assets[0].Sent != 1 {
		return fmt.Errorf("one-change re-stage: Reused %v, Sent %d; want a delta of one file", rt.Assets[0].Reused, rt.Assets[0].Sent)
	}
	got, err := os.ReadFile(filepath.Join(root, "skills", "changed-by-the-load-test.txt"))
	if err != nil || string(got) != "one change\n" {
		return fmt.Errorf("one-change re-stage: the changed file in the sandbox: %q, %v", got, err)
	}
	return nil
}

// loadTrees writes n source trees of 200 small files (0.5–4 KiB).
func loadTrees(tb testing.TB, n int) []string {
	tb.Helper()
	out := make([]string, n)
	for i := range out {
		out[i] = tb.TempDir()
		_, err := treegen.Write(out[i], treegen.Shape{Dirs: 4, Files: 50, MinBytes: 512, MaxBytes: 4 << 10, Seed: uint64(i + 1)})
		require.NoError(tb, err)
	}
	return out
}

// TestLoadConcurrentStage: one process stages into 10 sandboxes at once
// (first stage, unchanged re-stage, one-change re-stage); every stage
// succeeds, and once everything is closed no goroutine or descriptor is
// left over.
func TestLoadConcurrentStage(t *testing.T) {
	srcs := loadTrees(t, loadSandboxes)
	before := settled(t)
	sbs := startSandboxes(t, loadSandboxes)
	errs := make([]error, len(sbs))
	concurrently(t, len(sbs), func(i int) { errs[i] = stageCycle(t.Context(), sbs[i], srcs[i]) })
	for i, err := range errs {
		assert.NoError(t, err, "sandbox %d", i)
	}
	closeSandboxes(t, sbs)
	assertNoLeak(t, before)
}

// TestLoadConcurrentRoundTrips: 10 workspace round trips at once, each its
// own repository and sandbox: every Prepare and Restore succeeds and
// brings the agent's commit and edit back; no leak afterwards.
func TestLoadConcurrentRoundTrips(t *testing.T) {
	locals := make([]string, loadSandboxes)
	for i := range locals {
		locals[i] = hostRepo(t)
	}
	before := settled(t)
	sbs := startSandboxes(t, loadSandboxes)
	errs := make([]error, len(sbs))
	heads := make([]string, len(sbs))
	concurrently(t, len(sbs), func(i int) {
		work := filepath.Join(sbs[i].dir, "work")
		spec := workspace.Spec{Local: locals[i], Remote: work, Runner: sbs[i].host}
		r, err := workspace.Prepare(t.Context(), spec)
		if err != nil {
			errs[i] = fmt.Errorf("prepare: %w", err)
			return
		}
		if heads[i], err = agentCommit(work, i); err != nil {
			errs[i] = err
			return
		}
		if _, err := r.Restore(t.Context()); err != nil {
			errs[i] = fmt.Errorf("restore: %w", err)
		}
	})
	closeSandboxes(t, sbs)
	for i, err := range errs {
		if !assert.NoError(t, err, "round trip %d", i) {
			continue
		}
		assert.Equal(t, heads[i], strings.TrimSpace(git(t, locals[i], "rev-parse", "HEAD")), "round trip %d: the agent's commit", i)
		assert.Equal(t, fmt.Sprintf("agent %d\n", i), readFile(t, filepath.Join(locals[i], fmt.Sprintf("agent-%d.txt", i))))
		assert.Equal(t, "uncommitted edit\n", readFile(t, filepath.Join(locals[i], "b.txt")), "round trip %d: the agent's uncommitted edit", i)
		assertFsck(t, locals[i])
		assertNoHostLeftovers(t, locals[i])
	}
	assertNoLeak(t, before)
}

// agentCommit plays the agent in a sandbox work tree: it commits
// agent-<i>.txt and leaves an uncommitted edit of b.txt. It returns the
// commit's id.
func agentCommit(work string, i int) (string, error) {
	name := fmt.Sprintf("agent-%d.txt", i)
	if err := os.WriteFile(filepath.Join(work, name), fmt.Appendf(nil, "agent %d\n", i), 0o644); err != nil {
		return "", err
	}
	for _, args := range [][]string{{"add", name}, {"commit", "-q", "-m", "agent " + strconv.Itoa(i)}} {
		if out, err := gitErr(work, args...); err != nil {
			return "", fmt.Errorf("git %v in %s: %v: %s", args, work, err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(work, "b.txt"), []byte("uncommitted edit\n"), 0o644); err != nil {
		return "", err
	}
	out, err := gitErr(work, "rev-parse", "HEAD")
	return strings.TrimSpace(out), err
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	return string(b)
}

// TestLoadConcurrentRestoresOneRepo: 10 rounds prepared at once from one
// repository into 10 sandboxes; each agent commits a file of its own; the
// 10 Restores run at once. Each succeeds or fails with a documented
// retryable error (ErrLocked, ErrRace) or a conflict; there is none here,
// so every agent's commit must end in the history, and the repository
// stays fsck-clean with no leftover.
func TestLoadConcurrentRestoresOneRepo(t *testing.T) {
	local := hostRepo(t)
	git(t, local, "commit", "-q", "-m", "the edits Prepare would ship") // start clean: b.txt and staged.txt committed
	git(t, local, "add", "-A")
	git(t, local, "commit", "-q", "-m", "untracked too")
	before := settled(t)
	sbs := startSandboxes(t, loadSandboxes)
	rounds := make([]*workspace.Round, len(sbs))
	errs := make([]error, len(sbs))
	concurrently(t, len(sbs), func(i int) {
		spec := workspace.Spec{Local: local, Remote: filepath.Join(sbs[i].dir, "work"), Runner: sbs[i].host}
		rounds[i], errs[i] = workspace.Prepare(t.Context(), spec)
	})
	for i, err := range errs {
		require.NoError(t, err, "prepare %d", i)
	}
	heads := make([]string, len(sbs))
	for i := range sbs {
		h, err := agentCommit(filepath.Join(sbs[i].dir, "work"), i)
		require.NoError(t, err)
		heads[i] = h
	}
	results := make([]*workspace.Result, len(sbs))
	concurrently(t, len(sbs), func(i int) { results[i], errs[i] = rounds[i].Restore(t.Context()) })
	closeSandboxes(t, sbs)
	restored := 0
	for i, err := range errs {
		switch {
		case err == nil:
			restored++
			assert.Equal(t, 1, results[i].Commits, "restore %d: the agent's one commit", i)
		case errors.Is(err, workspace.ErrLocked), errors.Is(err, workspace.ErrRace), errors.Is(err, workspace.ErrConflict):
			t.Logf("restore %d: a documented retryable failure: %v", i, err)
		default:
			t.Errorf("restore %d: an undocumented failure: %v", i, err)
		}
	}
	t.Logf("%d of %d restores integrated at once", restored, len(sbs))
	for i, err := range errs {
		if err != nil {
			continue // retryable: not integrated
		}
		_, aerr := gitErr(local, "merge-base", "--is-ancestor", heads[i], "HEAD")
		assert.NoError(t, aerr, "restore %d succeeded: its commit %s must be in the history", i, heads[i])
		assert.Equal(t, fmt.Sprintf("agent %d\n", i), readFile(t, filepath.Join(local, fmt.Sprintf("agent-%d.txt", i))))
	}
	assertFsck(t, local)
	assertNoHostLeftovers(t, local)
	assertNoLeak(t, before)
}

// BenchmarkConcurrentStage50 stages into 50 remotetest sandboxes at once
// (first, unchanged, one change each) and reports the process's peak RSS
// (VmHWM) and the resident memory one idle connection costs (client and
// in-process server together: remotetest runs in this process).
//
//	go test -run '^$' -bench BenchmarkConcurrentStage50 -benchtime 1x ./internal/attack/
func BenchmarkConcurrentStage50(b *testing.B) {
	const n = 50
	for b.Loop() {
		b.StopTimer()
		srcs := loadTrees(b, n)
		runtime.GC()
		rss0 := procStatus(b, "VmRSS")
		sbs := startSandboxes(b, n)
		for _, s := range sbs { // every connection has run a command: its sessions and buffers exist
			require.NoError(b, s.host.Run(context.Background(), sandbox.Command{Script: "true"}))
		}
		runtime.GC()
		perConn := float64(procStatus(b, "VmRSS")-rss0) / n
		b.StartTimer()
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range sbs {
			wg.Go(func() { errs[i] = stageCycle(context.Background(), sbs[i], srcs[i]) })
		}
		wg.Wait()
		b.StopTimer()
		failed := 0
		for i, err := range errs {
			if err != nil {
				failed++
				b.Errorf("sandbox %d: %v", i, err)
			}
		}
		closeSandboxes(b, sbs)
		b.ReportMetric(float64(procStatus(b, "VmHWM"))/1024, "peak-RSS-MiB")
		b.ReportMetric(perConn, "RSS-KiB/idle-conn")
		b.ReportMetric(float64(failed), "failed-sandboxes")
		b.StartTimer()
	}
}

// procStatus returns a field of /proc/self/status in KiB.
func procStatus(tb testing.TB, field string) int64 {
	tb.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		tb.Skipf("no /proc/self/status: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			require.NoError(tb, err)
			return kb
		}
	}
	tb.Fatalf("no %s in /proc/self/status", field)
	return 0
}
