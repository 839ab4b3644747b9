package attack

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
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

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
)

// The subprocess harness: the test binary runs itself again with
// childRoleEnv naming what to do; the parent SIGKILLs the child (and every
// process it started) at a random point, then recovers in-process.

const (
	childRoleEnv = "AIRLOCK_ATTACK_CHILD" // the role a re-executed test binary plays
	childDirEnv  = "AIRLOCK_ATTACK_DIR"   // the base directory of its environment
	childArgEnv  = "AIRLOCK_ATTACK_ARG"   // one argument (a round id, a kind)
	childPrefix  = "airlock-attack: "     // the child's protocol lines on stdout
)

// child is a running re-executed test binary.
type child struct {
	arg   string // the argument it was started with
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []string
	start chan struct{} // closed when the child printed "start"
	done  chan error    // the child's exit
	out   bytes.Buffer  // everything it printed (under mu)
}

// startChild runs the test binary as role with dir and arg.
func startChild(t *testing.T, role, dir, arg string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillChild$", "-test.count=1", "-test.v=false")
	cmd.Env = append(os.Environ(), childRoleEnv+"="+role, childDirEnv+"="+dir, childArgEnv+"="+arg)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	c := &child{arg: arg, cmd: cmd, start: make(chan struct{}), done: make(chan error, 1)}
	require.NoError(t, cmd.Start(), "starting the child %s", role)
	var wg sync.WaitGroup
	wg.Go(func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		started := false
		for sc.Scan() {
			line := sc.Text()
			c.mu.Lock()
			c.out.WriteString(line + "\n")
			if rest, ok := strings.CutPrefix(line, childPrefix); ok {
				c.lines = append(c.lines, rest)
				if rest == "start" && !started {
					started = true
					close(c.start)
				}
			}
			c.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, pr)
	})
	go func() {
		err := cmd.Wait()
		_ = pw.Close()
		wg.Wait()
		c.done <- err
	}()
	return c
}

func (c *child) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

// finished reports whether the child printed "done".
func (c *child) finished() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Contains(c.lines, "done")
}

// waitStart waits for the child's "start" line (or its exit).
func (c *child) waitStart(t *testing.T) {
	t.Helper()
	select {
	case <-c.start:
	case err := <-c.done:
		c.done <- err
	case <-time.After(2 * time.Minute):
		t.Fatalf("the child never started its operation:\n%s", c.output())
	}
}

// wait waits for the child to exit by itself and fails t unless it printed
// "done".
func (c *child) wait(t *testing.T) {
	t.Helper()
	select {
	case err := <-c.done:
		require.True(t, c.finished(), "the child failed (%v):\n%s", err, c.output())
	case <-time.After(5 * time.Minute):
		c.killAll(t)
		t.Fatalf("the child did not finish within 5 minutes:\n%s", c.output())
	}
}

// killAll SIGKILLs the child and every process it started, as a host's
// death would: the child's process group is stopped first, then its
// descendants (scripts in process groups of their own included) are
// found and stopped until no new one appears, then all are killed. It
// waits for the child to exit and for the descendants to be gone (or
// zombies). It reports whether the child had already finished.
func (c *child) killAll(t *testing.T) bool {
	t.Helper()
	pid := c.cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGSTOP) // fails only when it is gone already
	seen := map[int]bool{pid: true}
	for range 20 {
		more := false
		for _, p := range descendants(pid) {
			if !seen[p] {
				seen[p] = true
				more = true
				_ = syscall.Kill(p, syscall.SIGSTOP)
			}
		}
		if !more {
			break
		}
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	for p := range seen {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	select {
	case <-c.done:
	case <-time.After(time.Minute):
		t.Fatalf("the killed child %d did not exit", pid)
	}
	deadline := time.Now().Add(30 * time.Second)
	for p := range seen {
		for alive(p) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d, started by the killed child, is still alive after SIGKILL", p)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return c.finished()
}

// descendants returns the pids whose parent chain leads to pid.
func descendants(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	parent := map[int]int{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp, ok := ppid(p); ok {
			parent[p] = pp
		}
	}
	var out []int
	for p := range parent {
		for q, hops := parent[p], 0; q > 1 && hops < 64; q, hops = parent[q], hops+1 {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// ppid reads the parent pid from /proc/<pid>/stat.
func ppid(pid int) (int, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 2 {
		return 0, false
	}
	pp, err := strconv.Atoi(fields[1])
	return pp, err == nil
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

// killCount is how many kills each operation gets: 5, or 30 with
// AIRLOCK_KILLS=full.
func killCount() int {
	if os.Getenv("AIRLOCK_KILLS") == "full" {
		return 30
	}
	return 5
}

// killRand returns the suite's random source, seeded from AIRLOCK_KILL_SEED
// or the clock, and logs the seed so that a failure reproduces.
func killRand(t *testing.T) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("AIRLOCK_KILL_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "AIRLOCK_KILL_SEED=%q", s)
		seed = v
	}
	t.Logf("kill seed %d (AIRLOCK_KILL_SEED=%d reproduces the kill points)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x5eed))
}

// killLoop runs prep, then the child role (killed after a random delay
// within the i-th of n slices of the operation's duration, measured by a
// second, unkilled run), then recover, n+2 times in all.
func killLoop(t *testing.T, n int, role string, base string, prep func(i int) string, recover func(i int, c *child, killed bool)) {
	rng := killRand(t)
	var measured time.Duration
	for i := 0; i <= n+1; i++ {
		arg := prep(i)
		c := startChild(t, role, base, arg)
		c.waitStart(t)
		began := time.Now()
		killed := false
		if i <= 1 {
			// Two unkilled runs: the first may do more (a first publish, a
			// first prepare); the second is what the kills interrupt.
			c.wait(t)
			measured = time.Since(began)
			t.Logf("%s: unkilled run %d takes %v", role, i, measured)
		} else {
			// Stratified: kill i lands at a random point of the i-th of n
			// equal slices of the run, so that n kills cover all of it.
			span := int64(measured) * 11 / 10 / int64(n)
			delay := time.Duration(int64(i-2)*span + rng.Int64N(span+1))
			time.Sleep(delay)
			finishedFirst := c.killAll(t)
			killed = !finishedFirst
			t.Logf("%s run %d (kill %d): SIGKILL after %v (finished first: %v)", role, i, i-1, delay, finishedFirst)
		}
		failed := t.Failed()
		recover(i, c, killed)
		if t.Failed() && !failed {
			t.Logf("child output of run %d:\n%s", i, c.output())
		}
	}
}

// childSay prints one protocol line from the child.
func childSay(format string, args ...any) {
	fmt.Printf(childPrefix+format+"\n", args...)
}

// gitIn runs host git in dir with a test identity and no user configuration.
func gitIn(t testing.TB, dir string, args ...string) string {
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
	cmd.Env = append(cmd.Env, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_AUTHOR_NAME=Test",
		"GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=t@example.com",
		"GIT_TERMINAL_PROMPT=0", "LC_ALL=C")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// newRepo makes a git work tree at dir with one commit of files.
func newRepo(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	gitIn(t, dir, "init", "-q", "-b", "main")
	writeFiles(t, dir, files)
	gitIn(t, dir, "add", "-A")
	gitIn(t, dir, "commit", "-q", "-m", "initial")
}

func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for rel, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(data), 0o644))
	}
}

// checkRepo fails t unless git fsck --strict is clean on the repository
// at dir and no refs/airlock/* ref is left.
func checkRepo(t testing.TB, dir string) {
	t.Helper()
	out, err := gitErr(dir, "fsck", "--strict", "--no-progress", "--no-dangling")
	require.NoError(t, err, "git fsck --strict in %s: %s", dir, out)
	require.Empty(t, strings.TrimSpace(out), "git fsck --strict in %s reports problems", dir)
	refs := gitIn(t, dir, "for-each-ref", "--format=%(refname)", "refs/airlock/")
	assert.Empty(t, strings.TrimSpace(refs), "refs/airlock/* refs are left in %s after the recovery run", dir)
}

// leftovers returns the entries below dir (not following links) whose
// names are those of airlock's temporary files and directories: a
// restore's temporary file (".<name>.airlock-<rand>"), an atomic write's
// (".<name>.tmp-<rand>"), a quarantine, a bundle or index left in a
// sandbox's .git, a stage's temporary directory (".airlock-tmp…").
// skip names subtrees (relative slash paths) not to look into.
func leftovers(t testing.TB, dir string, skip ...string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if slices.Contains(skip, rel) {
			return filepath.SkipDir
		}
		// airlock's own lock files (flock, kept) live in an airlock
		// directory; any other *.lock is a stale git lock.
		ownLock := strings.HasSuffix(rel, ".lock") && (path.Base(path.Dir(rel)) == "airlock" || path.Base(path.Dir(rel)) == sandbox.RuntimeDir)
		if (isLeftover(de.Name()) && !ownLock) || strings.Contains(rel, sandbox.RuntimeDir+"/restore-") {
			out = append(out, rel)
		}
		return nil
	})
	require.NoError(t, err, "walking %s for leftovers", dir)
	return out
}

// isLeftover reports whether name is one of airlock's temporary names.
func isLeftover(n string) bool {
	switch {
	case strings.Contains(n, ".airlock-") && !strings.HasPrefix(n, ".airlock-manifest") && !isStamps(n),
		strings.Contains(n, ".tmp-"),
		strings.HasPrefix(n, "quarantine-"),
		strings.HasPrefix(n, "airlock-prepare-"), strings.HasPrefix(n, "airlock-restore-"),
		strings.HasPrefix(n, ".airlock-tmp"), strings.HasPrefix(n, "tmp_pack_"), strings.HasPrefix(n, "tmp_idx_"),
		strings.HasSuffix(n, ".lock"):
		return true
	}
	return false
}

// isStamps reports whether name is a Bridge's record of a staged copy
// (".airlock-stamps-<asset>", kept beside its manifest); the ".new" it is
// written to first is a leftover.
func isStamps(n string) bool {
	return strings.HasPrefix(n, ".airlock-stamps-") && !strings.HasSuffix(n, ".new")
}

// withoutLeftovers returns tree without the entries whose base name is a
// leftover's (reported apart, by leftovers).
func withoutLeftovers(tree map[string]string) map[string]string {
	out := map[string]string{}
	for p, v := range tree {
		if !isLeftover(path.Base(p)) {
			out[p] = v
		}
	}
	return out
}

// files reads the regular files and links below dir (not following
// links), except the top-level names in skip: path -> content, or
// "-> target" for a link.
func files(t testing.TB, dir string, skip ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if rel != "." && slices.Contains(skip, strings.SplitN(rel, "/", 2)[0]) {
			if de.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case de.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "-> " + target
		case de.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = string(b)
		}
		return nil
	})
	require.NoError(t, err, "reading the tree %s", dir)
	return out
}

// fetched reads <root>/<name> back through target: path -> content for
// files, "-> link" for links, "dir" for directories.
func fetched(t testing.TB, target stage.Target, root, name string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := target.Fetch(context.Background(), root, name, func(e stage.Entry, r io.Reader) error {
		switch {
		case e.Mode.IsRegular():
			b, err := io.ReadAll(r)
			if err != nil {
				return err
			}
			out[e.Path] = string(b)
		case e.Mode.IsDir():
		default:
			out[e.Path] = "-> " + e.Mode.Type().String()
		}
		return nil
	})
	require.NoError(t, err, "fetching %s/%s", root, name)
	return out
}

// treeDiff describes how got differs from want (both from files):
// missing, extra and differing paths, one line each, sorted; "" when equal.
func treeDiff(want, got map[string]string) string {
	var lines []string
	short := func(s string) string {
		if len(s) > 40 {
			return fmt.Sprintf("%q… (%d bytes)", s[:40], len(s))
		}
		return fmt.Sprintf("%q", s)
	}
	for p, w := range want {
		g, ok := got[p]
		switch {
		case !ok:
			lines = append(lines, fmt.Sprintf("missing %q (want %s)", p, short(w)))
		case g != w:
			lines = append(lines, fmt.Sprintf("differs %q: want %s, got %s", p, short(w), short(g)))
		}
	}
	for p, g := range got {
		if _, ok := want[p]; !ok {
			lines = append(lines, fmt.Sprintf("extra %q (%s)", p, short(g)))
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// quiet waits (up to 30 s) until no process but this one has its working
// directory below dir: the sandbox side of a killed operation has ended.
func quiet(t testing.TB, dir string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		busy := ""
		ents, err := os.ReadDir("/proc")
		require.NoError(t, err)
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() || !alive(pid) {
				continue
			}
			if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err == nil && (cwd == dir || strings.HasPrefix(cwd, dir+"/")) {
				busy = fmt.Sprintf("process %d in %s", pid, cwd)
				break
			}
		}
		if busy == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sandbox is still busy 30 s after the kill: %s", busy)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
