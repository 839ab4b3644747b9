package sandbox_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLocalRunnerEnvBounds (issue 18, defect 10): a variable of
// sandbox.MaxEnvEntryBytes with tens of thousands of newlines arrives
// byte-exact; one byte more, or a total over sandbox.MaxEnvBytes, is refused
// by sandbox.CheckEnv's error before anything runs.
func TestLocalRunnerEnvBounds(t *testing.T) {
	dir := t.TempDir()
	r := sandbox.Local(dir)
	max := sandbox.MaxEnvEntryBytes - len("BIG") - 2
	v := strings.Repeat("'\\\n", max/3) + strings.Repeat("\xff", max%3)
	require.Len(t, v, max)
	var out bytes.Buffer
	require.NoError(t, r.Run(t.Context(), sandbox.Command{Script: `printf %s "$BIG"`, Env: map[string]string{"BIG": v}, Stdout: &out}))
	require.True(t, out.String() == v, "the value arrived altered")
	require.NoError(t, sandbox.CheckEnv(map[string]string{"BIG": v}))

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
			cerr := sandbox.CheckEnv(env)
			require.Error(t, cerr)
			err := r.Run(t.Context(), sandbox.Command{Script: "touch " + marker, Env: env})
			require.Error(t, err)
			assert.ErrorContains(t, err, cerr.Error())
			assert.ErrorContains(t, err, "nothing was run")
			var ee *sandbox.ExitError
			assert.False(t, errors.As(err, &ee), "%v", err)
			_, serr := os.Lstat(marker)
			assert.ErrorIs(t, serr, os.ErrNotExist, "the script must not have run")
		})
	}
}
