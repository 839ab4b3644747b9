package stage_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/shell"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
)

// Issue 18, defects 7, 8 and 13 (first half): leftovers of killed hosts
// and zombie owners are swept; the publish's and unstage's control step
// is the renames alone; Assets and Remove never follow a link at the root.

// leftovers returns the names under root that are airlock's own but not a
// manifest: temporary, swept-away or half-made entries.
func leftovers(t testing.TB, root string) []string {
	t.Helper()
	var out []string
	for _, n := range listDir(t, root) {
		if strings.HasPrefix(n, ".airlock") && !strings.HasPrefix(n, ".airlock-manifest-") && !strings.HasPrefix(n, ".airlock-stamps-") {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// zombie returns the id of a real zombie: a child of a process that never
// reaps it (what a sandbox's PID 1 that never reaps leaves behind).
func zombie(t *testing.T) int {
	t.Helper()
	c := exec.Command("sh", "-c", `sleep 1 & echo $!; exec sleep 60`)
	out, err := c.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, c.Start())
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	require.NoError(t, err)
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		require.NoError(t, err, "the zombie must stay until its parent reaps it")
		s := string(b)
		if st := strings.TrimLeft(s[strings.LastIndexByte(s, ')')+1:], " "); strings.HasPrefix(st, "Z") {
			break
		}
		require.True(t, time.Now().Before(deadline), "process %d never became a zombie", pid)
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, syscall.Kill(pid, 0), "kill -0 finds a zombie: the old sweep counted it alive")
	return pid
}

// plantLeftover makes a complete-looking temporary directory named name
// under root, owned by pid.
func plantLeftover(t *testing.T, root, name string, pid int) {
	t.Helper()
	d := filepath.Join(root, name)
	require.NoError(t, os.MkdirAll(filepath.Join(d, "new", "tree"), 0o700))
	require.NoError(t, os.MkdirAll(filepath.Join(d, "old"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(d, "new", "tree", "f"), []byte(name), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(d, "new", "manifest.json"), []byte("{}"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(d, "complete"), nil, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(d, "owner"), []byte(strconv.Itoa(pid)+"\n"), 0o644))
}

// TestSweepZombieOwner: a leftover whose owner is a zombie (kill -0
// succeeds on it) is removed by the next stage and by the next unstage, on
// every target; one whose owner is alive stays.
func TestSweepZombieOwner(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs procfs to make and recognise a zombie: " + err.Error())
	}
	for _, op := range []string{"Stage", "Unstage"} {
		t.Run(op, func(t *testing.T) {
			forEachSandbox(t, func(t *testing.T, sb sbox) {
				src := t.TempDir()
				build(t, src, "a=1")
				_, err := stage.Stage(t.Context(), sb, sb.root, []stage.Asset{{Name: "x", Source: src}, {Name: "y", Source: src}})
				require.NoError(t, err)

				live := exec.Command("sleep", "60")
				require.NoError(t, live.Start())
				t.Cleanup(func() { _ = live.Process.Kill(); _ = live.Wait() })
				z := zombie(t)
				plantLeftover(t, sb.hostRoot, ".airlock-tmp-x-zombie", z)
				plantLeftover(t, sb.hostRoot, ".airlock-tmp-unstage-zombie", z)
				plantLeftover(t, sb.hostRoot, ".airlock-tmp-x-live", live.Process.Pid)

				if op == "Stage" {
					build(t, src, "a=2")
					_, err = stage.Stage(t.Context(), sb.Target, sb.root, []stage.Asset{{Name: "x", Source: src}})
				} else {
					err = stage.Unstage(t.Context(), sb.Target, sb.root, "y")
				}
				require.NoError(t, err)
				assert.Equal(t, []string{".airlock-tmp-x-live"}, leftovers(t, sb.hostRoot), "only the live owner's directory stays")
				assert.Equal(t, ".airlock-tmp-x-live", readFile(t, sb.host(".airlock-tmp-x-live/new/tree/f")))
			})
		})
	}
}

// The helper process of TestSweepAfterKilledHost: it stages and SIGKILLs
// itself at the point AIRLOCK_KILL_AT names.
const killHelperEnv = "AIRLOCK_TEST_KILL_HELPER"

// TestKilledHostHelper is the body of the helper process (a no-op in a
// normal run).
func TestKilledHostHelper(t *testing.T) {
	spec := os.Getenv(killHelperEnv)
	if spec == "" {
		return
	}
	kind, rest, _ := strings.Cut(spec, ":")
	at, rest, _ := strings.Cut(rest, ":")
	dir, src, _ := strings.Cut(rest, ":")
	kill := func() { _ = syscall.Kill(os.Getpid(), syscall.SIGKILL); select {} }
	var target stage.Target
	var opts []stage.Option
	switch kind {
	case "Bridge":
		target = stage.NewBridge(&scriptedRunner{next: sandbox.Local(dir), match: func(c sandbox.Command) bool {
			return at == "publish" && isPublish(c)
		}, do: func(context.Context, sandbox.Command) error { kill(); return nil }}, stage.TwoSessions())
	case "BridgeMidPublish":
		// Every mv is slow and marks that the publish has begun; the
		// host dies once it has, before the publish reports.
		bin := t.TempDir()
		mv, err := exec.LookPath("mv")
		require.NoError(t, err)
		started := filepath.Join(bin, "started")
		require.NoError(t, os.WriteFile(filepath.Join(bin, "mv"), []byte("#!/bin/sh\n: >"+started+"\nsleep 0.3\nexec "+mv+" \"$@\"\n"), 0o755))
		local := sandbox.Local(dir)
		target = stage.NewBridge(&scriptedRunner{next: local, match: isPublish, do: func(ctx context.Context, c sandbox.Command) error {
			c.Env = map[string]string{"PATH": bin + ":" + os.Getenv("PATH")}
			go func() { _ = local.Run(ctx, c) }()
			for {
				if _, err := os.Stat(started); err == nil {
					kill()
				}
				time.Sleep(5 * time.Millisecond)
			}
		}}, stage.TwoSessions())
	case "Dir":
		d, err := stage.NewDir(dir)
		require.NoError(t, err)
		target = d
		opts = append(opts, stage.WithProgress(func(p sandbox.Progress) {
			if p.Files >= 3 {
				kill()
			}
		}))
	case "BridgeAtMkdir", "BridgeAtClaim", "BridgeAtRename", "BridgeAtDelete":
		// The sandbox's mkdir, mv or rm kills the host and the command's
		// shell, as a host's death (with every process it started) would:
		// Mkdir right after the mkdir of a temporary directory, Claim
		// before the publish's mv of its owner file, Rename before the mv
		// of a directory just made to its temporary name, Delete once the
		// deletion of a temporary directory has removed its owner file
		// (rm removes the entries in directory order).
		bin := t.TempDir()
		mkdir, err := exec.LookPath("mkdir")
		require.NoError(t, err)
		mv, err := exec.LookPath("mv")
		require.NoError(t, err)
		rm, err := exec.LookPath("rm")
		require.NoError(t, err)
		// The shell's pid is recorded for the test, which waits for its end.
		die := fmt.Sprintf("echo $PPID >%s; kill -9 %d $PPID; exit 1", filepath.Join(dir, killedShellFile), os.Getpid())
		mkdirHook, mvHook, rmHook := "", "", ""
		switch kind {
		case "BridgeAtMkdir":
			mkdirHook = `if [ "$1" = -m ]; then for a; do case "${a##*/}" in .airlock-*) ` + mkdir + ` "$@" || exit 1; ` + die + `;; esac; done; fi`
		case "BridgeAtClaim":
			mvHook = `for a; do case "$a" in */owner.new) ` + die + `;; esac; done`
		case "BridgeAtRename":
			mvHook = `case "${1##*/}" in .airlock-new-*) ` + die + `;; esac`
		case "BridgeAtDelete":
			rmHook = `for a; do case "${a##*/}" in .airlock-*) if [ -f "$a/owner" ]; then ` + rm + ` -f "$a/owner"; ` + die + `; fi;; esac; done`
		}
		require.NoError(t, os.WriteFile(filepath.Join(bin, "mkdir"), []byte("#!/bin/sh\n"+mkdirHook+"\nexec "+mkdir+" \"$@\"\n"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(bin, "mv"), []byte("#!/bin/sh\n"+mvHook+"\nexec "+mv+" \"$@\"\n"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(bin, "rm"), []byte("#!/bin/sh\n"+rmHook+"\nexec "+rm+" \"$@\"\n"), 0o755))
		local := sandbox.Local(dir)
		target = stage.NewBridge(&scriptedRunner{next: local, match: func(sandbox.Command) bool { return true }, do: func(ctx context.Context, c sandbox.Command) error {
			c.Env = map[string]string{"PATH": bin + ":" + os.Getenv("PATH")}
			return local.Run(ctx, c)
		}})
	case "DirAtMkdir":
		d, err := stage.NewDir(dir)
		require.NoError(t, err)
		stage.SetMade(d, kill)
		target = d
	case "DirAtMoved":
		// Killed between moving the manifest and moving the copy: a
		// removal once it has moved the manifest, a publish once its new
		// copy is in place (its manifest not yet).
		d, err := stage.NewDir(dir)
		require.NoError(t, err)
		stage.SetMoved(d, func(n string) {
			if at == "Unstage" && n == shell.ManifestName("x") || at == "Stage" && n == "x" {
				kill()
			}
		})
		target = d
	case "DirAtDelete":
		d, err := stage.NewDir(dir)
		require.NoError(t, err)
		stage.SetRemove(d, func(r *os.Root, name string) error {
			_ = r.Remove(name + "/owner") // what a removal may well delete first
			kill()
			return nil
		})
		target = d
	}
	root := filepath.Join(dir, "rt")
	if strings.HasPrefix(kind, "Dir") {
		root = "/rt"
	}
	var err error
	if at == "Unstage" {
		err = stage.Unstage(context.Background(), target, root, "x")
	} else {
		_, err = stage.Stage(context.Background(), target, root, []stage.Asset{{Name: "x", Source: src}}, opts...)
	}
	t.Fatalf("the helper was not killed: %v", err)
}

// killedShellFile, in the sandbox directory (outside the stage root), is
// where a BridgeAt helper records the pid of the shell it kills.
const killedShellFile = "killed-shell.pid"

// waitGone waits until pid is no live process (gone, or a zombie): a
// SIGKILLed process may still run for an instant, and a sweep rightly
// spares its directories until it has ended.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return
		}
		s := string(b)
		if st := strings.TrimLeft(s[strings.LastIndexByte(s, ')')+1:], " "); strings.HasPrefix(st, "Z") || strings.HasPrefix(st, "X") {
			return
		}
		require.True(t, time.Now().Before(deadline), "process %d still runs 30 s after SIGKILL", pid)
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSweepAfterKillAtMkdir: a host killed (with the sandbox command it
// ran) right after the exclusive mkdir of a publish's or an unstage's
// temporary directory, before its owner is recorded, leaves a directory
// that the next stage (changed or unchanged) or unstage of the root
// removes; the staged copy stays as it was. The same for a host killed
// before the directory gets its temporary name (Rename), and before the
// publish's claim of it replaces its owner file (Claim), and for one
// killed while deleting it, once the deletion removed its owner file
// (Delete: after the publish's renames, the new copy is in place; after
// the unstage's, the asset is gone).
func TestSweepAfterKillAtMkdir(t *testing.T) {
	for _, tc := range []struct{ kind, point, killed, x string }{
		{"Bridge", "Mkdir", "Stage", "old"}, {"Bridge", "Mkdir", "Unstage", "old"},
		{"Dir", "Mkdir", "Stage", "old"}, {"Dir", "Mkdir", "Unstage", "old"},
		{"Bridge", "Rename", "Stage", "old"}, {"Bridge", "Rename", "Unstage", "old"},
		{"Bridge", "Claim", "Stage", "old"},
		{"Bridge", "Delete", "Stage", "new"}, {"Bridge", "Delete", "Unstage", ""},
		{"Dir", "Delete", "Stage", "new"}, {"Dir", "Delete", "Unstage", ""},
	} {
		kind, killed := tc.kind, tc.killed
		for _, next := range []string{"Stage", "StageUnchanged", "Unstage"} {
			t.Run(kind+"/"+tc.point+"/"+killed+"/"+next, func(t *testing.T) {
				dir, srcX, srcY := t.TempDir(), t.TempDir(), t.TempDir()
				root, hostRoot := filepath.Join(dir, "rt"), filepath.Join(dir, "rt")
				var target stage.Target
				if kind == "Dir" {
					d, err := stage.NewDir(dir)
					require.NoError(t, err)
					target, root = d, "/rt"
				} else {
					target = stage.NewBridge(sandbox.Local(dir))
				}
				build(t, srcX, "a=old")
				build(t, srcY, "a=y")
				_, err := stage.Stage(t.Context(), target, root, []stage.Asset{{Name: "x", Source: srcX}, {Name: "y", Source: srcY}})
				require.NoError(t, err)
				build(t, srcX, "a=new")

				c := exec.Command(os.Args[0], "-test.run=^TestKilledHostHelper$", "-test.count=1")
				c.Env = append(os.Environ(), killHelperEnv+"="+kind+"At"+tc.point+":"+killed+":"+dir+":"+srcX)
				out, err := c.CombinedOutput()
				var ee *exec.ExitError
				require.ErrorAs(t, err, &ee, "%s", out)
				ws, ok := ee.Sys().(syscall.WaitStatus)
				require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "the helper must die by SIGKILL: %v\n%s", err, out)
				if kind == "Bridge" {
					b, err := os.ReadFile(filepath.Join(dir, killedShellFile))
					require.NoError(t, err, "the helper records the shell it kills")
					pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
					require.NoError(t, err)
					waitGone(t, pid)
				}
				// (killed while deleting the old copy, the publish also leaves
				// the directory it made for the new copy's stamps: both are
				// named for its dead shell and swept alike; and the Bridge's
				// publish leaves its sweep marker, which the next sweep
				// deletes too)
				all := leftovers(t, hostRoot)
				marked := slices.Contains(all, shell.SweepMarkerName("x"))
				assert.Equal(t, kind == "Bridge" && tc.point == "Delete" && killed == "Stage", marked, "a publish killed after its renames leaves its sweep marker: %v", all)
				left := slices.DeleteFunc(all, func(n string) bool {
					return tc.point == "Delete" && strings.HasSuffix(n, "-stamps") || n == shell.SweepMarkerName("x")
				})
				require.Len(t, left, 1, "the killed host leaves the directory it made")
				x := func() string {
					t.Helper()
					b, err := os.ReadFile(filepath.Join(hostRoot, "x", "a"))
					if errors.Is(err, os.ErrNotExist) {
						return ""
					}
					require.NoError(t, err)
					return string(b)
				}
				assert.Equal(t, tc.x, x(), "the staged copy stays, or is the new one")

				switch next {
				case "Stage":
					_, err = stage.Stage(t.Context(), target, root, []stage.Asset{{Name: "x", Source: srcX}})
					require.NoError(t, err)
					assert.Equal(t, "new", readFile(t, filepath.Join(hostRoot, "x", "a")))
				case "StageUnchanged":
					st, err := stage.Stage(t.Context(), target, root, []stage.Asset{{Name: "y", Source: srcY}})
					require.NoError(t, err)
					assert.Equal(t, 0, st.Assets[0].Sent, "y is unchanged")
					assert.Equal(t, tc.x, x())
				case "Unstage":
					require.NoError(t, stage.Unstage(t.Context(), target, root, "y"))
					assert.Equal(t, tc.x, x())
				}
				assert.Empty(t, leftovers(t, hostRoot), "the next %s removes what the killed host left", next)
			})
		}
	}
}

// TestKilledMidPublish: a host SIGKILLed while its publish command runs
// in the sandbox (after its first rename) closes the command's output; the
// command still finishes on its own: the new copy and its manifest are in
// place and nothing is left behind, with no later stage needed.
func TestKilledMidPublish(t *testing.T) {
	dir, src := t.TempDir(), t.TempDir()
	root := filepath.Join(dir, "rt")
	build(t, src, "a=old")
	_, err := stage.Stage(t.Context(), stage.NewBridge(sandbox.Local(dir)), root, []stage.Asset{{Name: "x", Source: src}})
	require.NoError(t, err)
	build(t, src, "a=new")
	c := exec.Command(os.Args[0], "-test.run=^TestKilledHostHelper$", "-test.count=1")
	c.Env = append(os.Environ(), killHelperEnv+"=BridgeMidPublish:publish:"+dir+":"+src)
	out, err := c.CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "%s", out)
	ws, ok := ee.Sys().(syscall.WaitStatus)
	require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "the helper must die by SIGKILL: %v\n%s", err, out)
	require.Eventually(t, func() bool { return len(leftovers(t, root)) == 0 }, time.Minute, 20*time.Millisecond, "left: %v", leftovers(t, root))
	assert.Equal(t, []string{".airlock-manifest-x.json", "x"}, listDir(t, root))
	assert.Equal(t, "new", readFile(t, filepath.Join(root, "x", "a")))
}

// TestSweepAfterKilledHost: a host SIGKILLed between the transfer and the
// publish (Bridge), or in the middle of writing the new copy (Dir), leaves
// a temporary directory; the next Stage, or the next Unstage, of the same
// root removes it, and the previous copy stayed in place throughout.
func TestSweepAfterKilledHost(t *testing.T) {
	for _, kind := range []string{"Bridge", "Dir"} {
		for _, next := range []string{"Stage", "Unstage"} {
			t.Run(kind+"/"+next, func(t *testing.T) {
				dir, src := t.TempDir(), t.TempDir()
				root, hostRoot := filepath.Join(dir, "rt"), filepath.Join(dir, "rt")
				var target stage.Target
				if kind == "Dir" {
					d, err := stage.NewDir(dir)
					require.NoError(t, err)
					target, root = d, "/rt"
				} else {
					target = stage.NewBridge(sandbox.Local(dir))
				}
				build(t, src, "a=old", "b=old", "c=old", "d=old")
				_, err := stage.Stage(t.Context(), target, root, []stage.Asset{{Name: "x", Source: src}, {Name: "y", Source: src}})
				require.NoError(t, err)
				build(t, src, "a=new", "b=new", "c=new", "d=new")

				at := "publish"
				c := exec.Command(os.Args[0], "-test.run=^TestKilledHostHelper$", "-test.count=1")
				c.Env = append(os.Environ(), killHelperEnv+"="+kind+":"+at+":"+dir+":"+src)
				out, err := c.CombinedOutput()
				var ee *exec.ExitError
				require.ErrorAs(t, err, &ee, "%s", out)
				ws, ok := ee.Sys().(syscall.WaitStatus)
				require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "the helper must die by SIGKILL: %v\n%s", err, out)

				left := leftovers(t, hostRoot)
				require.Len(t, left, 1, "the killed host leaves its temporary directory")
				if kind == "Bridge" {
					_, err := os.Stat(filepath.Join(hostRoot, left[0], "complete"))
					require.NoError(t, err, "killed between the transfer and the publish: the transfer is complete")
				}
				assert.Equal(t, "old", readFile(t, filepath.Join(hostRoot, "x", "a")), "the previous copy stays")

				if next == "Stage" {
					_, err = stage.Stage(t.Context(), target, root, []stage.Asset{{Name: "x", Source: src}})
					require.NoError(t, err)
					assert.Equal(t, "new", readFile(t, filepath.Join(hostRoot, "x", "a")))
				} else {
					require.NoError(t, stage.Unstage(t.Context(), target, root, "y"))
				}
				assert.Empty(t, leftovers(t, hostRoot), "the next %s removes what the killed host left", next)
			})
		}
	}
}

// slowRmRunner runs every command with a PATH whose rm sleeps longer than
// the control deadline before it removes anything.
type slowRmRunner struct {
	sandbox.Runner
	bin string
}

func newSlowRm(t *testing.T, r sandbox.Runner, sleep time.Duration) slowRmRunner {
	bin := t.TempDir()
	real, err := exec.LookPath("rm")
	require.NoError(t, err)
	script := fmt.Sprintf("#!/bin/sh\nsleep %.1f\nexec %s \"$@\"\n", sleep.Seconds(), real)
	require.NoError(t, os.WriteFile(filepath.Join(bin, "rm"), []byte(script), 0o755))
	return slowRmRunner{Runner: r, bin: bin}
}

func (s slowRmRunner) Run(ctx context.Context, cmd sandbox.Command) error {
	env := map[string]string{"PATH": s.bin + ":" + os.Getenv("PATH")}
	for k, v := range cmd.Env {
		env[k] = v
	}
	cmd.Env = env
	return s.Runner.Run(ctx, cmd)
}

// TestBridgeSlowRm: deleting the old copy is no part of the publish's or
// the unstage's control step: with an rm that takes three times the
// control deadline, re-staging and unstaging succeed, the asset is the new
// copy (or gone), and the old copy is deleted (at the latest by the next
// stage).
func TestBridgeSlowRm(t *testing.T) {
	dir, src := t.TempDir(), t.TempDir()
	root := filepath.Join(dir, "rt")
	const timeout = 500 * time.Millisecond
	b := stage.NewBridge(newSlowRm(t, sandbox.Local(dir), 3*timeout), stage.WithControlTimeout(timeout))
	build(t, src, "a=v1", "b=v1")
	assets := []stage.Asset{{Name: "x", Source: src}, {Name: "y", Source: src}}
	_, err := stage.Stage(t.Context(), b, root, assets)
	require.NoError(t, err)
	build(t, src, "a=v2")
	_, err = stage.Stage(t.Context(), b, root, assets)
	require.NoError(t, err, "the publish's control step must not wait for rm")
	assert.Equal(t, "v2", readFile(t, filepath.Join(root, "x", "a")))
	assert.Equal(t, "v2", readFile(t, filepath.Join(root, "y", "a")))

	require.NoError(t, stage.Unstage(t.Context(), b, root, "y"), "the unstage's control step must not wait for rm")
	_, err = os.Lstat(filepath.Join(root, "y"))
	assert.ErrorIs(t, err, os.ErrNotExist)

	build(t, src, "a=v3")
	_, err = stage.Stage(t.Context(), b, root, assets[:1])
	require.NoError(t, err)
	assert.Equal(t, "v3", readFile(t, filepath.Join(root, "x", "a")))
	// The old copies are deleted by their own commands, which go on after
	// the wait, or else by this stage's sweep: none may stay for good.
	require.Eventually(t, func() bool { return len(leftovers(t, root)) == 0 }, time.Minute, 50*time.Millisecond, "left: %v", leftovers(t, root))
	assert.Equal(t, []string{".airlock-manifest-x.json", "x"}, listDir(t, root))
}

// TestPrunerRefusesLinkedRoot: a stage root that is a link to a directory
// outside is never followed by Assets or Remove (Unstage, WithPrune): the
// Bridge refuses it with an error naming the link; Dir sees no staged
// asset there. Probe finds no manifest and Fetch no asset through it. The
// directory outside is untouched.
func TestPrunerRefusesLinkedRoot(t *testing.T) {
	forEachSandbox(t, func(t *testing.T, sb sbox) {
		outside := filepath.Join(sb.dir, "outside")
		build(t, outside, ".airlock-manifest-x.json={}", "x/f=keep", ".airlock-tmp-x-1/owner=1")
		require.NoError(t, os.Symlink(outside, sb.hostRoot))
		p := sb.Target.(stage.Pruner)
		names, aerr := p.Assets(t.Context(), sb.root)
		uerr := stage.Unstage(t.Context(), sb.Target, sb.root, "x")
		if _, ok := sb.Target.(*stage.Bridge); ok {
			require.Error(t, aerr)
			assert.ErrorContains(t, aerr, "is a symbolic link; refusing to follow it")
			require.Error(t, uerr)
			assert.ErrorContains(t, uerr, "is a symbolic link; refusing to follow it")
			var ee *sandbox.ExitError
			assert.True(t, errors.As(uerr, &ee), "%v", uerr)
		} else {
			require.NoError(t, aerr)
			assert.Empty(t, names)
			require.NoError(t, uerr)
		}
		// Nor do Probe and Fetch read through it.
		ms, err := sb.Target.Probe(t.Context(), sb.root, []string{"x"})
		require.NoError(t, err)
		assert.Equal(t, [][]byte{nil}, ms, "no manifest is read through a linked root")
		err = sb.Target.Fetch(t.Context(), sb.root, "x", func(e stage.Entry, _ io.Reader) error {
			return fmt.Errorf("read %s through a linked root", e.Path)
		})
		assert.ErrorIs(t, err, stage.ErrMismatch)

		assert.Equal(t, "keep", readFile(t, filepath.Join(outside, "x", "f")))
		assert.Equal(t, "{}", readFile(t, filepath.Join(outside, ".airlock-manifest-x.json")))
		assert.Equal(t, []string{".airlock-manifest-x.json", ".airlock-tmp-x-1", "x"}, listDir(t, outside))
		fi, err := os.Lstat(sb.hostRoot)
		require.NoError(t, err)
		assert.Equal(t, os.ModeSymlink, fi.Mode().Type(), "the link itself stays too")
	})
}

// TestBridgeSweepSparesOwnTransfers: between a transfer's end and its
// publish no sandbox process owns its temporary directory; a sweep by
// another publish through the same Bridge (another asset, same root) must
// leave it alone, and the first publish completes.
func TestBridgeSweepSparesOwnTransfers(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "rt")
	local := sandbox.Local(dir)
	xWaiting, yDone := make(chan struct{}), make(chan struct{})
	r := &scriptedRunner{next: local, match: func(c sandbox.Command) bool {
		return isPublish(c) && strings.Contains(c.Script, "/rt/x'")
	}, do: func(ctx context.Context, c sandbox.Command) error {
		close(xWaiting)
		<-yDone
		return local.Run(ctx, c)
	}}
	b := stage.NewBridge(r)
	srcX, srcY := t.TempDir(), t.TempDir()
	build(t, srcX, "a=x")
	build(t, srcY, "a=y")
	res := make(chan error, 1)
	go func() {
		_, err := stage.Stage(context.Background(), b, root, []stage.Asset{{Name: "x", Source: srcX}})
		res <- err
	}()
	select {
	case <-xWaiting:
	case err := <-res:
		t.Fatalf("the publish of x never came: %v", err)
	}
	_, err := stage.Stage(t.Context(), b, root, []stage.Asset{{Name: "y", Source: srcY}})
	close(yDone)
	require.NoError(t, err)
	require.NoError(t, <-res, "x's transfer was swept away before its publish")
	assert.Equal(t, "x", readFile(t, filepath.Join(root, "x", "a")))
	assert.Equal(t, "y", readFile(t, filepath.Join(root, "y", "a")))
	assert.Empty(t, leftovers(t, root))
}

// TestStageUnchangedSweeps: a stage with nothing to publish still removes
// the leftovers whose owner is gone (what a host or a command killed after
// the publish's renames leaves), on every target, and keeps a live owner's;
// with none, it stays one probe.
func TestStageUnchangedSweeps(t *testing.T) {
	forEachSandbox(t, func(t *testing.T, sb sbox) {
		src := t.TempDir()
		build(t, src, "a=1")
		assets := []stage.Asset{{Name: "x", Source: src}}
		_, err := stage.Stage(t.Context(), sb.Target, sb.root, assets)
		require.NoError(t, err)

		live := exec.Command("sleep", "60")
		require.NoError(t, live.Start())
		t.Cleanup(func() { _ = live.Process.Kill(); _ = live.Wait() })
		dead := exec.Command("true")
		require.NoError(t, dead.Run())
		plantLeftover(t, sb.hostRoot, ".airlock-tmp-x-dead", dead.Process.Pid)
		plantLeftover(t, sb.hostRoot, ".airlock-tmp-x-live", live.Process.Pid)
		if sb.runs != nil {
			require.NoError(t, os.MkdirAll(filepath.Join(sb.hostRoot, fmt.Sprintf(".airlock-gone-%d-0", dead.Process.Pid), "old"), 0o755))
		}

		st, err := stage.Stage(t.Context(), sb.Target, sb.root, assets)
		require.NoError(t, err)
		assert.Equal(t, 0, st.Assets[0].Sent, "unchanged")
		assert.Equal(t, []string{".airlock-tmp-x-live"}, leftovers(t, sb.hostRoot))

		if sb.runs != nil {
			before := sb.runs.Load()
			_, err = stage.Stage(t.Context(), sb.Target, sb.root, assets)
			require.NoError(t, err)
			assert.Equal(t, int64(1), sb.runs.Load()-before, "with nothing to sweep, an unchanged stage is one probe")
		}
	})
}

// TestDirKilledBetweenManifestAndCopy: a host killed between moving an
// asset's manifest and moving its copy (a removal after its manifest, a
// publish after its new copy) leaves a whole copy without a manifest
// beside the asset's sweep marker, naming the dead host. Assets lists it,
// so a prune removes it; a stage of it sends it whole; either leaves no
// marker and nothing else behind.
func TestDirKilledBetweenManifestAndCopy(t *testing.T) {
	for _, killed := range []string{"Unstage", "Stage"} {
		for _, next := range []string{"prune", "stage"} {
			t.Run(killed+"/"+next, func(t *testing.T) {
				d, dir, srcX, srcY := dirTwoAssets(t)

				c := exec.Command(os.Args[0], "-test.run=^TestKilledHostHelper$", "-test.count=1")
				c.Env = append(os.Environ(), killHelperEnv+"=DirAtMoved:"+killed+":"+dir+":"+srcX)
				out, err := c.CombinedOutput()
				var ee *exec.ExitError
				require.ErrorAs(t, err, &ee, "%s", out)
				ws, ok := ee.Sys().(syscall.WaitStatus)
				require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "the helper must die by SIGKILL: %v\n%s", err, out)
				waitGone(t, c.Process.Pid)

				root := filepath.Join(dir, "rt")
				assert.DirExists(t, filepath.Join(root, "x"), "the killed host left the copy")
				assert.NoFileExists(t, filepath.Join(root, shell.ManifestName("x")), "without its manifest")
				assert.FileExists(t, filepath.Join(root, shell.SweepMarkerName("x")), "beside its sweep marker")
				names, err := d.Assets(t.Context(), "/rt")
				require.NoError(t, err)
				assert.Equal(t, []string{"x", "y"}, names, "the listing names the copy without its manifest")

				if next == "prune" {
					_, err = stage.Stage(t.Context(), d, "/rt", []stage.Asset{{Name: "y", Source: srcY}}, stage.WithPrune())
					require.NoError(t, err)
					assert.NoDirExists(t, filepath.Join(root, "x"), "the deselected asset is gone")
				} else {
					rt, err := stage.Stage(t.Context(), d, "/rt", []stage.Asset{{Name: "x", Source: srcX}})
					require.NoError(t, err)
					assert.False(t, rt.Assets[0].Reused, "a copy without its manifest is sent again")
					b, err := os.ReadFile(filepath.Join(root, "x", "a"))
					require.NoError(t, err)
					assert.Equal(t, "new", string(b))
				}
				assert.NoFileExists(t, filepath.Join(root, shell.SweepMarkerName("x")))
				assert.Empty(t, leftovers(t, root))
				names, err = d.Assets(t.Context(), "/rt")
				require.NoError(t, err)
				if next == "prune" {
					assert.Equal(t, []string{"y"}, names)
				} else {
					assert.Equal(t, []string{"x", "y"}, names)
				}
			})
		}
	}
}

// TestDirMarkers: what Dir makes of sweep markers it finds (a killed
// host's, or planted): beside a copy that has its manifest, a dead one is
// deleted by the next stage's sweep (a directory, a link or a fifo at the
// marker's name too, never followed); beside a copy without a manifest it
// stays as that copy's record and the copy is listed, unless the marker
// names a live process (this one: a publish of another goroutine at
// work), whose copy is not listed.
func TestDirMarkers(t *testing.T) {
	outside := t.TempDir()
	keep := filepath.Join(outside, "keep")
	require.NoError(t, os.WriteFile(keep, []byte("keep"), 0o644))
	dead := deadPID(t) + "\n"
	live := fmt.Sprintf("%d\n", os.Getpid())
	for _, c := range []struct {
		name     string
		plant    func(p string) error
		manifest bool
		listed   bool // x is listed
		swept    bool // the marker is gone after a stage of x
	}{
		{"dead beside a staged copy", func(p string) error { return os.WriteFile(p, []byte(dead), 0o644) }, true, true, true},
		{"garbage beside a staged copy", func(p string) error { return os.WriteFile(p, []byte("garbage\n"), 0o644) }, true, true, true},
		{"directory beside a staged copy", func(p string) error { return os.MkdirAll(filepath.Join(p, "d"), 0o755) }, true, true, true},
		{"link beside a staged copy", func(p string) error { return os.Symlink(keep, p) }, true, true, true},
		{"fifo beside a staged copy", func(p string) error { return syscall.Mkfifo(p, 0o644) }, true, true, true},
		{"dead beside an orphan", func(p string) error { return os.WriteFile(p, []byte(dead), 0o644) }, false, true, true},
		{"live beside an orphan", func(p string) error { return os.WriteFile(p, []byte(live), 0o644) }, false, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, src := t.TempDir(), t.TempDir()
			build(t, src, "a=x")
			d, err := stage.NewDir(dir)
			require.NoError(t, err)
			_, err = stage.Stage(t.Context(), d, "/rt", []stage.Asset{{Name: "x", Source: src}})
			require.NoError(t, err)
			root := filepath.Join(dir, "rt")
			marker := filepath.Join(root, shell.SweepMarkerName("x"))
			require.NoError(t, c.plant(marker))
			if !c.manifest {
				require.NoError(t, os.Remove(filepath.Join(root, shell.ManifestName("x"))))
			}
			start := time.Now()
			names, err := d.Assets(t.Context(), "/rt")
			require.NoError(t, err)
			if c.listed {
				assert.Equal(t, []string{"x"}, names)
			} else {
				assert.Empty(t, names)
			}
			rt, err := stage.Stage(t.Context(), d, "/rt", []stage.Asset{{Name: "x", Source: src}})
			require.NoError(t, err)
			assert.Less(t, time.Since(start), 10*time.Second, "a planted marker must not hang")
			assert.Equal(t, c.manifest, rt.Assets[0].Reused, "a staged copy is reused, one without its manifest sent again")
			_, err = os.Lstat(marker)
			assert.Equal(t, c.swept, errors.Is(err, os.ErrNotExist), "the marker")
			assert.Empty(t, leftovers(t, root))
			b, err := os.ReadFile(keep)
			require.NoError(t, err)
			assert.Equal(t, "keep", string(b), "a linked marker is never followed")
		})
	}
}

// dirTwoAssets stages x (a=old) and y (a=y) through a new Dir into /rt
// of the sandbox directory dir, then changes x's source to a=new.
func dirTwoAssets(t *testing.T) (d *stage.Dir, dir, srcX, srcY string) {
	t.Helper()
	dir, srcX, srcY = t.TempDir(), t.TempDir(), t.TempDir()
	d, err := stage.NewDir(dir)
	require.NoError(t, err)
	build(t, srcX, "a=old")
	build(t, srcY, "a=y")
	_, err = stage.Stage(t.Context(), d, "/rt", []stage.Asset{{Name: "x", Source: srcX}, {Name: "y", Source: srcY}})
	require.NoError(t, err)
	build(t, srcX, "a=new")
	return d, dir, srcX, srcY
}

// TestDirFailedRenameListsOrphan: a publish or removal whose rename fails
// (not killed: the host process goes on) between moving the manifest and
// the copy leaves a copy without its manifest. Its marker must then name
// no process, or the listing would take it for a publish at work until
// the process ends: Assets lists the copy now, a prune removes it, and
// nothing is left behind.
func TestDirFailedRenameListsOrphan(t *testing.T) {
	for _, failed := range []string{"Stage", "Unstage"} {
		t.Run(failed, func(t *testing.T) {
			d, dir, srcX, srcY := dirTwoAssets(t)
			root := filepath.Join(dir, "rt")
			mf := filepath.Join(root, shell.ManifestName("x"))
			var planted string
			stage.SetMoved(d, func(name string) {
				switch {
				case failed == "Stage" && name == "x":
					planted = mf // the new manifest's rename meets a directory
				case failed == "Unstage" && name == shell.ManifestName("x"):
					tmps, err := filepath.Glob(filepath.Join(root, shell.TempPrefix+"x-*"))
					require.NoError(t, err)
					require.Len(t, tmps, 1)
					planted = filepath.Join(tmps[0], "x") // the copy's rename meets a directory
				default:
					return
				}
				require.NoError(t, os.MkdirAll(filepath.Join(planted, "in-the-way"), 0o755))
			})
			var err error
			if failed == "Stage" {
				_, err = stage.Stage(t.Context(), d, "/rt", []stage.Asset{{Name: "x", Source: srcX}})
			} else {
				err = stage.Unstage(t.Context(), d, "/rt", "x")
			}
			require.Error(t, err)
			require.NotEmpty(t, planted, "the rename was reached")
			stage.SetMoved(d, nil)
			require.NoError(t, os.RemoveAll(planted))

			assert.DirExists(t, filepath.Join(root, "x"), "the failed rename left the copy")
			assert.NoFileExists(t, mf, "without its manifest")
			names, err := d.Assets(t.Context(), "/rt")
			require.NoError(t, err)
			assert.Equal(t, []string{"x", "y"}, names, "the listing names the copy without its manifest while this process goes on")
			_, err = stage.Stage(t.Context(), d, "/rt", []stage.Asset{{Name: "y", Source: srcY}}, stage.WithPrune())
			require.NoError(t, err)
			assert.NoDirExists(t, filepath.Join(root, "x"), "the prune removes it")
			assert.NoFileExists(t, filepath.Join(root, shell.SweepMarkerName("x")))
			assert.Empty(t, leftovers(t, root))
		})
	}
}
