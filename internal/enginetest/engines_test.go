package enginetest_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable"
	"github.com/airlockdev/airlock/internal/enginetest"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/stage/stagetest"
	"github.com/airlockdev/airlock/workspace"
)

// The suites over real engines: sandbox.Exec over `docker exec -i` (a
// container of the harness's offline image) and over bwrap. Each skips,
// naming what is missing, where the engine is absent.

// dockerRunner starts a container and returns it with an Exec runner over
// `docker exec -i <id>`.
func dockerRunner(t *testing.T) (*enginetest.Container, sandbox.Runner) {
	t.Helper()
	c := enginetest.StartContainer(t, enginetest.Docker)
	return c, sandbox.Exec(c.Argv()...)
}

// mktemp makes a fresh directory in the sandbox through r.
func mktemp(t *testing.T, r sandbox.Runner) string {
	t.Helper()
	var out bytes.Buffer
	require.NoError(t, r.Run(t.Context(), sandbox.Command{Script: `mktemp -d "${TMPDIR:-/tmp}/airlock-engines.XXXXXX"`, Stdout: &out}))
	return strings.TrimSpace(out.String())
}

func TestDockerRunner(t *testing.T) {
	_, r := dockerRunner(t)
	stagetest.TestRunner(t, func(t *testing.T) sandbox.Runner { return r })
}

// TestPodmanRunner: the same suite over `podman exec -i` (skipped, naming
// podman, where it is not installed).
func TestPodmanRunner(t *testing.T) {
	c := enginetest.StartContainer(t, enginetest.Podman)
	r := sandbox.Exec(c.Argv()...)
	stagetest.TestRunner(t, func(t *testing.T) sandbox.Runner { return r })
}

func TestDockerTarget(t *testing.T) {
	_, r := dockerRunner(t)
	stagetest.TestTarget(t, func(t *testing.T) (stage.Target, string) {
		return stage.NewBridge(r), mktemp(t, r) + "/rt"
	}, stagetest.WithSandboxShell(func(t *testing.T, _ stage.Target) (sandbox.Runner, string) { return r, "" }))
}

// TestBwrapRunner runs the suite over bwrap sharing the host's PID
// namespace (see enginetest.BwrapConfig.SharePIDs: the suite's Cancel
// case checks from a second call that no process is left).
func TestBwrapRunner(t *testing.T) {
	stagetest.TestRunner(t, func(t *testing.T) sandbox.Runner { return sandbox.Exec(enginetest.BwrapSharedPIDs(t, t.TempDir())...) })
}

// TestBwrapCancelIsolated: with a PID namespace of its own, a cancelled
// command dies with its bwrap (--die-with-parent), though no second call
// can see it: checked from the host.
func TestBwrapCancelIsolated(t *testing.T) {
	r := sandbox.Exec(enginetest.Bwrap(t, t.TempDir())...)
	marker := "airlock-bwrap-isolated-cancel"
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	err := r.Run(ctx, sandbox.Command{Script: "trap '' TERM; sleep 60 & sleep 60; : " + marker})
	require.ErrorIs(t, err, sandbox.ErrTransport)
	var stop *sandbox.StopError
	require.ErrorAs(t, err, &stop)
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := hostProcesses(t, marker)
		if len(left) == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "processes left after cancel: %v", left)
		time.Sleep(50 * time.Millisecond)
	}
}

// hostProcesses lists the host processes whose command line holds marker
// (but this test binary).
func hostProcesses(t *testing.T, marker string) []string {
	t.Helper()
	files, err := filepath.Glob("/proc/[0-9]*/cmdline")
	require.NoError(t, err)
	var out []string
	self := fmt.Sprintf("/proc/%d/", os.Getpid())
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err == nil && !strings.HasPrefix(p, self) && bytes.Contains(b, []byte(marker)) {
			out = append(out, p+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

func TestBwrapTarget(t *testing.T) {
	var runners sync.Map // *stage.Bridge -> its runner, the sandbox shell of its cases
	stagetest.TestTarget(t, func(t *testing.T) (stage.Target, string) {
		work := t.TempDir()
		r := sandbox.Exec(enginetest.Bwrap(t, work)...)
		b := stage.NewBridge(r)
		runners.Store(b, r)
		return b, work + "/rt" // bwrap binds the work directory at its host path
	}, stagetest.WithSandboxShell(func(t *testing.T, target stage.Target) (sandbox.Runner, string) {
		r, ok := runners.Load(target)
		require.True(t, ok, "a target newTarget did not make")
		return r.(sandbox.Runner), ""
	}))
}

// gitLocal makes a host git work tree: a commit, a dirty edit and an
// untracked file.
func gitLocal(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	hostGit(t, dir, "init", "-q", "-b", "main")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "app.txt"), []byte("v1\n"), 0o644))
	hostGit(t, dir, "add", "app.txt")
	hostGit(t, dir, "commit", "-q", "-m", "initial")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "app.txt"), []byte("v1\ndirty\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("untracked\n"), 0o644))
	return dir
}

func hostGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=host", "-c", "user.email=host@host.invalid"}, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return string(out)
}

// agentCommit plays the agent in the sandbox workspace: a commit adding
// a file of size bytes (random), and an uncommitted report.md.
func agentCommit(t *testing.T, r sandbox.Runner, remote string, size int) string {
	t.Helper()
	var out, errOut bytes.Buffer
	err := r.Run(t.Context(), sandbox.Command{Dir: remote, Stdout: &out, Stderr: &errOut,
		Env: map[string]string{"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "SIZE": fmt.Sprint(size)},
		Script: `set -e
head -c "$SIZE" /dev/urandom > data.bin
printf 'v1\ndirty\nagent\n' > app.txt
git add data.bin app.txt
git -c user.name=agent -c user.email=agent@sandbox.invalid commit -q -m agent
printf 'report\n' > report.md
git rev-parse HEAD`})
	require.NoError(t, err, errOut.String())
	return strings.TrimSpace(out.String())
}

// TestDockerWorkspace: the round trip over docker exec, and a remote
// deliverable registered from the container.
func TestDockerWorkspace(t *testing.T) {
	_, r := dockerRunner(t)
	local := gitLocal(t)
	remote := mktemp(t, r) + "/ws"
	round, err := workspace.Prepare(t.Context(), workspace.Spec{Local: local, Remote: remote, Runner: r})
	require.NoError(t, err)
	head := agentCommit(t, r, remote, 4096)
	res, err := round.Restore(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 1, res.Commits)
	assert.Equal(t, head, res.Head)
	assert.Equal(t, head+"\n", hostGit(t, local, "rev-parse", "HEAD"))
	for name, want := range map[string]string{"app.txt": "v1\ndirty\nagent\n", "notes.txt": "untracked\n", "report.md": "report\n"} {
		b, err := os.ReadFile(filepath.Join(local, name))
		require.NoError(t, err)
		assert.Equal(t, want, string(b), name)
	}

	store, err := deliverable.NewFileStore(afero.NewMemMapFs(), "/attachments")
	require.NoError(t, err)
	reg := &deliverable.Registrar{Store: store}
	sum := sha256.Sum256([]byte("report\n"))
	rc, err := reg.Register(t.Context(), deliverable.RemoteWorkspace(r, remote), "task-1", "run-1", deliverable.Request{
		ContentRef: "report.md", Filename: "report.md", ContentType: "text/markdown", ByteSize: 7,
		SHA256: hex.EncodeToString(sum[:]), Title: "Report", IdempotencyKey: "k1"})
	require.NoError(t, err)
	assert.Equal(t, deliverable.Applied, rc.Disposition)
	assert.Equal(t, hex.EncodeToString(sum[:]), rc.SHA256)
}

// tripRunner starts trip once, in its own goroutine, when more than
// after bytes have crossed its commands' stdin or stdout, and slows those
// streams down (a pause per read or write) until trip has returned: a
// fault injected in the middle of a data stream, before it can end. The
// streams are slowed, not held: a docker daemon that cannot hand an
// exec's output to its client may not answer `docker inspect` either.
type tripRunner struct {
	r     sandbox.Runner
	after int64
	trip  func()
	n     atomic.Int64
	once  sync.Once
	done  chan struct{}
}

func newTrip(r sandbox.Runner, after int64, trip func()) *tripRunner {
	return &tripRunner{r: r, after: after, trip: trip, done: make(chan struct{})}
}

func (tr *tripRunner) Run(ctx context.Context, cmd sandbox.Command) error {
	count := func(k int) {
		if tr.n.Add(int64(k)) <= tr.after {
			return
		}
		tr.once.Do(func() {
			go func() { tr.trip(); close(tr.done) }()
		})
		select {
		case <-tr.done:
		case <-time.After(5 * time.Millisecond):
		}
	}
	if cmd.Stdin != nil {
		cmd.Stdin = countReader{cmd.Stdin, count}
	}
	if cmd.Stdout != nil {
		cmd.Stdout = countWriter{cmd.Stdout, count}
	}
	return tr.r.Run(ctx, cmd)
}

// tripped reports whether trip ran, waiting for it to end: the operation
// may return (its client killed) while trip still waits for the engine.
func (tr *tripRunner) tripped() bool {
	if tr.n.Load() <= tr.after {
		return false
	}
	select {
	case <-tr.done:
		return true
	case <-time.After(engineWait):
		return false
	}
}

// engineWait bounds a wait for the engine (a kill to take effect).
const engineWait = 2 * time.Minute

type countReader struct {
	r     io.Reader
	count func(int)
}

func (c countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.count(n)
	return n, err
}

type countWriter struct {
	w     io.Writer
	count func(int)
}

func (c countWriter) Write(p []byte) (int, error) {
	c.count(len(p))
	return c.w.Write(p)
}

// writeTree writes n files of size bytes (random) under dir.
func writeTree(t *testing.T, dir string, n, size int, seed string) {
	t.Helper()
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("d%02d", i%8), fmt.Sprintf("f%04d.bin", i))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		b := make([]byte, size)
		for j := 0; j < size; j += 32 {
			s := sha256.Sum256(fmt.Appendf(nil, "%s/%d/%d", seed, i, j))
			copy(b[j:], s[:])
		}
		require.NoError(t, os.WriteFile(p, b, 0o644))
	}
}

// hostSums returns "<sha256>  ./<path>" for every regular file under dir
// (but in .git), sorted by path: what sandboxSums prints.
func hostSums(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		s := sha256.Sum256(b)
		lines = append(lines, hex.EncodeToString(s[:])+"  ./"+filepath.ToSlash(rel))
		return nil
	}))
	slices.SortFunc(lines, func(a, b string) int { return strings.Compare(a[66:], b[66:]) })
	return strings.Join(lines, "\n") + "\n"
}

// sandboxSums lists the regular files under dir in the container, outside
// airlock (docker exec directly), in hostSums' format.
func sandboxSums(t *testing.T, c *enginetest.Container, dir string) string {
	t.Helper()
	return c.Sh(t, `cd '`+dir+`' && find . -type f ! -name '.airlock*' | LC_ALL=C sort | while IFS= read -r f; do sha256sum "$f"; done`)
}

// TestDockerKillMidStage: the container is killed while a stage streams
// its data. The stage fails as a transport failure; once the container is
// started again, the previous staged copy is intact, and a new stage
// succeeds.
func TestDockerKillMidStage(t *testing.T) {
	c, r := dockerRunner(t)
	root := mktemp(t, r) + "/rt"
	v1, v2 := t.TempDir(), t.TempDir()
	writeTree(t, v1, 20, 4096, "v1")
	writeTree(t, v2, 64, 256<<10, "v2") // 16 MiB: the kill lands mid-stream
	assets := func(src string) []stage.Asset { return []stage.Asset{{Name: "tree", Source: src}} }
	_, err := stage.Stage(t.Context(), stage.NewBridge(r), root, assets(v1))
	require.NoError(t, err)
	require.Equal(t, hostSums(t, v1), sandboxSums(t, c, root+"/tree"))

	var killErr error
	trip := newTrip(r, 4<<20, func() { killErr = c.Kill() })
	_, err = stage.Stage(t.Context(), stage.NewBridge(trip), root, assets(v2))
	require.True(t, trip.tripped(), "the container was never killed: the stage sent %d bytes", trip.n.Load())
	require.NoError(t, killErr)
	require.Error(t, err)
	assert.ErrorIs(t, err, sandbox.ErrTransport, "%v", err)
	assert.True(t, sandbox.Retryable(err), "%v", err)

	c.Start(t)
	assert.Equal(t, hostSums(t, v1), sandboxSums(t, c, root+"/tree"), "the previous copy is intact after the kill")
	rt, err := stage.Stage(t.Context(), stage.NewBridge(r), root, assets(v2))
	require.NoError(t, err)
	assert.False(t, rt.Assets[0].Reused)
	assert.Equal(t, hostSums(t, v2), sandboxSums(t, c, root+"/tree"))
}

// TestDockerKillMidRestore: the container is killed while a restore
// streams the agent's work back. Restore fails as a transport failure,
// the local work tree is untouched, and the same restore succeeds once
// the container runs again.
func TestDockerKillMidRestore(t *testing.T) {
	c, r := dockerRunner(t)
	local := gitLocal(t)
	remote := mktemp(t, r) + "/ws"
	round, err := workspace.Prepare(t.Context(), workspace.Spec{Local: local, Remote: remote, Runner: r})
	require.NoError(t, err)
	head := agentCommit(t, r, remote, 16<<20) // random: the bundle stays 16 MiB
	before := hostSums(t, local)
	beforeHead := hostGit(t, local, "rev-parse", "HEAD")

	var killErr error
	trip := newTrip(r, 4<<20, func() { killErr = c.Kill() })
	reopened, err := workspace.Reopen(t.Context(), workspace.Spec{Local: local, Remote: remote, Runner: trip}, round.ID())
	require.NoError(t, err)
	_, err = reopened.Restore(t.Context())
	require.True(t, trip.tripped(), "the container was never killed: the restore read %d bytes", trip.n.Load())
	require.NoError(t, killErr)
	require.Error(t, err)
	assert.ErrorIs(t, err, sandbox.ErrTransport, "%v", err)
	assert.Equal(t, before, hostSums(t, local), "the local work tree is untouched")
	assert.Equal(t, beforeHead, hostGit(t, local, "rev-parse", "HEAD"))

	c.Start(t)
	res, err := round.Restore(t.Context())
	require.NoError(t, err)
	assert.Equal(t, head, res.Head)
	assert.Equal(t, 1, res.Commits)
	assert.Equal(t, head+"\n", hostGit(t, local, "rev-parse", "HEAD"))
}
