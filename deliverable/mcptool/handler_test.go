package mcptool_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable"
	"github.com/airlockdev/airlock/deliverable/mcptool"
)

func post(t *testing.T, url, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

// TestHandlerKeepsNoSession: every request is served on its own (no
// Mcp-Session-Id is handed out, so a client cannot make the host keep
// sessions), answers are JSON, and a body over MaxRequestBytes is refused.
func TestHandlerKeepsNoSession(t *testing.T) {
	_, reg := newStore(t)
	ws, err := deliverable.LocalWorkspace(t.TempDir())
	require.NoError(t, err)
	srv := httptest.NewServer(mcptool.Handler(mcptool.New(reg, ws, "task-1", "run-1")))
	defer srv.Close()

	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"agent","version":"1"}}}`
	for range 3 {
		resp, body := post(t, srv.URL, initialize)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		assert.Empty(t, resp.Header.Get("Mcp-Session-Id"))
		assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		assert.Contains(t, body, `"serverInfo":{"name":"airlock-deliverable","version":"v1"}`)
	}
	resp, body := post(t, srv.URL, `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Contains(t, body, `"name":"register_deliverable"`)

	resp, _ = post(t, srv.URL, `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"x":"`+strings.Repeat("a", mcptool.MaxRequestBytes)+`"}}`)
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
}
