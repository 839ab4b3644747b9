package mcptool_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/afero"

	"github.com/airlockdev/airlock/deliverable"
	"github.com/airlockdev/airlock/deliverable/mcptool"
	"github.com/airlockdev/airlock/stage/remote"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
)

// The host's view: serve the tool inside the sandbox through the SSH
// connection, and give the agent the URL. The agent's view: an MCP client
// that calls register_deliverable and cites the receipt.
func Example() {
	ctx := context.Background()
	sandbox, err := remotetest.Start() // stands in for a remote sandbox
	if err != nil {
		panic(err)
	}
	defer sandbox.Close()
	host, err := remote.Dial(ctx, sandbox.Addr(), sandbox.Config())
	if err != nil {
		panic(err)
	}
	defer host.Close()
	storeDir, err := os.MkdirTemp("", "store")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(storeDir)
	store, err := deliverable.NewFileStore(afero.NewOsFs(), storeDir)
	if err != nil {
		panic(err)
	}

	// Host: one server per task and run, bound to the sandbox's workspace.
	reg := &deliverable.Registrar{Store: store, ContentTypes: deliverable.DeliverableContentTypes()}
	server := mcptool.New(reg, deliverable.RemoteWorkspace(host, sandbox.Dir()), "task-1", "run-1",
		mcptool.WithBinding("command-1", "revision-1"))
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcptool.Handler(server))
	addr, err := host.ServeInSandbox(ctx, "tcp", "127.0.0.1:0", mux)
	if err != nil {
		panic(err)
	}
	endpoint := "http://" + addr.String() + "/mcp" // put this in the agent's MCP configuration

	// Agent, inside the sandbox: write the file, then register it.
	data := []byte("a,b\n1,2\n")
	if err := os.WriteFile(filepath.Join(sandbox.Dir(), "totals.csv"), data, 0o644); err != nil {
		panic(err)
	}
	session, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: endpoint, DisableStandaloneSSE: true}, nil)
	if err != nil {
		panic(err)
	}
	defer session.Close()
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "register_deliverable", Arguments: map[string]any{
		"contentRef": "totals.csv", "filename": "totals.csv", "contentType": "text/csv",
		"byteSize": len(data), "sha256": sum(data), "title": "Totals", "idempotencyKey": "totals-1",
	}})
	if err != nil {
		panic(err)
	}
	fmt.Println("tool error:", res.IsError)
	fmt.Println(res.StructuredContent.(map[string]any)["disposition"], res.StructuredContent.(map[string]any)["command"])
	// Output:
	// tool error: false
	// applied command-1
}
