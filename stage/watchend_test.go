package stage_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/stage"
)

// TestWatchEndLine: an ArmAtEnd command's end line never reaches its
// Stderr, whatever the script wrote there before.
func TestWatchEndLine(t *testing.T) {
	for _, script := range []string{"true", "printf 'a\\nb' >&2", "printf 'airlock-command' >&2", "echo airlock-command-end-not >&2; exit 3"} {
		var out strings.Builder
		x := stage.Watch(t.Context(), stage.LocalRunner(t.TempDir()), stage.Command{Script: script, Stderr: &out}, stage.WatchOptions{Op: "test", ArmAtEnd: true})
		err := x.Wait()
		want := strings.TrimPrefix(strings.TrimPrefix(script, "printf '"), "echo ")
		switch script {
		case "true":
			require.NoError(t, err)
			assert.Empty(t, strings.TrimSpace(out.String()))
		case "echo airlock-command-end-not >&2; exit 3":
			var ee *stage.ExitError
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
