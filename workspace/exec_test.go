package workspace_test

import (
	"context"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

// TestExecRoundTrip runs the no-remote-git round trip over sandbox.Exec
// (the plain sh -c prefix, and a prefix process in front of it) and over
// FromExec: a dirty work tree goes in, an agent's commit and edits come
// back.
func TestExecRoundTrip(t *testing.T) {
	for name, newRunner := range map[string]func() sandbox.Runner{
		"plain":  func() sandbox.Runner { return sandbox.Exec() },
		"prefix": func() sandbox.Runner { return sandbox.Exec("sh", "-c", `exec "$@"`, "sh") },
		"FromExec": func() sandbox.Runner {
			return sandbox.FromExec(func(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
				c := exec.CommandContext(ctx, argv[0], argv[1:]...) // a stand-in for an SDK's exec call
				c.Stdin, c.Stdout, c.Stderr = struct{ io.Reader }{stdin}, stdout, stderr
				c.WaitDelay = time.Second
				return c.Run()
			})
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return inDir{newRunner(), dir} })
			initRepo(t, e.local, map[string]string{"tracked.txt": "v1\n", "gone.txt": "g\n"})
			write(t, e.local, "tracked.txt", "v2 local dirty\n")
			write(t, e.local, "untracked.txt", "new\n")
			require.NoError(t, os.Remove(e.local+"/gone.txt"))

			r, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			assert.Equal(t, "v2 local dirty\n", read(t, e.remote, "tracked.txt"))
			assert.Equal(t, git(t, e.local, "status", "--porcelain"), git(t, e.remote, "status", "--porcelain"))

			git(t, e.remote, "add", "tracked.txt", "untracked.txt")
			git(t, e.remote, "commit", "-q", "-m", "agent commit")
			write(t, e.remote, "nested/only.txt", "sandbox only\n")
			write(t, e.remote, ".airlock/never.txt", "runtime\n")

			res, err := r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, 1, res.Commits)
			assert.Equal(t, "agent commit\n", git(t, e.local, "log", "-1", "--format=%s"))
			assert.Equal(t, "v2 local dirty\n", read(t, e.local, "tracked.txt"))
			assert.Equal(t, "sandbox only\n", read(t, e.local, "nested/only.txt"))
			assert.False(t, exists(e.local, ".airlock/never.txt"), "the runtime directory came back")
		})
	}
}
