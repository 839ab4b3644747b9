package mcptool

import (
	"context"
	"fmt"
	"net"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Forwarder serves an http.Handler inside a sandbox, on an address there
// that the sandbox's agent can reach; *remote.Host (package stage/remote)
// is one, through its SSH connection.
type Forwarder interface {
	ServeInSandbox(ctx context.Context, network, address string, handler http.Handler) (net.Addr, error)
}

// Path is where ServeInSandbox mounts the tool: the agent's MCP URL ends
// with it.
const Path = "/mcp"

// ServeInSandbox serves s (Handler) on a free loopback port inside the
// sandbox f reaches, at Path, until ctx ends or f closes, and returns the
// URL to put in the agent's MCP configuration:
// "http://127.0.0.1:<port>/mcp". The sandbox needs no route to the host.
// A forward that answers anything but a loopback TCP address with a port
// (a nil address, a socket path, port 0, a wildcard or another host's
// address) is an error, and no URL.
func ServeInSandbox(ctx context.Context, f Forwarder, s *mcp.Server) (url string, err error) {
	mux := http.NewServeMux()
	mux.Handle(Path, Handler(s))
	addr, err := f.ServeInSandbox(ctx, "tcp", "127.0.0.1:0", mux)
	if err != nil {
		return "", fmt.Errorf("mcptool: serving the tool inside the sandbox: %w", err)
	}
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || !tcp.IP.IsLoopback() || tcp.Port < 1 || tcp.Port > 65535 {
		return "", fmt.Errorf("mcptool: the forward inside the sandbox answered the address %v, not a loopback TCP port; the agent could not be told where the tool is", addr)
	}
	return "http://" + tcp.String() + Path, nil
}
