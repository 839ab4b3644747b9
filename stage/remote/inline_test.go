package remote_test

import (
	"context"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/shell"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/stage/remote"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
)

// commandLog is a Host (its SFTP reads included) that records the scripts
// of the commands it runs.
type commandLog struct {
	*remote.Host
	mu      sync.Mutex
	scripts []string
}

func (c *commandLog) Run(ctx context.Context, cmd sandbox.Command) error {
	c.mu.Lock()
	c.scripts = append(c.scripts, cmd.Script)
	c.mu.Unlock()
	return c.Host.Run(ctx, cmd)
}

func (c *commandLog) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.scripts
	c.scripts = nil
	return s
}

// TestHostStageOneCommand: over SSH, where the sandbox has GNU tar, a first
// copy and a delta each cost one command (the probe reads manifests over
// SFTP; the send command publishes), the first learning what the sandbox
// offers on the way.
func TestHostStageOneCommand(t *testing.T) {
	dir := t.TempDir()
	h := &commandLog{Host: dial(t, remotetest.NewServer(t, remotetest.WithDir(dir)))}
	root := path.Join(dir, "rt")
	src := t.TempDir()
	writeFiles(t, src, "a", "1", "b/c", "same")
	assets := []stage.Asset{{Name: "x", Source: src}}
	b := stage.NewBridge(h)
	for i, v := range []string{"1", "2"} {
		writeFiles(t, src, "a", v)
		_, err := stage.Stage(t.Context(), b, root, assets)
		require.NoError(t, err)
		scripts := h.take()
		require.Len(t, scripts, 1, "stage %d: the send command alone", i)
		assert.Contains(t, scripts[0], shell.PublishLine)
		assert.Equal(t, i == 0, strings.Contains(scripts[0], shell.DetectScript), "a new Bridge learns the sandbox's tools in its first send command")
		got, err := os.ReadFile(filepath.Join(root, "x", "a"))
		require.NoError(t, err)
		assert.Equal(t, v, string(got))
	}
}
