package stage_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/shell"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
)

// The send command publishes in its own session where the sandbox's tar
// stops at its archive's end (GNU tar, this machine's): these tests cut
// that session at the one point where the host decides, between the
// command's report that the stream is extracted and the publish line.

// A command's stdout that calls at (once) when the command reports the
// stream extracted, before the host can see it, is a lineHook for
// shell.ExtractedLine.

// stagedOld stages src (a=old, b=same) into a fresh root through a Bridge,
// then changes a to new in src.
func stagedOld(t *testing.T) (dir, src, root string) {
	dir, src = t.TempDir(), t.TempDir()
	root = filepath.Join(dir, "rt")
	build(t, src, "a=old", "b=same")
	_, err := stage.Stage(t.Context(), stage.NewBridge(sandbox.Local(dir)), root, []stage.Asset{{Name: "x", Source: src}})
	require.NoError(t, err)
	build(t, src, "a=new")
	return dir, src, root
}

// TestInlinePublishCancelledAtExtracted: the caller cancels while the
// command reports the stream extracted: the host never writes the publish
// line, the command moves nothing, the temporary directory is removed and
// the previous copy stays.
func TestInlinePublishCancelledAtExtracted(t *testing.T) {
	dir, src, root := stagedOld(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	local := sandbox.Local(dir)
	var sends atomic.Int32
	r := &scriptedRunner{next: local, match: isTransfer, do: func(ctx context.Context, cmd sandbox.Command) error {
		sends.Add(1)
		require.Contains(t, cmd.Script, shell.PublishLine, "the send command publishes")
		cmd.Stdout = &lineHook{w: cmd.Stdout, line: shell.ExtractedLine, at: cancel}
		return local.Run(ctx, cmd)
	}}
	_, err := stage.Stage(ctx, stage.NewBridge(r), root, []stage.Asset{{Name: "x", Source: src}})
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, int32(1), sends.Load())
	assert.Equal(t, "old", readFile(t, filepath.Join(root, "x", "a")), "nothing may be published")
	assertNoTemp(t, root)
	cmds := r.commands()
	require.NotEmpty(t, cmds)
	assert.True(t, isCleanup(cmds[len(cmds)-1]), "the last command removes the temporary directory")
}

// cutAtExtracted is a command's stdin that ends (EOF) once the command has
// reported the stream extracted: a connection cut just before the publish
// line, which the command never reads.
type cutAtExtracted struct {
	r     io.Reader
	watch *lineHook
}

func (c *cutAtExtracted) Read(p []byte) (int, error) {
	if c.watch.seen.Load() {
		return 0, io.EOF
	}
	n, err := c.r.Read(p)
	if c.watch.seen.Load() {
		return 0, io.EOF // what came after the report: the publish line, dropped
	}
	return n, err
}

// TestInlinePublishLineNeverArrives: the command's stdin ends where the
// publish line was due: it exits with shell.NoPublishExit, moving
// nothing; the stage fails as a transport failure (retryable), the
// temporary directory is removed and the previous copy stays. A second
// stage through a sound connection publishes.
func TestInlinePublishLineNeverArrives(t *testing.T) {
	dir, src, root := stagedOld(t)
	local := sandbox.Local(dir)
	r := &scriptedRunner{next: local, match: isTransfer, do: func(ctx context.Context, cmd sandbox.Command) error {
		w := &lineHook{w: cmd.Stdout, line: shell.ExtractedLine, at: func() {}}
		cmd.Stdout = w
		cmd.Stdin = &cutAtExtracted{r: cmd.Stdin, watch: w}
		return local.Run(ctx, cmd)
	}}
	_, err := stage.Stage(t.Context(), stage.NewBridge(r), root, []stage.Asset{{Name: "x", Source: src}})
	require.ErrorIs(t, err, stage.ErrTransport)
	assert.ErrorContains(t, err, "did not receive the publish line; nothing was published")
	assert.True(t, sandbox.Retryable(err), "%v", err)
	assert.Equal(t, "old", readFile(t, filepath.Join(root, "x", "a")), "nothing may be published")
	assertNoTemp(t, root)

	_, err = stage.Stage(t.Context(), stage.NewBridge(local), root, []stage.Asset{{Name: "x", Source: src}})
	require.NoError(t, err)
	assert.Equal(t, "new", readFile(t, filepath.Join(root, "x", "a")))
	assert.Equal(t, "same", readFile(t, filepath.Join(root, "x", "b")))
	assertNoTemp(t, root)
}

// TestInlinePublishOneCommand: a delta through a Bridge whose sandbox has
// GNU tar runs the probe and one send command, which publishes; the
// sandbox ends with exactly the new copy.
func TestInlinePublishOneCommand(t *testing.T) {
	dir, src, root := stagedOld(t)
	r := &scriptedRunner{next: sandbox.Local(dir), match: func(sandbox.Command) bool { return false }}
	_, err := stage.Stage(t.Context(), stage.NewBridge(r), root, []stage.Asset{{Name: "x", Source: src}})
	require.NoError(t, err)
	cmds := r.commands()
	require.Len(t, cmds, 2, "probe and send")
	assert.True(t, isTransfer(cmds[1]) && strings.Contains(cmds[1].Script, shell.PublishLine))
	assert.Equal(t, "new", readFile(t, filepath.Join(root, "x", "a")))
	assert.Equal(t, "same", readFile(t, filepath.Join(root, "x", "b")))
	assert.Equal(t, []string{".airlock-manifest-x.json", "x"}, listDir(t, root))
	_, err = os.Lstat(filepath.Join(root, shell.StampsName("x")))
	assert.NoError(t, err, "the command recorded the new copy's stamps before the stage returned")
	assertNoTemp(t, root)
}
