package workspace_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

// TestHostRestart prepares in this process and restores in a new one (the
// test binary re-executed), by id only, over every runner. The child
// reaches the sandbox through a runner of its own: a LocalRunner, or for
// remotetest and sshd a new server on the same sandbox directory and a new
// connection (the host's server and connection die with the host).
func TestHostRestart(t *testing.T) {
	if os.Getenv("WORKSPACE_CHILD_ID") != "" {
		t.Skip("child process")
	}
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			for _, rc := range runners {
				t.Run(rc.name, func(t *testing.T) {
					e := newEnv(t, rc.new)
					var opts []workspace.Option
					state := ""
					if kind == "git" {
						initRepo(t, e.local, map[string]string{"a": "1\n"})
					} else {
						write(t, e.local, "a", "1\n")
						state = t.TempDir()
						opts = append(opts, workspace.WithStateDir(state))
					}
					r, err := workspace.Prepare(ctx(t), e.spec, opts...)
					require.NoError(t, err)
					id := r.ID()
					r = nil
					write(t, e.remote, "a", "2\n")
					write(t, e.remote, "new.txt", "new\n")
					if kind == "git" {
						git(t, e.remote, "add", "-A")
						git(t, e.remote, "commit", "-q", "-m", "while the host was down")
						write(t, e.remote, "dirty.txt", "dirty\n")
					}
					cmd := exec.Command(os.Args[0], "-test.run=^TestHostRestartChild$", "-test.count=1", "-test.v")
					cmd.Env = append(os.Environ(), "WORKSPACE_CHILD_ID="+id, "WORKSPACE_CHILD_LOCAL="+e.local,
						"WORKSPACE_CHILD_REMOTE="+e.remote, "WORKSPACE_CHILD_STATE="+state, "WORKSPACE_CHILD_RUNNER="+rc.name)
					out, err := cmd.CombinedOutput()
					require.NoError(t, err, "%s", out)
					assert.Contains(t, string(out), "--- PASS: TestHostRestartChild", "the child did not run: %s", out)
					assert.Equal(t, "2\n", read(t, e.local, "a"))
					assert.Equal(t, "new\n", read(t, e.local, "new.txt"))
					if kind == "git" {
						assert.Equal(t, "while the host was down\n", git(t, e.local, "log", "-1", "--format=%s"))
						assert.Equal(t, "dirty\n", read(t, e.local, "dirty.txt"))
						assert.Equal(t, "?? dirty.txt\n", git(t, e.local, "status", "--porcelain"))
					}
				})
			}
		})
	}
}

// TestHostRestartChild is the restarted host of TestHostRestart.
func TestHostRestartChild(t *testing.T) {
	id := os.Getenv("WORKSPACE_CHILD_ID")
	if id == "" {
		t.Skip("run by TestHostRestart")
	}
	remote := os.Getenv("WORKSPACE_CHILD_REMOTE")
	name := os.Getenv("WORKSPACE_CHILD_RUNNER")
	var runner sandbox.Runner
	for _, rc := range runners {
		if rc.name == name {
			runner = rc.new(t, filepath.Dir(remote))
		}
	}
	require.NotNil(t, runner, "unknown runner %q", name)
	spec := workspace.Spec{Local: os.Getenv("WORKSPACE_CHILD_LOCAL"), Remote: remote, Runner: runner}
	var opts []workspace.Option
	if s := os.Getenv("WORKSPACE_CHILD_STATE"); s != "" {
		opts = append(opts, workspace.WithStateDir(s))
	}
	r, err := workspace.Reopen(ctx(t), spec, id, opts...)
	require.NoError(t, err)
	assert.Equal(t, id, r.ID())
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Subset(t, res.Updated, []string{"a", "new.txt"})
}
