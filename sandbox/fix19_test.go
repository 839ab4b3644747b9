package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestExecTTYFlagShapes: every spelling that asks for a TTY is refused,
// and flags that merely hold the letter t (with a value of their own) are
// not.
func TestExecTTYFlagShapes(t *testing.T) {
	for _, flag := range []string{"-t", "-dit", "-itd", "-tq", "--tty=1", "--tty=yes", "-t=true", "--tty"} {
		_, _, err := run(t, sandbox.Exec("sh", "-c", `shift; exec "$@"`, "engine", flag, "--"), sandbox.Command{Script: "exit 0"})
		require.Error(t, err, flag)
		assert.Contains(t, err.Error(), `"`+flag+`" asks sh for a TTY`)
	}
	// An engine that drops its flags up to "--" and runs the rest.
	engine := []string{"sh", "-c", `while [ "$1" != -- ]; do shift; done; shift; exec "$@"`, "engine"}
	for _, flags := range [][]string{{"-c", "test"}, {"-e", "T=1"}, {"-w", "/tmp"}, {"-d"}, {"-iq"}, {"--tty=false"}, {"--tty=0"}, {"-t=false"}, {"--tmpfs=/t"}, {"-et"}} {
		argv := append(append(slices.Clone(engine), flags...), "--")
		_, _, err := run(t, sandbox.Exec(argv...), sandbox.Command{Script: "exit 0"})
		assert.NoError(t, err, flags)
	}
}

// TestLocalBigScriptFile: a script over 64 KiB runs from a private file
// (mode 0600) that is gone once Run returns, with the same $0 and $@ as a
// small one, and its stdin still delivered.
func TestLocalBigScriptFile(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	probe := `printf '%s|%s|' "$0" "$#"; ls -l "$T" | grep -c '^-rw-------'; cat` + "\n"
	big := probe + "#" + strings.Repeat("x", 200<<10) + "\n"
	var small, large bytes.Buffer
	r := sandbox.Local(t.TempDir())
	env := map[string]string{"T": tmp}
	require.NoError(t, r.Run(context.Background(), sandbox.Command{Script: probe, Env: env, Stdin: strings.NewReader("in"), Stdout: &small}))
	require.NoError(t, r.Run(context.Background(), sandbox.Command{Script: big, Env: env, Stdin: strings.NewReader("in"), Stdout: &large}))
	assert.Equal(t, "/bin/sh|0|0\nin", small.String())
	assert.Equal(t, "/bin/sh|0|1\nin", large.String(), "one 0600 file while the big script runs")
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	assert.Empty(t, left, "the script's file must be removed after Run")
}

// TestOutputWriteErrorStderr: a Command.Stderr that fails (a full disk)
// is returned as such by Local and Exec, naming stderr and the path, and
// is not retryable; the command still ran to its end.
func TestOutputWriteErrorStderr(t *testing.T) {
	full := writerFunc(func([]byte) (int, error) {
		return 0, &os.PathError{Op: "write", Path: "/host/err", Err: syscall.ENOSPC}
	})
	for name, r := range map[string]sandbox.Runner{"Local": sandbox.Local(t.TempDir()), "Exec": sandbox.Exec()} {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err := r.Run(ctx, sandbox.Command{Script: `head -c 100000 /dev/zero >&2; echo done`, Stdout: &out, Stderr: full})
			require.Error(t, err)
			assert.True(t, errors.Is(err, syscall.ENOSPC), "%v", err)
			assert.False(t, errors.Is(err, sandbox.ErrTransport), "%v", err)
			assert.False(t, sandbox.Retryable(err), "%v", err)
			assert.Contains(t, err.Error(), "writing the command's stderr: write /host/err")
			assert.Equal(t, "done\n", out.String())
		})
	}
}
