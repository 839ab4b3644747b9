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

// TestInlAtkFailSourceChangesDuringStage rewrites a source file while stages
// run, by replacing it (write hot.tmp, rename it over hot; sizes differ)
// or in place (same size): a stage that succeeds leaves the file holding
// one version whole and a copy its manifest describes, and a stage of the
// quiet tree publishes it exactly. Fails (replace): a stage returns nil
// with a copy holding hot.tmp, which its manifest does not list (see
// TestInlAtkFailExtraFileAfterRename); the final stage of the quiet tree is
// then Reused and leaves hot.tmp in the copy.
func TestInlAtkFailSourceChangesDuringStage(t *testing.T) {
	for _, how := range []string{"replace", "in-place"} {
		t.Run(how, func(t *testing.T) {
			dir, src := t.TempDir(), t.TempDir()
			root := filepath.Join(dir, "rt")
			build(t, src, "keep=k")
			v := [2]string{strings.Repeat("A", 300<<10), strings.Repeat("B", 100<<10)}
			if how == "in-place" {
				v[1] = strings.Repeat("B", 300<<10)
			}
			hot := filepath.Join(src, "hot")
			require.NoError(t, os.WriteFile(hot, []byte(v[0]), 0o644))
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					if how == "replace" {
						tmp := hot + ".tmp"
						_ = os.WriteFile(tmp, []byte(v[i%2]), 0o644)
						_ = os.Rename(tmp, hot)
					} else if fh, err := os.OpenFile(hot, os.O_WRONLY, 0); err == nil {
						_, _ = fh.WriteAt([]byte(v[i%2]), 0)
						_ = fh.Close()
					}
				}
			})
			b := stage.NewBridge(sandbox.Local(dir))
			var ok, failed int
			for range 8 {
				var before [2]map[string]iaEntry
				for i, name := range []string{"x", "y"} {
					if _, err := os.Lstat(filepath.Join(root, name)); err == nil {
						before[i] = iaSnap(t, filepath.Join(root, name))
					}
				}
				rt, err := stage.Stage(t.Context(), b, root, []stage.Asset{{Name: "x", Source: src}, {Name: "y", Source: src}})
				if err != nil {
					failed++
					assert.True(t, sandbox.Retryable(err), "%v", err)
					// The failing asset keeps its previous copy (the one
					// before it, if any, was published whole).
					for i, name := range []string{"x", "y"} {
						if before[i] != nil && (rt == nil || len(rt.Assets) <= i) && strings.Contains(err.Error(), `"`+name+`"`) {
							require.True(t, iaEqual(before[i], iaSnap(t, filepath.Join(root, name))), "a failed stage of %s changed its copy: %v", name, err)
						}
					}
					continue
				}
				ok++
				for _, name := range []string{"x", "y"} {
					got := readFile(t, filepath.Join(root, name, "hot"))
					require.True(t, got == v[0] || got == v[1], "a torn file: %d bytes", len(got))
					iaManifestMatches(t, root, name)
				}
			}
			close(stop)
			wg.Wait()
			t.Logf("ok %d failed %d", ok, failed)
			_, err := stage.Stage(t.Context(), b, root, []stage.Asset{{Name: "x", Source: src}, {Name: "y", Source: src}})
			require.NoError(t, err)
			iaSame(t, iaSnap(t, src), iaSnap(t, filepath.Join(root, "x")))
			iaSame(t, iaSnap(t, src), iaSnap(t, filepath.Join(root, "y")))
			iaNoTemp(t, root)
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
