package workspace_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/sshdtest"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage/remote"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
	"github.com/airlockdev/airlock/workspace"
)

// runners is every sandbox Runner the suite runs over. Another runner (an
// SSH one, remotetest) is one more line here.
var runners = []struct {
	name string
	new  func(t *testing.T, dir string) sandbox.Runner
}{
	{"local", func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) }},
	{"remotetest", func(t *testing.T, dir string) sandbox.Runner {
		srv := remotetest.NewServer(t, remotetest.WithDir(dir))
		return dialHost(t, srv.Addr(), srv.Config(), dir)
	}},
	{"sshd", func(t *testing.T, dir string) sandbox.Runner {
		srv := sshdtest.Start(t)
		return dialHost(t, srv.Addr(), srv.Config(), dir)
	}},
}

// dialHost connects a remote.Host whose commands run in dir unless they
// name another directory.
func dialHost(t testing.TB, addr string, cfg remote.Config, dir string) sandbox.Runner {
	t.Helper()
	h, err := remote.Dial(t.Context(), addr, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	return inDir{h, dir}
}

// inDir runs commands in dir by default.
type inDir struct {
	r   sandbox.Runner
	dir string
}

// ControlTimeout passes the wrapped Runner's control deadline on
// (sandbox.ControlTimeouter), as a wrapping Runner should.
func (d inDir) ControlTimeout() time.Duration { return sandbox.ControlDeadline(d.r) }

func (d inDir) Run(ctx context.Context, cmd sandbox.Command) error {
	if cmd.Dir == "" {
		cmd.Dir = d.dir
	}
	return d.r.Run(ctx, cmd)
}

// eachRunner runs fn once per runner, as a subtest.
func eachRunner(t *testing.T, fn func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner)) {
	for _, rc := range runners {
		t.Run(rc.name, func(t *testing.T) { fn(t, rc.new) })
	}
}

// env is a pair of directories: a local work tree and a sandbox directory.
type env struct {
	local, remote string
	spec          workspace.Spec
}

func newEnv(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner) *env {
	t.Helper()
	base := t.TempDir()
	e := &env{local: filepath.Join(base, "local"), remote: filepath.Join(base, "sandbox", "work")}
	require.NoError(t, os.MkdirAll(e.local, 0o755))
	require.NoError(t, os.MkdirAll(filepath.Dir(e.remote), 0o755))
	e.spec = workspace.Spec{Local: e.local, Remote: e.remote, Runner: newRunner(t, filepath.Dir(e.remote))}
	return e
}

var gitEnv = []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=t@example.com",
	"GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_TERMINAL_PROMPT=0", "LC_ALL=C"}

// git runs git in dir and returns its output.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, gitEnv...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v in %s: %s", args, dir, out)
	return string(out)
}

func write(t *testing.T, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
}

func read(t *testing.T, dir, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
	require.NoError(t, err)
	return string(b)
}

func exists(dir, rel string) bool {
	_, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(rel)))
	return err == nil
}

// initRepo makes e.local a repository with one commit of files.
func initRepo(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	git(t, dir, "init", "-q", "-b", "main")
	for k, v := range files {
		write(t, dir, k, v)
	}
	if len(files) > 0 {
		git(t, dir, "add", "-A")
		git(t, dir, "commit", "-q", "-m", "initial")
	}
}

// seed gives dir files: committed in a new repository when kind is
// "git", written as a plain directory otherwise.
func seed(t *testing.T, dir, kind string, files map[string]string) {
	t.Helper()
	if kind == "git" {
		initRepo(t, dir, files)
		return
	}
	for k, v := range files {
		write(t, dir, k, v)
	}
}

func ctx(t *testing.T) context.Context { return t.Context() }

// prepareOneFile gives the local work tree one file, a = "1\n" (committed
// when kind is "git", a plain directory otherwise), and prepares a round.
func prepareOneFile(t *testing.T, e *env, kind string) *workspace.Round {
	t.Helper()
	if kind == "git" {
		initRepo(t, e.local, map[string]string{"a": "1\n"})
	} else {
		write(t, e.local, "a", "1\n")
	}
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	return r
}
