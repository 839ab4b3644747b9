package enginetest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/enginetest"
)

// TestContainer checks the harness's own promises: the image has the
// tools the protocol needs (sh, tar, sha256sum, git that runs), the
// container has no network and runs as User in Workdir, a kill stops
// everything in it but keeps its files, and Start brings it back.
func TestContainer(t *testing.T) {
	c := enginetest.StartContainer(t, enginetest.Docker)
	assert.Equal(t, []string{"docker", "exec", "-i", c.ID()}, c.Argv())
	out := c.Sh(t, `id -u; pwd; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; printf x | sha256sum; git --version >/dev/null && echo git-ok
cd "$(mktemp -d)" && git init -q && echo hi > f && git add f && git -c user.name=a -c user.email=a@b commit -qm m && git bundle create -q ../b.bundle HEAD && git fsck --no-progress && echo commit-ok
tar -cf - f | tar -tf -`)
	assert.Equal(t, "1000\n"+enginetest.Workdir+"\nlo\n"+
		"2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881  -\ngit-ok\ncommit-ok\nf\n", out)

	c.Sh(t, `echo kept > kept && sleep 1000 >/dev/null 2>&1 &`)
	require.NoError(t, c.Kill())
	_, err := exec.Command("docker", "exec", c.ID(), "true").CombinedOutput()
	require.Error(t, err, "a killed container runs nothing")
	c.Start(t)
	assert.Equal(t, "kept\n", c.Sh(t, `cat kept`))
	assert.NotContains(t, c.Sh(t, `ps -o args`), "sleep 1000", "the kill ended every process")
}

// TestImageReused checks that a second build of the image, as a second
// test binary would run it, finds the tag instead of importing again: the
// tag names the content.
func TestImageReused(t *testing.T) {
	tag := enginetest.Docker.Image(t)
	assert.True(t, strings.HasPrefix(tag, "airlock-enginetest:"), tag)
	id, err := exec.Command("docker", "image", "inspect", "--format", "{{.Id}} {{.Created}}", tag).Output()
	require.NoError(t, err)
	again, err := enginetest.BuildImage("docker")
	require.NoError(t, err)
	assert.Equal(t, tag, again)
	idAgain, err := exec.Command("docker", "image", "inspect", "--format", "{{.Id}} {{.Created}}", tag).Output()
	require.NoError(t, err)
	assert.Equal(t, string(id), string(idAgain), "the image was imported again")
}

// TestPodmanSkips: the podman helpers skip, naming podman, where it is
// not installed.
func TestPodmanSkips(t *testing.T) {
	if _, err := exec.LookPath("podman"); err == nil {
		t.Skip("podman is installed here: TestContainer's promises would need a podman run")
	}
	ok := t.Run("inner", func(t *testing.T) {
		enginetest.StartContainer(t, enginetest.Podman)
		t.Error("StartContainer returned without podman")
	})
	assert.True(t, ok, "a missing podman skips, never fails")
}

// TestBwrap checks the sandbox BwrapArgs makes: the work directory is
// writable, nothing else is; no network, no host home, no /etc, no
// capability, a PID namespace of its own, an empty environment, and of
// /etc only the alternatives links.
func TestBwrap(t *testing.T) {
	work := t.TempDir()
	secret := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(secret, []byte("s3cret"), 0o600))
	argv := enginetest.Bwrap(t, work)
	script := `echo ok > here
cat "$1" 2>/dev/null && echo read-secret
ls /home 2>/dev/null || ls /root 2>/dev/null && echo saw-home
ls /etc
touch /usr/x /x /tmp/../y 2>/dev/null && echo wrote-outside
tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '
grep CapEff /proc/self/status
echo "pid $$"; env | sort | tr '\n' ' '`
	cmd := exec.Command(argv[0], append(argv[1:], "sh", "-c", script, "sh", secret)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LEAK=host"}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, "alternatives\nlo\nCapEff:\t0000000000000000\npid 2\nHOME="+work+" PATH=/usr/bin:/bin PWD="+work+" TMPDIR=/tmp ", string(out))
	b, err := os.ReadFile(filepath.Join(work, "here"))
	require.NoError(t, err)
	assert.Equal(t, "ok\n", string(b))
}
