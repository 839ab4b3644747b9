package stage_test

// Attack tests written from go doc only: stage.Over and stage.Sandbox
// over Runners that hang, lie, fail or nest.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
)

// a23Runner runs fn for every command.
type a23Runner func(ctx context.Context, cmd sandbox.Command) error

func (f a23Runner) Run(ctx context.Context, cmd sandbox.Command) error { return f(ctx, cmd) }

// a23Timeouter is a Runner that reports a control timeout.
type a23Timeouter struct {
	sandbox.Runner
	d time.Duration
}

func (r a23Timeouter) ControlTimeout() time.Duration { return r.d }

// a23Source is a small skill directory.
func a23Source(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(src, "SKILL.md"), []byte("skill\n"), 0o644))
	return src
}

// a23Stage stages one asset through sb and fails the test when Stage does
// not return within limit.
func a23Stage(t *testing.T, sb stage.Sandbox, limit time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := stage.Stage(t.Context(), sb, "/nonexistent-a23/rt", []stage.Asset{{Name: "skills", Source: a23Source(t)}})
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		t.Fatalf("Stage did not return within %s", limit)
		return nil
	}
}

// TestAttack23OverHangingRunner: a Runner that never returns and ignores
// its context. Stage through Over(r, WithControlTimeout(d)) gives up after
// about d with a retryable transport error.
func TestAttack23OverHangingRunner(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	hang := a23Runner(func(ctx context.Context, cmd sandbox.Command) error { <-release; return nil })
	sb := stage.Over(hang, stage.WithControlTimeout(300*time.Millisecond))
	start := time.Now()
	err := a23Stage(t, sb, 3*time.Second)
	require.Error(t, err)
	assert.ErrorIs(t, err, sandbox.ErrTransport)
	assert.NotErrorIs(t, err, sandbox.ErrProtocol)
	assert.True(t, sandbox.Retryable(err))
	assert.Less(t, time.Since(start), 2*time.Second, "the control deadline was not kept")
	assert.Equal(t, 300*time.Millisecond, sandbox.ControlDeadline(sb))
}

// TestAttack23OverLyingRunner: a Runner that answers every command with
// garbage and exit 0: a protocol error, never a transport error, never a
// success.
func TestAttack23OverLyingRunner(t *testing.T) {
	for name, out := range map[string]string{
		"garbage":  "\x00\xff not the protocol \n",
		"empty":    "",
		"huge":     string(make([]byte, 8<<20)),
		"nonsense": "ok\nok\nok\n",
	} {
		t.Run(name, func(t *testing.T) {
			lie := a23Runner(func(ctx context.Context, cmd sandbox.Command) error {
				if cmd.Stdin != nil {
					_, _ = io.Copy(io.Discard, cmd.Stdin) // what the host sends is irrelevant here
				}
				if cmd.Stdout != nil {
					_, err := io.WriteString(cmd.Stdout, out)
					return err
				}
				return nil
			})
			err := a23Stage(t, stage.Over(lie, stage.WithControlTimeout(2*time.Second)), 4*time.Second)
			require.Error(t, err, "a sandbox that answers garbage staged successfully")
			assert.NotErrorIs(t, err, sandbox.ErrTransport, "%v", err)
			assert.False(t, sandbox.Retryable(err), "%v", err)
		})
	}
}

// TestAttack23OverFailingRunner: a Runner whose Run fails without an exit
// status (a lost connection as a plain error): the Bridge reports a
// transport failure.
func TestAttack23OverFailingRunner(t *testing.T) {
	for _, cause := range []error{io.ErrUnexpectedEOF, errors.New("connection reset by peer"), context.DeadlineExceeded} {
		t.Run(cause.Error(), func(t *testing.T) {
			fail := a23Runner(func(ctx context.Context, cmd sandbox.Command) error { return cause })
			err := a23Stage(t, stage.Over(fail), 3*time.Second)
			require.Error(t, err)
			assert.ErrorIs(t, err, sandbox.ErrTransport, "%v", err)
			assert.NotErrorIs(t, err, sandbox.ErrProtocol)
		})
	}
}

// TestAttack23OverNesting: Over of an Over keeps what the inner one
// offers (FileReader, the shorter control deadline), and odd control
// timeouts of the Runner (zero, negative, over the cap) give a deadline
// in (0, MaxControlTimeout].
func TestAttack23OverNesting(t *testing.T) {
	inner := stage.Over(&readerRunner{Runner: sandbox.Local(t.TempDir()), timeout: 2 * time.Second})
	outer := stage.Over(inner)
	_, ok := outer.(sandbox.FileReader)
	assert.True(t, ok, "Over(Over(FileReader)) lost ReadFile")
	assert.Equal(t, 2*time.Second, sandbox.ControlDeadline(outer))
	for _, d := range []time.Duration{0, -time.Second, time.Hour, time.Nanosecond} {
		sb := stage.Over(a23Timeouter{sandbox.Local(t.TempDir()), d})
		got := sandbox.ControlDeadline(sb)
		assert.Greater(t, got, time.Duration(0), "runner timeout %v", d)
		assert.LessOrEqual(t, got, sandbox.MaxControlTimeout, "runner timeout %v", d)
		if d > 0 && d < sandbox.MaxControlTimeout {
			assert.Equal(t, d, got)
		}
	}
}

// TestAttack23OverNilRunner: Over(nil) is a programmer's error; using it
// should fail with an error (or at worst a panic in the caller's
// goroutine, which it can recover), not bring the whole host process down
// with a nil dereference inside a goroutine of the Bridge. Run in a child
// process, since such a panic cannot be recovered.
func TestAttack23OverNilRunner(t *testing.T) {
	if os.Getenv("AIRLOCK_A23_CHILD") == "over-nil" {
		sb := stage.Over(nil)
		err := func() (err error) {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("panic: %v", p)
				}
			}()
			_, err = stage.Stage(t.Context(), sb, "/nonexistent-a23/rt", []stage.Asset{{Name: "skills", Source: a23Source(t)}})
			return err
		}()
		require.Error(t, err)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAttack23OverNilRunner$", "-test.count=1")
	cmd.Env = append(os.Environ(), "AIRLOCK_A23_CHILD=over-nil")
	out, err := cmd.CombinedOutput()
	assert.NoError(t, err, "Stage over Over(nil) crashed the process:\n%s", out)
}
