//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
)

// needBox builds a Box on a fresh work directory, skipping the test, with
// the probe's reason, where this machine cannot give the isolation.
func needBox(t *testing.T) *Box {
	t.Helper()
	b, err := New(t.Context(), Config{Work: t.TempDir()})
	var unsupported *UnsupportedError
	if errors.As(err, &unsupported) {
		t.Skipf("bubblewrap cannot make the sandbox here: %v", err)
	}
	require.NoError(t, err)
	return b
}

// TestExample runs the example end to end and checks every claim: each
// escape attempt of the agent failed, for the reason the sandbox gives (not
// a broken fixture: the program checks the planted links and the listener
// from the host first), and the stage, restore and register worked through
// the sandbox. A variable of the host's environment is set, to show that
// bwrap's own environment (readable inside as /proc/1/environ) is empty.
func TestExample(t *testing.T) {
	needBox(t)
	t.Setenv("AIRLOCK_EXAMPLE_HOST_SECRET", "host-env-secret")
	var stdout, stderr bytes.Buffer
	sum, err := run(t.Context(), Options{JSON: true}, &stdout, &stderr)
	require.NoError(t, err, "stderr:\n%s", stderr.String())
	var printed Summary
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &printed))
	assert.Equal(t, *sum, printed)
	assert.NotContains(t, stdout.String(), "airlock-host-secret-", "no byte of the host secret came out")
	assert.NoDirExists(t, sum.Dir, "the temporary directory is removed")

	for _, f := range []string{"--unshare-all", "--die-with-parent", "--new-session", "--clearenv", "--json-status-fd"} {
		assert.Contains(t, sum.Argv, f)
	}
	i := slices.Index(sum.Argv, "--cap-drop")
	require.GreaterOrEqual(t, i, 0)
	assert.Equal(t, "ALL", sum.Argv[i+1])

	want := map[string]string{
		"read-secret":        "No such file or directory",
		"list-home":          "No such file or directory",
		"list-root-home":     "No such file or directory",
		"follow-link-abs":    "No such file or directory",
		"follow-link-rel":    "No such file or directory",
		"write-through-link": "Directory nonexistent",
		"write-host-path":    "Directory nonexistent",
		"write-usr":          "Read-only file system",
		"write-root":         "Read-only file system",
		"remount-usr-rw":     "permission denied",
		"network":            "connect",
		"see-host-process":   "",
		"read-bwrap-environ": "0",
	}
	require.Len(t, sum.Attempts, len(want), "%v", sum.Attempts)
	for name, why := range want {
		res := sum.Attempts[name]
		assert.True(t, strings.HasPrefix(res, "denied: "), "%s: %s", name, res)
		assert.Contains(t, res, why, name)
	}

	assert.Equal(t, SandboxWork+"/ws/.airlock/skills", sum.Staged)
	assert.Equal(t, 5, sum.SkillFiles)
	assert.Equal(t, sum.Staged+"/code-review/SKILL.md", sum.SkillRead)
	assert.Len(t, sum.Commit, 40)
	assert.Equal(t, 1, sum.Commits)
	assert.Equal(t, []string{"CHANGELOG.md", "report.md"}, sum.Restored)
	assert.NotEmpty(t, sum.Attachment)
	assert.Equal(t, int64(len("# Findings\n\nRead "+sum.SkillRead+" in the sandbox.\n")), sum.ByteSize)
	assert.Equal(t, 5, strings.Count(stderr.String(), "\n"), "a probe line and one line per step:\n%s", stderr.String())
}

// without returns args with the flag and its n values removed.
func without(args []string, flag string, n int) []string {
	i := slices.Index(args, flag)
	if i < 0 {
		panic("no flag " + flag)
	}
	return slices.Concat(args[:i], args[i+1+n:])
}

// TestProbeRefusesWeakerSandbox: the probe is what stands between a
// machine that cannot isolate and a silently weaker sandbox. Each flag
// taken away is caught as the guarantee it gives.
func TestProbeRefusesWeakerSandbox(t *testing.T) {
	b := needBox(t)
	every := []string{"--unshare-user-try", "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"}
	cases := []struct {
		name    string
		flag    string // taken away with its n values, and replaced by instead
		n       int
		instead []string
		missing string
	}{
		{"NoCapDrop", "--cap-drop", 1, nil, "capability drop (--cap-drop ALL)"},
		{"WritableRoot", "--remount-ro", 1, nil, "a read-only root (--remount-ro /)"},
		{"SharedNetwork", "--unshare-all", 0, slices.DeleteFunc(slices.Clone(every), func(f string) bool { return f == "--unshare-net" }), "a network namespace (--unshare-net)"},
		{"SharedPIDs", "--unshare-all", 0, slices.DeleteFunc(slices.Clone(every), func(f string) bool { return f == "--unshare-pid" }), "a PID namespace (--unshare-pid)"},
	}
	if os.Getuid() != 0 {
		cases = cases[1:] // without root there is no capability to drop
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			weak := &Box{bwrap: b.bwrap, work: b.work, args: slices.Concat(c.instead, without(b.args, c.flag, c.n))}
			err := weak.probe(t.Context())
			var unsupported *UnsupportedError
			require.ErrorAs(t, err, &unsupported)
			assert.Equal(t, c.missing, unsupported.Missing, "%v", err)
			assert.Contains(t, err.Error(), "never runs with weaker isolation")
		})
	}
	t.Run("Complete", func(t *testing.T) {
		require.NoError(t, b.probe(t.Context()), "the flags as New builds them pass")
	})
	t.Run("MissingBwrap", func(t *testing.T) {
		_, err := New(t.Context(), Config{Bwrap: filepath.Join(t.TempDir(), "bwrap"), Work: t.TempDir()})
		var unsupported *UnsupportedError
		require.ErrorAs(t, err, &unsupported)
		assert.Equal(t, "bwrap", unsupported.Missing)
		assert.ErrorIs(t, err, os.ErrNotExist)
	})
}

// TestStartErrorOrExit: --json-status-fd tells bwrap failing to build the
// sandbox (no exit-code record; a *StartError, a transport failure) from
// a command that ran and exited 1 (its own status, not a StartError).
func TestStartErrorOrExit(t *testing.T) {
	b := needBox(t)
	var stderr bytes.Buffer
	err := b.exec(t.Context(), []string{"sh", "-c", "echo failing >&2; exit 1"}, nil, nil, &stderr)
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 1, ee.ExitCode())
	var se *StartError
	assert.False(t, errors.As(err, &se), "a command's exit 1 is not a start failure: %v", err)
	assert.Equal(t, "failing\n", stderr.String())

	broken := &Box{bwrap: b.bwrap, work: b.work, args: slices.Concat([]string{"--ro-bind", "/nonexistent-airlock", "/x"}, b.args)}
	err = broken.exec(t.Context(), []string{"sh", "-c", "exit 0"}, nil, nil, nil)
	require.ErrorAs(t, err, &se)
	assert.ErrorIs(t, err, sandbox.ErrTransport)
	assert.Contains(t, se.Stderr, "/nonexistent-airlock")
	assert.Contains(t, err.Error(), "bwrap did not start the command")
}

// TestCancelKillsSandbox: cancelling a command ends bwrap and everything
// in its sandbox promptly (killed with its parent), leaving no process
// on the host.
func TestCancelKillsSandbox(t *testing.T) {
	b := needBox(t)
	marker := "airlock-bwrap-cancel-" + strings.ToLower(t.Name())
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := b.exec(ctx, []string{"sh", "-c", "trap '' TERM; (sleep 60; : " + marker + ") & sleep 60; : " + marker}, nil, nil, nil)
	require.Error(t, err)
	assert.Less(t, time.Since(start), 10*time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := hostProcesses(t, marker)
		if len(left) == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "processes left after cancel: %v", left)
		time.Sleep(50 * time.Millisecond)
	}
}

// hostProcesses lists the host processes whose command line holds marker.
func hostProcesses(t *testing.T, marker string) []string {
	t.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	require.NoError(t, err)
	var out []string
	for _, p := range dirs {
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, []byte(marker)) {
			out = append(out, p+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}
