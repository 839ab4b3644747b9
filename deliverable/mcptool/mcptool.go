// Package mcptool offers deliverable's registration to an agent as a Model
// Context Protocol tool, with the official Go SDK
// (github.com/modelcontextprotocol/go-sdk).
//
// New returns an MCP server with one tool, "register_deliverable" (or
// Registrar.ToolName), bound by the host to one workspace, task and run:
// the agent supplies the Request fields, the tool calls
// Registrar.RegisterFor and answers with the receipt. Handler serves the
// server over streamable HTTP (mount it anywhere; stage/remote's
// Host.ServeInSandbox makes it reachable inside a sandbox at
// http://127.0.0.1:<port>/mcp), ServeStdio over stdin and stdout for a
// local agent, ServeConn over any other byte stream.
//
// # What the agent sees
//
// The tool's description (Description) tells the agent what to supply,
// to wait for the receipt, to retry an unclear result with the same
// idempotencyKey, to cite deliverable:<attachmentId> in its completion, and
// never to describe a workspace path as an upload. The input schema is
// inferred from deliverable.Request (its jsonschema tags), the output
// schema from Result.
//
// Every rejection comes back as a tool error (IsError) whose text is the
// agent-facing message of the *deliverable.RequestError, as it is. Arguments
// that do not decode into a Request are rejected the same way, before
// Register runs, with a message naming the fields. A failure on the host's
// side (*deliverable.HostError: the store, the transport, the sandbox's
// protocol) is a tool error too, with a message that asks the agent to
// retry later with the same idempotencyKey and reveals nothing of the host;
// the error itself goes to the Option WithLogger's logger.
//
// # Guarantees
//
//   - The task, run, workspace and the host's ids come from the host (New
//     and WithBinding), never from the agent's arguments.
//   - Handler keeps no session: each HTTP request is served on its own
//     (the SDK's stateless mode, JSON responses, bodies of at most
//     MaxRequestBytes), so a client that opens many sessions holds no memory
//     on the host.
//   - No message ends a session: ServeStdio and ServeConn check each line
//     before the SDK reads it (one JSON-RPC 2.0 object, at most
//     MaxRequestBytes, nested at most MaxNesting levels) and answer a bad
//     one with a JSON-RPC error; Handler answers a body nested too deeply
//     itself. A tool call whose argument is nested too deeply gets a tool
//     error naming the argument. JSON-RPC batches are not accepted on a
//     stream (MCP dropped them in 2025-06-18).
//
// # Non-guarantees
//
// Handler does no authentication: whoever reaches it can register files of
// the bound workspace for the bound task. Mount it where only the agent can
// reach it (inside its sandbox through ServeInSandbox, or behind the host's
// own checks).
package mcptool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockdev/airlock/deliverable"
	"github.com/airlockdev/airlock/internal/jsonlit"
)

// MaxRequestBytes bounds the body of one HTTP request Handler reads.
const MaxRequestBytes = 1 << 20

// Result is the tool's structured output: the receipt, and the citation
// the completion report uses.
type Result struct {
	deliverable.Receipt
	Citation    string                  `json:"citation" jsonschema:"cite the file in the completion report exactly so: deliverable:<attachmentId>"`
	WorkProduct deliverable.WorkProduct `json:"workProduct" jsonschema:"the attachment's artifact work product"`
}

// An Option configures New.
type Option func(*config)

type config struct {
	binding  deliverable.Binding
	log      *slog.Logger
	name     string
	version  string
	hostText string
}

// WithBinding sets the host's ids that every receipt of this server echoes
// back (deliverable.Binding's Command, Revision and Entities); the task and
// run are New's.
func WithBinding(command, revision string, entities ...deliverable.EntityRef) Option {
	return func(c *config) {
		c.binding.Command, c.binding.Revision = command, revision
		c.binding.Entities = append([]deliverable.EntityRef(nil), entities...)
	}
}

// WithLogger logs every host failure (with its cause, which the agent is
// not shown) and every rejection at debug level. Default: nothing is logged.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// WithImplementation sets the name and version the server reports to MCP
// clients. Default: "airlock-deliverable", "v1".
func WithImplementation(name, version string) Option {
	return func(c *config) { c.name, c.version = name, version }
}

// New returns an MCP server whose one tool registers files of ws for task
// taskID in run runID through reg. The tool is named reg.ToolName
// (deliverable.DefaultToolName when empty); see the package documentation
// for what the agent is told and shown. A nil reg or ws, or bad ids, make
// every call a host error (logged), not a panic.
func New(reg *deliverable.Registrar, ws deliverable.Workspace, taskID, runID string, opts ...Option) *mcp.Server {
	c := config{log: slog.New(slog.DiscardHandler), name: "airlock-deliverable", version: "v1"}
	for _, o := range opts {
		o(&c)
	}
	c.binding.TaskID, c.binding.RunID = taskID, runID
	name := deliverable.DefaultToolName
	if reg != nil && reg.ToolName != "" {
		name = reg.ToolName
	}
	c.hostText = name + ": the registration failed on the host's side, not because of your request. " +
		"Wait a little and call " + name + " again with the same arguments and the same idempotencyKey; " +
		"if it keeps failing, say in your report that the file could not be registered."
	s := mcp.NewServer(&mcp.Implementation{Name: c.name, Version: c.version}, nil)
	t := &tool{reg: reg, ws: ws, cfg: c, name: name}
	s.AddTool(&mcp.Tool{
		Name:         name,
		Title:        "Register a deliverable file",
		Description:  Description(name),
		InputSchema:  mustSchema[deliverable.Request](),
		OutputSchema: mustSchema[Result](),
		Annotations:  &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: new(false), OpenWorldHint: new(false)},
	}, t.call)
	return s
}

// mustSchema infers the JSON schema of T; metadata (json.RawMessage) is an
// object. T's schema is fixed at compile time, so a failure is a bug here.
func mustSchema[T any]() *jsonschema.Schema {
	ref := &jsonschema.Schema{Type: "object", Required: []string{"type", "id"}, Properties: map[string]*jsonschema.Schema{
		"type": {Type: "string"}, "id": {Type: "string"},
	}}
	s, err := jsonschema.For[T](&jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[json.RawMessage]():        {Type: "object"},
		reflect.TypeFor[deliverable.EntityRefs](): {Type: "array", Items: ref},
	}})
	if err != nil {
		panic(fmt.Sprintf("mcptool: schema of %T: %v", *new(T), err))
	}
	return s
}

// Description returns the tool's description for the agent, for a tool
// named name.
func Description(name string) string {
	return "Deliver a file you made to the user. " + name + " checks a file in your workspace and stores a copy " +
		"as an attachment of this task; a file that is only written to the workspace is not delivered.\n\n" +
		"Finish the file first, then pass: contentRef, its path relative to the workspace root (such as out/report.pdf; " +
		"no absolute path, URL, \"..\" or symbolic link); filename, its base name (report.pdf); contentType, its media type " +
		"(application/pdf); byteSize and sha256, its exact size in bytes and the SHA-256 of its bytes as hex, both measured " +
		"on the final file (for example with wc -c and sha256sum); title, a short description for the user; and " +
		"idempotencyKey, a key you choose, new for each file.\n\n" +
		"Wait for the receipt before you count the file as delivered. If a call ends without a clear answer (a timeout, " +
		"a lost connection, a host failure), call again with the same arguments and the same idempotencyKey: you get the " +
		"first receipt back, never a second copy. A rejection says what to fix: fix it and call again, with a new " +
		"idempotencyKey if the file changed.\n\n" +
		"In your completion report, cite each delivered file as deliverable:<attachmentId>, the citation in its receipt. " +
		"Never describe a workspace path as an upload or as a delivered file: only a receipt's citation is one."
}

type tool struct {
	reg  *deliverable.Registrar
	ws   deliverable.Workspace
	cfg  config
	name string
}

func (t *tool) call(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	in, msg := decodeRequest(t.name, req.Params.Arguments)
	if msg != "" {
		t.cfg.log.Debug("mcptool: arguments rejected", "tool", t.name, "message", msg)
		return toolError(msg), nil
	}
	if t.reg == nil {
		t.cfg.log.Error("mcptool: the Registrar is nil; pass one to mcptool.New", "tool", t.name)
		return toolError(t.cfg.hostText), nil
	}
	rc, err := t.reg.RegisterFor(ctx, t.ws, t.cfg.binding, in)
	var re *deliverable.RequestError
	switch {
	case errors.As(err, &re):
		t.cfg.log.Debug("mcptool: request rejected", "tool", t.name, "field", re.Field, "message", re.Message, "err", re.Err)
		return toolError(re.Message), nil
	case err != nil:
		t.cfg.log.Error("mcptool: registration failed on the host", "tool", t.name, "task", t.cfg.binding.TaskID, "run", t.cfg.binding.RunID, "err", err)
		return toolError(t.cfg.hostText), nil
	}
	out := Result{Receipt: rc, Citation: "deliverable:" + rc.AttachmentID, WorkProduct: t.workProduct(ctx, rc, in)}
	data, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("mcptool: encode receipt: %w", err) // a Receipt always encodes
	}
	what := "Registered"
	if rc.Disposition == deliverable.Duplicate {
		what = "Already registered in this run (same bytes from the same contentRef):"
	}
	text := fmt.Sprintf("%s %s as attachment %s. Cite it in your completion report as %s.\n%s",
		what, rc.Filename, rc.AttachmentID, out.Citation, data)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: json.RawMessage(data)}, nil
}

// workProduct returns the receipt's artifact work product: the store's
// record when the Store serves them, else the one its attachment implies.
func (t *tool) workProduct(ctx context.Context, rc deliverable.Receipt, in deliverable.Request) deliverable.WorkProduct {
	if wps, ok := t.reg.Store.(deliverable.WorkProducts); ok {
		if wp, err := wps.WorkProduct(ctx, rc.WorkProductID); err == nil {
			return wp
		}
	}
	return deliverable.ArtifactWorkProduct(deliverable.Attachment{ID: rc.AttachmentID, TaskID: rc.TaskID, RunID: rc.RunID, Title: strings.TrimSpace(in.Title)})
}

func toolError(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

// decodeRequest decodes the tool's arguments strictly: one JSON object of
// Request's fields, each a string but byteSize (a whole number), no other
// key. A problem is returned as the agent's message.
func decodeRequest(tool string, args json.RawMessage) (deliverable.Request, string) {
	fields := "contentRef, filename, contentType, byteSize, sha256, title and idempotencyKey"
	var in deliverable.Request
	trimmed := strings.TrimSpace(string(args))
	if trimmed == "" || trimmed == "null" {
		return in, tool + ": no arguments were given; pass an object with " + fields + "."
	}
	if msg := checkArgNames(tool, trimmed); msg != "" {
		return in, msg
	}
	dec := json.NewDecoder(strings.NewReader(trimmed))
	dec.DisallowUnknownFields()
	err := dec.Decode(&in)
	if err == nil && dec.More() {
		err = errors.New("trailing data after the object")
	}
	if err == nil {
		return in, ""
	}
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &te) && te.Field == "byteSize" && strings.HasPrefix(te.Value, "number"):
		return in, tool + ": byteSize must be written as digits only (no fraction, exponent or sign), at most 9223372036854775807; pass the file's exact size in bytes, such as 1024."
	case errors.As(err, &te) && te.Field == "byteSize":
		return in, tool + ": byteSize is not a number; pass the file's exact size in bytes as a JSON number, such as 1024."
	case errors.As(err, &te) && te.Field != "":
		return in, fmt.Sprintf("%s: %s is not a string; pass it as a JSON string.", tool, te.Field)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return in, fmt.Sprintf("%s: the argument %s is not one of %s; remove it.", tool, strings.TrimPrefix(err.Error(), "json: unknown field "), fields)
	}
	return in, tool + ": the arguments are not one JSON object with " + fields + "; pass exactly those."
}

// argNames are the tool's argument names, as Request's JSON tags spell them.
var argNames = []string{"contentRef", "filename", "contentType", "byteSize", "sha256", "title", "idempotencyKey"}

// checkArgNames reads the names of the arguments object's members: each
// must be given once and spelled as argNames spell it (encoding/json
// would take any letter case, and the last of two); an unknown name is
// left to the decoder. Anything that is not an object is too. It returns
// the agent's message, or "".
func checkArgNames(tool, args string) string {
	members, err := jsonlit.Object([]byte(args))
	if dup := (*jsonlit.DuplicateKeyError)(nil); errors.As(err, &dup) {
		return fmt.Sprintf("%s: the argument %s is given twice; pass each argument once.", tool, clipName(dup.Key))
	}
	for _, m := range members {
		for _, n := range argNames {
			if n != m.Key && strings.EqualFold(n, m.Key) {
				return fmt.Sprintf("%s: the argument %s must be spelled %s (argument names are case-sensitive); rename it.", tool, clipName(m.Key), n)
			}
		}
	}
	return ""
}

// clipName quotes an argument name for a message, cut to 64 bytes.
func clipName(name string) string {
	if len(name) > 64 {
		name = name[:64] + "…"
	}
	return strconv.Quote(name)
}

// Handler serves s over MCP's streamable HTTP transport, statelessly (no
// session is kept between requests), answering with JSON, reading at most
// MaxRequestBytes of a body. A body nested deeper than MaxNesting is
// answered by Handler itself (the SDK would answer 400): as a tool error
// naming the argument when it is a tool call's argument that is too deep.
// Mount it at the path the agent is given, such as /mcp.
func Handler(s *mcp.Server) http.Handler {
	return guardHTTP(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		JSONResponse:        true,
		MaxRequestBodyBytes: MaxRequestBytes,
	}))
}

// ServeStdio serves s on this process's standard input and output (one
// MCP session, newline-delimited JSON) until the client disconnects or ctx
// ends. It is the entry point of a local agent's tool process: the agent
// starts the program and speaks MCP on its stdin and stdout. A line that
// is not one JSON-RPC 2.0 message, is over MaxRequestBytes or nests deeper
// than MaxNesting is answered with a JSON-RPC error (or a tool error, see
// ServeConn) and the session goes on; what is dropped is logged to
// slog.Default at Debug.
func ServeStdio(ctx context.Context, s *mcp.Server) error {
	return serveStream(ctx, s, os.Stdin, os.Stdout, slog.Default())
}

func serveIO(ctx context.Context, s *mcp.Server, t mcp.Transport) error {
	err := s.Run(ctx, t)
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("mcptool: serving MCP on a stream: %w", err)
	}
	return err
}
