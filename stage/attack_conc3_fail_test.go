//go:build airlock_attack_fail

package stage_test

// Attacks of attack_conc3_test.go that expose defects (branch h/attack3).
// Run: go test -tags airlock_attack_fail -run 'TestConc3Fail' ./stage/

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
)

// TestConc3FailTwoBridgesSameAsset: two Bridges (two host processes) stage
// the same asset at once, next to other assets, round after round. Publishes
// of one asset from two processes are not coordinated, so a call may fail,
// and the previous copy stays (it does). But the failure is not retryable
// (sandbox.Retryable false: an *ExitError, status 4), though the cause is
// the other process's publish and the same call succeeds when tried again;
// one of its messages even says "stage again". Seen in most runs, 1 to 3
// of the 60 calls of a run (GNU and busybox alike), e.g.:
//
//	publish asset "a0" (…/rt/a0): moving the new copy into place failed in the sandbox: exited with status 4: cannot move the new copy to …/rt/a0: it is in use, or another stage put one there meanwhile; stage again (retryable false)
//	… exited with status 4: mv: cannot stat '…/rt/.airlock-manifest-a0.json': No such file or directory (retryable false)
//	… exited with status 4: mv: cannot stat '…/rt/a0': No such file or directory (retryable false)
func TestConc3FailTwoBridgesSameAsset(t *testing.T) {
	for _, bb := range []bool{false, true} {
		t.Run(c3Kind(bb), func(t *testing.T) {
			fails, absent := c3TwoBridges(t, bb, true, 10)
			t.Logf("failed calls %d, absent copies %d", fails, absent)
		})
	}
}

// c3SlowReturn passes commands to next; after a cancelled send command
// ends, it returns only after a second (a Runner slow to report), so the
// Bridge gives up after its grace and leaves the transfer's directory
// behind, named in its error (documented).
type c3SlowReturn struct{ next sandbox.Runner }

func (s c3SlowReturn) Run(ctx context.Context, cmd sandbox.Command) error {
	err := s.next.Run(ctx, cmd)
	if iaIsSend(cmd) && ctx.Err() != nil {
		time.Sleep(time.Second)
	}
	return err
}

// TestConc3FailBwrapLeftoverNeverSwept: on a sandbox whose engine gives
// every exec a PID namespace of its own (bwrap --unshare-pid, as the README
// recommends), a cancelled transfer whose Runner returns late leaves its
// temporary directory (documented), its command dead. The docs promise that
// the next stage or unstage of the root removes it once its owner is gone.
// It is never removed: by further stages, an unstage, or a new Bridge. Every
// command's shell has the same pid in its namespace (5 through
// sandbox.Exec's wrapper), and the sweep spares an owner file whose pid is
// its own before it looks at the namespace line (which says the owner is
// another namespace's, swept as gone). Fails every run.
func TestConc3FailBwrapLeftoverNeverSwept(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "rt")
	r := c3Bwrap(t)
	src := t.TempDir()
	build(t, src, "big="+strings.Repeat("z", 8<<20))
	c3Version(t, src, 0, 0)
	a := []stage.Asset{{Name: "a0", Source: src}}
	_, err := stage.Stage(t.Context(), stage.NewBridge(r), root, a)
	require.NoError(t, err)
	left := ""
	for i := 0; left == "" && i < 10; i++ {
		build(t, src, fmt.Sprint("big=", strings.Repeat("y", 8<<20), i))
		ctx, cancel := context.WithTimeout(t.Context(), time.Duration(30+20*i)*time.Millisecond)
		_, err = stage.Stage(ctx, stage.NewBridge(c3SlowReturn{next: r}), root, a)
		cancel()
		ents, rerr := os.ReadDir(root)
		require.NoError(t, rerr)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".airlock-tmp-") {
				left = e.Name()
				t.Logf("left behind: %s (stage error: %v)", left, err)
			}
		}
	}
	if left == "" {
		t.Skip("no cancellation left a temporary directory")
	}
	owner, _ := os.ReadFile(filepath.Join(root, left, "owner"))
	t.Logf("its owner file: %q", owner)
	b := stage.NewBridge(r)
	build(t, src, "big=quiet")
	_, err = stage.Stage(t.Context(), b, root, a)
	require.NoError(t, err)
	require.NoError(t, stage.Unstage(t.Context(), b, root, "never-staged"))
	build(t, src, "big=quiet again")
	_, err = stage.Stage(t.Context(), stage.NewBridge(r), root, a)
	require.NoError(t, err)
	_, err = os.Lstat(filepath.Join(root, left))
	assert.True(t, errors.Is(err, os.ErrNotExist), "%s is still there after two stages and an unstage; its command is dead", left)
	c3OnlyStaged(t, root, "a0")
}

// TestConc3FailPlantedNameSaysWhy: the sandbox plants a directory under the
// Bridge's next temporary name (tag and count read from the names it sees).
// The stage that draws that name fails, rightly (the mkdir is exclusive),
// but its error does not say why: "creating temporary directory …/rt/
// .airlock-tmp-x-<tag><n> failed in the sandbox: exited with status 1",
// nothing on stderr, so neither the caller nor an operator can tell a
// taken name from a full disk or a missing root. (A planted
// .airlock-new-<pid>-<name> does say it: "mkdir: cannot create directory
// …: File exists".) Fails every run, GNU and busybox.
func TestConc3FailPlantedNameSaysWhy(t *testing.T) {
	for _, bb := range []bool{false, true} {
		t.Run(c3Kind(bb), func(t *testing.T) {
			dir, src := t.TempDir(), t.TempDir()
			root := filepath.Join(dir, "rt")
			c3Version(t, src, 0, 0)
			spy := &c3Spy{next: c3Runner(t, dir, bb)}
			b := stage.NewBridge(spy)
			_, err := stage.Stage(t.Context(), b, root, []stage.Asset{{Name: "x", Source: src}})
			require.NoError(t, err)
			tag, n := spy.next2()
			c3Plant(t, filepath.Join(root, fmt.Sprintf(".airlock-tmp-x-%s%08d", tag, n+1)), deadPID(t)+"\n")
			c3Version(t, src, 0, 1)
			_, err = stage.Stage(t.Context(), b, root, []stage.Asset{{Name: "x", Source: src}})
			require.Error(t, err)
			c3NoPlanted(t, root)
			assert.Regexp(t, `(?i)exist|taken|in use`, err.Error(), "the error does not say why")
		})
	}
}

// TestConc3FailForgedFutureNameNotSwept: the sandbox plants a directory
// named like a transfer this Bridge will make much later (its tag, a count
// far ahead) with an owner file naming a dead process. The docs promise that
// the next stage or unstage of the root removes every temporary directory
// whose owner process is gone; through this Bridge it stays (its sweeps
// spare every name of its tag with a count above the last one it gave out,
// and it gives out one a publish), until the Bridge's count passes it.
// A new Bridge (another tag) sweeps it at once. Fails every run.
func TestConc3FailForgedFutureNameNotSwept(t *testing.T) {
	for _, bb := range []bool{false, true} {
		t.Run(c3Kind(bb), func(t *testing.T) {
			dir, src := t.TempDir(), t.TempDir()
			root := filepath.Join(dir, "rt")
			c3Version(t, src, 0, 0)
			spy := &c3Spy{next: c3Runner(t, dir, bb)}
			b := stage.NewBridge(spy)
			_, err := stage.Stage(t.Context(), b, root, []stage.Asset{{Name: "x", Source: src}})
			require.NoError(t, err)
			tag, n := spy.next2()
			p := filepath.Join(root, fmt.Sprintf(".airlock-tmp-x-%s%08d", tag, n+1000))
			c3Plant(t, p, deadPID(t)+"\n")
			c3Version(t, src, 0, 1)
			_, err = stage.Stage(t.Context(), b, root, []stage.Asset{{Name: "x", Source: src}})
			require.NoError(t, err)
			require.NoError(t, stage.Unstage(t.Context(), b, root, "never-staged"))
			_, serr := os.Lstat(p)
			assert.True(t, errors.Is(serr, os.ErrNotExist), "a stage and an unstage through the Bridge left %s (owner dead)", filepath.Base(p))
			c3Version(t, src, 0, 2)
			_, err = stage.Stage(t.Context(), stage.NewBridge(c3Runner(t, dir, bb)), root, []stage.Asset{{Name: "x", Source: src}})
			require.NoError(t, err)
			_, serr = os.Lstat(p)
			assert.True(t, errors.Is(serr, os.ErrNotExist), "a new Bridge left it too")
		})
	}
}
