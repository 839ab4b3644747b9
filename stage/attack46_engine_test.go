package stage_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/sandboxtest"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
)

// sandboxtest.EngineError is what docker prints on the exec client's stdout, with
// exit 126, when it cannot start the exec (a container stopped mid-exec
// and started again).
// longEngineError46 is an engine's error longer than a tar header block
// (512 bytes), which the fetch's tar reader refuses before the stream
// ends.
var longEngineError46 = sandboxtest.EngineError + ": " + strings.Repeat("exec: \"/bin/sh\": stat /bin/sh: no such file or directory; ", 12)

// TestStageEngineErrorOnStdout: every stage command through an engine that
// fails before it reaches the sandbox, printing its error where the
// command's reply should be, fails with the Runner's transport failure:
// the probe (Stage over NewBridge and over Over, with and without
// WithVerify), the send command once the probe went through, and the
// fetch of WithVerify. Unstage too. The same words from a sandbox whose
// command ended normally are still its broken protocol.
func TestStageEngineErrorOnStdout(t *testing.T) {
	for name, target := range map[string]func(sandbox.Runner) stage.Target{
		"Bridge": func(r sandbox.Runner) stage.Target { return stage.NewBridge(r) },
		"Over":   func(r sandbox.Runner) stage.Target { return stage.Over(r) },
	} {
		for _, verify := range []bool{false, true} {
			t.Run(name+map[bool]string{false: "", true: "/verify"}[verify], func(t *testing.T) {
				src := t.TempDir()
				build(t, src, "f=x", "d/g=y")
				var opts []stage.Option
				if verify {
					opts = append(opts, stage.WithVerify())
				}
				_, err := stage.Stage(t.Context(), target(sandboxtest.DeadEngine(t, sandboxtest.EngineError)), filepath.Join(t.TempDir(), "rt"), []stage.Asset{{Name: "a", Source: src}}, opts...)
				t.Log(err)
				sandboxtest.AssertEngineTransport(t, err)
			})
		}
	}
	for name, match := range map[string]func(sandbox.Command) bool{"send": isSetup, "fetch": isFetch} {
		t.Run(name, func(t *testing.T) {
			dir, src := t.TempDir(), t.TempDir()
			build(t, src, "f=x", "d/g=y")
			dead := sandboxtest.DeadEngine(t, sandboxtest.EngineError)
			if name == "fetch" {
				dead = sandboxtest.DeadEngine(t, longEngineError46)
			}
			r := &scriptedRunner{next: sandbox.Local(dir), match: match, do: dead.Run}
			root := filepath.Join(dir, "rt")
			_, err := stage.Stage(t.Context(), stage.NewBridge(r), root, []stage.Asset{{Name: "a", Source: src}}, stage.WithVerify())
			t.Log(err)
			sandboxtest.AssertEngineTransport(t, err)
			n := 0
			for _, c := range r.commands() {
				if match(c) {
					n++
				}
			}
			assert.Equal(t, 1, n, "the failed command ran once")
		})
	}
	t.Run("Unstage", func(t *testing.T) {
		err := stage.Unstage(t.Context(), stage.Over(sandboxtest.DeadEngine(t, sandboxtest.EngineError)), filepath.Join(t.TempDir(), "rt"), "a")
		t.Log(err)
		sandboxtest.AssertEngineTransport(t, err)
	})
	// The same words printed by a sandbox whose commands ran and ended
	// normally are its broken protocol (ErrProtocol, not retryable): only
	// the run's end, not the text, makes them the transport's.
	for name, match := range map[string]func(sandbox.Command) bool{"probe": isProbe, "send": isSetup, "fetch": isFetch} {
		t.Run("printed by the sandbox/"+name, func(t *testing.T) {
			dir, src := t.TempDir(), t.TempDir()
			build(t, src, "f=x")
			r := &scriptedRunner{next: sandbox.Local(dir), match: match, do: func(ctx context.Context, cmd sandbox.Command) error {
				cmd.Script = "echo '" + sandboxtest.EngineError + "'; cat >/dev/null"
				return sandbox.Local(dir).Run(ctx, cmd)
			}}
			_, err := stage.Stage(t.Context(), stage.NewBridge(r), filepath.Join(dir, "rt"), []stage.Asset{{Name: "a", Source: src}}, stage.WithVerify())
			t.Log(err)
			require.Error(t, err)
			assert.ErrorIs(t, err, sandbox.ErrProtocol)
			assert.False(t, sandbox.Retryable(err))
		})
	}
}

// TestStageCarryReply: the carry command that runs on its own (a long
// plan, a sandbox that publishes by a command of its own) through an
// engine that fails before it reaches the sandbox is the transport's
// failure; a carry command that ran and ended normally with a reply that
// breaks the protocol is ErrProtocol, not a retryable transport failure
// (the host stopped the command for its reply, and took the failure that
// followed for the cause).
func TestStageCarryReply(t *testing.T) {
	stage.SetMaxEmbeddedCarry(t, 1)
	for _, c := range []struct {
		name string
		do   func(t *testing.T, dir string) func(context.Context, sandbox.Command) error
		want func(t *testing.T, err error)
	}{
		{"dead engine", func(t *testing.T, _ string) func(context.Context, sandbox.Command) error {
			return sandboxtest.DeadEngine(t, sandboxtest.EngineError).Run
		}, func(t *testing.T, err error) {
			sandboxtest.AssertEngineTransport(t, err)
		}},
		{"broken reply", func(_ *testing.T, dir string) func(context.Context, sandbox.Command) error {
			return func(ctx context.Context, cmd sandbox.Command) error {
				cmd.Script, cmd.Stdin = "echo 'not a hash line'; exec sleep 30", nil
				return sandbox.Local(dir).Run(ctx, cmd)
			}
		}, func(t *testing.T, err error) {
			require.Error(t, err)
			assert.ErrorIs(t, err, sandbox.ErrProtocol)
			assert.NotErrorIs(t, err, sandbox.ErrTransport)
			assert.False(t, sandbox.Retryable(err))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, src := t.TempDir(), t.TempDir()
			root := filepath.Join(dir, "rt")
			build(t, src, "a=alpha", "d/b=bravo", "d/c=charlie", "e=echo")
			r := &scriptedRunner{next: sandbox.Local(dir), match: func(sandbox.Command) bool { return false }}
			b := stage.NewBridge(r, stage.TwoSessions())
			_, err := stage.Stage(t.Context(), b, root, []stage.Asset{{Name: "x", Source: src}})
			require.NoError(t, err)
			build(t, src, "a=ALPHA")
			r.mu.Lock()
			r.match, r.do = isCarry, c.do(t, dir)
			r.mu.Unlock()
			_, err = stage.Stage(t.Context(), b, root, []stage.Asset{{Name: "x", Source: src}})
			t.Log(err)
			c.want(t, err)
			assert.Equal(t, "alpha", readFile(t, filepath.Join(root, "x", "a")), "the old copy stays")
			carries := 0
			for _, cmd := range r.commands() {
				if isCarry(cmd) {
					carries++
				}
			}
			require.Equal(t, 1, carries, "the carry ran on its own")
		})
	}
}
