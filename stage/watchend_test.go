package stage_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWatchEndLine: an ArmAtEnd command's end line never reaches its
// Stderr, whatever the script wrote there before.
func TestWatchEndLine(t *testing.T) {
	for _, script := range []string{"true", "printf 'a\\nb' >&2", "printf 'airlock-command' >&2", "echo airlock-command-end-not >&2; exit 3"} {
		var out strings.Builder
		x := sandbox.Watch(t.Context(), sandbox.Local(t.TempDir()), sandbox.Command{Script: script, Stderr: &out}, sandbox.WatchOptions{Op: "test", ArmAtEnd: true})
		err := x.Wait()
		want := strings.TrimPrefix(strings.TrimPrefix(script, "printf '"), "echo ")
		switch script {
		case "true":
			require.NoError(t, err)
			assert.Empty(t, strings.TrimSpace(out.String()))
		case "echo airlock-command-end-not >&2; exit 3":
			var ee *sandbox.ExitError
			require.ErrorAs(t, err, &ee)
			assert.Equal(t, 3, ee.Status)
			assert.Equal(t, "airlock-command-end-not", strings.TrimSpace(out.String()))
		default:
			require.NoError(t, err)
			want = strings.ReplaceAll(strings.TrimSuffix(want, "' >&2"), `\n`, "\n")
			assert.Equal(t, want, strings.TrimSpace(out.String()), script)
		}
	}
}

// pieces writes its stderr in the given pieces, then blocks until the test
// ends: a Runner that never returns.
type pieces struct {
	parts   []string
	release chan struct{}
}

func (p pieces) Run(_ context.Context, cmd sandbox.Command) error {
	for _, s := range p.parts {
		if _, err := cmd.Stderr.Write([]byte(s)); err != nil {
			return err
		}
	}
	<-p.release
	return nil
}

// TestWatchEndLineSplit: the end line is found across writes of any size,
// is never passed on, arms the deadline (the Runner never returns: Wait
// fails with ErrTransport) and leaves every other byte in order.
func TestWatchEndLineSplit(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	for _, parts := range [][]string{
		{"abc\n", "airlock-command-end\n", "tail"},
		{"abc\nairlock-com", "mand-end\ntail"},
		{"abc\na", "i", "rlock-command-end", "\n", "tail"},
		{"abc\nairlock-command-en", "X\n", "airlock-command-end\ntail"},
	} {
		var out strings.Builder
		x := sandbox.Watch(t.Context(), pieces{parts, release}, sandbox.Command{Script: "true", Stderr: &out}, sandbox.WatchOptions{Op: "test", ArmAtEnd: true, Deadline: 100 * time.Millisecond})
		err := x.Wait()
		require.ErrorIs(t, err, sandbox.ErrTransport, "%q", parts)
		want := "abc\ntail"
		if strings.Contains(strings.Join(parts, ""), "en"+"X") {
			want = "abc\nairlock-command-enX\ntail"
		}
		assert.Equal(t, want, out.String(), "%q", parts)
	}
}
