package workspace_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/busyboxuser"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

// sandboxShells are the POSIX shells the sandbox scripts must run under.
var sandboxShells = []struct {
	name string
	argv []string
}{
	{"dash", []string{"dash"}},
	{"busybox", []string{"busybox", "sh"}},
}

// eachShell runs fn once per sandbox shell, as a subtest; a shell that is
// not installed is skipped, by name.
func eachShell(t *testing.T, fn func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner)) {
	for _, sh := range sandboxShells {
		t.Run(sh.name, func(t *testing.T) {
			if _, err := exec.LookPath(sh.argv[0]); err != nil {
				t.Skipf("%s is not installed (Debian: apt-get install dash busybox-static): %v", sh.argv[0], err)
			}
			fn(t, func(t *testing.T, dir string) sandbox.Runner { return busyboxuser.ShellRunner{Argv: sh.argv, Dir: dir} })
		})
	}
}

// TestRoundTripUnderShells runs a round trip, plain and git, with every
// script under dash and under busybox sh (and busybox's tar, find, stat
// and ls): the agent's edits and commits come back, and what must not
// (links out, a hard link, a FIFO, setuid and setgid bits, the runtime
// directory) is refused exactly as under the system's shell.
func TestRoundTripUnderShells(t *testing.T) {
	eachShell(t, func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner) {
		for _, kind := range []string{"git", "plain"} {
			t.Run(kind, func(t *testing.T) {
				e := newEnv(t, newRunner)
				r := prepareOneFile(t, e, kind)
				assert.Equal(t, "1\n", read(t, e.remote, "a"))
				plantHostile(t, e)
				write(t, e.remote, "a", "2 from the agent\n")
				write(t, e.remote, "new dir/it's b", "b\n")
				if kind == "git" {
					git(t, e.remote, "add", "a")
					git(t, e.remote, "commit", "-q", "-m", "agent commit")
				}
				res, err := r.Restore(ctx(t))
				require.NoError(t, err)
				assert.Equal(t, []string{"etc", "fifo", "hard", "sgid", "suid", "up"}, res.Refused)
				assert.Equal(t, []string{sandbox.RuntimeDir + "/evil"}, res.Runtime, "the runtime directory's entries are listed apart")
				assert.NotContains(t, res.Reasons, sandbox.RuntimeDir+"/evil")
				assert.Equal(t, "2 from the agent\n", read(t, e.local, "a"))
				assert.Equal(t, "b\n", read(t, e.local, "new dir/it's b"))
				assert.Equal(t, "fine\n", read(t, e.local, "ok.txt"))
				for _, p := range []string{"etc", "up", "hard", "fifo", sandbox.RuntimeDir + "/evil"} {
					assert.False(t, exists(e.local, p), "%s was written", p)
				}
				fi, err := os.Lstat(filepath.Join(e.local, "suid"))
				require.NoError(t, err)
				assert.Equal(t, os.FileMode(0o755), fi.Mode(), "suid is written without the bit")
				if kind == "git" {
					assert.Equal(t, 1, res.Commits)
					assert.Equal(t, "agent commit\n", git(t, e.local, "log", "-1", "--format=%s"))
				}
				again, err := r.Restore(ctx(t))
				require.NoError(t, err)
				assert.Empty(t, again.Updated, "a second restore changes nothing")
				assert.Empty(t, again.Deleted)
				_, err = workspace.Prepare(ctx(t), e.spec)
				require.NoError(t, err, "a second prepare over the first")
			})
		}
	})
}
