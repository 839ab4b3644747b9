package mcptool_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/afero"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable"
	"github.com/airlockdev/airlock/deliverable/mcptool"
)

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// args are the agent's arguments for a file it wrote at ref with data.
func args(ref, key string, data []byte) map[string]any {
	return map[string]any{
		"contentRef": ref, "filename": filepath.Base(ref), "contentType": "application/pdf",
		"byteSize": len(data), "sha256": sum(data), "title": "The report", "idempotencyKey": key,
	}
}

// tasks is a host's Tasks: one task in progress, attachments from the store.
type tasks struct{ store *deliverable.FileStore }

func (ts tasks) Task(_ context.Context, id string) (deliverable.Task, error) {
	if id == "task-1" {
		return deliverable.Task{ID: id, Status: deliverable.StatusInProgress}, nil
	}
	return deliverable.Task{}, fmt.Errorf("%w: task %s", deliverable.ErrNotFound, id)
}

func (ts tasks) Attachment(ctx context.Context, id string) (deliverable.Attachment, error) {
	return ts.store.Attachment(ctx, id)
}

func (ts tasks) WorkProduct(ctx context.Context, id string) (deliverable.WorkProduct, error) {
	return ts.store.WorkProduct(ctx, id)
}

func newStore(t *testing.T) (*deliverable.FileStore, *deliverable.Registrar) {
	t.Helper()
	store, err := deliverable.NewFileStore(afero.NewOsFs(), t.TempDir())
	require.NoError(t, err)
	return store, &deliverable.Registrar{Store: store, ContentTypes: deliverable.DeliverableContentTypes()}
}

// writeFile is the agent writing a file in its workspace.
func writeFile(t *testing.T, dir, ref string, data []byte) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(ref))
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, data, 0o644))
}

// inMemory connects an SDK client to s in this process.
func inMemory(t *testing.T, s *mcp.Server) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.Connect(t.Context(), st, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "test"}, nil).Connect(t.Context(), ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// call calls the tool and returns its text and whether it is a tool error.
func call(t *testing.T, cs *mcp.ClientSession, arguments any) (text string, isError bool, res *mcp.CallToolResult) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: deliverable.DefaultToolName, Arguments: arguments})
	require.NoError(t, err)
	require.Len(t, res.Content, 1)
	tc, ok := res.Content[0].(*mcp.TextContent)
	require.True(t, ok, "content is %T", res.Content[0])
	return tc.Text, res.IsError, res
}

// result decodes a successful call's structured output.
func result(t *testing.T, res *mcp.CallToolResult) mcptool.Result {
	t.Helper()
	require.False(t, res.IsError)
	raw, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	var out mcptool.Result
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&out), "%s", raw)
	return out
}
