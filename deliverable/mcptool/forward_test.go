package mcptool_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable"
	"github.com/airlockdev/airlock/deliverable/mcptool"
	"github.com/airlockdev/airlock/internal/sshdtest"
	"github.com/airlockdev/airlock/stage/remote"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
)

// agentThroughForward is the whole loop: the host serves the tool inside
// the sandbox through h's SSH connection; the agent (an SDK client on the
// sandbox's side, this machine for remotetest and sshdtest) reaches it at
// http://127.0.0.1:<port>/mcp, lists the tool, registers a file it wrote in
// the workspace (read back by the host through h), replays with the same
// key, and its completion citing the receipt passes ValidateEvidence.
func agentThroughForward(t *testing.T, h *remote.Host, sandboxDir string) {
	store, reg := newStore(t)
	wsDir := filepath.Join(sandboxDir, "work")
	require.NoError(t, os.MkdirAll(wsDir, 0o755))
	s := mcptool.New(reg, deliverable.RemoteWorkspace(h, wsDir), "task-1", "run-1", mcptool.WithBinding("cmd-1", "rev-1"))
	endpoint, err := mcptool.ServeInSandbox(t.Context(), h, s)
	require.NoError(t, err)
	require.Regexp(t, `^http://127\.0\.0\.1:[1-9][0-9]*/mcp$`, endpoint)

	// The sandbox side.
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "test"}, nil).Connect(t.Context(),
		&mcp.StreamableClientTransport{Endpoint: endpoint, DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	require.NoError(t, err)
	defer cs.Close()
	list, err := cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
	require.Len(t, list.Tools, 1)
	assert.Equal(t, "register_deliverable", list.Tools[0].Name)

	data := []byte("%PDF-1.7 the quarterly report")
	writeFile(t, wsDir, "out/report.pdf", data)
	text, isErr, res := call(t, cs, args("out/report.pdf", "report-1", data))
	require.False(t, isErr, "%s", text)
	rc := result(t, res)
	assert.Equal(t, deliverable.Applied, rc.Disposition)
	assert.Equal(t, "report.pdf", rc.Filename)
	assert.Equal(t, sum(data), rc.SHA256)
	assert.Equal(t, "cmd-1", rc.Command)
	assert.Contains(t, text, "Cite it in your completion report as deliverable:"+rc.AttachmentID+".")

	// An ambiguous result: the agent calls again with the same key.
	_, isErr, res = call(t, cs, args("out/report.pdf", "report-1", data))
	require.False(t, isErr)
	assert.Equal(t, rc, result(t, res), "the replay returns the same receipt")

	// A rejection travels back through the forward as a tool error.
	text, isErr, _ = call(t, cs, args("/etc/passwd", "k2", data))
	assert.True(t, isErr)
	assert.Equal(t, `register_deliverable: contentRef "/etc/passwd" is absolute; pass the file's path relative to the workspace root, such as "out/report.pdf".`, text)

	ev := deliverable.Evidence{TaskID: "task-1", RunID: "run-1", Objective: "Write the quarterly report as report.pdf.", Refs: []string{rc.Citation}}
	require.NoError(t, deliverable.ValidateEvidence(t.Context(), tasks{store}, ev))
	ev.Refs = []string{"out/report.pdf"}
	err = deliverable.ValidateEvidence(t.Context(), tasks{store}, ev)
	require.ErrorIs(t, err, deliverable.ErrEvidence, "a workspace path is not a delivery")
}

func TestAgentThroughForwardRemotetest(t *testing.T) {
	srv := remotetest.NewServer(t)
	agentThroughForward(t, srv.Dial(t), srv.Dir())
}

func TestAgentThroughForwardSSHD(t *testing.T) {
	srv := sshdtest.Start(t)
	h, err := remote.Dial(t.Context(), srv.Addr(), srv.Config())
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	agentThroughForward(t, h, srv.Dir())
}

// refusingForwarder is a sandbox that refuses every forward.
type refusingForwarder struct{}

func (refusingForwarder) ServeInSandbox(context.Context, string, string, http.Handler) (net.Addr, error) {
	return nil, remote.ErrForward
}

// TestServeInSandboxRefused: a refused forward is the forwarder's error,
// said to be the tool's, and no URL.
func TestServeInSandboxRefused(t *testing.T) {
	_, reg := newStore(t)
	s := mcptool.New(reg, deliverable.RemoteWorkspace(nil, "/work"), "task-1", "run-1")
	url, err := mcptool.ServeInSandbox(t.Context(), refusingForwarder{}, s)
	require.ErrorIs(t, err, remote.ErrForward)
	assert.Equal(t, "mcptool: serving the tool inside the sandbox: "+remote.ErrForward.Error(), err.Error())
	assert.Empty(t, url)
}
