package stage_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
)

// envRunner adds env to every command.
type envRunner struct {
	next sandbox.Runner
	env  map[string]string
}

func (r envRunner) Run(ctx context.Context, cmd sandbox.Command) error {
	merged := map[string]string{}
	for k, v := range r.env {
		merged[k] = v
	}
	for k, v := range cmd.Env {
		merged[k] = v
	}
	cmd.Env = merged
	return r.next.Run(ctx, cmd)
}

// TestBridgeExchangePublish puts an mv that offers --exchange first on the
// sandbox's PATH: the Bridge detects it once and publishes a re-stage with
// one exchange; the sandbox ends with exactly the new copy.
func TestBridgeExchangePublish(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	require.NoError(t, os.Mkdir(bin, 0o755))
	log := filepath.Join(dir, "mv.log")
	realMv := "/bin/mv"
	// The stand-in swaps through a third name: not atomic, but it follows
	// the same script path as coreutils' renameat2(RENAME_EXCHANGE).
	fake := `#!/bin/sh
case "$1" in
--help) echo "  --exchange  exchange source and destination"; exit 0;;
esac
case "$1 $2" in
"-T --exchange") echo "exchange $3 $4" >> ` + log + `; ` + realMv + ` "$3" "$3.x" && ` + realMv + ` "$4" "$3" && ` + realMv + ` "$3.x" "$4"; exit $?;;
esac
exec ` + realMv + ` "$@"
`
	require.NoError(t, os.WriteFile(filepath.Join(bin, "mv"), []byte(fake), 0o755))
	r := envRunner{next: sandbox.Local(dir), env: map[string]string{"PATH": bin + ":" + os.Getenv("PATH")}}
	b := stage.NewBridge(r)
	root := filepath.Join(dir, "rt")
	src := t.TempDir()
	build(t, src, "a=1")
	_, err := stage.Stage(t.Context(), b, root, []stage.Asset{{Name: "x", Source: src}})
	require.NoError(t, err)
	_, err = os.Stat(log)
	assert.ErrorIs(t, err, os.ErrNotExist, "nothing to exchange with on the first publish")
	build(t, src, "a=2")
	_, err = stage.Stage(t.Context(), b, root, []stage.Asset{{Name: "x", Source: src}})
	require.NoError(t, err)
	got, err := os.ReadFile(log)
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(string(got), "exchange "), string(got))
	assert.Equal(t, "2", readFile(t, filepath.Join(root, "x", "a")))
	assert.Equal(t, []string{"x"}, listNoTemp(t, root))
}

// noFiles is a Runner with the FileReader capability that finds no file,
// so the Bridge's probe runs no command and the publish's setup must learn
// the sandbox's tools.
type noFiles struct{ sandbox.Runner }

func (noFiles) ReadFile(context.Context, string, int64) ([]byte, error) { return nil, os.ErrNotExist }

// TestBridgeSetupNamesMissingTool: a sandbox without tar fails the first
// publish before anything is created, with an error that names tar.
func TestBridgeSetupNamesMissingTool(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	require.NoError(t, os.Mkdir(bin, 0o755))
	for _, tool := range []string{"mkdir", "mv", "rm", "cat", "chmod", "grep"} {
		p, err := exec.LookPath(tool)
		require.NoError(t, err)
		require.NoError(t, os.Symlink(p, filepath.Join(bin, tool)))
	}
	r := envRunner{next: sandbox.Local(dir), env: map[string]string{"PATH": bin}}
	root := filepath.Join(dir, "rt")
	src := t.TempDir()
	build(t, src, "a=1")
	_, err := stage.Stage(t.Context(), stage.NewBridge(noFiles{r}), root, []stage.Asset{{Name: "x", Source: src}})
	require.ErrorIs(t, err, stage.ErrTool)
	assert.NotErrorIs(t, err, sandbox.ErrTransport, "a missing tool is no transport failure")
	assert.False(t, sandbox.Retryable(err), "trying again does not install tar")
	assert.ErrorContains(t, err, "the sandbox lacks tar")
	_, err = os.Stat(root)
	assert.ErrorIs(t, err, os.ErrNotExist, "nothing was created")
}

// TestBridgeDeltaWithoutSHA256Sum: a sandbox that cannot check a carried
// copy (no sha256sum) gets every file again.
func TestBridgeDeltaWithoutSHA256Sum(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	require.NoError(t, os.Mkdir(bin, 0o755))
	for _, tool := range []string{"tar", "mkdir", "mv", "rm", "cat", "chmod", "grep", "ls"} { // ls: the publish's guard identifies directories by inode without stat
		p, err := exec.LookPath(tool)
		require.NoError(t, err)
		require.NoError(t, os.Symlink(p, filepath.Join(bin, tool)))
	}
	b := stage.NewBridge(envRunner{next: sandbox.Local(dir), env: map[string]string{"PATH": bin}})
	root := filepath.Join(dir, "rt")
	src := t.TempDir()
	build(t, src, "a=1", "b=2", "c=3")
	_, err := stage.Stage(t.Context(), b, root, []stage.Asset{{Name: "x", Source: src}})
	require.NoError(t, err)
	build(t, src, "a=changed")
	rt, err := stage.Stage(t.Context(), b, root, []stage.Asset{{Name: "x", Source: src}}, stage.WithVerify())
	require.NoError(t, err)
	assert.Equal(t, 3, rt.Assets[0].Sent, "nothing can be checked in the sandbox, so nothing is carried")
	assert.Equal(t, "changed", readFile(t, filepath.Join(root, "x", "a")))
}
