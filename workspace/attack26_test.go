//go:build linux

package workspace_test

// Attacks on a plain directory's Restore killed by SIGKILL (2026-12-04: the
// rename of the sandbox's entry over a local directory is journaled before
// the directory goes, and the next sweep completes it). A child host (this
// test binary again) restores a round whose sandbox replaced directories by
// files and links, nested ones too, a file by a directory, and deleted
// entries, while the user edited some of the same paths; it is killed at a
// random instant, or at a random rename into the work tree; then a new
// Restore runs. The invariant: no data is lost. Every path ends with the
// sandbox's version, or with the local one while the sandbox keeps its own
// and the path is reported (Kept or Refused); no .airlock-tmp-* file stays.

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
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

	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/treetest"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

// atk26Node is one entry of a work tree: its type, and its content (a
// file), its target (a link) or nothing (a directory).
type atk26Node struct {
	kind string // "file", "exec", "link", "dir"
	data string
}

// atk26Snap returns the entries under dir but its runtime directory
// (treetest.Snapshot, each entry reduced to its kind and content).
func atk26Snap(t *testing.T, dir string) map[string]atk26Node {
	t.Helper()
	m := map[string]atk26Node{}
	for rel, n := range treetest.Snapshot(t, dir) {
		if rel == sandbox.RuntimeDir || strings.HasPrefix(rel, sandbox.RuntimeDir+"/") {
			continue
		}
		switch {
		case n.Mode.IsDir():
			m[rel] = atk26Node{kind: "dir"}
		case n.Mode&fs.ModeSymlink != 0:
			m[rel] = atk26Node{kind: "link", data: n.Link}
		case n.Mode.IsRegular() && n.Mode&0o100 != 0:
			m[rel] = atk26Node{kind: "exec", data: n.Data}
		case n.Mode.IsRegular():
			m[rel] = atk26Node{kind: "file", data: n.Data}
		default:
			t.Fatalf("%s: unexpected type %v", filepath.Join(dir, rel), n.Mode.Type())
		}
	}
	return m
}

// atk26Scenario builds the local tree, prepares it, makes the agent's
// changes in the sandbox and the user's in the work tree, and returns the
// round. Which user edits happen depends on rng.
func atk26Scenario(t *testing.T, e *env, state string, rng *rand.Rand) *workspace.Round {
	t.Helper()
	for rel, c := range map[string]string{
		"a": "a0\n", "keep": "k0\n", "f1": "f1\n", "f2": "f2\n", "f3": "f3\n",
		"d1/x": "x\n", "d1/e/y": "y\n", "d2/x": "x\n", "d3/e/y": "y\n", "d3/z": "z\n",
		"d4/e/f/y": "y\n", "d5/x": "x\n", "d5/e/y": "y\n", "d6/x": "x\n", "d7/x": "x\n",
		"d8/e/x": "x\n", "d9/x": "x\n",
	} {
		write(t, e.local, rel, c)
	}
	r, err := workspace.Prepare(ctx(t), e.spec, workspace.WithStateDir(state))
	require.NoError(t, err)
	rm := func(rel string) { require.NoError(t, os.RemoveAll(filepath.Join(e.remote, rel))) }
	link := func(target, rel string) { require.NoError(t, os.Symlink(target, filepath.Join(e.remote, rel))) }
	rm("d1")
	write(t, e.remote, "d1", "agent d1\n") // dir -> file
	rm("d2")
	link("a", "d2") // dir -> link
	rm("d3/e")
	write(t, e.remote, "d3/e", "agent d3/e\n") // nested dir -> file
	rm("d4")
	link("keep", "d4") // dir holding dirs -> link
	rm("f1")
	write(t, e.remote, "f1/z", "agent f1/z\n") // file -> dir
	rm("f2")                                   // deletion
	rm("d5")                                   // a directory deleted
	rm("d6")
	write(t, e.remote, "d6", "agent d6\n") // dir -> file, the user edits d6/x
	rm("d7")
	write(t, e.remote, "d7", "agent d7\n") // dir -> file, the user adds d7/u
	rm("d8/e")
	link("../keep", "d8/e") // nested dir -> link
	rm("d9/x")
	write(t, e.remote, "d9/x/w", "agent w\n") // file below a dir -> dir
	write(t, e.remote, "a", "agent a\n")
	write(t, e.remote, "f3", "agent f3\n")
	write(t, e.remote, "n/new", "agent new\n")
	if rng.Intn(2) == 0 {
		write(t, e.local, "d6/x", "user d6/x\n")
	}
	if rng.Intn(2) == 0 {
		write(t, e.local, "d7/u", "user d7/u\n")
	}
	if rng.Intn(2) == 0 {
		write(t, e.local, "f3", "user f3\n")
	}
	if rng.Intn(2) == 0 {
		write(t, e.local, "d1/e/y", "user d1/e/y\n")
	}
	return r
}

// atk26Reported says whether p, a path above it or one below it is in
// Kept or Refused.
func atk26Reported(res *workspace.Result, p string) bool {
	for _, q := range append(append([]string{}, res.Kept...), res.Refused...) {
		if q == p || strings.HasPrefix(p, q+"/") || strings.HasPrefix(q, p+"/") {
			return true
		}
	}
	return false
}

// atk26Check asserts that nothing was lost: final holds, at every path,
// the sandbox's version, or the local one (before the restore) reported
// in res; and no temporary file stays in the work tree.
func atk26Check(t *testing.T, what string, final, sbx, local map[string]atk26Node, res *workspace.Result) {
	t.Helper()
	paths := map[string]bool{}
	for _, m := range []map[string]atk26Node{final, sbx, local} {
		for p := range m {
			paths[p] = true
		}
	}
	var bad []string
	for p := range paths {
		f, fok := final[p]
		s, sok := sbx[p]
		l, lok := local[p]
		if strings.Contains(p, ".airlock-tmp-") {
			bad = append(bad, fmt.Sprintf("%s: a temporary file stays", p))
			continue
		}
		switch {
		case fok == sok && f == s:
		case fok == lok && f == l:
			if !atk26Reported(res, p) {
				bad = append(bad, fmt.Sprintf("%s: local %v kept over the sandbox's %v (present %v) and not reported (Kept %q, Refused %q)", p, f, s, sok, res.Kept, res.Refused))
			}
		default:
			bad = append(bad, fmt.Sprintf("%s: ends %v (present %v); the sandbox's was %v (present %v), the local %v (present %v)", p, f, fok, s, sok, l, lok))
		}
	}
	sort.Strings(bad)
	require.Empty(t, bad, "%s: data lost or unreported", what)
}

const atk26Env = "WORKSPACE_ATK26"

// atk26Replaced are the local directories the agent replaced by a file or
// a link (atk26Scenario).
var atk26Replaced = []string{"d1", "d2", "d3/e", "d4", "d6", "d7", "d8/e"}

// TestAtk26RestoreChild is the host TestAtk26KilledRestore kills.
func TestAtk26RestoreChild(t *testing.T) {
	mode := os.Getenv(atk26Env)
	if mode == "" {
		t.Skip("run by TestAtk26KilledRestore")
	}
	remote, mark := os.Getenv(atk26Env+"_REMOTE"), os.Getenv(atk26Env+"_MARK")
	spec := workspace.Spec{Local: os.Getenv(atk26Env + "_LOCAL"), Remote: remote, Runner: sandbox.Local(filepath.Dir(remote))}
	opts := []workspace.Option{workspace.WithStateDir(os.Getenv(atk26Env + "_STATE"))}
	if mode == "place" {
		at := os.Getenv(atk26Env + "_K")
		k, err := strconv.Atoi(at)
		if err != nil {
			k = -1 // at names the path
		}
		n := 0
		opts = append(opts, workspace.WithBeforePlace(func(_, rel string) {
			if n++; n == k || rel == at {
				markAndHang(mark)
			}
		}))
	}
	r, err := workspace.Reopen(ctx(t), spec, os.Getenv(atk26Env+"_ID"), opts...)
	require.NoError(t, err)
	if mode == "time" {
		require.NoError(t, os.WriteFile(mark, nil, 0o600))
	}
	_, err = r.Restore(ctx(t))
	require.NoError(t, err)
}

// atk26Kill runs the child host on round r and SIGKILLs it: at its k-th
// rename into the work tree or at its rename over the path at (mode
// "place"), or delay after its Restore
// began (mode "time"). It reports whether the child finished first.
func atk26Kill(t *testing.T, e *env, state string, r *workspace.Round, mode, at string, delay time.Duration) bool {
	t.Helper()
	mark := filepath.Join(t.TempDir(), "mark")
	cmd := exec.Command(os.Args[0], "-test.run=^TestAtk26RestoreChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), atk26Env+"="+mode, atk26Env+"_REMOTE="+e.remote, atk26Env+"_LOCAL="+e.local,
		atk26Env+"_STATE="+state, atk26Env+"_ID="+r.ID(), atk26Env+"_MARK="+mark, atk26Env+"_K="+at)
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.After(time.Minute)
	for {
		select {
		case err := <-done:
			require.NoError(t, err, "the child host failed before it was killed")
			return true
		case <-deadline:
			require.NoError(t, cmd.Process.Kill())
			<-done
			t.Fatal("the child never reached its kill point")
		case <-time.After(time.Millisecond):
		}
		if _, err := os.Stat(mark); err == nil {
			break
		}
	}
	if mode == "time" {
		time.Sleep(delay)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); !errors.Is(err, os.ErrProcessDone) {
		require.NoError(t, err)
	}
	err := <-done
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ProcessState.Sys().(syscall.WaitStatus).Signaled() {
		return false
	}
	require.NoError(t, err, "the child host failed")
	return true
}

// TestAtk26KilledRestore kills a plain directory's Restore at random points
// and checks, after the next Restore, that nothing was lost.
func TestAtk26KilledRestore(t *testing.T) {
	if os.Getenv(atk26Env) != "" {
		t.Skip("child process")
	}
	requireProc(t)
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	seed := rng.Int63()
	t.Logf("seed %d", seed)
	rng = rand.New(rand.NewSource(seed))

	// How long an undisturbed Restore takes, and that it keeps the invariant.
	e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
	state := filepath.Join(t.TempDir(), "state")
	r := atk26Scenario(t, e, state, rng)
	sbx, local := atk26Snap(t, e.remote), atk26Snap(t, e.local)
	start := time.Now()
	res, err := r.Restore(ctx(t))
	took := time.Since(start)
	require.NoError(t, err)
	atk26Check(t, "undisturbed", atk26Snap(t, e.local), sbx, local, res)

	outside := t.TempDir()
	write(t, outside, "o", "outside\n")
	var finished, killed, gone, unreported int
	deadline := time.Now().Add(8 * time.Second)
	for run := 0; time.Now().Before(deadline); run++ {
		mode, at, delay := "time", "", time.Duration(rng.Int63n(int64(took)*3/2+1))
		switch run % 3 {
		case 1:
			mode, at = "place", strconv.Itoa(1+rng.Intn(14))
		case 2:
			mode, at = "place", atk26Replaced[rng.Intn(len(atk26Replaced))]
		}
		what := fmt.Sprintf("run %d (%s, at %q, delay %v)", run, mode, at, delay)
		e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
		state := filepath.Join(t.TempDir(), "state")
		r := atk26Scenario(t, e, state, rng)
		sbx, local := atk26Snap(t, e.remote), atk26Snap(t, e.local)
		if atk26Kill(t, e, state, r, mode, at, delay) {
			finished++
		} else {
			killed++
		}
		if rng.Intn(3) == 0 { // killed twice
			what += fmt.Sprintf(", killed again after %v", delay/2)
			atk26Kill(t, e, state, r, "time", "", delay/2)
		}
		for _, d := range atk26Replaced {
			if _, err := os.Lstat(filepath.Join(e.local, d)); !errors.Is(err, fs.ErrNotExist) {
				continue
			}
			gone++
			switch rng.Intn(4) {
			case 2: // the user links it to a directory outside the work tree
				what += ", " + d + " linked outside by the user"
				require.NoError(t, os.Symlink(outside, filepath.Join(e.local, d)))
				local[d] = atk26Node{kind: "link", data: outside}
			case 0: // the user makes the directory again, with a new file
				what += ", " + d + "/new made by the user"
				write(t, e.local, d+"/new", "user new\n")
				local[d] = atk26Node{kind: "dir"}
				local[d+"/new"] = atk26Node{kind: "file", data: "user new\n"}
			case 1: // the user writes a file there
				what += ", " + d + " written by the user"
				write(t, e.local, d, "user file\n")
				local[d] = atk26Node{kind: "file", data: "user file\n"}
			}
		}
		mid := atk26Snap(t, e.local)
		r2, err := workspace.Reopen(ctx(t), e.spec, r.ID(), workspace.WithStateDir(state))
		require.NoError(t, err, what)
		res, err := r2.Restore(ctx(t))
		require.NoError(t, err, what)
		final := atk26Snap(t, e.local)
		atk26Check(t, what, final, sbx, local, res)
		for p, n := range final {
			// An entry whose journaled rename the sweep completed is
			// already there for this Restore: counted, not asserted.
			if m, ok := mid[p]; n.kind != "dir" && (!ok || m != n) && !slices.Contains(res.Updated, p) {
				unreported++
			}
		}
		require.Equal(t, sbx, atk26Snap(t, e.remote), "%s: the sandbox's tree changed", what)
		require.Equal(t, map[string]atk26Node{"o": {kind: "file", data: "outside\n"}}, atk26Snap(t, outside), "%s: the directory outside the work tree changed", what)
	}
	t.Logf("took %v undisturbed; %d children killed, %d finished first; a replaced directory missing after the kill %d times; %d entries arrived by the sweep, not in Updated", took, killed, finished, gone, unreported)
	require.NotZero(t, killed)
}

// TestAtk26KilledRestoreThenPrepare kills a plain directory's Restore at a
// random rename into the work tree and prepares a new round instead of
// restoring: the Prepare completes a journaled rename before it sends the
// work tree, so every path holds the sandbox's version or the local one,
// never neither, and the new round's sandbox holds exactly the work tree
// but its links.
func TestAtk26KilledRestoreThenPrepare(t *testing.T) {
	if os.Getenv(atk26Env) != "" {
		t.Skip("child process")
	}
	requireProc(t)
	rng := rand.New(rand.NewSource(2626))
	var gone int
	for run := 0; run < 2*len(atk26Replaced); run++ {
		at := atk26Replaced[run%len(atk26Replaced)]
		what := fmt.Sprintf("run %d (place, at %q)", run, at)
		e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
		state := filepath.Join(t.TempDir(), "state")
		r := atk26Scenario(t, e, state, rng)
		sbx, local := atk26Snap(t, e.remote), atk26Snap(t, e.local)
		atk26Kill(t, e, state, r, "place", at, 0)
		if !exists(e.local, at) {
			gone++
		}
		_, err := workspace.Prepare(ctx(t), e.spec, workspace.WithStateDir(state))
		require.NoError(t, err, what)
		final := atk26Snap(t, e.local)
		all := &workspace.Result{Refused: []string{""}} // a Prepare reports nothing: only loss counts
		for p := range final {
			all.Refused = append(all.Refused, p)
		}
		for p := range local {
			all.Refused = append(all.Refused, p)
		}
		atk26Check(t, what, final, sbx, local, all)
		for p, n := range final {
			if n.kind == "link" { // a plain round sends no links
				delete(final, p)
			}
		}
		require.Equal(t, final, atk26Snap(t, e.remote), "%s: the new round's sandbox is not the work tree (links left out)", what)
	}
	t.Logf("the replaced directory missing after the kill %d times", gone)
}
