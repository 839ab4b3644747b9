package remote_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/sshdtest"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage/remote"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
)

// bigEnvValue is a value of the largest size one variable named name may
// have, nearly every line of it one byte long, with quotes, backslashes,
// invalid UTF-8, a line that looks like the prelude's terminator and
// trailing newlines.
func bigEnvValue(name string) string {
	var sb strings.Builder
	tail := "'\"\\ \xff\xfe $HOME `x` __airlock_env_end\n__airlock_env_end\n\n\n"
	max := sandbox.MaxEnvEntryBytes - len(name) - 2
	for i := 0; sb.Len() < max-len(tail)-2; i++ {
		sb.WriteByte("a'\\\"$\r\t"[i%7])
		sb.WriteByte('\n')
	}
	for sb.Len() < max-len(tail) {
		sb.WriteByte('z')
	}
	sb.WriteString(tail)
	return sb.String()
}

// testEnvDelivery: a variable of sandbox.MaxEnvEntryBytes with some 65,000
// newlines arrives byte-exact within the control deadline (the old prelude
// rebuilt the string per line: minutes, then "Argument list too long"),
// and the script's own stdin starts exactly after the environment; values
// over the bounds are refused before anything runs.
func testEnvDelivery(t *testing.T, h *remote.Host, dir string) {
	t.Run("Largest", func(t *testing.T) {
		v := bigEnvValue("BIG")
		require.Equal(t, sandbox.MaxEnvEntryBytes, len("BIG")+len(v)+2)
		require.Greater(t, strings.Count(v, "\n"), 50000)
		var out bytes.Buffer
		// Control: under the control deadline.
		err := h.Control(t.Context(), sandbox.Command{
			Script: `printf %s "$BIG"; printf '|%s|' "$SMALL"; cat`,
			Env:    map[string]string{"BIG": v, "SMALL": "s\n"},
			Stdin:  strings.NewReader("stdin\n"), Stdout: &out,
		})
		require.NoError(t, err)
		require.True(t, out.String() == v+"|s\n|stdin\n", "the value arrived altered (%d bytes of %d)", out.Len(), len(v)+11)
	})
	t.Run("ManyAtTheTotalBound", func(t *testing.T) {
		env := map[string]string{}
		total := 0
		for i := 0; total+(100<<10) <= sandbox.MaxEnvBytes; i++ {
			k := fmt.Sprintf("V%d", i)
			env[k] = strings.Repeat(fmt.Sprintf("%d\n", i), 50<<10)
			total += len(k) + len(env[k]) + 2
		}
		var out bytes.Buffer
		err := h.Control(t.Context(), sandbox.Command{Script: `for k in $(env | sed -n 's/^\(V[0-9]*\)=.*/\1/p' | sort); do eval "printf '%s' \"\$$k\"" | cksum; done`, Env: env, Stdout: &out})
		require.NoError(t, err)
		assert.Equal(t, len(env), strings.Count(out.String(), "\n"))
	})
	t.Run("WorstContentAtTheTotalBound", func(t *testing.T) {
		// Newlines and quotes cost the most on the wire: still within the
		// control deadline at the bounds.
		env := map[string]string{}
		for i := range sandbox.MaxEnvBytes / sandbox.MaxEnvEntryBytes {
			k := fmt.Sprintf("W%d", i)
			env[k] = strings.Repeat("\n'", (sandbox.MaxEnvEntryBytes-len(k)-2)/2)
		}
		var out bytes.Buffer
		err := h.Control(t.Context(), sandbox.Command{Script: `printf %s "$W0" | cksum; printf %s "$W7" | wc -c`, Env: env, Stdout: &out})
		require.NoError(t, err)
		var want bytes.Buffer
		c := exec.Command("sh", "-c", `printf %s "$W0" | cksum; printf %s "$W7" | wc -c`)
		c.Env = []string{"W0=" + env["W0"], "W7=" + env["W7"]}
		c.Stdout = &want
		require.NoError(t, c.Run())
		assert.Equal(t, want.String(), out.String())
	})
	over := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"EntryOverBound", map[string]string{"BIG": strings.Repeat("x\n", (sandbox.MaxEnvEntryBytes-3)/2)}, "sandbox.MaxEnvEntryBytes"},
		{"TotalOverBound", func() map[string]string {
			env := map[string]string{}
			for i := range 9 {
				env[fmt.Sprintf("V%d", i)] = strings.Repeat("y", 120<<10)
			}
			return env
		}(), "sandbox.MaxEnvBytes"},
		{"NUL", map[string]string{"A": "a\x00b"}, "NUL"},
		{"Reserved", map[string]string{"__airlock_l": "x"}, "the prelude's own"},
	}
	for _, c := range over {
		t.Run(c.name, func(t *testing.T) {
			marker := filepath.Join(dir, "marker-"+c.name)
			err := h.Run(t.Context(), sandbox.Command{Script: "touch " + marker, Env: c.env})
			require.Error(t, err)
			assert.ErrorContains(t, err, c.want)
			assert.ErrorContains(t, err, "nothing was run")
			var ee *sandbox.ExitError
			assert.False(t, errors.As(err, &ee), "refused before running, not a failed command: %v", err)
			assert.False(t, errors.Is(err, sandbox.ErrTransport), "%v", err)
			_, serr := os.Lstat(marker)
			assert.ErrorIs(t, serr, os.ErrNotExist, "the script must not have run")
		})
	}
	t.Run("Random", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(18, 10))
		alphabet := []byte("ab'\"\\$`\n\r\t !*?;&|(){}[]<>#~=%\xff\xc3\xa9")
		for round := range 10 {
			env := map[string]string{}
			for i := range 1 + rng.IntN(5) {
				b := make([]byte, rng.IntN(300))
				for j := range b {
					if rng.IntN(8) == 0 {
						b[j] = byte(1 + rng.IntN(255)) // any byte but NUL
					} else {
						b[j] = alphabet[rng.IntN(len(alphabet))]
					}
				}
				env[fmt.Sprintf("R%d", i)] = string(b)
			}
			var out bytes.Buffer
			script := ""
			for i := range len(env) {
				script += fmt.Sprintf(`printf '%%s\000' "$R%d"; `, i)
			}
			require.NoError(t, h.Control(t.Context(), sandbox.Command{Script: script + "cat", Env: env, Stdin: strings.NewReader("end"), Stdout: &out}))
			var want strings.Builder
			for i := range len(env) {
				want.WriteString(env[fmt.Sprintf("R%d", i)] + "\x00")
			}
			want.WriteString("end")
			require.Equal(t, want.String(), out.String(), "round %d", round)
		}
	})
}

func TestHostEnvDelivery(t *testing.T) {
	srv := remotetest.NewServer(t)
	testEnvDelivery(t, dial(t, srv), srv.Dir())
}

func TestHostEnvDeliverySSHD(t *testing.T) {
	srv := sshdtest.Start(t)
	h, err := remote.Dial(t.Context(), srv.Addr(), srv.Config())
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	testEnvDelivery(t, h, srv.Dir())
}

// FuzzHostEnv: any value without NUL arrives byte-exact.
func FuzzHostEnv(f *testing.F) {
	for _, s := range []string{"", "\n", "'", "a'b\"c\\d\n\n", "\xff\x00", "__airlock_env_end", "$(touch /tmp/x)", "'\"$1\"'", "'\"$__airlock_n\"'"} {
		f.Add(s)
	}
	srv := remotetest.NewServer(f)
	cfg := srv.Config()
	h, err := remote.Dial(f.Context(), srv.Addr(), cfg)
	require.NoError(f, err)
	f.Cleanup(func() { _ = h.Close() })
	f.Fuzz(func(t *testing.T, v string) {
		if strings.ContainsRune(v, 0) || len(v) > sandbox.MaxEnvEntryBytes-4 {
			t.Skip("not a value an environment can carry")
		}
		var out bytes.Buffer
		require.NoError(t, h.Run(t.Context(), sandbox.Command{Script: `printf %s "$V"; cat`, Env: map[string]string{"V": v}, Stdin: strings.NewReader("|in"), Stdout: &out}))
		require.Equal(t, v+"|in", out.String())
	})
}
