package gitexec

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseVersion(t *testing.T) {
	for in, want := range map[string][2]int{
		"git version 2.39.5":                {2, 39},
		"git version 2.38.0 (Apple Git-14)": {2, 38},
		"git version 2.45.windows.1":        {2, 45},
	} {
		maj, min, ok := ParseVersion(in)
		require.True(t, ok, in)
		assert.Equal(t, want, [2]int{maj, min}, in)
	}
	for _, in := range []string{"", "git version", "hub version 2.1", "git version x.y"} {
		_, _, ok := ParseVersion(in)
		assert.False(t, ok, in)
	}
}

// TestEnvironmentScrubbed: a GIT_DIR of the host process never reaches git.
func TestEnvironmentScrubbed(t *testing.T) {
	t.Setenv("GIT_DIR", "/nonexistent")
	t.Setenv("GIT_CONFIG_PARAMETERS", "'core.hooksPath'='/evil'")
	g := &Git{Dir: t.TempDir()}
	env := strings.Join(g.environ(nil, false), "\n")
	assert.NotContains(t, env, "GIT_DIR=")
	assert.NotContains(t, env, "/evil")
	assert.Contains(t, env, "GIT_CONFIG_GLOBAL=/dev/null")
	err := g.Run(context.Background(), Cmd{Args: []string{"rev-parse", "--git-dir"}})
	assert.Equal(t, 128, Status(err), "no repository is found above the ceiling: %v", err)
}

// TestUserConfig: a command with UserConfig reads the user's global
// configuration; every other command does not, and neither sees a
// GIT_* variable of the host process.
func TestUserConfig(t *testing.T) {
	home := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[core]\n\tautocrlf = true\n"), 0o644))
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Setenv("GIT_DIR", "/nonexistent")
	dir := t.TempDir()
	g := &Git{Dir: dir}
	_, err := g.Output(context.Background(), "init", "-q")
	require.NoError(t, err)
	var out strings.Builder
	require.NoError(t, g.Run(context.Background(), Cmd{Args: []string{"config", "core.autocrlf"}, Stdout: &out, UserConfig: true}))
	assert.Equal(t, "true\n", out.String())
	_, err = g.Output(context.Background(), "config", "core.autocrlf")
	assert.Equal(t, 1, Status(err), "the isolated command read the global file: %v", err)
	env := strings.Join(g.environ(nil, true), "\n")
	assert.NotContains(t, env, "GIT_DIR=")
	assert.NotContains(t, env, "GIT_CONFIG_GLOBAL=")

	// A user whose global configuration is another file.
	alt := filepath.Join(home, "alt.gitconfig")
	require.NoError(t, os.WriteFile(alt, []byte("[core]\n\tautocrlf = input\n"), 0o644))
	t.Setenv("GIT_CONFIG_GLOBAL", alt)
	out.Reset()
	require.NoError(t, g.Run(context.Background(), Cmd{Args: []string{"config", "core.autocrlf"}, Stdout: &out, UserConfig: true}))
	assert.Equal(t, "input\n", out.String())
	_, err = g.Output(context.Background(), "config", "core.autocrlf")
	assert.Equal(t, 1, Status(err), "the isolated command read the user's file: %v", err)
}

// TestCancelKillsChildren: a cancelled command ends with the processes
// git started (a filter driver, here an alias's shell), which would
// otherwise hold its output open until they exit.
func TestCancelKillsChildren(t *testing.T) {
	g := &Git{Dir: t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := g.Run(ctx, Cmd{Args: []string{"-c", "alias.hang=!sleep 30", "hang"}})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 5*time.Second, "the alias's sleep held the command")
}

// TestErrorUnwrapsHostFailure: a git command that failed on a full disk
// (or a quota, a read-only file system, an I/O error) is that errno to
// errors.Is, in every spelling git uses; a write failure whose cause git
// does not name is ErrWrite; any other failure is none of them, and a
// name git quotes in its message decides nothing.
func TestErrorUnwrapsHostFailure(t *testing.T) {
	hostErrnos := []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EROFS, syscall.EIO, syscall.EFBIG, syscall.EACCES}
	for _, c := range []struct {
		msg   string
		errno syscall.Errno // 0: none
		write bool          // ErrWrite
	}{
		{"fatal: write error: No space left on device", syscall.ENOSPC, true},
		{"fatal: sha1 file '/r/.git/objects/pack/tmp_idx_9iQIZw' write error. Out of diskspace", syscall.ENOSPC, true},
		{"fatal: sha1 file '/r/.git/index.lock' write error: No space left on device", syscall.ENOSPC, true},
		{"error: file write error: No space left on device\nfatal: unable to write loose object file", syscall.ENOSPC, true},
		{"error: unable to write file: Disk quota exceeded", syscall.EDQUOT, true},
		{"fatal: Unable to create '/r/.git/index.lock': Read-only file system", syscall.EROFS, false},
		{"fatal: read error: Input/output error", syscall.EIO, false},
		{"fatal: write failure on 'x': File too large", syscall.EFBIG, true},
		{"error: insufficient permission for adding an object to repository database .git/objects\nfatal: unable to open '/r/.git/objects/pack/tmp_pack_x': Permission denied", syscall.EACCES, false},
		{"fatal: unable to write new index file", 0, true},
		{"error: short write", 0, true},
		{"fatal: failed to write commit object", 0, true},
		{"error: error when closing loose object file", 0, true},
		{"fatal: write error: Broken pipe", 0, false},
		{"fatal: pack has bad object at offset 12", 0, false},
		{"error: invalid path 'No space left on device'\nfatal: unable to add 'x: No space left on device' to index", 0, false},
		{"error: invalid path 'write error/unable to write'", 0, false},
		{"remote: fatal: write error: No space left on device", 0, false}, // not this git's own line
		{"hint: the write error. Out of diskspace", 0, false},
	} {
		err := error(&Error{Args: []string{"index-pack"}, Status: 128, Stderr: c.msg})
		for _, e := range hostErrnos {
			if e == c.errno {
				assert.ErrorIs(t, err, e, c.msg)
			} else {
				assert.NotErrorIs(t, err, e, c.msg)
			}
		}
		assert.Equal(t, c.write, errors.Is(err, ErrWrite), "ErrWrite for %q", c.msg)
	}
}

// slowWriter takes its writes, sleeping once when it holds at least at
// bytes: a reader that falls behind git, past WaitDelay, after git has
// exited (git writes its last bytes into the pipe's buffer and exits).
type slowWriter struct {
	n, at, calls int
	paused       bool
	pause        time.Duration
}

func (w *slowWriter) Write(p []byte) (int, error) {
	w.calls++
	if !w.paused && w.n+len(p) > w.at { // the write that reaches at: the last one may hold all the rest
		w.paused = true
		time.Sleep(w.pause)
	}
	w.n += len(p)
	return len(p), nil
}

// TestSlowReaderGetsAllOutput: git's output reaches a writer that is not
// a file whole, however long after git's exit the writer takes it (it
// used to be cut WaitDelay after the exit, and the run reported success).
func TestSlowReaderGetsAllOutput(t *testing.T) {
	dir := t.TempDir()
	g := &Git{Dir: dir}
	_, err := g.Output(t.Context(), "init", "-q")
	require.NoError(t, err)
	const n = 4000
	line := strings.Repeat("e", 40) + "\n" // a missing object: "<id> missing"
	var full bytes.Buffer
	require.NoError(t, g.Run(t.Context(), Cmd{Args: []string{"cat-file", "--batch"}, Stdin: strings.NewReader(strings.Repeat(line, n)), Stdout: &full}))
	require.Equal(t, n*len(strings.Repeat("e", 40)+" missing\n"), full.Len())

	w := &slowWriter{pause: 3 * waitDelay, at: full.Len() - 48<<10} // git exits during the pause, with up to 48 KiB left in the pipe
	start := time.Now()
	require.NoError(t, g.Run(t.Context(), Cmd{Args: []string{"cat-file", "--batch"}, Stdin: strings.NewReader(strings.Repeat(line, n)), Stdout: w}))
	assert.Equal(t, full.Len(), w.n, "every byte, %d writes", w.calls)
	assert.GreaterOrEqual(t, time.Since(start), 3*waitDelay)
}
