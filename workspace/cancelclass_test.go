package workspace_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/shell"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

// TestCancelledRestoreIsNotHostile: a Restore cancelled by its caller
// while the host's git checks what the sandbox sent (the bundle's
// verification and heads, its objects, the snapshot) ends with the
// context's error, never ErrHostile (the sandbox did nothing wrong), and
// the next Restore brings everything. The host's git is a wrapper that
// stops on one command in the local repository until the test cancels
// (an outside attack found these four misreported, by timing).
func TestCancelledRestoreIsNotHostile(t *testing.T) {
	realGit, err := exec.LookPath("git")
	require.NoError(t, err)
	path := os.Getenv("PATH")
	for _, tc := range []struct{ name, args string }{
		{"bundle verify", " bundle verify "},
		{"bundle heads", " bundle list-heads "},
		{"objects", " rev-list --objects --quiet "},
		{"snapshot", " rev-list --parents -n 1 "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
			r := prepareOneFile(t, e, "git")
			write(t, e.remote, "a", "agent\n")
			git(t, e.remote, "commit", "-q", "-am", "agent")
			write(t, e.remote, "new", "untracked\n")

			bin, mark := t.TempDir(), filepath.Join(t.TempDir(), "reached")
			wrapper := "#!/bin/sh\ncase \"$PWD\" in " + shell.Quote(e.local) + "|" + shell.Quote(e.local) + "/*)\n" +
				"  case \" $* \" in *" + shell.Quote(tc.args) + "*) : > " + shell.Quote(mark) + "; exec sleep 60 ;; esac ;;\nesac\nexec " + shell.Quote(realGit) + " \"$@\"\n"
			require.NoError(t, os.WriteFile(filepath.Join(bin, "git"), []byte(wrapper), 0o755))
			t.Setenv("PATH", bin+string(os.PathListSeparator)+path)

			c, cancel := context.WithCancel(ctx(t))
			done := make(chan error, 1)
			go func() {
				_, err := r.Restore(c)
				done <- err
			}()
			reached := false
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				if _, err := os.Stat(mark); err == nil {
					reached = true
					break
				}
			}
			cancel()
			err := <-done
			require.True(t, reached, "the Restore never ran git%s on the host (it ended with %v)", tc.args, err)
			require.Error(t, err)
			assert.NotErrorIs(t, err, workspace.ErrHostile)
			assert.NotErrorIs(t, err, sandbox.ErrProtocol)
			assert.ErrorIs(t, err, context.Canceled)
			assert.Equal(t, "1\n", read(t, e.local, "a"), "a cancelled Restore wrote")
			assert.False(t, exists(e.local, "new"), "a cancelled Restore wrote")

			t.Setenv("PATH", path)
			res, err := r.Restore(ctx(t))
			require.NoError(t, err, "the Restore after the cancelled one")
			assert.Equal(t, "agent\n", read(t, e.local, "a"))
			assert.Equal(t, "untracked\n", read(t, e.local, "new"))
			assert.Equal(t, "agent\n", git(t, e.local, "log", "-1", "--format=%s"))
			assert.NotNil(t, res)
		})
	}
}
