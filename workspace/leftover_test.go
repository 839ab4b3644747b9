package workspace_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

// procState is the state letter of pid in /proc ("" when it is gone).
func procState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	return f[0]
}

func requireProc(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc to tell a zombie from a live process")
	}
}

// owners starts the owners of planted leftovers: a dead process, a zombie
// (exited, not reaped), a live one, and the live one's pid with another
// start time (a dead owner whose pid was reused).
func owners(t *testing.T) (dead, zombie, live, reused string) {
	t.Helper()
	d := exec.Command("sleep", "60")
	require.NoError(t, d.Start())
	dead = workspace.OwnerTagOf(d.Process.Pid)
	require.NoError(t, d.Process.Kill())
	_ = d.Wait() // killed: the error is the signal
	z := exec.Command("sh", "-c", "exit 0")
	require.NoError(t, z.Start())
	zombie = workspace.OwnerTagOf(z.Process.Pid)
	t.Cleanup(func() { _ = z.Wait() })
	for procState(z.Process.Pid) != "Z" {
		time.Sleep(5 * time.Millisecond)
	}
	l := exec.Command("sleep", "600")
	require.NoError(t, l.Start())
	t.Cleanup(func() { _ = l.Process.Kill(); _ = l.Wait() })
	live = workspace.OwnerTagOf(l.Process.Pid)
	pid, start, ok := strings.Cut(live, ".")
	require.True(t, ok)
	n, err := strconv.ParseUint(start, 10, 64)
	require.NoError(t, err)
	reused = pid + "." + strconv.FormatUint(n+1, 10)
	return dead, zombie, live, reused
}

// TestLeftoversSwept plants what killed hosts leave — temporary refs,
// quarantine directories, scratch files — owned by a dead process, a
// zombie, a reused pid and a live process: the next Restore and the next
// Prepare remove all but the live owner's.
// TestRestoreStalePackedRefsLock: a git killed while deleting a ref (a
// restore whose connection was cut at its last step) leaves
// .git/packed-refs.lock in the sandbox, and git then refuses every ref
// deletion. A Restore must still leave no temporary ref behind, bring the
// agent's commit, and leave the lock, which may be another git's, alone.
func TestRestoreStalePackedRefsLock(t *testing.T) {
	e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
	r := prepareOneFile(t, e, "git")
	write(t, e.remote, "a", "agent\n")
	git(t, e.remote, "commit", "-q", "-am", "agent")
	agent := strings.TrimSpace(git(t, e.remote, "rev-parse", "HEAD"))
	lock := filepath.Join(e.remote, ".git", "packed-refs.lock")
	write(t, e.remote, ".git/packed-refs.lock", "")
	_, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, agent, strings.TrimSpace(git(t, e.local, "rev-parse", "HEAD")), "the agent's commit")
	assert.Empty(t, git(t, e.remote, "for-each-ref", "refs/airlock/out", "refs/airlock/tmp"), "a temporary ref left in the sandbox")
	assert.FileExists(t, lock, "the lock is not the restore's to remove")
}

func TestLeftoversSwept(t *testing.T) {
	requireProc(t)
	dead, zombie, live, reused := owners(t)
	e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
	r := prepareOneFile(t, e, "git")
	id := r.ID()
	objects := filepath.Join(e.local, ".git", "objects")
	state := filepath.Join(e.local, ".git", "airlock", "rounds")
	plant := func() {
		for _, o := range []string{dead, zombie, live, reused} {
			git(t, e.local, "update-ref", "refs/airlock/restore/"+o+"/"+id+"-abcdefabcdef", "HEAD")
			git(t, e.local, "update-ref", "refs/airlock/tmp/"+o+"/"+id+"/snap", "HEAD")
			write(t, objects, "airlock-quarantine-"+o+"-abcdefabcdef/pack/x", "x")
			write(t, state, "restore-"+o+"-"+id+"-abcdefabcdef.bundle", "x")
			write(t, state, "tmp-"+o+"-"+id+".index", "x")
		}
		git(t, e.local, "update-ref", "refs/airlock/restore/"+id+"-abcdefabcdef", "HEAD") // an earlier version's
		// Rounds whose Prepare never returned.
		write(t, state, "prep-"+dead+"-0000000000000000000000d1", "")
		write(t, state, "0000000000000000000000d1.json", "{}")
		write(t, state, "prep-"+live+"-0000000000000000000000a1", "")
		write(t, state, "0000000000000000000000a1.json", "{}")
	}
	assertRounds := func() {
		t.Helper()
		assert.NoFileExists(t, filepath.Join(state, "0000000000000000000000d1.json"), "a killed Prepare's round stays")
		assert.NoFileExists(t, filepath.Join(state, "prep-"+dead+"-0000000000000000000000d1"))
		assert.FileExists(t, filepath.Join(state, "0000000000000000000000a1.json"), "a running Prepare's round was removed")
		assert.FileExists(t, filepath.Join(state, "prep-"+live+"-0000000000000000000000a1"))
		assert.FileExists(t, filepath.Join(state, id+".json"))
	}
	livePaths := func() []string {
		return []string{
			filepath.Join(objects, "airlock-quarantine-"+live+"-abcdefabcdef", "pack", "x"),
			filepath.Join(state, "restore-"+live+"-"+id+"-abcdefabcdef.bundle"),
			filepath.Join(state, "tmp-"+live+"-"+id+".index"),
		}
	}
	liveRefs := []string{"refs/airlock/restore/" + live + "/" + id + "-abcdefabcdef", "refs/airlock/tmp/" + live + "/" + id + "/snap"}
	refs := func() []string {
		return strings.Fields(git(t, e.local, "for-each-ref", "--format=%(refname)", "refs/airlock"))
	}
	plant()
	write(t, e.remote, "a", "2\n")
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, res.Updated)
	assert.ElementsMatch(t, liveRefs, refs())
	for _, p := range livePaths() {
		assert.FileExists(t, p, "a live owner's leftover was removed")
	}
	for _, o := range []string{dead, zombie, reused} {
		assert.NoDirExists(t, filepath.Join(objects, "airlock-quarantine-"+o+"-abcdefabcdef"))
		assert.NoFileExists(t, filepath.Join(state, "restore-"+o+"-"+id+"-abcdefabcdef.bundle"))
		assert.NoFileExists(t, filepath.Join(state, "tmp-"+o+"-"+id+".index"))
	}

	assertRounds()
	plant()
	_, err = workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	// Prepare does not hold the restore lock: the earlier version's
	// restore ref stays for a Restore to remove.
	assert.ElementsMatch(t, append(liveRefs, "refs/airlock/restore/"+id+"-abcdefabcdef"), refs())
	for _, p := range livePaths() {
		assert.FileExists(t, p, "a live owner's leftover was removed")
	}
	for _, o := range []string{dead, zombie, reused} {
		assert.NoDirExists(t, filepath.Join(objects, "airlock-quarantine-"+o+"-abcdefabcdef"))
		assert.NoFileExists(t, filepath.Join(state, "tmp-"+o+"-"+id+".index"))
	}
	assertRounds()
	git(t, e.local, "fsck", "--strict", "--no-progress")
}

// blockRunner runs every command, but announces the prepare script (by
// creating the file mark) and then never runs it.
type blockRunner struct {
	real sandbox.Runner
	mark string
}

func (b blockRunner) Run(ctx context.Context, cmd sandbox.Command) error {
	if strings.Contains(cmd.Script, "airlock-prepare-") {
		if err := os.WriteFile(b.mark, nil, 0o600); err != nil {
			return err
		}
		<-ctx.Done()
		return ctx.Err()
	}
	return b.real.Run(ctx, cmd)
}

// TestKilledHostLeftovers SIGKILLs a host process in the middle of a
// Restore (before it moves the local ref) and of a Prepare (while the
// sandbox receives the bundle), leaves it a zombie (not reaped), and runs
// the same operation again here: it succeeds, and nothing the killed host
// left remains — no ref under refs/airlock, no quarantine, no scratch file.
func TestKilledHostLeftovers(t *testing.T) {
	if os.Getenv("WORKSPACE_KILL_MODE") != "" {
		t.Skip("child process")
	}
	requireProc(t)
	for _, mode := range []string{"restore", "prepare"} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
			r := prepareOneFile(t, e, "git")
			write(t, e.remote, "b", "agent\n")
			git(t, e.remote, "add", "b")
			git(t, e.remote, "commit", "-q", "-m", "agent")
			cmd := killAtMark(t, "WORKSPACE_KILL_MODE="+mode, "WORKSPACE_KILL_ID="+r.ID(), "WORKSPACE_KILL_LOCAL="+e.local, "WORKSPACE_KILL_REMOTE="+e.remote)
			tag := workspace.OwnerTagOf(cmd.Process.Pid)
			deadline := time.Now().Add(2 * time.Minute)
			for procState(cmd.Process.Pid) != "Z" {
				require.True(t, time.Now().Before(deadline), "the child did not die")
				time.Sleep(5 * time.Millisecond)
			}
			refs := git(t, e.local, "for-each-ref", "--format=%(refname)", "refs/airlock")
			want := map[string]string{"restore": "refs/airlock/restore/" + tag + "/", "prepare": "refs/airlock/tmp/" + tag + "/"}[mode]
			require.Contains(t, refs, want, "the killed host left no ref to sweep")

			switch mode {
			case "restore":
				r2, err := workspace.Reopen(ctx(t), e.spec, r.ID())
				require.NoError(t, err)
				res, err := r2.Restore(ctx(t))
				require.NoError(t, err)
				assert.Equal(t, 1, res.Commits)
				assert.Equal(t, "agent\n", read(t, e.local, "b"))
			case "prepare":
				roundTripAfter(t, e, "kill")
			}
			assert.Empty(t, git(t, e.local, "for-each-ref", "refs/airlock"), "leftover refs of the killed host")
			assertNoQuarantine(t, e.local)
			ents, err := os.ReadDir(filepath.Join(e.local, ".git", "airlock", "rounds"))
			require.NoError(t, err)
			for _, f := range ents {
				assert.True(t, strings.HasSuffix(f.Name(), ".json"), "scratch file %s left", f.Name())
			}
			// The rounds: this process's first, and in prepare mode the
			// recovery's; the killed Prepare's round (which no caller
			// ever got) is gone.
			assert.Len(t, ents, map[string]int{"restore": 1, "prepare": 2}[mode], "%v", ents)
			git(t, e.local, "fsck", "--strict", "--no-progress")
		})
	}
}

// killAtMark runs TestKilledHostChild with env (WORKSPACE_KILL_MODE and
// the rest), waits until the child announces its kill point (markAndHang)
// and SIGKILLs it. The child stays unreaped (a zombie) until the test's
// cleanup waits for it.
func killAtMark(t *testing.T, env ...string) *exec.Cmd {
	t.Helper()
	cmd, _ := startToMark(t, "TestKilledHostChild", "WORKSPACE_KILL_MARK", env...)
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	return cmd
}

// startToMark runs the test binary's child test with env, the path of a
// mark file in markVar, and waits until the child has written the mark
// (its kill point); it returns the running child and the mark's path. The
// test's cleanup kills and reaps the child.
func startToMark(t *testing.T, child, markVar string, env ...string) (*exec.Cmd, string) {
	t.Helper()
	mark := filepath.Join(t.TempDir(), "mark")
	cmd := exec.Command(os.Args[0], "-test.run=^"+child+"$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), env...), markVar+"="+mark)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait() // killed: the error is the signal
	})
	deadline := time.Now().Add(2 * time.Minute)
	for !exists(filepath.Dir(mark), "mark") {
		require.True(t, time.Now().Before(deadline), "the child never reached the kill point")
		time.Sleep(10 * time.Millisecond)
	}
	return cmd, mark
}

// markAndHang announces a child's kill point (see killAtMark) and waits
// to be killed there.
func markAndHang(mark string) {
	if err := os.WriteFile(mark, nil, 0o600); err != nil {
		panic(err)
	}
	select {}
}

// TestKilledHostChild is the host TestKilledHostLeftovers kills.
func TestKilledHostChild(t *testing.T) {
	mode := os.Getenv("WORKSPACE_KILL_MODE")
	if mode == "" {
		t.Skip("run by TestKilledHostLeftovers")
	}
	remote, mark := os.Getenv("WORKSPACE_KILL_REMOTE"), os.Getenv("WORKSPACE_KILL_MARK")
	spec := workspace.Spec{Local: os.Getenv("WORKSPACE_KILL_LOCAL"), Remote: remote, Runner: sandbox.Local(filepath.Dir(remote))}
	switch mode {
	case "restore":
		r, err := workspace.Reopen(ctx(t), spec, os.Getenv("WORKSPACE_KILL_ID"), workspace.WithBeforeCAS(func(int) { markAndHang(mark) }))
		require.NoError(t, err)
		_, err = r.Restore(ctx(t))
		require.NoError(t, err)
	case "replace-dir": // TestKilledHostDirReplaced
		r, err := workspace.Reopen(ctx(t), spec, os.Getenv("WORKSPACE_KILL_ID"), workspace.WithStateDir(os.Getenv("WORKSPACE_KILL_STATE")), workspace.WithBeforePlace(func(_, rel string) {
			if _, err := os.Lstat(filepath.Join(spec.Local, rel)); rel == "d" && errors.Is(err, fs.ErrNotExist) {
				markAndHang(mark)
			}
		}))
		require.NoError(t, err)
		_, err = r.Restore(ctx(t))
		require.NoError(t, err)
	case "prepare":
		spec.Runner = blockRunner{real: spec.Runner, mark: mark}
		_, err := workspace.Prepare(ctx(t), spec)
		require.NoError(t, err)
	default:
		t.Fatalf("unknown mode %q", mode)
	}
}
