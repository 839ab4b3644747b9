package workspace_test

import (
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
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/shell"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

// isPrepare reports whether cmd is a prepare script (git or plain).
func isPrepare(cmd sandbox.Command) bool { return strings.Contains(cmd.Script, shell.PrepareLockName) }

// shim writes into dir a program called name that runs the shell line
// pre (its arguments are "$@"), then the real name (from PATH).
func shim(t *testing.T, dir, name, pre string) {
	t.Helper()
	real, err := exec.LookPath(name)
	require.NoError(t, err)
	body := fmt.Sprintf("#!/bin/sh\n%s\nexec %s \"$@\"\n", pre, shell.Quote(real))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755))
}

// slowShims returns a directory whose git sleeps before each read-tree
// and whose tar sleeps before it extracts: a checkout that takes a while.
func slowShims(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	shim(t, dir, "git", `case " $* " in *" read-tree "*) sleep 2;; esac`)
	shim(t, dir, "tar", `case " $* " in *" -x "*) sleep 2;; esac`)
	return dir
}

// binsWithout returns a directory of links to every program of
// /usr/local/bin, /usr/bin and /bin but those named: a PATH without them.
func binsWithout(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"/usr/local/bin", "/usr/bin", "/bin"} {
		ents, err := os.ReadDir(d)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		require.NoError(t, err)
		for _, en := range ents {
			if slices.Contains(names, en.Name()) {
				continue
			}
			err := os.Symlink(filepath.Join(d, en.Name()), filepath.Join(dir, en.Name()))
			if !errors.Is(err, fs.ErrExist) { // the first directory's wins, as on PATH
				require.NoError(t, err)
			}
		}
	}
	return dir
}

// detachPrepare runs the first prepare script detached and slowed (its
// checkout sleeps): it reports ErrTransport after delay while the script
// goes on in the sandbox, as a cut connection leaves it.
// Every command runs with PATH path ("": the Runner's own).
type detachPrepare struct {
	r     sandbox.Runner
	path  string
	slow  string // slowShims
	delay time.Duration
	once  sync.Once
	wg    sync.WaitGroup
}

func (d *detachPrepare) Run(ctx context.Context, cmd sandbox.Command) error {
	first := false
	if isPrepare(cmd) {
		d.once.Do(func() { first = true })
	}
	if d.path != "" {
		env := map[string]string{"PATH": d.path}
		for k, v := range cmd.Env {
			env[k] = v
		}
		cmd.Env = env
	}
	if !first {
		return d.r.Run(ctx, cmd)
	}
	in, err := io.ReadAll(cmd.Stdin)
	if err != nil {
		return err
	}
	path := "/usr/local/bin:/usr/bin:/bin"
	if d.path != "" {
		path = d.path
	}
	env := map[string]string{}
	for k, v := range cmd.Env {
		env[k] = v
	}
	env["PATH"] = d.slow + ":" + path
	cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr = env, strings.NewReader(string(in)), io.Discard, io.Discard
	d.wg.Add(1)
	go func() { defer d.wg.Done(); _ = d.r.Run(context.Background(), cmd) }()
	time.Sleep(d.delay)
	return fmt.Errorf("%w: connection lost (test)", sandbox.ErrTransport)
}

// TestPrepareRetryWhileEarlierPrepareRuns: a Prepare retried after a
// transport failure, while the first attempt's script still checks out
// in the sandbox, waits for it; the agent that starts after the retry
// returned keeps its work (before, the first script's late checkout
// reverted the agent's edit and git clean removed its new file), and the
// work tree holds the retry's snapshot. Both locks are tried: flock(1),
// and the pid file of a sandbox without flock.
func TestPrepareRetryWhileEarlierPrepareRuns(t *testing.T) {
	noFlock := binsWithout(t, "flock")
	for _, kind := range []string{"git", "plain"} {
		for _, path := range []string{"", noFlock} {
			t.Run(fmt.Sprintf("%s/flock=%v", kind, path == ""), func(t *testing.T) {
				testPrepareRetryWhileEarlierPrepareRuns(t, kind, path)
			})
		}
	}
}

func testPrepareRetryWhileEarlierPrepareRuns(t *testing.T, kind, path string) {
	e := newEnv(t, runners[0].new)
	seed(t, e.local, kind, map[string]string{"a": "v1\n", "keep": "k\n"})
	cut := &detachPrepare{r: e.spec.Runner, path: path, slow: slowShims(t), delay: 500 * time.Millisecond}
	e.spec.Runner = &detachPrepare{r: e.spec.Runner, path: path, slow: slowShims(t)}
	e.spec.Runner.(*detachPrepare).once.Do(func() {}) // never detaches
	spec := e.spec
	spec.Runner = cut
	_, err := workspace.Prepare(ctx(t), spec)
	require.ErrorIs(t, err, sandbox.ErrTransport)

	write(t, e.local, "a", "v2\n") // the user's edit between the attempts
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	assert.Equal(t, "v2\n", read(t, e.remote, "a"), "the retry's snapshot")

	write(t, e.remote, "a", "agent\n") // the agent starts
	write(t, e.remote, "new", "agent's file\n")
	cut.wg.Wait()
	assert.Equal(t, "agent\n", read(t, e.remote, "a"), "the agent's edit")
	assert.Equal(t, "agent's file\n", read(t, e.remote, "new"), "the agent's new file")

	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Empty(t, res.Refused)
	assert.Equal(t, "agent\n", read(t, e.local, "a"))
	assert.Equal(t, "agent's file\n", read(t, e.local, "new"))
	_, err = os.Lstat(filepath.Join(e.remote, ".airlock", shell.PrepareLockName+".pid"))
	assert.ErrorIs(t, err, fs.ErrNotExist, "the pid lock is released")
}

// holdPrepare keeps the first prepare command (it fails it with
// ErrTransport without running it), so that the test can run it late.
type holdPrepare struct {
	sandbox.Runner
	held *sandbox.Command
}

func (h *holdPrepare) Run(ctx context.Context, cmd sandbox.Command) error {
	if h.held != nil || !isPrepare(cmd) {
		return h.Runner.Run(ctx, cmd)
	}
	in, err := io.ReadAll(cmd.Stdin)
	if err != nil {
		return err
	}
	cmd.Stdin = strings.NewReader(string(in))
	h.held = &cmd
	return fmt.Errorf("%w: connection lost (test)", sandbox.ErrTransport)
}

// TestPrepareStartedLateChangesNothing: a prepare script that starts only
// after a later Prepare finished (a command delivered late) stops before
// it changes anything, and says why.
func TestPrepareStartedLateChangesNothing(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, runners[0].new)
			seed(t, e.local, kind, map[string]string{"a": "v1\n"})
			hold := &holdPrepare{Runner: e.spec.Runner}
			spec := e.spec
			spec.Runner = hold
			_, err := workspace.Prepare(ctx(t), spec)
			require.ErrorIs(t, err, sandbox.ErrTransport)
			require.NotNil(t, hold.held)

			write(t, e.local, "a", "v2\n")
			_, err = workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			write(t, e.remote, "a", "agent\n")
			write(t, e.remote, "new", "agent's file\n")

			var stderr strings.Builder
			late := *hold.held
			late.Stdout, late.Stderr = io.Discard, &stderr
			err = e.spec.Runner.Run(ctx(t), late)
			var ee *sandbox.ExitError
			require.True(t, errors.As(err, &ee), "%v", err)
			assert.Equal(t, shell.PrepareSuperseded, ee.Status)
			assert.Contains(t, stderr.String(), "a later prepare already prepared "+e.remote)
			assert.Contains(t, stderr.String(), "this one stopped before changing anything")
			assert.Equal(t, "agent\n", read(t, e.remote, "a"))
			assert.Equal(t, "agent's file\n", read(t, e.remote, "new"))
		})
	}
}

// TestPrepareWhileAnotherHoldsTheLock: a Prepare whose work tree another
// prepare still holds (a process in the sandbox holding the lock) waits,
// then fails with ErrLocked (retryable), naming the holder and the next
// step, and changes nothing; once the holder is gone the same Prepare
// succeeds. Both locks: flock(1), and the pid file.
func TestPrepareWhileAnotherHoldsTheLock(t *testing.T) {
	noFlock := binsWithout(t, "flock")
	for _, kind := range []string{"git", "plain"} {
		for _, path := range []string{"", noFlock} {
			t.Run(fmt.Sprintf("%s/flock=%v", kind, path == ""), func(t *testing.T) {
				e := newEnv(t, runners[0].new)
				seed(t, e.local, kind, map[string]string{"a": "v1\n"})
				write(t, e.remote, "agent", "the sandbox's file\n")
				lock := filepath.Join(e.remote, ".airlock", shell.PrepareLockName)
				var holder *exec.Cmd
				if path == "" {
					write(t, e.remote, ".airlock/"+shell.PrepareLockName, "4242 1\n")
					holder = exec.Command("flock", lock, "sleep", "30")
				} else {
					holder = exec.Command("sleep", "30")
				}
				holder.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // flock's child holds the lock too
				require.NoError(t, holder.Start())
				kill := func() { _ = syscall.Kill(-holder.Process.Pid, syscall.SIGKILL); _, _ = holder.Process.Wait() }
				t.Cleanup(kill)
				if path != "" {
					write(t, e.remote, ".airlock/"+shell.PrepareLockName+".pid", fmt.Sprintf("%d\n", holder.Process.Pid))
				} else {
					require.Eventually(t, func() bool { return exec.Command("flock", "-n", lock, "true").Run() != nil }, 5*time.Second, 20*time.Millisecond)
				}
				e.spec.Runner = &detachPrepare{r: e.spec.Runner, path: path}
				e.spec.Runner.(*detachPrepare).once.Do(func() {})

				_, err := workspace.Prepare(ctx(t), e.spec, workspace.WithPrepareLockWait(1))
				require.ErrorIs(t, err, workspace.ErrLocked)
				assert.True(t, sandbox.Retryable(err))
				pid := 4242
				if path != "" {
					pid = holder.Process.Pid
				}
				if path == "" {
					assert.Contains(t, err.Error(), fmt.Sprintf("another prepare or restore of %s still holds its lock %s/.airlock/%s after 1 seconds: wait for it to end or stop it, then try again", e.remote, e.remote, shell.PrepareLockName))
				} else {
					assert.Contains(t, err.Error(), fmt.Sprintf("another prepare or restore of %s still holds its lock %s/.airlock/%s.pid (pid %d) after 1 seconds: wait for it to end or stop it", e.remote, e.remote, shell.PrepareLockName, pid))
				}
				assert.Equal(t, "the sandbox's file\n", read(t, e.remote, "agent"), "nothing changed")
				assert.False(t, exists(e.remote, "a"))

				kill()
				_, err = workspace.Prepare(ctx(t), e.spec, workspace.WithPrepareLockWait(1))
				require.NoError(t, err)
				assert.Equal(t, "v1\n", read(t, e.remote, "a"))
			})
		}
	}
}

// pidNS runs every command in a PID namespace of its own (unshare), where
// the shell is pid 1: as engines that give each exec its own namespace do.
// With path set, commands run with that PATH.
type pidNS struct {
	r    sandbox.Runner
	path string
}

func (p pidNS) Run(ctx context.Context, cmd sandbox.Command) error {
	cmd.Script = "exec unshare --pid --fork --mount-proc /bin/sh -c " + shell.Quote(cmd.Script)
	if p.path != "" {
		env := map[string]string{"PATH": p.path}
		for k, v := range cmd.Env {
			env[k] = v
		}
		cmd.Env = env
	}
	return p.r.Run(ctx, cmd)
}

// slowFind returns a PATH whose find sleeps, first, as many seconds as the
// file it also returns says.
func slowFind(t *testing.T) (path, secs string) {
	t.Helper()
	dir := t.TempDir()
	secs = filepath.Join(dir, "secs")
	require.NoError(t, os.WriteFile(secs, []byte("0"), 0o644))
	shim(t, dir, "find", fmt.Sprintf(`sleep "$(cat %s)"`, shell.Quote(secs)))
	return dir + ":/usr/local/bin:/usr/bin:/bin", secs
}

// TestPlainRestoreRetryInPIDNamespaces: a plain Restore retried at once
// after a cut connection, while the first run's script still goes on, in
// a sandbox whose commands each get a PID namespace (both shells are pid
// 1), brings everything and refuses the agent's hard link: the two runs
// never share a report (before, both wrote restore-<round>.1, and the
// first, its report written while the retry's still was, removed it: the
// retry failed, or in a bash sandbox read an empty report). Each run's
// report takes a while (a slow find): the first's ends inside the
// retry's.
func TestPlainRestoreRetryInPIDNamespaces(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("PID namespaces (unshare --pid) need root; CI runs as root")
	}
	if err := exec.Command("unshare", "--pid", "--fork", "--mount-proc", "true").Run(); err != nil {
		t.Skipf("unshare --pid does not run here (%v)", err)
	}
	for run := range 2 {
		t.Run(fmt.Sprint(run), func(t *testing.T) {
			e := newEnv(t, runners[0].new)
			write(t, e.local, "a", "1\n")
			path, secs := slowFind(t)
			e.spec.Runner = pidNS{e.spec.Runner, path}
			state := workspace.WithStateDir(t.TempDir())
			r, err := workspace.Prepare(ctx(t), e.spec, state)
			require.NoError(t, err)
			for j := range 300 {
				write(t, e.remote, fmt.Sprintf("new/%03d/g", j), strings.Repeat("z", j*50))
			}
			write(t, e.remote, "a", "agent\n")
			require.NoError(t, os.Link(filepath.Join(e.remote, "a"), filepath.Join(e.remote, "hard")))

			cut := &detachOnce{r: e.spec.Runner, delay: time.Duration(10+run*40) * time.Millisecond}
			spec := e.spec
			spec.Runner = cut
			r1, err := workspace.Reopen(ctx(t), spec, r.ID(), state)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(secs, []byte("1"), 0o644))
			_, err = r1.Restore(ctx(t))
			require.ErrorIs(t, err, sandbox.ErrTransport)
			require.NoError(t, os.WriteFile(secs, []byte("2"), 0o644))

			r2, err := workspace.Reopen(ctx(t), e.spec, r.ID(), state)
			require.NoError(t, err)
			res, err := r2.Restore(ctx(t))
			cut.wg.Wait()
			require.NoError(t, err)
			assert.Equal(t, []string{"a", "hard"}, res.Refused, "the report's hard links")
			assert.Equal(t, strings.Repeat("z", 299*50), read(t, e.local, "new/299/g"))
			left, err := filepath.Glob(filepath.Join(e.remote, ".airlock", "restore-*"))
			require.NoError(t, err)
			assert.Empty(t, left, "reports left in the sandbox")
		})
	}
}

// TestPrepareLockPlanted: a link, a FIFO or a directory planted at the
// prepare lock (or its pid file) fails the Prepare at once, naming it and
// the next step, rather than being followed or hanging on the FIFO's
// open; nothing of the work tree changes.
func TestPrepareLockPlanted(t *testing.T) {
	for _, name := range []string{shell.PrepareLockName, shell.PrepareLockName + ".pid"} {
		for _, kind := range []string{"link", "fifo", "dir"} {
			t.Run(name+"/"+kind, func(t *testing.T) {
				e := newEnv(t, runners[0].new)
				seed(t, e.local, "plain", map[string]string{"a": "v1\n"})
				write(t, e.remote, "agent", "the sandbox's file\n")
				require.NoError(t, os.MkdirAll(filepath.Join(e.remote, ".airlock"), 0o755))
				p := filepath.Join(e.remote, ".airlock", name)
				victim := filepath.Join(t.TempDir(), "victim")
				require.NoError(t, os.WriteFile(victim, []byte("victim\n"), 0o644))
				switch kind {
				case "link":
					require.NoError(t, os.Symlink(victim, p))
				case "fifo":
					require.NoError(t, syscall.Mkfifo(p, 0o600))
				case "dir":
					require.NoError(t, os.Mkdir(p, 0o700))
				}
				c, cancel := context.WithTimeout(ctx(t), 20*time.Second)
				defer cancel()
				_, err := workspace.Prepare(c, e.spec)
				require.Error(t, err)
				assert.Contains(t, err.Error(), e.remote+"/.airlock/"+name+", the work tree's lock, is not a regular file (a link, a FIFO?): remove it and try again")
				assert.Equal(t, "the sandbox's file\n", read(t, e.remote, "agent"))
				assert.Equal(t, "victim\n", read(t, filepath.Dir(victim), "victim"))
			})
		}
	}
}

// TestPrepareLockGarbageSeq: a lock file whose recorded start lies far
// ahead (garbage the sandbox wrote, a clock far off), or a huge sparse
// one, is no later prepare: Prepare goes on and records its own; one a
// minute ahead stops the prepare, saying what to do.
func TestPrepareLockGarbageSeq(t *testing.T) {
	for _, garbage := range []string{"1 999999999999999999\n", "1 99999999999999999999999999999\n", "x -5\n", "\x00\xff", ""} {
		e := newEnv(t, runners[0].new)
		seed(t, e.local, "plain", map[string]string{"a": "v1\n"})
		write(t, e.remote, ".airlock/"+shell.PrepareLockName, garbage)
		_, err := workspace.Prepare(ctx(t), e.spec)
		require.NoError(t, err, "%q", garbage)
		assert.Equal(t, "v1\n", read(t, e.remote, "a"))
	}
	// A sparse 256 MiB lock file without a newline: read 64 bytes, not
	// crawled through (an outside attack: 64 MiB cost every Prepare 30 s).
	e := newEnv(t, runners[0].new)
	seed(t, e.local, "plain", map[string]string{"a": "v1\n"})
	write(t, e.remote, ".airlock/"+shell.PrepareLockName, "")
	require.NoError(t, os.Truncate(filepath.Join(e.remote, ".airlock", shell.PrepareLockName), 256<<20))
	c, cancel := context.WithTimeout(ctx(t), 10*time.Second)
	defer cancel()
	_, err := workspace.Prepare(c, e.spec)
	require.NoError(t, err)

	e = newEnv(t, runners[0].new)
	seed(t, e.local, "plain", map[string]string{"a": "v1\n"})
	write(t, e.remote, ".airlock/"+shell.PrepareLockName, fmt.Sprintf("7 %d\n", time.Now().Add(time.Minute).UnixMicro()))
	_, err = workspace.Prepare(ctx(t), e.spec)
	var ee *sandbox.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, shell.PrepareSuperseded, ee.Status)
	assert.Contains(t, err.Error(), "a later prepare already prepared "+e.remote+": this one stopped before changing anything; "+
		"prepare again if the work tree should hold this round (a host clock set back does this too: then remove "+e.remote+"/.airlock/"+shell.PrepareLockName+")")
	assert.False(t, exists(e.remote, "a"))
}

// cutStdin gives prepare scripts only the first n bytes of their stdin,
// then fails as a cut connection does.
type cutStdin struct {
	r sandbox.Runner
	n int64
}

func (c cutStdin) Run(ctx context.Context, cmd sandbox.Command) error {
	if !isPrepare(cmd) {
		return c.r.Run(ctx, cmd)
	}
	cmd.Stdin = io.LimitReader(cmd.Stdin, c.n)
	if err := c.r.Run(ctx, cmd); err != nil {
		return fmt.Errorf("%w: connection lost (test): %w", sandbox.ErrTransport, err)
	}
	return fmt.Errorf("%w: connection lost (test)", sandbox.ErrTransport)
}

// TestRestoreAfterCutPrepareOfAnotherRound: a plain round's Restore after
// a later round's Prepare was cut mid-stream (the sandbox cleared, the
// tree not arrived) refuses the sandbox and deletes nothing locally (an
// outside attack: the earlier round's marker stayed until the new one was
// written, and the Restore read the cleared directory as the agent's
// deletion of every file, with success).
func TestRestoreAfterCutPrepareOfAnotherRound(t *testing.T) {
	for _, n := range []int64{0, 700} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			e := newEnv(t, runners[0].new)
			files := map[string]string{"a.txt": "a\n", "dir/b.txt": "b\n", "keep.txt": strings.Repeat("k", 4000)}
			seed(t, e.local, "plain", files)
			state := workspace.WithStateDir(t.TempDir())
			r1, err := workspace.Prepare(ctx(t), e.spec, state)
			require.NoError(t, err)
			write(t, e.remote, "a.txt", "agent\n")

			cut := e.spec
			cut.Runner = cutStdin{e.spec.Runner, n}
			_, err = workspace.Prepare(ctx(t), cut, state)
			require.ErrorIs(t, err, sandbox.ErrTransport)

			again, err := workspace.Reopen(ctx(t), e.spec, r1.ID(), state)
			require.NoError(t, err)
			_, err = again.Restore(ctx(t))
			require.Error(t, err, "the sandbox no longer holds round 1")
			assert.Contains(t, err.Error(), "does not hold round "+r1.ID())
			for p, want := range files {
				assert.Equal(t, want, read(t, e.local, p), "the user's %s", p)
			}
		})
	}
}

// failGitAt returns a PATH whose git fails (exit 1) for a command whose
// arguments hold " "+words, and runs the real git otherwise.
func failGitAt(t *testing.T, words string) string {
	t.Helper()
	dir := t.TempDir()
	shim(t, dir, "git", fmt.Sprintf(`case " $* " in *%s*) echo 'failed here (test)' >&2; exit 1;; esac`, shell.Quote(" "+words)))
	return dir + ":/usr/local/bin:/usr/bin:/bin"
}

// TestGitRestoreAfterFailedPrepareOfAnotherRound: a git round's Restore
// after a later round's Prepare (of another local tree, which lacks half
// the files) failed right after its checkout refuses the sandbox and
// changes nothing locally (an outside attack: the earlier round's base
// ref was removed only after the checkout, so its Restore read the other
// tree as the agent's deletions and lost an uncommitted edit).
func TestGitRestoreAfterFailedPrepareOfAnotherRound(t *testing.T) {
	e := newEnv(t, runners[0].new)
	files := map[string]string{"a.txt": "a\n", "b.txt": "b\n", "c.txt": "c\n"}
	initRepo(t, e.local, files)
	write(t, e.local, "a.txt", "the user's uncommitted edit\n")
	r1, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	write(t, e.remote, "d.txt", "agent\n")

	other := filepath.Join(t.TempDir(), "other")
	require.NoError(t, os.MkdirAll(other, 0o755))
	initRepo(t, other, map[string]string{"a.txt": "a\n"})
	spec := e.spec
	spec.Local = other
	spec.Runner = &detachPrepare{r: e.spec.Runner, path: failGitAt(t, "update-ref refs/airlock/base/")}
	spec.Runner.(*detachPrepare).once.Do(func() {})
	_, err = workspace.Prepare(ctx(t), spec)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "failed here (test)")

	again, err := workspace.Reopen(ctx(t), e.spec, r1.ID())
	require.NoError(t, err)
	_, err = again.Restore(ctx(t))
	require.Error(t, err, "the sandbox no longer holds round 1")
	assert.Equal(t, "the user's uncommitted edit\n", read(t, e.local, "a.txt"))
	assert.Equal(t, "b\n", read(t, e.local, "b.txt"))
	assert.Equal(t, "c\n", read(t, e.local, "c.txt"))
}

// TestPrepareWaitsForARunningRestore: a Prepare of a new round that starts
// while the earlier round's Restore still reads the sandbox (its report
// slowed) waits for it: the Restore brings the agent's work and deletes
// nothing, then the Prepare succeeds (an outside attack: the prepare
// cleared the tree under the restore, and removed a git restore's scratch
// files, which failed it with a shell error).
func TestPrepareWaitsForARunningRestore(t *testing.T) {
	for _, kind := range []string{"plain", "git"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, runners[0].new)
			files := map[string]string{"a.txt": "a\n", "dir/b.txt": "b\n"}
			seed(t, e.local, kind, files)
			path, secs := slowFind(t)
			e.spec.Runner = &detachPrepare{r: e.spec.Runner, path: path}
			e.spec.Runner.(*detachPrepare).once.Do(func() {})
			state := workspace.WithStateDir(t.TempDir())
			r1, err := workspace.Prepare(ctx(t), e.spec, state)
			require.NoError(t, err)
			write(t, e.remote, "a.txt", "agent\n")
			write(t, e.remote, "new.txt", "agent's file\n")

			require.NoError(t, os.WriteFile(secs, []byte("2"), 0o644))
			type restored struct {
				res *workspace.Result
				err error
			}
			done := make(chan restored, 1)
			go func() { res, err := r1.Restore(ctx(t)); done <- restored{res, err} }()
			time.Sleep(700 * time.Millisecond) // the restore holds the lock, in its slowed find
			require.NoError(t, os.WriteFile(secs, []byte("0"), 0o644))
			_, err = workspace.Prepare(ctx(t), e.spec, state)
			require.NoError(t, err)
			got := <-done
			require.NoError(t, got.err)
			assert.Empty(t, got.res.Deleted)
			assert.Equal(t, "agent\n", read(t, e.local, "a.txt"))
			assert.Equal(t, "agent's file\n", read(t, e.local, "new.txt"))
			assert.Equal(t, "b\n", read(t, e.local, "dir/b.txt"))
		})
	}
}

// TestPrepareLockPidReused: in a sandbox without flock, the lock's pid
// file names its holder's shell by pid and start time. A container that
// restarts numbers its processes again, so the pid of a killed holder may
// belong to a live process of the new run: an outside tester's prepares
// waited 30 s and failed with ErrLocked although nothing held the lock.
// A live pid with another start time is taken over at once; a live pid
// with its own start time still holds the lock, as does a pid file of an
// earlier version that records no start time.
func TestPrepareLockPidReused(t *testing.T) {
	noFlock := binsWithout(t, "flock")
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, runners[0].new)
			seed(t, e.local, kind, map[string]string{"a": "v1\n"})
			live := exec.Command("sleep", "30")
			require.NoError(t, live.Start())
			t.Cleanup(func() { _ = live.Process.Kill(); _, _ = live.Process.Wait() })
			stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", live.Process.Pid))
			require.NoError(t, err)
			fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
			start := fields[19] // field 22 of proc(5)
			e.spec.Runner = &detachPrepare{r: e.spec.Runner, path: noFlock}
			e.spec.Runner.(*detachPrepare).once.Do(func() {})
			pidFile := ".airlock/" + shell.PrepareLockName + ".pid"

			for _, held := range []string{fmt.Sprintf("%d %s\n", live.Process.Pid, start), fmt.Sprintf("%d\n", live.Process.Pid)} {
				write(t, e.remote, pidFile, held)
				_, err = workspace.Prepare(ctx(t), e.spec, workspace.WithPrepareLockWait(1))
				require.ErrorIs(t, err, workspace.ErrLocked, "held by %q", held)
				assert.False(t, exists(e.remote, "a"))
			}

			write(t, e.remote, pidFile, fmt.Sprintf("%d %d\n", live.Process.Pid, mustAtoi(t, start)+1))
			began := time.Now()
			_, err = workspace.Prepare(ctx(t), e.spec, workspace.WithPrepareLockWait(20))
			require.NoError(t, err)
			assert.Less(t, time.Since(began), 10*time.Second, "a reused pid is no holder: no wait")
			assert.Equal(t, "v1\n", read(t, e.remote, "a"))
			assert.False(t, exists(e.remote, pidFile), "the prepare removed its own pid file")
		})
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}
