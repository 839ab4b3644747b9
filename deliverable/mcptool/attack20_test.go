package mcptool_test

// Attack tests written from the README, go doc and issue 20 only: a hostile
// agent calling register_deliverable, and a hostile sandbox flooding the
// forward that serves it.

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable"
	"github.com/airlockdev/airlock/deliverable/mcptool"
	"github.com/airlockdev/airlock/stage/remote"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
)

type a20 struct {
	ws, storeDir string
	store        *deliverable.FileStore
	session      *mcp.ClientSession
}

func a20Sum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func a20Start(t *testing.T, reg func(*deliverable.FileStore) *deliverable.Registrar, ws deliverable.Workspace) *a20 {
	t.Helper()
	env := &a20{ws: t.TempDir(), storeDir: t.TempDir()}
	store, err := deliverable.NewFileStore(afero.NewOsFs(), env.storeDir)
	require.NoError(t, err)
	env.store = store
	r := &deliverable.Registrar{Store: store}
	if reg != nil {
		r = reg(store)
	}
	if ws == nil {
		ws, err = deliverable.LocalWorkspace(env.ws)
		require.NoError(t, err)
	}
	server := mcptool.New(r, ws, "task-1", "run-1")
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := server.Connect(ctx, st, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil).Connect(ctx, ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	env.session = cs
	return env
}

func (e *a20) write(t *testing.T, name string, data []byte) {
	t.Helper()
	p := filepath.Join(e.ws, name)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, data, 0o644))
}

func a20Args(name string, data []byte, key string) map[string]any {
	return map[string]any{
		"contentRef": name, "filename": filepath.Base(name), "contentType": "text/plain",
		"byteSize": len(data), "sha256": a20Sum(data), "title": "T", "idempotencyKey": key,
	}
}

func a20Text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// call returns the tool result; a protocol error fails the test.
func (e *a20) call(t *testing.T, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := e.session.CallTool(context.Background(), &mcp.CallToolParams{Name: "register_deliverable", Arguments: args})
	require.NoError(t, err, "a rejection must be a tool error, not a protocol error")
	return res
}

// rejected asserts a tool error whose text names want and leaks no host path.
func (e *a20) rejected(t *testing.T, res *mcp.CallToolResult, want ...string) string {
	t.Helper()
	text := a20Text(res)
	require.True(t, res.IsError, "want a tool error, got %q %v", text, res.StructuredContent)
	require.NotEmpty(t, text)
	if os.Getenv("A20_SHOW") != "" {
		t.Logf("agent sees: %s", text)
	}
	assert.NotContains(t, text, e.ws, "host workspace path leaked to the agent")
	assert.NotContains(t, text, e.storeDir, "host store path leaked to the agent")
	assert.NotContains(t, text, os.TempDir()+"/", "a host temp path leaked")
	for _, w := range want {
		assert.Contains(t, text, w)
	}
	return text
}

func TestAttackMalformedArgumentsAreToolErrors(t *testing.T) {
	e := a20Start(t, nil, nil)
	data := []byte("hello\n")
	e.write(t, "ok.txt", data)
	base := func(k, v string) map[string]any { a := a20Args("ok.txt", data, "k-"+k); a[k] = v; return a }
	rows := []struct {
		name  string
		args  any
		field string
	}{
		{"negative size", func() any { a := a20Args("ok.txt", data, "neg"); a["byteSize"] = -6; return a }(), "byteSize"},
		{"zero size", func() any { a := a20Args("ok.txt", data, "zero"); a["byteSize"] = 0; return a }(), "byteSize"},
		{"overflowing size", json.RawMessage(`{"contentRef":"ok.txt","filename":"ok.txt","contentType":"text/plain","byteSize":99999999999999999999999,"sha256":"` + a20Sum(data) + `","title":"T","idempotencyKey":"ovf"}`), "byteSize"},
		{"fractional size", json.RawMessage(`{"contentRef":"ok.txt","filename":"ok.txt","contentType":"text/plain","byteSize":6.5,"sha256":"` + a20Sum(data) + `","title":"T","idempotencyKey":"frac"}`), "byteSize"},
		{"string size", base("byteSize", "6"), "byteSize"},
		{"uppercase sha", base("sha256", strings.ToUpper(a20Sum(data))+"0"), "sha256"},
		{"short sha", base("sha256", "abc"), "sha256"},
		{"absolute ref", base("contentRef", "/etc/ok.txt"), "contentRef"},
		{"dotdot ref", base("contentRef", "../ok.txt"), "contentRef"},
		{"inner dotdot", base("contentRef", "a/../../ok.txt"), "contentRef"},
		{"url ref", base("contentRef", "file:///etc/passwd"), "contentRef"},
		{"home ref", base("contentRef", "~/ok.txt"), "contentRef"},
		{"backslash ref", base("contentRef", `a\..\ok.txt`), "contentRef"},
		{"nul ref", base("contentRef", "ok.txt\x00.png"), "contentRef"},
		{"filename not base", base("filename", "dir/ok.txt"), "filename"},
		{"filename mismatch", base("filename", "other.txt"), "filename"},
		{"bad type", base("contentType", "not a type"), "contentType"},
		{"huge title", base("title", strings.Repeat("é", 300_000)), "title"},
		{"control title", base("title", "a\x1b[2Jb"), "title"},
		{"empty key", base("idempotencyKey", "   "), "idempotencyKey"},
		{"missing fields", map[string]any{"contentRef": "ok.txt"}, ""},
		{"unknown field", func() any { a := a20Args("ok.txt", data, "unk"); a["taskId"] = "other"; return a }(), ""},
		{"array arguments", json.RawMessage(`[1,2,3]`), ""},
		{"null arguments", json.RawMessage(`null`), ""},
		{"missing file", a20Args("nope.txt", data, "missing"), "contentRef"},
		{"long ref", base("contentRef", strings.Repeat("a/", 50000)+"ok.txt"), "contentRef"},
		{"empty ref", base("contentRef", ""), "contentRef"},
		{"bidi filename", base("filename", "ok\u202etxt.exe"), "filename"},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			res, err := e.session.CallTool(context.Background(), &mcp.CallToolParams{Name: "register_deliverable", Arguments: row.args})
			require.NoError(t, err, "package doc: arguments that do not decode are rejected as a tool error naming the fields")
			if row.field != "" {
				e.rejected(t, res, row.field)
			} else {
				e.rejected(t, res)
			}
		})
	}
}

func TestAttackHostileFilesAreRejected(t *testing.T) {
	e := a20Start(t, nil, nil)
	secret := []byte("host secret\n")
	outside := filepath.Join(t.TempDir(), "secret.txt")
	require.NoError(t, os.WriteFile(outside, secret, 0o600))
	require.NoError(t, os.Symlink(outside, filepath.Join(e.ws, "link.txt")))
	require.NoError(t, os.Mkdir(filepath.Join(e.ws, "real"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(e.ws, "real", "in.txt"), secret, 0o644))
	require.NoError(t, os.Symlink(filepath.Dir(outside), filepath.Join(e.ws, "dirlink")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(e.ws, "fifo.txt"), 0o644))
	e.write(t, "hard.txt", secret)
	require.NoError(t, os.Link(filepath.Join(e.ws, "hard.txt"), filepath.Join(e.ws, "hard2.txt")))
	require.NoError(t, os.Mkdir(filepath.Join(e.ws, "adir.txt"), 0o755))
	e.write(t, "données/résumé ✓.txt", secret)

	for _, ref := range []string{"link.txt", "dirlink/secret.txt", "hard.txt", "adir.txt"} {
		t.Run(ref, func(t *testing.T) {
			e.rejected(t, e.call(t, a20Args(ref, secret, "k-"+ref)), "contentRef")
		})
	}
	t.Run("fifo never blocks", func(t *testing.T) {
		done := make(chan *mcp.CallToolResult, 1)
		go func() {
			res, _ := e.session.CallTool(context.Background(), &mcp.CallToolParams{Name: "register_deliverable", Arguments: a20Args("fifo.txt", secret, "fifo")})
			done <- res
		}()
		select {
		case res := <-done:
			require.NotNil(t, res)
			e.rejected(t, res, "contentRef")
		case <-time.After(10 * time.Second):
			t.Fatal("a FIFO contentRef blocked the tool: FIFOs must never be opened")
		}
	})
	t.Run("unicode path is fine", func(t *testing.T) {
		res := e.call(t, a20Args("données/résumé ✓.txt", secret, "uni"))
		require.False(t, res.IsError, a20Text(res))
	})
}

func TestAttackReplayAndConcurrency(t *testing.T) {
	e := a20Start(t, nil, nil)
	v1, v2 := []byte("version one\n"), []byte("version two, longer\n")
	e.write(t, "r.txt", v1)
	first := e.call(t, a20Args("r.txt", v1, "same"))
	require.False(t, first.IsError, a20Text(first))
	e.write(t, "r.txt", v2)
	text := e.rejected(t, e.call(t, a20Args("r.txt", v2, "same")), "idempotencyKey")
	assert.Contains(t, strings.ToLower(text), "new", "a conflict tells the agent to use a new key: %q", text)
	replay := e.call(t, a20Args("r.txt", v1, "same"))
	require.False(t, replay.IsError, "a replay of the first request returns the first receipt without reading the file: %s", a20Text(replay))
	assert.Equal(t, first.StructuredContent, replay.StructuredContent)

	e.write(t, "c.txt", v1)
	var wg sync.WaitGroup
	ids := make([]string, 16)
	errs := make([]string, 16)
	for i := range ids {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			res, err := e.session.CallTool(context.Background(), &mcp.CallToolParams{Name: "register_deliverable", Arguments: a20Args("c.txt", v1, "conc")})
			if err != nil || res.IsError {
				errs[i] = fmt.Sprint(err, a20Text(res))
				return
			}
			ids[i] = res.StructuredContent.(map[string]any)["attachmentId"].(string)
		}(i)
	}
	wg.Wait()
	for i := range ids {
		require.Empty(t, errs[i])
		assert.Equal(t, ids[0], ids[i], "concurrent calls with one key store one receipt")
	}
	entries, err := os.ReadDir(filepath.Join(e.storeDir, "attachments"))
	require.NoError(t, err)
	assert.Len(t, entries, 2, "one attachment for r.txt, one for c.txt")
}

func TestAttackUnknownToolIsAnError(t *testing.T) {
	e := a20Start(t, nil, nil)
	res, err := e.session.CallTool(context.Background(), &mcp.CallToolParams{Name: "register_deliverables", Arguments: map[string]any{}})
	if err == nil {
		require.True(t, res.IsError, "an unknown tool must not succeed")
	}
	tools, err := e.session.ListTools(context.Background(), nil)
	require.NoError(t, err)
	require.Len(t, tools.Tools, 1)
	assert.Equal(t, mcptool.Description("register_deliverable"), tools.Tools[0].Description)
}

// changingWorkspace serves a file whose bytes differ from what Stat announced
// (a file rewritten between hashing and storing, as a hostile sandbox does).
type changingWorkspace struct{ announced, served []byte }

type changingFile struct {
	io.Reader
	size int64
}

func (f changingFile) Close() error { return nil }
func (f changingFile) Stat() deliverable.FileStat {
	return deliverable.FileStat{Size: f.size, Links: 1}
}

func (w changingWorkspace) Open(ctx context.Context, name string) (deliverable.File, error) {
	return changingFile{Reader: strings.NewReader(string(w.served)), size: int64(len(w.announced))}, nil
}

func TestAttackFileChangedWhileReadIsRejected(t *testing.T) {
	announced := []byte("the file as hashed\n")
	for name, served := range map[string][]byte{
		"same size, other bytes": []byte("THE FILE AS HASHED\n"),
		"longer":                 append(append([]byte{}, announced...), strings.Repeat("x", 1<<16)...),
		"shorter":                announced[:5],
	} {
		t.Run(name, func(t *testing.T) {
			e := a20Start(t, nil, changingWorkspace{announced, served})
			res := e.call(t, a20Args("f.txt", announced, "chg"))
			e.rejected(t, res)
			entries, err := os.ReadDir(filepath.Join(e.storeDir, "blobs"))
			require.NoError(t, err)
			assert.Empty(t, entries, "nothing is stored unless every check passes")
		})
	}
}

// a20FailingStore fails every call with an error naming a host path.
type a20FailingStore struct{ deliverable.Store }

const a20HostSecret = "/srv/airlock/host-only/store.db"

func (a20FailingStore) Lookup(context.Context, deliverable.Key) (deliverable.Receipt, string, error) {
	return deliverable.Receipt{}, "", fmt.Errorf("open %s: disk on fire", a20HostSecret)
}

func (a20FailingStore) Put(context.Context, deliverable.Entry, *deliverable.Content) (deliverable.Receipt, error) {
	return deliverable.Receipt{}, fmt.Errorf("open %s: disk on fire", a20HostSecret)
}

func TestAttackHostFailureRevealsNothing(t *testing.T) {
	e := a20Start(t, func(*deliverable.FileStore) *deliverable.Registrar {
		return &deliverable.Registrar{Store: a20FailingStore{}}
	}, nil)
	data := []byte("x\n")
	e.write(t, "x.txt", data)
	text := e.rejected(t, e.call(t, a20Args("x.txt", data, "hostfail")), "idempotencyKey")
	assert.NotContains(t, text, a20HostSecret)
	assert.NotContains(t, text, "disk on fire")

	// nil Registrar and Workspace: a host error, never a panic.
	server := mcptool.New(nil, nil, "task-1", "run-1", mcptool.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	st, ct := mcp.NewInMemoryTransports()
	ss, err := server.Connect(context.Background(), st, nil)
	require.NoError(t, err)
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "a", Version: "v1"}, nil).Connect(context.Background(), ct, nil)
	require.NoError(t, err)
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "register_deliverable", Arguments: a20Args("x.txt", data, "nil")})
	require.NoError(t, err)
	require.True(t, res.IsError)
	assert.Contains(t, a20Text(res), "idempotencyKey")
}

// countingReader is an endless body that counts what the handler read.
type countingReader struct {
	mu sync.Mutex
	n  int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range p {
		p[i] = ' '
	}
	c.n += int64(len(p))
	return len(p), nil
}

func TestAttackHandlerBoundsBodiesAndGarbage(t *testing.T) {
	e := a20Start(t, nil, nil)
	ws, err := deliverable.LocalWorkspace(e.ws)
	require.NoError(t, err)
	h := mcptool.Handler(mcptool.New(&deliverable.Registrar{Store: e.store}, ws, "task-1", "run-1"))

	body := &countingReader{}
	req := httptest.NewRequest(http.MethodPost, "/mcp", io.MultiReader(strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":"`), body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() { h.ServeHTTP(rec, req); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("an endless body was read without end")
	}
	assert.LessOrEqual(t, body.n, int64(mcptool.MaxRequestBytes)+64<<10, "read at most MaxRequestBytes of a body")
	assert.GreaterOrEqual(t, rec.Code, 400)

	for _, garbage := range []string{"", "{", "nul\x00l", `{"jsonrpc":"1.0","id":1,"method":"tools/call"}`, `[` + strings.Repeat(`[`, 100000) + `]`, `{"jsonrpc":"2.0","id":{"a":1},"method":"tools/call"}`} {
		req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(garbage))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		assert.GreaterOrEqual(t, rec.Code, 400, "garbage %q got %d %s", garbage[:min(len(garbage), 20)], rec.Code, rec.Body.String())
		assert.NotContains(t, rec.Body.String(), e.ws)
	}
}

// a20Forward serves the tool in the sandbox and returns the address and host.
func a20Forward(t *testing.T, ctx context.Context, h http.Handler) (*remotetest.Server, *remote.Host, net.Addr) {
	t.Helper()
	srv := remotetest.NewServer(t)
	host, err := remote.Dial(ctx, srv.Addr(), srv.Config())
	require.NoError(t, err)
	t.Cleanup(func() { _ = host.Close() })
	addr, err := host.ServeInSandbox(ctx, "tcp", "127.0.0.1:0", h)
	require.NoError(t, err)
	return srv, host, addr
}

func a20Get(addr net.Addr) (int, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr.String() + "/ok")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

func TestAttackForwardFloodOfConnections(t *testing.T) {
	ctx := t.Context()
	_, _, addr := a20Forward(t, ctx, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range 2000 {
		c, err := net.DialTimeout("tcp", addr.String(), 2*time.Second)
		if err != nil {
			continue
		}
		conns = append(conns, c)
	}
	// Every connection beyond MaxForwardConns is closed at once.
	closed := 0
	for _, c := range conns[remote.MaxForwardConns:] {
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		var b [1]byte
		if _, err := c.Read(b[:]); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			closed++
		}
		if closed > 100 {
			break
		}
	}
	assert.Greater(t, closed, 100, "connections beyond %d must be closed at once", remote.MaxForwardConns)
	for _, c := range conns {
		_ = c.Close()
	}
	conns = nil
	deadline := time.Now().Add(15 * time.Second)
	for {
		code, err := a20Get(addr)
		if err == nil && code == 204 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the forward did not recover after the flood: %v %d", err, code)
		time.Sleep(200 * time.Millisecond)
	}
}

func TestAttackForwardSlowlorisIsCutOff(t *testing.T) {
	t.Parallel() // waits out the forward's timeouts; its own server
	ctx := t.Context()
	_, _, addr := a20Forward(t, ctx, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	c, err := net.Dial("tcp", addr.String())
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "GET /ok HTTP/1.1\r\nHost: x\r\n")
	require.NoError(t, err)
	start := time.Now()
	dripped := make(chan struct{})
	go func() {
		defer close(dripped)
		for range 40 {
			if _, err := io.WriteString(c, "X"); err != nil {
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
	}()
	_ = c.SetReadDeadline(time.Now().Add(remote.ForwardHeaderTimeout + 8*time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	elapsed := time.Since(start)
	assert.False(t, errors.Is(err, os.ErrDeadlineExceeded), "a header dripped byte by byte was not cut off after %v", elapsed)
	if err == nil {
		assert.NotContains(t, line, " 2", "a dripped header must not be served: %q", line)
	}
	assert.Less(t, elapsed, remote.ForwardHeaderTimeout+5*time.Second)
	<-dripped
}

func TestAttackForwardHeaderAndBodyLimits(t *testing.T) {
	ctx := t.Context()
	var read int64
	var mu sync.Mutex
	_, _, addr := a20Forward(t, ctx, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		mu.Lock()
		read = n
		mu.Unlock()
		if err != nil {
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			return
		}
		w.WriteHeader(204)
	}))
	c := &http.Client{Timeout: 30 * time.Second}
	req, err := http.NewRequest(http.MethodGet, "http://"+addr.String()+"/", nil)
	require.NoError(t, err)
	req.Header.Set("X-Big", strings.Repeat("a", 64<<10))
	resp, err := c.Do(req)
	if err == nil {
		assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)
		resp.Body.Close()
	}
	resp, err = c.Post("http://"+addr.String()+"/", "application/octet-stream", io.LimitReader(&countingReader{}, 64<<20))
	if err == nil {
		resp.Body.Close()
		assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	}
	mu.Lock()
	defer mu.Unlock()
	assert.LessOrEqual(t, read, int64(remote.MaxForwardBodyBytes), "the handler read more than MaxForwardBodyBytes")
}

func TestAttackForwardLifecycle(t *testing.T) {
	srv := remotetest.NewServer(t)
	host, err := remote.Dial(t.Context(), srv.Addr(), srv.Config())
	require.NoError(t, err)
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })

	for _, bad := range [][2]string{{"tcp", "0.0.0.0:0"}, {"tcp", "localhost:0"}, {"tcp", ":0"}, {"tcp", "10.0.0.1:0"}, {"unix", "relative.sock"}, {"udp", "127.0.0.1:0"}, {"tcp", "127.0.0.1:99999"}} {
		_, err := host.ServeInSandbox(t.Context(), bad[0], bad[1], ok)
		assert.Error(t, err, "%v must be refused", bad)
	}

	// ctx cancel mid-request: the forward ends, the handler's request ends.
	ctx, cancel := context.WithCancel(t.Context())
	entered := make(chan struct{})
	ended := make(chan struct{})
	addr, err := host.ServeInSandbox(ctx, "tcp", "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-r.Context().Done()
		close(ended)
	}))
	require.NoError(t, err)
	go func() { _, _ = a20Get(addr) }()
	<-entered
	cancel()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("cancelling ServeInSandbox's ctx did not end the request in flight")
	}
	time.Sleep(200 * time.Millisecond)
	_, err = a20Get(addr)
	assert.Error(t, err, "the forward must be gone once ctx ended")

	// Existing path and symlink for a unix forward.
	dir := t.TempDir()
	existing := filepath.Join(dir, "exists.sock")
	require.NoError(t, os.WriteFile(existing, []byte("keep me"), 0o644))
	_, err = host.ServeInSandbox(t.Context(), "unix", existing, ok)
	assert.ErrorIs(t, err, remote.ErrForward, "a socket path that exists is refused")
	b, rerr := os.ReadFile(existing)
	require.NoError(t, rerr, "the existing file must not be removed")
	assert.Equal(t, "keep me", string(b))
	target := filepath.Join(t.TempDir(), "target")
	require.NoError(t, os.WriteFile(target, []byte("victim"), 0o644))
	link := filepath.Join(dir, "link.sock")
	require.NoError(t, os.Symlink(target, link))
	_, err = host.ServeInSandbox(t.Context(), "unix", link, ok)
	assert.ErrorIs(t, err, remote.ErrForward, "a socket path that is a symlink is refused")
	b, rerr = os.ReadFile(target)
	require.NoError(t, rerr)
	assert.Equal(t, "victim", string(b))

	// A fresh unix forward works, then ServeInSandbox after Close fails fast.
	sock := filepath.Join(dir, "mcp.sock")
	uaddr, err := host.ServeInSandbox(t.Context(), "unix", sock, ok)
	require.NoError(t, err)
	assert.Equal(t, sock, uaddr.String())
	require.NoError(t, host.Close())
	done := make(chan error, 1)
	go func() { _, err := host.ServeInSandbox(context.Background(), "tcp", "127.0.0.1:0", ok); done <- err }()
	select {
	case err := <-done:
		require.Error(t, err, "ServeInSandbox after Close must fail")
	case <-time.After(10 * time.Second):
		t.Fatal("ServeInSandbox after Host.Close hung")
	}
}

// a20Remote serves the tool over the forward, bound to a RemoteWorkspace of
// the sandbox's directory, and connects the agent's MCP client to it.
func a20Remote(t *testing.T) (*remotetest.Server, *mcp.ClientSession, string) {
	t.Helper()
	ctx := t.Context()
	srv := remotetest.NewServer(t)
	host, err := remote.Dial(ctx, srv.Addr(), srv.Config())
	require.NoError(t, err)
	t.Cleanup(func() { _ = host.Close() })
	storeDir := t.TempDir()
	store, err := deliverable.NewFileStore(afero.NewOsFs(), storeDir)
	require.NoError(t, err)
	server := mcptool.New(&deliverable.Registrar{Store: store}, deliverable.RemoteWorkspace(host, srv.Dir()), "task-1", "run-1")
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcptool.Handler(server))
	addr, err := host.ServeInSandbox(ctx, "tcp", "127.0.0.1:0", mux)
	require.NoError(t, err)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: "http://" + addr.String() + "/mcp", DisableStandaloneSSE: true}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return srv, cs, storeDir
}

func TestAttackRemoteWorkspaceHostileNames(t *testing.T) {
	srv, cs, storeDir := a20Remote(t)
	e := &a20{ws: srv.Dir(), storeDir: storeDir, session: cs}
	data := []byte("payload\n")
	pwned := filepath.Join(srv.Dir(), "pwned")
	for _, name := range []string{"$(touch pwned).txt", "`touch pwned`.txt", "a'b\".txt", "-n.txt", "--.txt", "sp ace.txt", "ünï ✓.txt", "*.txt", "a;touch pwned.txt"} {
		t.Run(name, func(t *testing.T) {
			e.write(t, name, data)
			res := e.call(t, a20Args(name, data, "k-"+name))
			require.False(t, res.IsError, "%q: %s", name, a20Text(res))
			sc := res.StructuredContent.(map[string]any)
			assert.Equal(t, a20Sum(data), sc["sha256"])
			_, err := os.Lstat(pwned)
			assert.ErrorIs(t, err, os.ErrNotExist, "a file name ran a command in the sandbox")
		})
	}
	secret := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(secret, data, 0o600))
	require.NoError(t, os.Symlink(secret, filepath.Join(srv.Dir(), "link.txt")))
	require.NoError(t, os.Symlink("/dev/zero", filepath.Join(srv.Dir(), "zero.txt")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(srv.Dir(), "fifo.txt"), 0o644))
	e.write(t, "h.txt", data)
	require.NoError(t, os.Link(filepath.Join(srv.Dir(), "h.txt"), filepath.Join(srv.Dir(), "h2.txt")))
	for _, name := range []string{"link.txt", "zero.txt", "fifo.txt", "h.txt"} {
		t.Run("reject "+name, func(t *testing.T) {
			done := make(chan *mcp.CallToolResult, 1)
			go func() {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "register_deliverable", Arguments: a20Args(name, data, "r-"+name)})
				if err != nil {
					res = &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "protocol error: " + err.Error()}}}
				}
				done <- res
			}()
			select {
			case res := <-done:
				e.rejected(t, res, "contentRef")
			case <-time.After(40 * time.Second):
				t.Fatalf("%s blocked the tool", name)
			}
		})
	}
}

func TestAttackConcurrentSameKeyDifferentContent(t *testing.T) {
	e := a20Start(t, nil, nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, conflict := 0, 0
	for i := range 12 {
		data := []byte(fmt.Sprintf("content %d\n", i))
		name := fmt.Sprintf("f%d.txt", i)
		e.write(t, name, data)
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.session.CallTool(context.Background(), &mcp.CallToolParams{Name: "register_deliverable", Arguments: a20Args(name, data, "shared")})
			mu.Lock()
			defer mu.Unlock()
			if err == nil && !res.IsError {
				ok++
			} else if err == nil && strings.Contains(a20Text(res), "idempotencyKey") {
				conflict++
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, 1, ok, "one request wins the key")
	assert.Equal(t, 11, conflict, "every other is a conflict naming idempotencyKey")
	entries, err := os.ReadDir(filepath.Join(e.storeDir, "attachments"))
	require.NoError(t, err)
	assert.Len(t, entries, 1)
}

func TestAttackStatelessHandlerHoldsNoSessions(t *testing.T) {
	e := a20Start(t, nil, nil)
	ws, err := deliverable.LocalWorkspace(e.ws)
	require.NoError(t, err)
	ts := httptest.NewServer(mcptool.Handler(mcptool.New(&deliverable.Registrar{Store: e.store}, ws, "task-1", "run-1")))
	defer ts.Close()
	initBody := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	post := func() {
		req, _ := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader(initBody))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := ts.Client().Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode)
		assert.Empty(t, resp.Header.Get("Mcp-Session-Id"), "stateless: no session id")
	}
	for range 50 {
		post()
	}
	time.Sleep(100 * time.Millisecond)
	before := runtime.NumGoroutine()
	for range 2000 {
		post()
	}
	time.Sleep(300 * time.Millisecond)
	assert.Less(t, runtime.NumGoroutine()-before, 50, "goroutines grew with initialize requests")
}

// TestAttackReadmeAgentView: the README's "agent's tool" section shows the
// tool's description word for word, and its host snippet works with the
// SDK's default client transport (as an agent's MCP configuration uses it).
func TestAttackReadmeAgentView(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	readme := string(raw)
	i := strings.Index(readme, "word for word:")
	require.GreaterOrEqual(t, i, 0)
	block := readme[i:]
	start := strings.Index(block, "```text\n") + len("```text\n")
	end := strings.Index(block[start:], "```")
	require.Greater(t, end, 0)
	assert.Equal(t, strings.TrimSpace(block[start:start+end]), strings.TrimSpace(mcptool.Description("register_deliverable")))

	// The host's view, as the README writes it.
	ctx := t.Context()
	srv := remotetest.NewServer(t)
	host, err := remote.Dial(ctx, srv.Addr(), srv.Config())
	require.NoError(t, err)
	defer host.Close()
	store, err := deliverable.NewFileStore(afero.NewOsFs(), t.TempDir())
	require.NoError(t, err)
	reg := &deliverable.Registrar{Store: store}
	workDir, taskID, runID := srv.Dir(), "task-1", "run-1"
	server := mcptool.New(reg, deliverable.RemoteWorkspace(host, workDir), taskID, runID)
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcptool.Handler(server))
	addr, err := host.ServeInSandbox(ctx, "tcp", "127.0.0.1:0", mux)
	require.NoError(t, err)
	endpoint := "http://" + addr.String() + "/mcp"

	data := []byte("# Report\n")
	require.NoError(t, os.WriteFile(filepath.Join(srv.Dir(), "report.md"), data, 0o644))
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil).Connect(cctx,
		&mcp.StreamableClientTransport{Endpoint: endpoint}, nil)
	require.NoError(t, err, "the SDK's default client transport must connect")
	defer cs.Close()
	res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "register_deliverable", Arguments: a20Args("report.md", data, "rep-1")})
	require.NoError(t, err)
	require.False(t, res.IsError, a20Text(res))
	sc := res.StructuredContent.(map[string]any)
	assert.Equal(t, "deliverable:"+sc["attachmentId"].(string), sc["citation"])
	assert.Contains(t, a20Text(res), "deliverable:"+sc["attachmentId"].(string), "the text content cites the receipt for clients that ignore structured content")
}

// TestAttackForwardSlotsHeldByNonReaders: connections that ask for a large
// response and never read it must time out like any other (the doc: "a
// sandbox that keeps every slot busy locks itself out ... until its
// connections time out"), so the forward serves again afterwards.
func TestAttackForwardSlotsHeldByNonReaders(t *testing.T) {
	t.Parallel() // waits out the forward's timeouts; its own server
	ctx := t.Context()
	big := strings.Repeat("x", 1<<20)
	_, _, addr := a20Forward(t, ctx, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ok" {
			w.WriteHeader(204)
			return
		}
		for range 64 {
			if _, err := io.WriteString(w, big); err != nil {
				return
			}
		}
	}))
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range remote.MaxForwardConns {
		c, err := net.Dial("tcp", addr.String())
		require.NoError(t, err)
		_, err = io.WriteString(c, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		conns = append(conns, c)
	}
	time.Sleep(time.Second)
	if code, err := a20Get(addr); err == nil && code == 204 {
		t.Log("a slot was still free")
	}
	deadline := time.Now().Add(remote.ForwardIdleTimeout + remote.ForwardHeaderTimeout + 20*time.Second)
	for {
		code, err := a20Get(addr)
		if err == nil && code == 204 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("16 connections that never read their responses locked the forward for good (%v %d)", err, code)
		}
		time.Sleep(time.Second)
	}
}

// TestAttackStdioGarbage runs ServeStdio in a child process (this test binary)
// and feeds it garbage, then a real call, then closes stdin.
// TestAttackStdioGarbage runs ServeStdio in a child process (this test
// binary): a rejected call, then one poison line, then a plain request; the
// server must keep answering until stdin closes ("until the client
// disconnects or ctx ends"), and then end cleanly.
func TestAttackStdioGarbage(t *testing.T) {
	if os.Getenv("A20_STDIO_WS") != "" {
		a20StdioChild()
	}
	for name, poison := range map[string]string{
		"deep":     `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"register_deliverable","arguments":` + a20DeepArgs(1500) + `}}`,
		"not json": `this is not json`,
		"unknown":  `{"jsonrpc":"2.0","id":3,"method":"no/such/method","params":{}}`,
	} {
		t.Run(name, func(t *testing.T) { a20StdioRun(t, poison) })
	}
}

func a20StdioChild() {
	ws, err := deliverable.LocalWorkspace(os.Getenv("A20_STDIO_WS"))
	if err != nil {
		os.Exit(3)
	}
	store, err := deliverable.NewFileStore(afero.NewOsFs(), os.Getenv("A20_STDIO_STORE"))
	if err != nil {
		os.Exit(4)
	}
	err = mcptool.ServeStdio(context.Background(), mcptool.New(&deliverable.Registrar{Store: store}, ws, "task-1", "run-1"))
	if err != nil {
		os.Stderr.WriteString("serve: " + err.Error())
		os.Exit(5)
	}
	os.Exit(0)
}

func a20StdioRun(t *testing.T, poison string) {
	ws, storeDir := t.TempDir(), t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestAttackStdioGarbage$")
	cmd.Env = append(os.Environ(), "A20_STDIO_WS="+ws, "A20_STDIO_STORE="+storeDir)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill() }()
	lines := bufio.NewScanner(stdout)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	send := func(s string) { _, _ = io.WriteString(stdin, s+"\n") }
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`)
	require.True(t, lines.Scan(), "no initialize answer: %s", stderr.String())
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"register_deliverable","arguments":{"contentRef":"../../etc/passwd","filename":"passwd","contentType":"text/plain","byteSize":1,"sha256":"` + strings.Repeat("0", 64) + `","title":"t","idempotencyKey":"k"}}}`)
	require.True(t, lines.Scan(), "no answer to the call: %s", stderr.String())
	var resp struct {
		Result struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(lines.Bytes(), &resp), lines.Text())
	assert.True(t, resp.Result.IsError, lines.Text())
	require.NotEmpty(t, resp.Result.Content)
	assert.Contains(t, resp.Result.Content[0].Text, "contentRef")
	assert.NotContains(t, resp.Result.Content[0].Text, ws)

	send(poison)
	send(`{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{}}`)
	var gotList bool
	for !gotList && lines.Scan() {
		gotList = strings.Contains(lines.Text(), `"id":4`)
	}
	assert.True(t, gotList, "ServeStdio stopped answering after %.60q (stderr: %s)", poison, stderr.String())
	require.NoError(t, stdin.Close())
	done := make(chan error, 1)
	go func() {
		for lines.Scan() {
		}
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		assert.NoError(t, err, "ServeStdio must end cleanly when the client disconnects: %s", stderr.String())
	case <-time.After(10 * time.Second):
		t.Fatal("ServeStdio did not end after stdin closed")
	}
}

func TestAttackForwardSetupIsBounded(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	srv := remotetest.NewServer(t)
	host, err := remote.Dial(t.Context(), srv.Addr(), srv.Config())
	require.NoError(t, err)
	defer host.Close()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	addr, err := host.ServeInSandbox(ctx, "tcp", "127.0.0.1:0", ok)
	if err == nil {
		time.Sleep(200 * time.Millisecond)
		_, gerr := a20Get(addr)
		assert.Error(t, gerr, "a forward set up with an ended ctx must not be served")
	}

	hung := remotetest.NewServer(t, remotetest.WithHangForward())
	cfg := hung.Config()
	cfg.ControlTimeout = 2 * time.Second
	hh, err := remote.Dial(t.Context(), hung.Addr(), cfg)
	require.NoError(t, err)
	defer hh.Close()
	for name, mk := range map[string]func() (context.Context, context.CancelFunc){
		"ctx deadline": func() (context.Context, context.CancelFunc) { return context.WithTimeout(t.Context(), 2*time.Second) },
		"no deadline":  func() (context.Context, context.CancelFunc) { return context.WithCancel(t.Context()) },
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := mk()
			defer cancel()
			done := make(chan error, 1)
			go func() { _, err := hh.ServeInSandbox(ctx, "tcp", "127.0.0.1:0", ok); done <- err }()
			select {
			case err := <-done:
				require.Error(t, err)
				assert.True(t, errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "forward"), "%v", err)
			case <-time.After(10 * time.Second):
				t.Fatal("ServeInSandbox waited on a server that never answers the forward request (control deadline 2 s)")
			}
		})
	}
}

func TestAttackHostCloseEndsRequestsInFlight(t *testing.T) {
	srv := remotetest.NewServer(t)
	host, err := remote.Dial(t.Context(), srv.Addr(), srv.Config())
	require.NoError(t, err)
	entered, ended := make(chan struct{}), make(chan struct{})
	var once sync.Once
	addr, err := host.ServeInSandbox(context.Background(), "tcp", "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(entered) })
		<-r.Context().Done()
		close(ended)
	}))
	require.NoError(t, err)
	go func() { _, _ = a20Get(addr) }()
	<-entered
	closed := make(chan error, 1)
	go func() { closed <- host.Close() }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Host.Close hung with a forwarded request in flight")
	}
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("Host.Close did not end the handler's request")
	}
	_, err = a20Get(addr)
	assert.Error(t, err, "the forward must be gone with the Host")
}

// TestAttackRacingWriter rewrites the file between two versions of one size
// while the agent registers version A: every call either fails as a tool
// error or stores exactly version A.
func TestAttackRacingWriter(t *testing.T) {
	a := []byte(strings.Repeat("A", 256<<10))
	b := []byte(strings.Repeat("B", 256<<10))
	check := func(t *testing.T, dir string, storeDir string, call func(key string) *mcp.CallToolResult) {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				v := a
				if i%2 == 1 {
					v = b
				}
				tmp := filepath.Join(dir, ".tmp")
				_ = os.WriteFile(tmp, v, 0o644)
				_ = os.Rename(tmp, filepath.Join(dir, "race.bin"))
				f, err := os.OpenFile(filepath.Join(dir, "race.bin"), os.O_WRONLY, 0)
				if err == nil {
					_, _ = f.WriteAt(v[:4096], 0)
					_ = f.Close()
				}
			}
		}()
		stored, rejected := 0, 0
		for i := range 30 {
			res := call(fmt.Sprintf("race-%d", i))
			if res.IsError {
				rejected++
				continue
			}
			stored++
			sc := res.StructuredContent.(map[string]any)
			blob, err := os.ReadFile(filepath.Join(storeDir, "blobs", sc["sha256"].(string)))
			require.NoError(t, err)
			require.Equal(t, a20Sum(a), a20Sum(blob), "stored bytes are not the declared ones")
		}
		close(stop)
		wg.Wait()
		t.Logf("stored %d, rejected %d", stored, rejected)
	}
	t.Run("local", func(t *testing.T) {
		e := a20Start(t, nil, nil)
		e.write(t, "race.bin", a)
		check(t, e.ws, e.storeDir, func(key string) *mcp.CallToolResult {
			res := e.call(t, a20Args("race.bin", a, key))
			if res.IsError {
				e.rejected(t, res)
			}
			return res
		})
	})
	t.Run("remote", func(t *testing.T) {
		srv, cs, storeDir := a20Remote(t)
		e := &a20{ws: srv.Dir(), storeDir: storeDir, session: cs}
		e.write(t, "race.bin", a)
		check(t, srv.Dir(), storeDir, func(key string) *mcp.CallToolResult {
			res := e.call(t, a20Args("race.bin", a, key))
			if res.IsError {
				e.rejected(t, res)
			}
			return res
		})
	})
}

// TestAttackForwardPipelinedNonReaders: the same lockout with the tool's
// own handler, whose responses are small: each connection pipelines
// thousands of tools/list requests and never reads a response.
func TestAttackForwardPipelinedNonReaders(t *testing.T) {
	ctx := t.Context()
	e := a20Start(t, nil, nil)
	ws, err := deliverable.LocalWorkspace(e.ws)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcptool.Handler(mcptool.New(&deliverable.Registrar{Store: e.store}, ws, "task-1", "run-1")))
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	_, _, addr := a20Forward(t, ctx, mux)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`
	req := "POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Protocol-Version: 2025-06-18\r\nContent-Length: " + fmt.Sprint(len(body)) + "\r\n\r\n" + body
	pipeline := strings.Repeat(req, 20000)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range remote.MaxForwardConns {
		c, err := net.Dial("tcp", addr.String())
		require.NoError(t, err)
		conns = append(conns, c)
		go func() { _, _ = io.WriteString(c, pipeline) }()
	}
	time.Sleep(3 * time.Second)
	deadline := time.Now().Add(remote.ForwardIdleTimeout + remote.ForwardHeaderTimeout + 20*time.Second)
	for {
		code, err := a20Get(addr)
		if err == nil && code == 204 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("16 connections pipelining tools/list without reading locked the tool's forward for good (%v %d)", err, code)
		}
		time.Sleep(time.Second)
	}
}

func a20DeepArgs(depth int) string {
	return `{"contentRef":"ok.txt","filename":"ok.txt","contentType":"text/plain","byteSize":6,"sha256":"x","idempotencyKey":"deep","title":` +
		strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}`
}

// TestAttackDeepArgumentsAreToolErrors: a title nested 1,500 arrays deep
// (well under every size limit) is "arguments that do not decode into a
// Request"; the package doc promises a tool error naming the field. Over a
// stream transport (in-memory here, ServeStdio alike) the session must
// survive it; over HTTP the answer must be the tool error, not a 400.
func TestAttackDeepArgumentsAreToolErrors(t *testing.T) {
	e := a20Start(t, nil, nil)
	data := []byte("hello\n")
	e.write(t, "ok.txt", data)
	t.Run("http", func(t *testing.T) {
		ws, err := deliverable.LocalWorkspace(e.ws)
		require.NoError(t, err)
		h := mcptool.Handler(mcptool.New(&deliverable.Registrar{Store: e.store}, ws, "task-1", "run-1"))
		body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"register_deliverable","arguments":` + a20DeepArgs(1500) + `}}`
		req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		assert.Equal(t, http.StatusOK, rec.Code, "over HTTP: %s", rec.Body.String())
		assert.Contains(t, rec.Body.String(), `"isError":true`)
	})
	t.Run("stream", func(t *testing.T) {
		// fix20: served through mcptool.ServeConn (ServeStdio's code) rather than
		// straight through the SDK's in-memory transport, in which no product
		// code sits between the client and the SDK's decoder.
		ws, err := deliverable.LocalWorkspace(e.ws)
		require.NoError(t, err)
		c1, c2 := net.Pipe()
		served := make(chan error, 1)
		go func() {
			served <- mcptool.ServeConn(context.Background(), mcptool.New(&deliverable.Registrar{Store: e.store}, ws, "task-1", "run-1"), c1, nil)
		}()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil).Connect(context.Background(), &mcp.IOTransport{Reader: c2, Writer: c2}, nil)
		require.NoError(t, err)
		e := &a20{ws: e.ws, storeDir: e.storeDir, store: e.store, session: cs}
		defer func() {
			require.NoError(t, cs.Close())
			select {
			case err := <-served:
				assert.NoError(t, err, "ServeConn ends cleanly when the client disconnects")
			case <-time.After(10 * time.Second):
				t.Fatal("ServeConn did not end after the client closed")
			}
		}()
		res, err := e.session.CallTool(context.Background(), &mcp.CallToolParams{Name: "register_deliverable", Arguments: json.RawMessage(a20DeepArgs(1500))})
		if assert.NoError(t, err, "a deeply nested argument must be a tool error, not a protocol failure") {
			e.rejected(t, res, "title")
		}
		res, err = e.session.CallTool(context.Background(), &mcp.CallToolParams{Name: "register_deliverable", Arguments: a20Args("ok.txt", data, "after-deep")})
		require.NoError(t, err, "one deeply nested argument ended the agent's MCP session for good")
		assert.False(t, res.IsError, a20Text(res))
	})
}

// TestAttackStdioHugeLineMemory: one unterminated 256 MiB JSON string on
// stdin. MaxRequestBytes bounds Handler's bodies; the stdio server should be
// as bounded (it may run in the host's own process).
func TestAttackStdioHugeLineMemory(t *testing.T) {
	if os.Getenv("A20_STDIO_WS") != "" {
		a20StdioChild()
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAttackStdioHugeLineMemory$")
	cmd.Env = append(os.Environ(), "A20_STDIO_WS="+t.TempDir(), "A20_STDIO_STORE="+t.TempDir())
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	cmd.Stdout = io.Discard
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); t.Logf("child stderr: %.300s", stderr.String()) }()
	_, err = io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"a":"`)
	require.NoError(t, err)
	chunk := strings.Repeat("a", 1<<20)
	written := 0
	for range 256 {
		if _, err := io.WriteString(stdin, chunk); err != nil {
			break
		}
		written++
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	require.NoError(t, err)
	if !strings.Contains(string(status), "VmHWM:") {
		t.Logf("the child ended after %d MiB (a bound, not growth)", written)
		return
	}
	var rssKB int
	for _, l := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			_, _ = fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(l, "VmHWM:")), "%d", &rssKB)
		}
	}
	t.Logf("wrote %d MiB; child peak RSS %d MiB", written, rssKB>>10)
	assert.Less(t, rssKB>>10, 160, "the stdio server buffered an unterminated message of %d MiB", written)
}

func TestAttackReplayEdges(t *testing.T) {
	e := a20Start(t, nil, nil)
	data := []byte("replayed\n")
	e.write(t, "p.txt", data)
	first := e.call(t, a20Args("p.txt", data, "p"))
	require.False(t, first.IsError, a20Text(first))
	other := a20Args("p.txt", data, "p")
	other["title"] = "another title"
	e.rejected(t, e.call(t, other), "idempotencyKey")
	other = a20Args("p.txt", data, "p")
	other["contentType"] = "text/markdown"
	e.rejected(t, e.call(t, other), "idempotencyKey")
	require.NoError(t, os.Remove(filepath.Join(e.ws, "p.txt")))
	replay := e.call(t, a20Args("p.txt", data, "p"))
	require.False(t, replay.IsError, "a replay does not read the file: %s", a20Text(replay))
	assert.Equal(t, first.StructuredContent, replay.StructuredContent)
	// A new key for the same bytes after the file is gone: not found, as a tool error.
	e.rejected(t, e.call(t, a20Args("p.txt", data, "p2")), "contentRef")
}

func TestAttackBadHostBindingIsHostError(t *testing.T) {
	store, err := deliverable.NewFileStore(afero.NewOsFs(), t.TempDir())
	require.NoError(t, err)
	dir := t.TempDir()
	ws, err := deliverable.LocalWorkspace(dir)
	require.NoError(t, err)
	data := []byte("b\n")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "b.txt"), data, 0o644))
	for name, opts := range map[string][]mcptool.Option{
		"bad command":  {mcptool.WithBinding("cmd\n1", "rev")},
		"huge entity":  {mcptool.WithBinding("c", "r", deliverable.EntityRef{Type: "issue", ID: strings.Repeat("x", 5000)})},
		"bad task ids": nil,
	} {
		t.Run(name, func(t *testing.T) {
			task := "task-1"
			if opts == nil {
				task = " bad\x00task "
			}
			server := mcptool.New(&deliverable.Registrar{Store: store}, ws, task, "run-1", opts...)
			st, ct := mcp.NewInMemoryTransports()
			ss, err := server.Connect(context.Background(), st, nil)
			require.NoError(t, err)
			defer ss.Close()
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "a", Version: "v1"}, nil).Connect(context.Background(), ct, nil)
			require.NoError(t, err)
			defer cs.Close()
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "register_deliverable", Arguments: a20Args("b.txt", data, "k")})
			require.NoError(t, err)
			require.True(t, res.IsError)
			text := a20Text(res)
			assert.Contains(t, text, "host's side", "a host misconfiguration is a host error: %s", text)
			assert.NotContains(t, text, dir)
		})
	}
}
