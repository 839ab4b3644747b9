package workspace_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

// TestKilledHostDirReplaced SIGKILLs a host in the one window where a
// Restore has removed a local directory the sandbox replaced by a file,
// and has not yet renamed the sandbox's file (made beside it first) over
// it. The next Restore completes the replacement: the agent's file is in
// the work tree, nothing is reported Kept, and no temporary file stays.
func TestKilledHostDirReplaced(t *testing.T) {
	if os.Getenv("WORKSPACE_KILL_MODE") != "" {
		t.Skip("child process")
	}
	requireProc(t)
	for _, kind := range []string{"plain", "git"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
			if kind == "git" {
				initRepo(t, e.local, map[string]string{"a": "1\n", "d/x": "x\n", "d/e/y": "y\n"})
			} else {
				write(t, e.local, "a", "1\n")
				write(t, e.local, "d/x", "x\n")
				write(t, e.local, "d/e/y", "y\n")
			}
			state := filepath.Join(t.TempDir(), "state") // a plain directory's rounds are kept there
			r, err := workspace.Prepare(ctx(t), e.spec, workspace.WithStateDir(state))
			require.NoError(t, err)
			require.NoError(t, os.RemoveAll(filepath.Join(e.remote, "d")))
			write(t, e.remote, "d", "agent\n")
			if kind == "git" {
				git(t, e.remote, "add", "-A")
				git(t, e.remote, "commit", "-q", "-m", "agent")
			}

			cmd := killAtMark(t, "WORKSPACE_KILL_MODE=replace-dir", "WORKSPACE_KILL_ID="+r.ID(), "WORKSPACE_KILL_LOCAL="+e.local,
				"WORKSPACE_KILL_REMOTE="+e.remote, "WORKSPACE_KILL_STATE="+state)
			_ = cmd.Wait() // killed: the error is the signal
			_, err = os.Lstat(filepath.Join(e.local, "d"))
			require.ErrorIs(t, err, os.ErrNotExist, "the child was killed after the directory went and before the file came")

			r2, err := workspace.Reopen(ctx(t), e.spec, r.ID(), workspace.WithStateDir(state))
			require.NoError(t, err)
			res, err := r2.Restore(ctx(t))
			require.NoError(t, err)
			assert.Empty(t, res.Kept, "the agent's file must not be taken for a local deletion")
			assert.Equal(t, "agent\n", read(t, e.local, "d"))
			assert.Equal(t, "1\n", read(t, e.local, "a"))
			ents, err := os.ReadDir(e.local)
			require.NoError(t, err)
			for _, f := range ents {
				assert.False(t, strings.HasPrefix(f.Name(), ".airlock-tmp-"), "temporary file %s left", f.Name())
			}
		})
	}
}

// TestSweepReplaceRecords plants the journal of a dead restore with
// replacement records (see TestKilledHostDirReplaced) beside ones the
// sweep must not complete: the local path there again, a path out of the
// work tree, a temporary file in another directory, a record cut short.
// Only the first kind is renamed; every other temporary file is removed,
// and nothing outside the work tree is touched.
func TestSweepReplaceRecords(t *testing.T) {
	requireProc(t)
	dead, _, _, _ := owners(t)
	e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
	write(t, e.local, "a", "1\n")
	state := filepath.Join(t.TempDir(), "state")
	r, err := workspace.Prepare(ctx(t), e.spec, workspace.WithStateDir(state))
	require.NoError(t, err)

	tmp := map[string]string{}
	for _, k := range []string{"done", "there", "out", "elsewhere", "cut"} {
		dir := "."
		if k == "elsewhere" {
			dir = "sub"
		}
		tmp[k] = filepath.ToSlash(filepath.Join(dir, workspace.TmpNameOf(dead)))
		write(t, e.local, tmp[k], k+"\n")
	}
	write(t, e.local, "there/keep", "mine\n")
	require.NoError(t, workspace.WriteJournal(filepath.Join(e.local, ".airlock"), dead, ".", "sub",
		"/"+tmp["done"], "done",
		"/"+tmp["there"], "there",
		"/"+tmp["out"], "../out",
		"/"+tmp["elsewhere"], "elsewhere",
		"/"+tmp["cut"]))

	r2, err := workspace.Reopen(ctx(t), e.spec, r.ID(), workspace.WithStateDir(state))
	require.NoError(t, err)
	_, err = r2.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, "done\n", read(t, e.local, "done"))
	assert.Equal(t, "mine\n", read(t, e.local, "there/keep"))
	assert.False(t, exists(filepath.Dir(e.local), "out"), "a record led out of the work tree")
	assert.False(t, exists(e.local, "elsewhere"))
	for k, p := range tmp {
		assert.False(t, exists(e.local, p), "the temporary file of %q stayed", k)
	}
	ents, err := os.ReadDir(filepath.Join(e.local, ".airlock"))
	require.NoError(t, err)
	for _, f := range ents {
		assert.False(t, strings.HasPrefix(f.Name(), "writes-"), "the journal %s stayed", f.Name())
	}
}
