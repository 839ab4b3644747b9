package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
)

// TestRunAgentRegistersThroughTheTool: the agent delivers report.md itself,
// calling register_deliverable over MCP at Turn.ToolURL (the sandbox's
// loopback, forwarded through the SSH connection), and cites the receipt;
// the run validates that citation. A rejected call comes back to the agent
// as a tool error it can read.
func TestRunAgentRegistersThroughTheTool(t *testing.T) {
	srv := remotetest.NewServer(t)
	r := newRun(t, srv.Dial(t), srv.Dir()+"/work")
	var receipt map[string]any
	r.Agent = func(ctx context.Context, turn Turn) (Completion, error) {
		require.NotEmpty(t, turn.ToolURL, "remote.Host forwards: the agent gets the tool")
		const report = "findings, registered by the agent\n"
		require.NoError(t, turn.Runner.Run(ctx, sandbox.Command{Dir: turn.Remote, Env: map[string]string{"R": report}, Script: `printf '%s' "$R" > report.md`}))
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "test"}, nil).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: turn.ToolURL, DisableStandaloneSSE: true, MaxRetries: -1}, nil)
		require.NoError(t, err)
		defer cs.Close()
		sum := sha256.Sum256([]byte(report))
		args := map[string]any{"contentRef": "report.md", "filename": "report.md", "contentType": "text/markdown",
			"byteSize": len(report), "sha256": hex.EncodeToString(sum[:]), "title": "Findings", "idempotencyKey": "report"}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "register_deliverable", Arguments: args})
		require.NoError(t, err)
		require.False(t, res.IsError, "%v", res.Content)
		raw, err := json.Marshal(res.StructuredContent)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(raw, &receipt))

		args["byteSize"] = len(report) + 1 // a wrong size: the agent is told, nothing is stored
		bad, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "register_deliverable", Arguments: args})
		require.NoError(t, err)
		assert.True(t, bad.IsError)
		return Completion{BackendSessionID: "backend-1", AgentSessionID: "agent-1", Refs: []string{receipt["citation"].(string)}}, nil
	}
	out, err := r.Do(t.Context())
	require.NoError(t, err)
	assert.Empty(t, out.Receipts, "the agent registered the file itself")
	id, _ := receipt["attachmentId"].(string)
	require.NotEmpty(t, id, "%v", receipt)
	a, err := r.Files.Attachment(t.Context(), id)
	require.NoError(t, err)
	assert.Equal(t, "report.md", a.Filename)
	assert.Equal(t, "deliverable:"+id, receipt["citation"])
}
