package mcptool

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGuard(t *testing.T) {
	deep := strings.Repeat("[", 1500) + strings.Repeat("]", 1500)
	for _, tc := range []struct {
		name, line string
		ok, result bool
		want       string // in the answer; "": no answer
	}{
		{"plain request", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, true, false, ""},
		{"response", `{"jsonrpc":"2.0","id":"a","result":{}}`, true, false, ""},
		{"at the bound", `{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":` + strings.Repeat("[", MaxNesting-2) + strings.Repeat("]", MaxNesting-2) + `}}`, true, false, ""},
		{"not json", `this is not json`, false, false, `"id":null,"error":{"code":-32700`},
		{"trailing data", `{"jsonrpc":"2.0","id":1,"method":"x"} {}`, false, false, `-32700`},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"x"}]`, false, false, `"code":-32700,"message":"parse error: the line is not one JSON object`},
		{"empty batch", `[]`, false, false, `-32700`},
		{"old version", `{"jsonrpc":"1.0","id":5,"method":"x"}`, false, false, `"id":5,"error":{"code":-32600`},
		{"object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"x"}`, false, false, `"id":null,"error":{"code":-32600`},
		{"neither", `{"jsonrpc":"2.0"}`, false, false, `-32600`},
		{"deep argument", `{"jsonrpc":"2.0","id":"q","method":"tools/call","params":{"name":"reg","arguments":{"a":"x","title":` + deep + `}}}`, false, true, `reg: title nests arrays or objects more than 256 levels deep; pass it as a JSON string.`},
		{"deep elsewhere in a call", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"reg","_meta":` + deep + `}}`, false, false, `"id":2,"error":{"code":-32602`},
		{"deep other method", `{"jsonrpc":"2.0","id":3,"method":"x","params":` + deep + `}`, false, false, `"id":3,"error":{"code":-32600`},
		{"deep notification", `{"jsonrpc":"2.0","method":"x","params":` + deep + `}`, false, false, ""},
		{"hostile tool name", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"a\u001b[2J","arguments":{"t":` + deep + `}}}`, false, true, `the tool: t nests`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := guard([]byte(tc.line))
			assert.Equal(t, tc.ok, v.ok)
			assert.Equal(t, tc.result, v.result)
			if tc.want == "" {
				assert.Nil(t, v.answer)
				return
			}
			assert.Contains(t, string(v.answer), tc.want)
			assert.True(t, json.Valid(v.answer), "%s", v.answer)
			assert.NotContains(t, string(v.answer), "\n")
		})
	}
}

// TestServeConnSurvivesGarbage: each line that would end the SDK's stream
// session is answered (or dropped) and the session answers the next request.
func TestServeConnSurvivesGarbage(t *testing.T) {
	c1, c2 := net.Pipe()
	served := make(chan error, 1)
	go func() { served <- ServeConn(context.Background(), New(nil, nil, "task-1", "run-1"), c1, nil) }()
	lines := bufio.NewScanner(c2)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	send := func(s string) {
		if _, err := io.WriteString(c2, s+"\n"); err != nil {
			t.Errorf("sending %.40q: %v", s, err)
		}
	}
	until := func(id string) {
		t.Helper()
		for lines.Scan() {
			if strings.Contains(lines.Text(), `"id":`+id+`,`) {
				return
			}
		}
		t.Fatalf("no answer with id %s: %v", id, lines.Err())
	}
	go func() { // net.Pipe is unbuffered: a large line needs a reader on the other side
		send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`)
	}()
	until("1")
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for i, garbage := range []string{`nope`, `[]`, `[{"jsonrpc":"2.0","id":9,"method":"ping"}]`, `{"jsonrpc":"1.0","id":9,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, `{"jsonrpc":"2.0","id":9,"method":"ping","params":` + strings.Repeat("[", 5000) + `}`,
		`{"jsonrpc":"2.0","id":9,"method":"ping","params":{"a":"` + strings.Repeat("x", MaxRequestBytes+10) + `"}}`, "\r", ""} {
		id := strings.Repeat("1", i+2)
		go func() {
			send(garbage)
			send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list"}`)
		}()
		until(id)
	}
	require.NoError(t, c2.Close())
	select {
	case err := <-served:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("ServeConn did not end after the client closed")
	}
}
