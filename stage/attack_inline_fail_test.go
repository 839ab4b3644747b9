//go:build airlock_attack_fail

package stage_test

// Tests that expose defects found by attacking the Bridge (see the report
// of branch h/attack). Run: go test -tags airlock_attack_fail -run 'TestInlAtkFail' ./stage/

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
)

// TestInlAtkFailFreshRootRace: as TestInlAtkFreshRootRace, through several
// busybox Bridges (as several hosts would): busybox tar reads its input to
// the end, so each publish is a command of its own, and another host's
// sweep can take a transfer in the instant between its end and its publish
// (the Bridge's documented non-guarantee: that publish fails, the previous
// copy stays).
// Through one busybox Bridge it fails too (CI of 9057a97: "transfer
// incomplete" for one of six assets, not reproduced since): cause not
// found.
func TestInlAtkFailFreshRootRace(t *testing.T) {
	t.Run("busybox-bridges", func(t *testing.T) { iaFreshRootRace(t, false, true) })
	t.Run("busybox-one-bridge", func(t *testing.T) { iaFreshRootRace(t, true, true) })
}

// TestInlAtkFailKilledMidRename: the command that publishes (the send
// command where the sandbox has GNU tar, the separate publish command under
// busybox) is killed (SIGKILL of its process group, as sandbox.Local does
// when its context ends: a Runner whose connection drops, a container
// stop) while it moves the old copy aside and the new one into place: a
// watcher kills it the moment <root>/x is absent. On a sandbox without
// mv --exchange (coreutils < 9.5, busybox) that leaves <root>/x absent:
// neither the previous copy nor the new one, until the next stage (which
// publishes it again; the old copy, moved into the temporary directory,
// is swept).
func TestInlAtkFailKilledMidRename(t *testing.T) {
	for _, bb := range []bool{false, true} {
		t.Run(fmt.Sprint("busybox=", bb), func(t *testing.T) {
			absent := 0
			for range 5 {
				f := iaSetup(t)
				next := sandbox.Local(f.dir)
				if bb {
					next = iaBusybox(t, f.dir)
				}
				r := iaKillWhenAbsent{next: next, path: f.copyPath()}
				_, err := stage.Stage(t.Context(), stage.NewBridge(r, stage.WithControlTimeout(2*time.Second)), f.root, f.assets())
				time.Sleep(50 * time.Millisecond)
				if _, serr := os.Lstat(f.copyPath()); serr != nil {
					absent++
					t.Errorf("killed between the renames: %s is absent (stage error: %v)", f.copyPath(), err)
					f.retry(t)
					continue
				}
				f.oldOrNew(t)
			}
			t.Logf("absent %d of 5 times", absent)
		})
	}
}

// iaKillWhenAbsent kills each command (cancels its context) the moment path
// is absent while the command runs.
type iaKillWhenAbsent struct {
	next sandbox.Runner
	path string
}

func (k iaKillWhenAbsent) Run(ctx context.Context, cmd sandbox.Command) error {
	cctx, kill := context.WithCancel(ctx)
	defer kill()
	go func() {
		for cctx.Err() == nil {
			if _, err := os.Lstat(k.path); err != nil {
				kill()
				return
			}
		}
	}()
	return k.next.Run(cctx, cmd)
}

// TestInlAtkFailGarbledReportIsProtocol: the sandbox garbles the send
// command's extraction report (a line the protocol does not know, where
// the report is due). The package promises that a sandbox breaking the
// protocol (a garbled reply) fails with sandbox.ErrProtocol, which is not
// retryable. The stage does fail and leaves the previous copy, but only
// after the whole control deadline, as a retryable ErrTransport ("the
// sandbox command did not end within the control deadline after its work
// was done (the Runner never returned)"), blaming the connection.
func TestInlAtkFailGarbledReportIsProtocol(t *testing.T) {
	for _, to := range []string{"airlock-extracted junk\n", "zzz\n", "airlock-bogus\n"} {
		t.Run(strings.TrimSpace(to), func(t *testing.T) {
			f := iaSetup(t)
			r := &iaRunner{next: sandbox.Local(f.dir), send: func(ctx context.Context, cmd sandbox.Command, next sandbox.Runner) error {
				cmd.Stdout = &iaRewrite{w: cmd.Stdout, from: iaExtracted, to: to}
				return next.Run(ctx, cmd)
			}}
			start := time.Now()
			_, err := stage.Stage(t.Context(), stage.NewBridge(r, stage.WithControlTimeout(2*time.Second)), f.root, f.assets())
			require.Error(t, err)
			t.Logf("after %v: %v", time.Since(start).Round(time.Millisecond), err)
			assert.Equal(t, "old", f.oldOrNew(t))
			assert.ErrorIs(t, err, sandbox.ErrProtocol)
			assert.False(t, sandbox.Retryable(err), "a garbled reply is not retryable")
			assert.Less(t, time.Since(start), time.Second, "a garbled line needs no deadline to be seen")
		})
	}
}

// TestInlAtkFailOwnSweepBusybox (intermittent: failed once in about a dozen
// runs, on a loaded machine; the failure was not captured): one Bridge over a busybox sandbox (two commands a
// publish) stages different assets at once into a root that already
// exists. Nothing is shared but the root, and "a Bridge knows only its
// own" transfers: every stage must succeed. Each stage's sweep must not
// take another call's transfer in the instant between its send command and
// its publish command.
func TestInlAtkFailOwnSweepBusybox(t *testing.T) {
	src := t.TempDir()
	build(t, src, "f=1", "d/g=2")
	want := iaSnap(t, src)
	dir := t.TempDir()
	root := filepath.Join(dir, "rt")
	b := stage.NewBridge(iaBusybox(t, dir))
	_, err := stage.Stage(t.Context(), b, root, []stage.Asset{{Name: "first", Source: src}})
	require.NoError(t, err)
	for round := range 5 {
		var wg sync.WaitGroup
		errs := make([]error, 6)
		for g := range 6 {
			wg.Go(func() {
				_, errs[g] = stage.Stage(t.Context(), b, root, []stage.Asset{{Name: fmt.Sprint("r", round, "a", g), Source: src}})
			})
		}
		wg.Wait()
		for g, err := range errs {
			require.NoError(t, err, "round %d, asset a%d (retryable %v)", round, g, sandbox.Retryable(err))
			iaSame(t, want, iaSnap(t, filepath.Join(root, fmt.Sprint("r", round, "a", g))))
		}
	}
}
