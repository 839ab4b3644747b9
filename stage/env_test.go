package stage_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/stage"
)

// TestLocalRunnerEnvBounds (issue 18, defect 10): a variable of
// stage.MaxEnvEntryBytes with tens of thousands of newlines arrives
// byte-exact; one byte more, or a total over stage.MaxEnvBytes, is refused
// by stage.CheckEnv's error before anything runs.
func TestLocalRunnerEnvBounds(t *testing.T) {
	dir := t.TempDir()
	r := stage.LocalRunner(dir)
	max := stage.MaxEnvEntryBytes - len("BIG") - 2
	v := strings.Repeat("'\\\n", max/3) + strings.Repeat("\xff", max%3)
	require.Len(t, v, max)
	var out bytes.Buffer
	require.NoError(t, r.Run(t.Context(), stage.Command{Script: `printf %s "$BIG"`, Env: map[string]string{"BIG": v}, Stdout: &out}))
	require.True(t, out.String() == v, "the value arrived altered")
	require.NoError(t, stage.CheckEnv(map[string]string{"BIG": v}))

	total := map[string]string{}
	for _, k := range []string{"A", "B", "C", "D", "E", "F", "G", "H", "I"} {
		total[k] = strings.Repeat("y", 120<<10)
	}
	for name, env := range map[string]map[string]string{
		"Entry": {"BIG": v + "x"},
		"Total": total,
		"NUL":   {"A": "\x00"},
		"Name":  {"A-B": "x"},
	} {
		t.Run(name, func(t *testing.T) {
			marker := filepath.Join(dir, "marker-"+name)
			cerr := stage.CheckEnv(env)
			require.Error(t, cerr)
			err := r.Run(t.Context(), stage.Command{Script: "touch " + marker, Env: env})
			require.Error(t, err)
			assert.ErrorContains(t, err, cerr.Error())
			assert.ErrorContains(t, err, "nothing was run")
			var ee *stage.ExitError
			assert.False(t, errors.As(err, &ee), "%v", err)
			_, serr := os.Lstat(marker)
			assert.ErrorIs(t, serr, os.ErrNotExist, "the script must not have run")
		})
	}
}
