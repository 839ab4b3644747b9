package attack_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/faultnet"
	"github.com/airlockdev/airlock/internal/sshdtest"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/stage/remote"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
)

// controlTimeout is the control deadline of the Hosts whose connection is
// faulted (remote.Config.ControlTimeout): a stalled control step must end
// in sandbox.ErrTransport within it. The clean runs (setup, measuring, the
// retry) keep the default deadline, so that a loaded machine cannot fail
// them.
const controlTimeout = 3 * time.Second

// stallKeepAlive is the keepalive interval of a stalled connection's Host:
// the data steps (a bundle, a tar stream) have no deadline but the
// caller's, so a stall there ends only when the keepalive gets no answer.
const stallKeepAlive = time.Second

// sandbox is one SSH server the suite runs over. Its file system is the
// test's own (remotetest runs commands here; sshdtest is a local sshd), so
// the tests inspect the sandbox side directly.
type server struct {
	name string
	addr string
	cfg  remote.Config
	dir  string // an absolute directory the server's user may write
}

// sandboxKinds are the servers every sweep runs over.
var sandboxKinds = []struct {
	name  string
	start func(t *testing.T) server
}{
	{"remotetest", func(t *testing.T) server {
		dir := t.TempDir()
		srv := remotetest.NewServer(t, remotetest.WithDir(dir))
		return server{name: "remotetest", addr: srv.Addr(), cfg: srv.Config(), dir: dir}
	}},
	{"sshd", func(t *testing.T) server {
		srv := sshdtest.Start(t) // skips, saying how to get sshd, when it is missing
		return server{name: "sshd", addr: srv.Addr(), cfg: srv.Config(), dir: srv.Dir()}
	}},
}

// config is the sandbox's client configuration with no keepalives (their
// bytes would make the byte counts of two runs differ).
func (s server) config() remote.Config {
	c := s.cfg
	c.KeepAlive = -1
	c.DialTimeout = 10 * time.Second
	return c
}

// faultedConfig is config with the suite's short control deadline.
func (s server) faultedConfig() remote.Config {
	c := s.config()
	c.ControlTimeout = controlTimeout
	return c
}

// dial connects directly (no proxy): the retry's new connection.
func (s server) dial(t *testing.T) *remote.Host {
	t.Helper()
	h, err := remote.Dial(t.Context(), s.addr, s.config())
	require.NoError(t, err, "dialling %s directly", s.name)
	t.Cleanup(func() { _ = h.Close() })
	return h
}

// fresh returns a new, empty directory in the sandbox.
func (s server) fresh(t *testing.T, name string) string {
	t.Helper()
	d, err := os.MkdirTemp(s.dir, name+"-")
	require.NoError(t, err)
	return d
}

// link is how an operation reaches the sandbox: a Target for stage and a
// Runner for workspace and deliverable. In a sweep both are the Host
// itself; in a measuring run they record where each command starts.
type link struct {
	target stage.Target
	runner sandbox.Runner
}

func hostLink(h *remote.Host) link { return link{target: h, runner: h} }

// mark is the byte offset (both directions, from the connection's first
// byte) at which a command or a file read began, in a clean run.
type mark struct {
	at    int64
	label string
}

// recorder is a Runner (and FileReader) over a Host that records, before
// each call, how many bytes the proxy has forwarded: the offsets where the
// phases of an operation begin. A Bridge over it sends what the Host's own
// Target methods send (remote.Host delegates them to a Bridge over itself;
// the control deadline changes no byte), so the offsets it records are
// those of the faulted runs, which use the Host itself.
type recorder struct {
	h     *remote.Host
	p     *faultnet.Proxy
	mu    sync.Mutex
	marks []mark
}

var (
	_ sandbox.Runner     = (*recorder)(nil)
	_ sandbox.FileReader = (*recorder)(nil)
)

func (r *recorder) add(label string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.marks = append(r.marks, mark{at: r.p.Bytes().Total(), label: label})
}

func (r *recorder) Run(ctx context.Context, cmd sandbox.Command) error {
	r.add(phaseOf(cmd.Script))
	return r.h.Run(ctx, cmd)
}

func (r *recorder) ReadFile(ctx context.Context, p string, max int64) ([]byte, error) {
	switch b := filepath.Base(p); {
	case strings.HasPrefix(b, ".airlock-manifest-"):
		r.add("probe (SFTP read of " + b + ")")
	case strings.HasPrefix(b, ".airlock-sweep-"):
		// read alongside the manifest, part of the probe: no mark of its own
	default:
		r.add("SFTP read of " + b)
	}
	return r.h.ReadFile(ctx, p, max)
}

func (r *recorder) link() link {
	return link{target: stage.NewBridge(r), runner: r}
}

// phases name the commands of the operations by a string of their
// scripts, in the order they are tried.
var phases = []struct{ has, name string }{
	{"echo airlock-ready", "setup+transfer (the send command)"},
	{"transfer incomplete", "publish (the rename)"},
	{`R "$o" "$d"`, "cleanup of a failed publish"},
	{"airlock-manifest-", "prune or unstage (list, remove)"},
	{"for t in git tar", "workspace probe"},
	{"g init -q", "prepare (init, bundle, checkout)"},
	{"airlock-restore 1", "restore (snapshot and bundle)"},
	{"exec tar -x -o -f -", "prepare (clear, then the tar stream)"},
	{"exec 3>&2", "register (open and read)"},
}

// phaseOf labels a script with its phase, or else its first line.
func phaseOf(script string) string {
	for _, p := range phases {
		if strings.Contains(script, p.has) {
			return p.name
		}
	}
	return firstLine(script)
}

// firstLine labels a script: its first line that says something.
func firstLine(script string) string {
	for l := range strings.SplitSeq(script, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "unset ") || strings.HasPrefix(l, "exec 3>&2") {
			continue
		}
		if len(l) > 48 {
			l = l[:48] + "…"
		}
		return l
	}
	return "(empty script)"
}

// measured is what a clean run through the proxy moved.
type measured struct {
	handshake int64 // bytes of the SSH handshake (the Dial)
	total     int64 // bytes of the whole connection
	marks     []mark
}

// phase names the phase a byte offset falls in, for messages.
func (m measured) phase(n int64) string {
	if n < m.handshake {
		return "handshake"
	}
	p := "after the handshake"
	for _, mk := range m.marks {
		if mk.at <= n {
			p = mk.label
		}
	}
	return p
}

// sweepFull reports AIRLOCK_FAULT_SWEEP=full: every byte-boundary class.
func sweepFull() bool { return os.Getenv("AIRLOCK_FAULT_SWEEP") == "full" }

// cutPoints chooses where to cut. Bounded (CI): the start of every phase
// (or a spread of them), three points in the last 220 bytes, then evenly
// spaced points between, budget in all.
// Full: every phase start and its neighbours, every power of two, the
// handshake's end and its neighbours, the last bytes, and a dense walk of
// 256 steps over the whole run.
func cutPoints(m measured, budget int) []int64 {
	var pts []int64
	add := func(n int64) {
		if n >= 1 && n < m.total {
			pts = append(pts, n)
		}
	}
	if sweepFull() {
		for _, d := range []int64{-1, 0, 1} {
			add(m.handshake + d)
			add(m.total + d - 1)
			for _, mk := range m.marks {
				add(mk.at + d)
			}
		}
		for p := int64(1); p < m.total; p <<= 1 {
			add(p)
		}
		step := max(1, m.total/256)
		for n := step; n < m.total; n += step {
			add(n)
		}
	} else {
		starts := spread(m.marks, budget/2)
		for _, mk := range starts {
			add(mk.at + 1) // the command's request has begun
		}
		// The last bytes: the end of the payload and the command's exit,
		// where a stream cut between two of its units reads as whole.
		for _, d := range []int64{220, 150, 80} {
			add(m.total - d)
		}
		span := m.total - m.handshake
		left := budget - len(pts)
		for i := range left {
			add(m.handshake + span*int64(i+1)/int64(left+1))
		}
	}
	slices.Sort(pts)
	return slices.Compact(pts)
}

// stallPoints chooses where to stall: inside the request of a few
// commands (each a control step, or the start of one), n of them spread
// over the run; every command in the full sweep.
func stallPoints(m measured, n int) []int64 {
	marks := m.marks
	if !sweepFull() {
		marks = spread(marks, n)
	}
	var pts []int64
	for _, mk := range marks {
		pts = append(pts, mk.at+48)
	}
	return pts
}

// spread picks n of ms, evenly, always the last one.
func spread(ms []mark, n int) []mark {
	if n <= 0 || len(ms) == 0 {
		return nil
	}
	if len(ms) <= n {
		return ms
	}
	var out []mark
	for i := range n {
		out = append(out, ms[(len(ms)-1)-i*(len(ms)-1)/max(1, n-1)])
	}
	slices.Reverse(out)
	return slices.CompactFunc(out, func(a, b mark) bool { return a.at == b.at })
}

// quiesce waits (up to 10 s) until no process of the sandbox still works
// under dir: none whose command line names dir or whose working directory
// is below it, no stage temporary directory under dir whose owner (the
// tar that writes into it) still runs, and no directory moved aside to be
// deleted whose deleting shell still runs. A cut connection's commands
// end on their own (their input ends); waiting makes the retry's view of
// the sandbox deterministic. It never kills anything.
func quiesce(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		busy := busyUnder(dir)
		if len(busy) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Logf("sandbox processes still at work under %s after 10 s: %v", dir, busy)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func busyUnder(dir string) []string {
	self := os.Getpid()
	var busy []string
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == self {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", p.Name(), "stat"))
		if err != nil || zombie(stat) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		cwd, _ := os.Readlink(filepath.Join("/proc", p.Name(), "cwd"))
		if bytes.Contains(cmdline, []byte(dir)) || cwd == dir || strings.HasPrefix(cwd, dir+"/") {
			busy = append(busy, fmt.Sprintf("%d %q", pid, bytes.ReplaceAll(cmdline[:min(len(cmdline), 60)], []byte{0}, []byte{' '})))
		}
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".airlock-tmp-") {
			if b, err := os.ReadFile(filepath.Join(p, "owner")); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0])); err == nil && alive(pid) {
					busy = append(busy, fmt.Sprintf("%d (owner of %s)", pid, p))
				}
			}
			return filepath.SkipDir
		}
		if rest, ok := strings.CutPrefix(d.Name(), ".airlock-gone-"); ok && d.IsDir() {
			// Moved aside by a sandbox shell that deletes it: <pid>-<n>.
			if pid, err := strconv.Atoi(strings.SplitN(rest, "-", 2)[0]); err == nil && alive(pid) {
				busy = append(busy, fmt.Sprintf("%d (deleting %s)", pid, p))
			}
			return filepath.SkipDir
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		return nil
	})
	return busy
}

// zombie reports a /proc/PID/stat whose state is Z (or X).
func zombie(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X')
}

func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !zombie(stat)
}

// stageTemps lists the temporary directories a publish may leave in root,
// and its sweep markers.
func stageTemps(t *testing.T, root string) []string {
	t.Helper()
	entries, err := os.ReadDir(root)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var tmp []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".airlock-tmp-") || strings.HasPrefix(e.Name(), ".airlock-gone-") || strings.HasPrefix(e.Name(), ".airlock-sweep-") {
			tmp = append(tmp, e.Name())
		}
	}
	return tmp
}

// files maps every regular file under dir (relative slash path) to its
// content and every directory to "/"; links map to "-> target". ignore
// drops top-level names.
func files(t *testing.T, dir string, ignore ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if slices.Contains(ignore, strings.SplitN(rel, "/", 2)[0]) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "-> " + target
		case d.IsDir():
			out[rel] = "/"
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = string(b)
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

// writeFiles writes name, content pairs under dir.
func writeFiles(t *testing.T, dir string, kv ...string) {
	t.Helper()
	for i := 0; i < len(kv); i += 2 {
		p := filepath.Join(dir, filepath.FromSlash(kv[i]))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(kv[i+1]), 0o644))
	}
}

// manifestEntry is one entry of a staged manifest as the suite reads it.
type manifestEntry struct {
	Path   string `json:"path"`
	Type   string `json:"type"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// assertStagedOrMarked is assertStaged, except that a copy may lack its
// manifest where a command killed between moving the manifest and moving
// the copy left it: then its sweep marker must be there, its record, which
// has the asset listing name it (so that a prune removes it; a stage
// sends it whole).
func assertStagedOrMarked(t *testing.T, root, name string, wants ...map[string]string) {
	t.Helper()
	_, err := os.Lstat(filepath.Join(root, ".airlock-manifest-"+name+".json"))
	if err == nil {
		assertStaged(t, root, name, wants...)
		return
	}
	require.ErrorIs(t, err, fs.ErrNotExist)
	assertWholeCopy(t, filepath.Join(root, name), wants...)
	assert.FileExists(t, filepath.Join(root, ".airlock-sweep-"+name), "a copy without its manifest must keep its sweep marker")
}

// assertWholeCopy checks that dir is a whole copy equal to one of wants;
// it returns what dir holds (as files returns it) and the index of the
// copy found, -1 for none.
func assertWholeCopy(t *testing.T, dir string, wants ...map[string]string) (map[string]string, int) {
	t.Helper()
	got := files(t, dir)
	idx := slices.IndexFunc(wants, func(w map[string]string) bool { return maps(w, got) })
	assert.GreaterOrEqual(t, idx, 0, "%s is no whole copy of any expected tree: %v", dir, keys(got))
	return got, idx
}

// assertStaged checks that root/name is a whole copy equal to one of
// wants (tree maps as files returns) and that its manifest describes it
// exactly; it returns the index of the copy found.
func assertStaged(t *testing.T, root, name string, wants ...map[string]string) int {
	t.Helper()
	dir := filepath.Join(root, name)
	got, idx := assertWholeCopy(t, dir, wants...)
	if idx < 0 {
		return -1
	}
	mf, err := os.ReadFile(filepath.Join(root, ".airlock-manifest-"+name+".json"))
	if !assert.NoError(t, err, "the manifest of a staged copy") {
		return idx
	}
	var m struct{ Entries []manifestEntry }
	require.NoError(t, json.Unmarshal(mf, &m), "the manifest of %s", dir)
	described := map[string]string{}
	for _, e := range m.Entries {
		if e.Type == "dir" {
			described[e.Path] = "/"
			continue
		}
		described[e.Path] = fmt.Sprintf("%d %s", e.Size, e.SHA256)
	}
	actual := map[string]string{}
	for p, c := range got {
		if c == "/" {
			actual[p] = "/"
			continue
		}
		sum := sha256.Sum256([]byte(c))
		actual[p] = fmt.Sprintf("%d %s", len(c), hex.EncodeToString(sum[:]))
	}
	assert.Equal(t, actual, described, "the manifest of %s describes it exactly", dir)
	return idx
}

// assertAbsent checks that root holds neither name nor its manifest.
func assertAbsent(t *testing.T, root, name string) {
	t.Helper()
	for _, p := range []string{name, ".airlock-manifest-" + name + ".json"} {
		_, err := os.Lstat(filepath.Join(root, p))
		assert.ErrorIs(t, err, fs.ErrNotExist, "%s must be gone", filepath.Join(root, p))
	}
}

func maps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

var gitEnv = []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=t@example.com",
	"GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_TERMINAL_PROMPT=0", "LC_ALL=C", "GIT_OPTIONAL_LOCKS=0"}

// git runs git in dir and returns its output; a failure fails the test.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := gitErr(dir, args...)
	require.NoError(t, err, "git %v in %s: %s", args, dir, out)
	return out
}

func gitErr(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, gitEnv...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// repoState is what a host repository must keep through a failed round:
// HEAD, every ref, the index file's bytes and the work tree.
type repoState struct {
	head, refs, index string
	tree              map[string]string
}

func snapshotRepo(t *testing.T, dir string) repoState {
	t.Helper()
	idx, err := os.ReadFile(filepath.Join(dir, ".git", "index"))
	require.NoError(t, err)
	sum := sha256.Sum256(idx)
	return repoState{
		head:  strings.TrimSpace(git(t, dir, "rev-parse", "HEAD")),
		refs:  git(t, dir, "for-each-ref", "--format=%(refname) %(objectname)"),
		index: hex.EncodeToString(sum[:]),
		tree:  files(t, dir, ".git"),
	}
}

// assertRepoIntact checks that dir is as before and git fsck --strict clean.
func assertRepoIntact(t *testing.T, dir string, before repoState) {
	t.Helper()
	now := snapshotRepo(t, dir)
	assert.Equal(t, before.head, now.head, "the host's HEAD")
	assert.Equal(t, before.refs, now.refs, "the host's refs")
	assert.Equal(t, before.index, now.index, "the host's index file")
	assert.Equal(t, before.tree, now.tree, "the host's work tree")
	assertFsck(t, dir)
}

func assertFsck(t *testing.T, dir string) {
	t.Helper()
	out, err := gitErr(dir, "fsck", "--strict", "--no-progress")
	assert.NoError(t, err, "git fsck --strict in %s: %s", dir, out)
}

// assertNoHostLeftovers checks a host repository for what a round may
// leave: refs under refs/airlock, quarantine directories, temporary index
// and bundle files in the state directory, temporary files in the work tree.
func assertNoHostLeftovers(t *testing.T, dir string) {
	t.Helper()
	assert.Empty(t, git(t, dir, "for-each-ref", "refs/airlock"), "refs/airlock/* left in %s", dir)
	state := filepath.Join(dir, ".git", "airlock", "rounds")
	entries, err := os.ReadDir(state)
	if err == nil {
		for _, e := range entries {
			n := e.Name()
			assert.False(t, strings.HasPrefix(n, "quarantine-") || strings.HasPrefix(n, "tmp-") || strings.HasSuffix(n, ".bundle"),
				"left in the state directory %s: %s", state, n)
		}
	}
	for p := range files(t, dir, ".git") {
		assert.NotContains(t, filepath.Base(p), ".airlock-", "a temporary file left in the work tree: %s", p)
	}
}

// assertNoSandboxGitLeftovers checks a sandbox repository for the
// temporary files and refs a round's commands use.
func assertNoSandboxGitLeftovers(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, ".git"))
	require.NoError(t, err)
	for _, e := range entries {
		assert.False(t, strings.HasPrefix(e.Name(), "airlock-"), "left in the sandbox's .git: %s", e.Name())
	}
	assert.Empty(t, git(t, dir, "for-each-ref", "refs/airlock/out", "refs/airlock/tmp"), "temporary refs left in the sandbox %s", dir)
}
