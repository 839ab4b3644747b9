package mcptool_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable"
	"github.com/airlockdev/airlock/deliverable/mcptool"
)

// childEnv makes the test binary a stdio tool process (see TestMain).
const childEnv = "AIRLOCK_MCPTOOL_STDIO_CHILD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(childEnv); dir != "" {
		os.Exit(stdioChild(dir))
	}
	os.Exit(m.Run())
}

// stdioChild serves the tool on stdin and stdout for the workspace and
// store under dir, as a local agent's tool process would.
func stdioChild(dir string) int {
	store, err := deliverable.NewFileStore(afero.NewOsFs(), filepath.Join(dir, "store"))
	if err == nil {
		var ws deliverable.Workspace
		ws, err = deliverable.LocalWorkspace(filepath.Join(dir, "ws"))
		if err == nil {
			err = mcptool.ServeStdio(context.Background(), mcptool.New(&deliverable.Registrar{Store: store}, ws, "task-1", "run-1"))
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "stdio child:", err)
		return 1
	}
	return 0
}

func TestServeStdio(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "ws"), 0o755))
	data := []byte("name,total\nA,3\n")
	writeFile(t, filepath.Join(dir, "ws"), "totals.csv", data)

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+dir)
	cmd.Stderr = os.Stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "test"}, nil).Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err)
	list, err := cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
	require.Len(t, list.Tools, 1)
	a := args("totals.csv", "t1", data)
	a["contentType"] = "text/csv"
	_, isErr, res := call(t, cs, a)
	require.False(t, isErr)
	rc := result(t, res)
	require.NoError(t, cs.Close())

	store, err := deliverable.NewFileStore(afero.NewOsFs(), filepath.Join(dir, "store"))
	require.NoError(t, err)
	att, err := store.Attachment(t.Context(), rc.AttachmentID)
	require.NoError(t, err)
	assert.Equal(t, "totals.csv", att.Filename)
	assert.Equal(t, sum(data), att.SHA256)
}
