package workspace_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

// roundTripAfter checks that the sandbox works after a repair: Prepare
// succeeds, the sandbox holds the local work tree, and an agent's commit
// and edit come back.
func roundTripAfter(t *testing.T, e *env, tag string) {
	t.Helper()
	write(t, e.local, "local-"+tag, tag+"\n")
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err, "the Prepare after %s", tag)
	assert.Equal(t, git(t, e.local, "rev-parse", "HEAD"), git(t, e.remote, "rev-parse", "HEAD"))
	assert.Equal(t, git(t, e.local, "status", "--porcelain"), git(t, e.remote, "status", "--porcelain"))
	assert.Equal(t, tag+"\n", read(t, e.remote, "local-"+tag))
	write(t, e.remote, "agent-"+tag, "agent\n")
	git(t, e.remote, "add", "agent-"+tag)
	git(t, e.remote, "commit", "-q", "-m", "agent after "+tag)
	write(t, e.remote, "dirty-"+tag, "dirty\n")
	res, err := r.Restore(ctx(t))
	require.NoError(t, err, "the Restore after %s", tag)
	assert.Equal(t, 1, res.Commits)
	assert.Equal(t, "agent after "+tag+"\n", git(t, e.local, "log", "-1", "--format=%s"))
	assert.Equal(t, "agent\n", read(t, e.local, "agent-"+tag))
	assert.Equal(t, "dirty\n", read(t, e.local, "dirty-"+tag))
	git(t, e.local, "fsck", "--strict", "--no-progress")
	assert.Empty(t, git(t, e.local, "for-each-ref", "refs/airlock"))
}

// TestPrepareRepairsSandbox: whatever a cut Prepare (or a killed git) can
// leave in the sandbox's repository, the next Prepare repairs, over every
// runner; the round trip then works.
func TestPrepareRepairsSandbox(t *testing.T) {
	gitDir := func(e *env, rel string) string { return filepath.Join(e.remote, ".git", filepath.FromSlash(rel)) }
	for _, tc := range []struct {
		name    string
		prepare bool // a round is prepared before the damage
		sshd    bool // run over sshd too
		damage  func(t *testing.T, e *env)
	}{
		{"init cut short", false, true, func(t *testing.T, e *env) {
			for _, d := range []string{"branches", "hooks"} {
				require.NoError(t, os.MkdirAll(gitDir(e, d), 0o755))
			}
			require.NoError(t, os.WriteFile(gitDir(e, "description"), []byte("Unnamed repository\n"), 0o644))
		}},
		{"empty .git", false, false, func(t *testing.T, e *env) { require.NoError(t, os.MkdirAll(gitDir(e, ""), 0o755)) }},
		{"no HEAD", true, false, func(t *testing.T, e *env) { require.NoError(t, os.Remove(gitDir(e, "HEAD"))) }},
		{"no config", true, false, func(t *testing.T, e *env) { require.NoError(t, os.Remove(gitDir(e, "config"))) }},
		{"no refs", true, false, func(t *testing.T, e *env) { require.NoError(t, os.RemoveAll(gitDir(e, "refs"))) }},
		{"no objects", true, false, func(t *testing.T, e *env) { require.NoError(t, os.RemoveAll(gitDir(e, "objects"))) }},
		{"empty objects", true, true, func(t *testing.T, e *env) {
			require.NoError(t, os.RemoveAll(gitDir(e, "objects")))
			require.NoError(t, os.MkdirAll(gitDir(e, "objects/pack"), 0o755))
		}},
		{"a ref to a missing commit", true, false, func(t *testing.T, e *env) {
			write(t, e.remote, ".git/refs/heads/ghost", strings.Repeat("ab", 20)+"\n")
		}},
		{"locks of a killed git", true, false, func(t *testing.T, e *env) {
			for _, l := range []string{"index.lock", "HEAD.lock", "config.lock", "packed-refs.lock", "refs/heads/main.lock"} {
				write(t, e.remote, ".git/"+l, "")
			}
		}},
		{"scratch of an earlier round", true, false, func(t *testing.T, e *env) {
			write(t, e.remote, ".git/airlock-prepare-0123456789abcdef01234567.bundle", "# v2 git bundle\ngarbage")
			write(t, e.remote, ".git/airlock-restore-0123456789abcdef01234567.index", "garbage")
			git(t, e.remote, "update-ref", "refs/airlock/out/0123456789abcdef01234567/snap", "HEAD")
			git(t, e.remote, "update-ref", "refs/airlock/base/0123456789abcdef01234567/snap", "HEAD")
		}},
		{"a half-written work tree", true, false, func(t *testing.T, e *env) {
			write(t, e.remote, "a", "half")
			write(t, e.remote, "stray/file", "stray\n")
			require.NoError(t, os.Remove(gitDir(e, "index")))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, rc := range runners {
				// The scripts are the same over every runner: the
				// states that need the probe and the repair over SSH
				// run over sshd too, the rest over the in-process ones.
				if rc.name == "sshd" && !tc.sshd {
					continue
				}
				t.Run(rc.name, func(t *testing.T) {
					e := newEnv(t, rc.new)
					initRepo(t, e.local, map[string]string{"a": "1\n"})
					if tc.prepare {
						_, err := workspace.Prepare(ctx(t), e.spec)
						require.NoError(t, err)
					}
					tc.damage(t, e)
					roundTripAfter(t, e, "repair")
					assert.False(t, exists(e.remote, "stray/file"), "the half-written work tree was not reset")
					assert.Equal(t, "", strings.TrimSpace(git(t, e.remote, "for-each-ref", "refs/airlock/out")))
					ents, err := os.ReadDir(gitDir(e, ""))
					require.NoError(t, err)
					for _, f := range ents {
						assert.False(t, strings.HasPrefix(f.Name(), "airlock-"), "scratch file %s left", f.Name())
						assert.False(t, strings.HasSuffix(f.Name(), ".lock"), "lock file %s left", f.Name())
					}
				})
			}
		})
	}
}

// TestPrepareUnrepairableSandbox: a sandbox repository git init cannot
// complete is an error that names it and says what to do, not a
// misleading one.
func TestPrepareUnrepairableSandbox(t *testing.T) {
	e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
	initRepo(t, e.local, map[string]string{"a": "1\n"})
	require.NoError(t, os.MkdirAll(filepath.Join(e.remote, ".git", "HEAD", "x"), 0o755))
	_, err := workspace.Prepare(ctx(t), e.spec)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the sandbox repository "+e.remote+"/.git is damaged and git init cannot repair it")
	assert.Contains(t, err.Error(), "remove "+e.remote+"/.git and prepare again")
	assert.NotContains(t, err.Error(), "bundle")
	assert.Empty(t, git(t, e.local, "for-each-ref", "refs/airlock"))
}

// cutRunner runs the prepare script with its shell killed (SIGKILL, as a
// dropped connection ends it) after line cut; every other command runs
// as it is.
type cutRunner struct {
	real sandbox.Runner
	cut  int
	hit  bool // the kill was reached
}

func (c *cutRunner) Run(ctx context.Context, cmd sandbox.Command) error {
	if strings.Contains(cmd.Script, "airlock-prepare-") {
		lines := strings.Split(cmd.Script, "\n")
		if c.cut < len(lines) {
			c.hit = true
			cmd.Script = strings.Join(lines[:c.cut], "\n") + "\nkill -9 $$\n" + strings.Join(lines[c.cut:], "\n")
		}
	}
	return c.real.Run(ctx, cmd)
}

// TestPrepareCutAtEveryLine kills the sandbox side of a Prepare after
// a line of its script — on a new sandbox and on one prepared before —
// and then prepares again on the real runner: it must succeed, and the
// round trip work. A sample of lines by default (every fifth over the
// local runner, every twelfth over remotetest); every line, and over
// sshd too, with AIRLOCK_FAULT_SWEEP=full.
func TestPrepareCutAtEveryLine(t *testing.T) {
	full := os.Getenv("AIRLOCK_FAULT_SWEEP") == "full"
	for _, rc := range runners {
		if rc.name == "sshd" && !full {
			continue // each sshd case starts a server: the full sweep only (TestPrepareRepairsSandbox runs over sshd)
		}
		t.Run(rc.name, func(t *testing.T) {
			// A bounded sweep by default (the two passes cut at
			// interleaved lines); AIRLOCK_FAULT_SWEEP=full cuts after
			// every line in both.
			step := map[string]int{"local": 5, "remotetest": 12, "sshd": 24}[rc.name]
			if full {
				step = 1
			}
			cuts := 0
			for pass, again := range []bool{false, true} {
				for cut := pass * step / 2; ; cut += step {
					e := newEnv(t, rc.new)
					initRepo(t, e.local, map[string]string{"a": "1\n"})
					if again {
						_, err := workspace.Prepare(ctx(t), e.spec)
						require.NoError(t, err)
						write(t, e.local, "a", "2\n")
					}
					real := e.spec.Runner
					cr := &cutRunner{real: real, cut: cut}
					e.spec.Runner = cr
					_, err := workspace.Prepare(ctx(t), e.spec)
					if !cr.hit {
						break
					}
					if err != nil {
						cuts++ // else the line was in a branch not taken
					}
					e.spec.Runner = real
					roundTripAfter(t, e, "cut")
					if t.Failed() {
						t.Fatalf("after a cut after line %d (again=%v) of the prepare script", cut, again)
					}
				}
			}
			assert.GreaterOrEqual(t, cuts, 40/step, "too few cuts ended a Prepare")
			t.Logf("%d cuts ended a Prepare", cuts)
		})
	}
}

// gitKillRunner runs the prepare script with its kill-th git command
// killed (SIGKILL) a moment after it starts, and then the script's shell:
// a connection cut in the middle of a git command (an init, a fetch, a
// ref update, the checkout).
type gitKillRunner struct {
	real sandbox.Runner
	kill int
}

func (k *gitKillRunner) Run(ctx context.Context, cmd sandbox.Command) error {
	if strings.Contains(cmd.Script, "airlock-prepare-") {
		lines := strings.Split(cmd.Script, "\n")
		for i, l := range lines {
			body, ok := strings.CutPrefix(l, "g() { ")
			if !ok {
				continue
			}
			body = strings.TrimSuffix(body, "; }")
			lines[i] = fmt.Sprintf(`airlock_n=0; g() { airlock_n=$((airlock_n+1)); if [ "$airlock_n" = %d ]; then %s & sleep 0.00%d; kill -9 $! 2>/dev/null; kill -9 $$; fi; %s; }`, k.kill, body, k.kill%10, body)
			break
		}
		cmd.Script = strings.Join(lines, "\n")
	}
	return k.real.Run(ctx, cmd)
}

// TestPrepareKilledInGitCommand kills each git command of the prepare
// script (on a new sandbox and on one prepared before) a moment after it
// starts, over the local runner, and prepares again: it must succeed and
// the round trip work.
func TestPrepareKilledInGitCommand(t *testing.T) {
	kills := 0
	for _, again := range []bool{false, true} {
		for kill := 1; ; kill++ {
			e := newEnv(t, runners[0].new)
			initRepo(t, e.local, map[string]string{"a": "1\n"})
			if again {
				_, err := workspace.Prepare(ctx(t), e.spec)
				require.NoError(t, err)
				write(t, e.local, "a", "2\n")
			}
			real := e.spec.Runner
			e.spec.Runner = &gitKillRunner{real: real, kill: kill}
			if _, err := workspace.Prepare(ctx(t), e.spec); err == nil {
				break // fewer git commands than kill
			}
			kills++
			e.spec.Runner = real
			roundTripAfter(t, e, "kill")
			if t.Failed() {
				t.Fatalf("after killing git command %d (again=%v) of the prepare script", kill, again)
			}
		}
	}
	assert.GreaterOrEqual(t, kills, 20, "too few git commands were killed")
	t.Logf("%d kills", kills)
}

// TestRestoreAfterKilledRestore: a restore whose sandbox git was killed
// (a cut connection ends the whole command) leaves the lock files of its
// temporary index and ref behind; the next Restore of the round must not
// trip over them.
func TestRestoreAfterKilledRestore(t *testing.T) {
	for _, rc := range runners {
		if rc.name == "sshd" {
			continue // the script is the same over every runner
		}
		t.Run(rc.name, func(t *testing.T) {
			e := newEnv(t, rc.new)
			initRepo(t, e.local, map[string]string{"a": "1\n"})
			r, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			id := r.ID()
			write(t, e.remote, ".git/airlock-restore-"+id+".index.lock", "")
			write(t, e.remote, ".git/refs/airlock/out/"+id+"/snap.lock", "")
			write(t, e.remote, "b", "agent\n")
			git(t, e.remote, "add", "b")
			git(t, e.remote, "commit", "-q", "-m", "agent")
			res, err := r.Restore(ctx(t))
			require.NoError(t, err, "a Restore after a killed one")
			assert.Equal(t, 1, res.Commits)
			assert.Equal(t, "agent\n", read(t, e.local, "b"))
			assert.Empty(t, strings.TrimSpace(git(t, e.remote, "for-each-ref", "refs/airlock/out")))
			assert.False(t, exists(e.remote, ".git/refs/airlock/out/"+id+"/snap.lock"), "the stale ref lock is left")
		})
	}
}
