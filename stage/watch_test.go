package stage_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
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

// afterRun runs every command through a real Runner; a matched one runs
// for real and then its Run never returns (until the test ends), whatever
// its context, like an exec client that does not exit after the remote
// process ended. Its control deadline is control (sandbox.ControlTimeouter).
type afterRun struct {
	next    sandbox.Runner
	control time.Duration
	match   func(sandbox.Command) bool
	release chan struct{}
}

func newAfterRun(t *testing.T, next sandbox.Runner, match func(sandbox.Command) bool) *afterRun {
	a := &afterRun{next: next, control: time.Second, match: match, release: make(chan struct{})}
	t.Cleanup(func() { close(a.release) })
	return a
}

func (a *afterRun) ControlTimeout() time.Duration { return a.control }

func (a *afterRun) Run(ctx context.Context, cmd sandbox.Command) error {
	err := a.next.Run(ctx, cmd)
	if a.match(cmd) {
		<-a.release
	}
	return err
}

var (
	isAssets = func(c sandbox.Command) bool { return strings.Contains(c.Script, `printf '%s\0' "$f"`) }
	isRemove = func(c sandbox.Command) bool {
		return strings.Contains(c.Script, "removed, but $t could not be deleted")
	}
)

// returnsWithin runs fn and fails the test when it has not returned within
// limit: loose, for operations expected near their 1 s control deadline.
func returnsWithin(t *testing.T, limit time.Duration, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		t.Fatalf("the operation did not return within %s", limit)
		return nil
	}
}

// TestBridgeRunnerNeverReturns: for every command that Stage, WithPrune,
// WithVerify and Unstage send, a Runner that runs it and then never returns
// fails the operation with ErrTransport within the control deadline (1 s),
// the previous copy intact when the command was the
// transfer, and nothing replayed.
func TestBridgeRunnerNeverReturns(t *testing.T) {
	stage.SetMaxEmbeddedCarry(t, 1) // the carry travels in a command of its own
	cases := []struct {
		name  string
		match func(sandbox.Command) bool
		run   func(ctx context.Context, b *stage.Bridge, root, src string) error
		// kept: the previous copy must still be there, unchanged
		kept bool
		// done: the command's work is complete once it has reported its
		// renames (the publish, the remove), so the operation succeeds;
		// only the deletion of the old copy, outside the control step,
		// is left to the next sweep
		done func(t *testing.T, root string)
	}{
		{"probe", isProbe, restage(), true, nil},
		{"send", isTransfer, restage(), true, nil},
		{"carry", isCarry, restage(), true, nil},
		{"publish", isPublish, restage(), false, func(t *testing.T, root string) {
			assert.Equal(t, "2", readFile(t, filepath.Join(root, "a", "f")), "the publish reported success without the new copy")
		}},
		{"fetch", isFetch, restage(stage.WithVerify()), false, nil},
		{"assets", isAssets, restage(stage.WithPrune()), false, nil},
		{"remove", isRemove, func(ctx context.Context, b *stage.Bridge, root, _ string) error {
			return stage.Unstage(ctx, b, root, "a")
		}, false, func(t *testing.T, root string) {
			_, err := os.Lstat(filepath.Join(root, "a"))
			assert.ErrorIs(t, err, fs.ErrNotExist, "the unstage reported success with the asset still there")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			src := t.TempDir()
			build(t, src, "f=1", "g=same", "h=same too")
			root := filepath.Join(dir, "rt")
			local := sandbox.Local(dir)
			_, err := stage.Stage(t.Context(), stage.NewBridge(local), root, []stage.Asset{{Name: "a", Source: src}, {Name: "old", Source: src}})
			require.NoError(t, err)
			build(t, src, "f=2")

			r := newAfterRun(t, local, c.match)
			b := stage.NewBridge(r, stage.WithControlTimeout(time.Second), stage.TwoSessions())
			start := time.Now()
			err = returnsWithin(t, 20*time.Second, func() error { return c.run(t.Context(), b, root, src) })
			if c.done != nil {
				require.NoError(t, err)
				c.done(t, root)
			} else {
				require.ErrorIs(t, err, sandbox.ErrTransport)
			}
			assert.Less(t, time.Since(start), 15*time.Second)
			if c.kept {
				assert.Equal(t, "1", readFile(t, filepath.Join(root, "a", "f")), "the previous copy changed")
				assert.Equal(t, "same", readFile(t, filepath.Join(root, "a", "g")))
			}
		})
	}
}

// restage stages src again as asset a (changed since the first stage),
// with opts.
func restage(opts ...stage.Option) func(ctx context.Context, b *stage.Bridge, root, src string) error {
	return func(ctx context.Context, b *stage.Bridge, root, src string) error {
		_, err := stage.Stage(ctx, b, root, []stage.Asset{{Name: "a", Source: src}}, opts...)
		return err
	}
}

// sleeper runs a matched command as "sleep 60" (through the real Runner,
// which honours its context) and has a 1 s control deadline of its own.
type sleeper struct {
	next  sandbox.Runner
	match func(sandbox.Command) bool
}

func (s sleeper) ControlTimeout() time.Duration { return time.Second }

func (s sleeper) Run(ctx context.Context, cmd sandbox.Command) error {
	if s.match(cmd) {
		cmd.Script = "sleep 60"
	}
	return s.next.Run(ctx, cmd)
}

// TestBridgeHonoursRunnersControlTimeout: a Runner with a 1 s control
// deadline of its own (remote.Host with Config.ControlTimeout) bounds
// every control step of a Bridge made without options.
func TestBridgeHonoursRunnersControlTimeout(t *testing.T) {
	for name, run := range map[string]func(ctx context.Context, b *stage.Bridge, root string) error{
		"Control": func(ctx context.Context, b *stage.Bridge, _ string) error {
			return b.Control(ctx, sandbox.Command{Script: "true"})
		},
		"Probe": func(ctx context.Context, b *stage.Bridge, root string) error {
			_, err := b.Probe(ctx, root, []string{"a"})
			return err
		},
		"Assets": func(ctx context.Context, b *stage.Bridge, root string) error {
			_, err := b.Assets(ctx, root)
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			b := stage.NewBridge(sleeper{next: sandbox.Local(dir), match: func(sandbox.Command) bool { return true }})
			start := time.Now()
			err := returnsWithin(t, 40*time.Second, func() error { return run(t.Context(), b, filepath.Join(dir, "rt")) })
			require.ErrorIs(t, err, sandbox.ErrTransport)
			assert.Less(t, time.Since(start), 15*time.Second)
		})
	}
	t.Run("shorter option wins", func(t *testing.T) {
		b := stage.NewBridge(sleeper{next: sandbox.Local(t.TempDir())}, stage.WithControlTimeout(200*time.Millisecond))
		assert.Equal(t, 200*time.Millisecond, b.ControlTimeout())
		b = stage.NewBridge(sleeper{next: sandbox.Local(t.TempDir())}, stage.WithControlTimeout(10*time.Second))
		assert.Equal(t, time.Second, b.ControlTimeout(), "the Runner's shorter deadline applies")
	})
}

// cutAfter runs matched commands with their stdout cut after n bytes, and
// then fails them as a dropped connection does (a plain error).
type cutAfter struct {
	next  sandbox.Runner
	match func(sandbox.Command) bool
	n     int64
}

func (c cutAfter) Run(ctx context.Context, cmd sandbox.Command) error {
	if !c.match(cmd) {
		return c.next.Run(ctx, cmd)
	}
	if cmd.Stdout != nil {
		w := cmd.Stdout
		left := c.n
		cmd.Stdout = writerFunc(func(p []byte) (int, error) {
			k := min(int64(len(p)), left)
			left -= k
			if k > 0 {
				if _, err := w.Write(p[:k]); err != nil {
					return 0, err
				}
			}
			return len(p), nil
		})
	}
	if cmd.Stdin != nil {
		cmd.Stdin = io.LimitReader(cmd.Stdin, c.n)
	}
	_ = c.next.Run(ctx, cmd)
	return errors.New("read tcp: connection reset by peer")
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestBridgeCutIsTransport cuts each command of a stage after a few bytes
// (its stdout and stdin), then fails it as a dropped connection: always
// ErrTransport, and the previous copy stays.
func TestBridgeCutIsTransport(t *testing.T) {
	for name, m := range map[string]func(sandbox.Command) bool{"probe": isProbe, "send": isTransfer, "publish": isPublish, "fetch": isFetch} {
		for _, n := range []int64{0, 10, 600} {
			t.Run(fmt.Sprintf("%s/%d", name, n), func(t *testing.T) {
				dir := t.TempDir()
				src := t.TempDir()
				build(t, src, "f=1")
				root := filepath.Join(dir, "rt")
				local := sandbox.Local(dir)
				_, err := stage.Stage(t.Context(), stage.NewBridge(local), root, []stage.Asset{{Name: "a", Source: src}})
				require.NoError(t, err)
				build(t, src, "f=2")
				_, err = stage.Stage(t.Context(), stage.NewBridge(cutAfter{next: local, match: m, n: n}, stage.WithControlTimeout(2*time.Second)), root, []stage.Asset{{Name: "a", Source: src}}, stage.WithVerify())
				if name == "publish" && err == nil {
					// Cut after the publish reported its renames: the
					// new copy is in place, which is a success.
					assert.Equal(t, "2", readFile(t, filepath.Join(root, "a", "f")))
					return
				}
				require.ErrorIs(t, err, sandbox.ErrTransport)
				if name != "publish" && name != "fetch" {
					assert.Equal(t, "1", readFile(t, filepath.Join(root, "a", "f")))
				}
				_, err = os.Stat(filepath.Join(root, "a"))
				require.NoError(t, err, "the asset is gone")
			})
		}
	}
}
