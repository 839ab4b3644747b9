package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockdev/airlock/deliverable"
	"github.com/airlockdev/airlock/deliverable/mcptool"
)

// agentRegisters is step 6's delivery as the agent makes it: the host
// serves register_deliverable over MCP on the sandbox's loopback, through
// the SSH connection (no route from the sandbox to the host), and the agent
// calls it twice with the same key (the second time as after an ambiguous
// result). The agent's side dials the sandbox's loopback: directly for the
// embedded server (its sandbox is this machine), through the SSH
// connection (direct-tcpip) for a real one.
func (e *env) agentRegisters(ctx context.Context, reg *deliverable.Registrar, ws deliverable.Workspace, req deliverable.Request) (first, again mcptool.Result, err error) {
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcptool.Handler(mcptool.New(reg, ws, "task-42", "run-1")))
	addr, err := e.host.ServeInSandbox(sctx, "tcp", "127.0.0.1:0", mux)
	if err != nil {
		return first, again, err
	}
	dial := (&net.Dialer{}).DialContext
	if !e.embedded {
		dial = e.host.Client().DialContext
	}
	transport := &mcp.StreamableClientTransport{Endpoint: "http://" + addr.String() + "/mcp", DisableStandaloneSSE: true, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: &http.Transport{DialContext: dial}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "quickstart-agent", Version: "1"}, nil).Connect(ctx, transport, nil)
	if err != nil {
		return first, again, fmt.Errorf("the agent's MCP client: %w", err)
	}
	defer cs.Close()
	if first, err = callRegister(ctx, cs, req); err != nil {
		return first, again, err
	}
	again, err = callRegister(ctx, cs, req)
	return first, again, err
}

// callRegister calls register_deliverable with req's fields.
func callRegister(ctx context.Context, cs *mcp.ClientSession, req deliverable.Request) (mcptool.Result, error) {
	var out mcptool.Result
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "register_deliverable", Arguments: req})
	if err != nil {
		return out, fmt.Errorf("register_deliverable: %w", err)
	}
	if res.IsError {
		return out, fmt.Errorf("register_deliverable refused the file: %v", res.Content)
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return out, err
	}
	return out, json.Unmarshal(raw, &out)
}
