//go:build airlock_attack_fail

package stage_test

// Tests that expose defects found by attacking the Bridge (see the report
// of branch h/attack). Run: go test -tags airlock_attack_fail -run 'TestInlAtkFail' ./stage/

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
)

// TestInlAtkFailFreshRootRace: as TestInlAtkFreshRootRace, through several
// busybox Bridges (as several hosts would): busybox tar reads its input to
// the end, so each publish is a command of its own, and another host's
// sweep can take a transfer in the instant between its end and its publish
// (the Bridge's documented non-guarantee: that publish fails, the previous
// copy stays).
// (Through one busybox Bridge it passes: TestInlAtkFreshRootRace.)
func TestInlAtkFailFreshRootRace(t *testing.T) {
	iaFreshRootRace(t, false, true)
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
