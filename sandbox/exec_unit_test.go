package sandbox_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
)

// TestExecEnvByteExact sends awkward and large values: each arrives
// byte-exact, and none is in any command line on this machine or in the
// initial environment (/proc/PID/environ) of any process outside the
// script's own process group: not the client's, not the wrapper's.
func TestExecEnvByteExact(t *testing.T) {
	big := strings.Repeat("x'\"\n\\$(no)`no`", 100<<10/16)
	for name, prefix := range execPrefixes(t) {
		t.Run(name, func(t *testing.T) {
			secret := "exec-secret-" + rand.Text()
			env := map[string]string{
				"A_NEWLINES": "\n" + secret + "\nend\n\n",
				"A_QUOTES":   `'"'` + secret + `'\'`,
				"A_BIG":      big + secret,
			}
			var out bytes.Buffer
			done := make(chan error, 1)
			pidFile := filepath.Join(t.TempDir(), "pid")
			go func() {
				_, _, err := run(t, sandbox.Exec(prefix...), sandbox.Command{
					Script: `echo $$ >"$PF"; sleep 1; printf '%s\037' "$A_NEWLINES" "$A_QUOTES" "$A_BIG"`,
					Env:    map[string]string{"A_NEWLINES": env["A_NEWLINES"], "A_QUOTES": env["A_QUOTES"], "A_BIG": env["A_BIG"], "PF": pidFile},
					Stdout: &out,
				})
				done <- err
			}()
			pg := readPid(t, pidFile)
			var found []string
			for scanning := true; scanning; {
				found = append(found, scanProc(t, secret, pg)...)
				select {
				case err := <-done:
					require.NoError(t, err)
					scanning = false
				case <-time.After(5 * time.Millisecond):
				}
			}
			assert.Empty(t, found, "the secret is in a command line or an environment outside the script's group")
			got := strings.Split(out.String(), "\037")
			require.Len(t, got, 4, "the script printed %d bytes", out.Len())
			assert.Equal(t, env["A_NEWLINES"], got[0])
			assert.Equal(t, env["A_QUOTES"], got[1])
			assert.True(t, env["A_BIG"] == got[2], "the 100 KiB value arrived as %d bytes, want %d", len(got[2]), len(env["A_BIG"]))
		})
	}
}

// scanProc returns the processes on this machine whose command line holds
// needle, and those outside group pg whose initial environment does.
func scanProc(t *testing.T, needle string, pg int) []string {
	ents, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var found []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && bytes.Contains(b, []byte(needle)) {
			found = append(found, "cmdline of "+e.Name())
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !bytes.Contains(b, []byte(needle)) {
			continue
		}
		st, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:]))
		if len(f) < 3 || f[2] != strconv.Itoa(pg) {
			found = append(found, "environ of "+e.Name()+" (group "+f[2]+")")
		}
	}
	return found
}

// TestExecNoRecord: a client that ends without the completion record is a
// transport failure whatever its exit status; exit 1 in particular is not
// taken for the script's.
func TestExecNoRecord(t *testing.T) {
	for _, c := range []struct {
		name   string
		prefix []string
		want   string
	}{
		{"exit 0", []string{"sh", "-c", "exit 0", "sh"}, "exited 0 without the command's completion record"},
		{"exit 1", []string{"sh", "-c", "exit 1", "sh"}, "ended without the command's completion record (exit status 1)"},
		{"exit 0 mid-stream", []string{"sh", "-c", `"$@" >/dev/null 2>&1 & sleep 0.3; exit 0`, "sh"}, "exited 0 without the command's completion record"},
		// A client that cannot be started is ErrBadCommand, not a missing
		// record: TestExecClientNotStarted.
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := run(t, sandbox.Exec(c.prefix...), sandbox.Command{Script: "sleep 1; echo late"})
			require.Error(t, err)
			assert.ErrorIs(t, err, sandbox.ErrTransport)
			var ee *sandbox.ExitError
			assert.False(t, errors.As(err, &ee), "a missing record was taken for the script's exit: %v", err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
	t.Run("FromExec returns nil without running", func(t *testing.T) {
		r := sandbox.FromExec(func(context.Context, []string, io.Reader, io.Writer, io.Writer) error { return nil })
		_, _, err := run(t, r, sandbox.Command{Script: "exit 0"})
		assert.ErrorIs(t, err, sandbox.ErrTransport)
	})
	t.Run("fails after the record", func(t *testing.T) {
		_, _, err := run(t, sandbox.Exec("sh", "-c", `"$@"; exit 1`, "sh"), sandbox.Command{Script: "exit 0"})
		assert.ErrorIs(t, err, sandbox.ErrTransport)
		assert.Contains(t, err.Error(), "failed after the command ended")
	})
}

// TestExecNoRecordRedactsEnv: the error of a command without its
// completion record quotes the client's short stdout with the values of
// Command.Env redacted (an outside attack: a token the script printed
// reached the error, and so the host's logs); short values stay.
func TestExecNoRecordRedactsEnv(t *testing.T) {
	dropsStderr := sandbox.Exec("sh", "-c", `"$@" 2>/dev/null; exit 1`, "sh")
	env := map[string]string{"TOKEN": "ghp_atk48bLEAK", "TOKEN_PREFIX": "ghp_atk", "PORT": "8080"}
	_, _, err := run(t, dropsStderr, sandbox.Command{Script: `echo "token=$TOKEN prefix=$TOKEN_PREFIX port=$PORT"`, Env: env})
	require.ErrorIs(t, err, sandbox.ErrTransport)
	assert.Contains(t, err.Error(), `its stdout was "token=<Env TOKEN> prefix=<Env TOKEN_PREFIX> port=8080"`)
	assert.NotContains(t, err.Error(), "LEAK")
}

// TestExecForgedRecord: a script printing records with another nonce (or a
// malformed one with no nonce at all) has them passed through as output,
// byte-exact, and its own exit status stands.
func TestExecForgedRecord(t *testing.T) {
	forged := "airlock-exec-0123456789abcdef0123456789abcdef: end 0 \n" +
		"airlock-exec-: end 0 \nairlock-exec-" + strings.Repeat("z", 40)
	for name, prefix := range execPrefixes(t) {
		t.Run(name, func(t *testing.T) {
			out, stderr, err := run(t, sandbox.Exec(prefix...), sandbox.Command{
				Script: `printf '%s' "$F"; printf '%s' "$F" >&2; exit 3`, Env: map[string]string{"F": forged},
			})
			var ee *sandbox.ExitError
			require.ErrorAs(t, err, &ee)
			assert.Equal(t, 3, ee.Status)
			assert.Equal(t, forged, out)
			assert.Equal(t, forged, stderr)
		})
	}
}

// TestExecNonceOutOfReach: the nonce that tags the records is in no argv,
// in neither the script's environment nor its parent's command line: a
// script (or a nested call) cannot forge a record by accident.
func TestExecNonceOutOfReach(t *testing.T) {
	f := &fakeSDK{}
	out, _, err := run(t, sandbox.FromExec(f.exec), sandbox.Command{
		Script: `env; cat /proc/$$/cmdline /proc/$PPID/cmdline /proc/$PPID/environ 2>/dev/null; echo`,
	})
	require.NoError(t, err)
	argvs, stdins := f.calls()
	require.Len(t, argvs, 1)
	_, rest, ok := strings.Cut(stdins[0], "__airlock_n=")
	require.True(t, ok, "the prelude holds no nonce: %q", stdins[0])
	nonce, _, _ := strings.Cut(rest, "\n")
	require.Len(t, nonce, 32)
	assert.NotContains(t, strings.Join(argvs[0], " "), nonce, "the nonce is in the wrapper's argv")
	assert.NotContains(t, out, nonce, "the script can see the nonce")
}

// TestExecLargeScript: a 200 KiB script runs, and travels on stdin, not in
// the argv.
func TestExecLargeScript(t *testing.T) {
	script := "v=0\n" + strings.Repeat("v=$((v+1))\n", 200<<10/11) + `echo "$v"; printf '%s' "$E"`
	want := strconv.Itoa(200<<10/11) + "\ne'\nv"
	f := &fakeSDK{}
	out, _, err := run(t, sandbox.FromExec(f.exec), sandbox.Command{Script: script, Env: map[string]string{"E": "e'\nv"}})
	require.NoError(t, err)
	assert.Equal(t, want, out)
	argvs, _ := f.calls()
	require.Len(t, argvs, 1)
	assert.Less(t, len(strings.Join(argvs[0], " ")), 64<<10, "the script travelled in the argv")
	out, _, err = run(t, sandbox.Exec(), sandbox.Command{Script: script, Env: map[string]string{"E": "e'\nv"}})
	require.NoError(t, err)
	assert.Equal(t, want, out)
}

// TestExecRefusesTTY: a TTY flag in the argv is refused before anything
// runs.
func TestExecRefusesTTY(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	for _, flag := range []string{"-t", "--tty", "-it", "-ti", "--tty=true"} {
		_, _, err := run(t, sandbox.Exec("sh", "-c", `touch "$0"; exec "$@"`, marker, flag), sandbox.Command{Script: "exit 0"})
		require.Error(t, err, flag)
		assert.Contains(t, err.Error(), fmt.Sprintf("%q asks sh for a TTY", flag))
		assert.NoFileExists(t, marker)
	}
	// After "--" the words are the sandbox command's own.
	_, _, err := run(t, sandbox.Exec("sh", "-c", `exec "$@"`, "--", "-t"), sandbox.Command{Script: "exit 0"})
	assert.NotContains(t, fmt.Sprint(err), "TTY")
}

// TestExecMissingDir: a missing Dir is fs.ErrNotExist, naming it; nothing
// runs.
func TestExecMissingDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "missing")
	out, _, err := run(t, sandbox.Exec(), sandbox.Command{Script: "echo ran", Dir: dir})
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.Contains(t, err.Error(), dir)
	assert.Empty(t, out)
}

// TestExecReservedEnv: names of the wrapper's own variables are refused.
func TestExecReservedEnv(t *testing.T) {
	out, _, err := run(t, sandbox.Exec(), sandbox.Command{Script: "echo ran", Env: map[string]string{"__airlock_n": "x"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "__airlock_n")
	assert.Empty(t, out)
}

// TestExecStderrWithoutNewline: stderr that does not end with a newline,
// and stderr that ends with part of a tag, arrive byte-exact.
func TestExecStderrWithoutNewline(t *testing.T) {
	for _, s := range []string{"no newline", "airlock-exec-", "airlock-", "x\n\n\x00\xff"} {
		_, stderr, err := run(t, sandbox.Exec(), sandbox.Command{Script: `printf '%s' "$S" >&2`, Env: map[string]string{"S": strings.ReplaceAll(s, "\x00", "")}})
		require.NoError(t, err)
		assert.Equal(t, strings.ReplaceAll(s, "\x00", ""), stderr)
	}
	// Binary stdout, byte-exact.
	in := make([]byte, 1<<20)
	_, _ = rand.Read(in)
	out, _, err := run(t, sandbox.Exec(), sandbox.Command{Script: "cat", Stdin: bytes.NewReader(in)})
	require.NoError(t, err)
	assert.True(t, bytes.Equal(in, []byte(out)), "binary stdin/stdout round trip")
}

// TestExecNoRecordSaysWhy: the error of a client that failed quotes the
// end of what it said on stderr.
func TestExecNoRecordSaysWhy(t *testing.T) {
	_, stderr, err := run(t, sandbox.Exec("sh", "-c", `echo 'Error from server (NotFound): pods "agent-7" not found' >&2; exit 1`, "sh"), sandbox.Command{Script: "exit 0"})
	assert.ErrorIs(t, err, sandbox.ErrTransport)
	assert.Contains(t, err.Error(), `pods \"agent-7\" not found`)
	assert.Contains(t, stderr, "agent-7", "the client's stderr still reaches Command.Stderr")
}
