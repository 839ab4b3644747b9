package mcptool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable"
	"github.com/airlockdev/airlock/deliverable/mcptool"
)

func TestToolListing(t *testing.T) {
	_, reg := newStore(t)
	ws, err := deliverable.LocalWorkspace(t.TempDir())
	require.NoError(t, err)
	cs := inMemory(t, mcptool.New(reg, ws, "task-1", "run-1"))
	list, err := cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
	require.Len(t, list.Tools, 1)
	tool := list.Tools[0]
	assert.Equal(t, "register_deliverable", tool.Name)
	assert.Equal(t, mcptool.Description("register_deliverable"), tool.Description)
	for _, want := range []string{"contentRef", "filename", "contentType", "byteSize", "sha256", "title", "idempotencyKey",
		"Wait for the receipt", "same idempotencyKey", "deliverable:<attachmentId>", "Never describe a workspace path as an upload"} {
		assert.Contains(t, tool.Description, want)
	}

	raw, err := json.Marshal(tool.InputSchema)
	require.NoError(t, err)
	var schema struct {
		Type                 string                     `json:"type"`
		Required             []string                   `json:"required"`
		Properties           map[string]json.RawMessage `json:"properties"`
		AdditionalProperties json.RawMessage            `json:"additionalProperties"`
	}
	require.NoError(t, json.Unmarshal(raw, &schema))
	fields := []string{"contentRef", "filename", "contentType", "byteSize", "sha256", "title", "idempotencyKey"}
	assert.Equal(t, "object", schema.Type)
	assert.ElementsMatch(t, fields, schema.Required)
	assert.ElementsMatch(t, fields, slices.Collect(mapsKeys(schema.Properties)))
	assert.JSONEq(t, `false`, string(schema.AdditionalProperties))
	assert.Contains(t, string(schema.Properties["byteSize"]), `"integer"`)
	assert.Contains(t, string(schema.Properties["idempotencyKey"]), "same key again to retry")

	// The name follows Registrar.ToolName.
	reg.ToolName = "deliver_file"
	list, err = inMemory(t, mcptool.New(reg, ws, "task-1", "run-1")).ListTools(t.Context(), nil)
	require.NoError(t, err)
	assert.Equal(t, "deliver_file", list.Tools[0].Name)
	assert.Contains(t, list.Tools[0].Description, "deliver_file checks a file")
}

func mapsKeys(m map[string]json.RawMessage) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestRejectionsAreToolErrors: every rejection is a tool error whose text
// is the agent-facing message, exactly.
func TestRejectionsAreToolErrors(t *testing.T) {
	store, reg := newStore(t)
	dir := t.TempDir()
	ws, err := deliverable.LocalWorkspace(dir)
	require.NoError(t, err)
	data := []byte("%PDF-1.7 report")
	writeFile(t, dir, "out/report.pdf", data)
	cs := inMemory(t, mcptool.New(reg, ws, "task-1", "run-1"))

	with := func(kv ...any) map[string]any {
		a := args("out/report.pdf", "k1", data)
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(a, kv[i].(string))
			} else {
				a[kv[i].(string)] = kv[i+1]
			}
		}
		return a
	}
	wrong := strings.Repeat("0", 64)
	for _, c := range []struct {
		name string
		args any
		want string
	}{
		{"escaping path", with("contentRef", "../etc/passwd", "filename", "passwd"),
			`register_deliverable: contentRef "../etc/passwd" contains ".."; pass the file's path relative to the workspace root, such as "out/report.pdf".`},
		{"hash", with("sha256", wrong),
			"register_deliverable: sha256 is " + wrong + " but the file's bytes hash to " + sum(data) + "; recompute sha256 from the final file."},
		{"size", with("byteSize", len(data)+1),
			"register_deliverable: byteSize is 16 but the file has 15 bytes; recompute byteSize and sha256 from the final file."},
		{"content type", with("contentType", "application/x-msdownload"),
			`register_deliverable: contentType "application/x-msdownload" is not accepted here; deliver the file in one of these types, converting it if needed: ` +
				strings.Join(deliverable.DeliverableContentTypes(), ", ") + "."},
		{"missing field", with("title", nil), "register_deliverable: title is empty; pass a short description of the file for the user."},
		{"unknown field", with("path", "/etc/passwd"),
			`register_deliverable: the argument "path" is not one of contentRef, filename, contentType, byteSize, sha256, title and idempotencyKey; remove it.`},
		{"byteSize as text", with("byteSize", "15"), "register_deliverable: byteSize is not a number; pass the file's exact size in bytes as a JSON number, such as 1024."},
		{"byteSize with an exponent", with("byteSize", json.Number("15e0")),
			"register_deliverable: byteSize must be written as digits only (no fraction, exponent or sign), at most 9223372036854775807; pass the file's exact size in bytes, such as 1024."},
		{"byteSize too large", with("byteSize", json.Number("100000000000000000000")),
			"register_deliverable: byteSize must be written as digits only (no fraction, exponent or sign), at most 9223372036854775807; pass the file's exact size in bytes, such as 1024."},
		{"argument name in another case", with("CONTENTREF", "out/report.pdf", "contentRef", nil),
			`register_deliverable: the argument "CONTENTREF" must be spelled contentRef (argument names are case-sensitive); rename it.`},
		{"argument given twice", json.RawMessage(`{"contentRef":"out/other.pdf","filename":"report.pdf","contentType":"application/pdf","byteSize":15,"sha256":"` + sum(data) + `","title":"t","idempotencyKey":"k9","contentRef":"out/report.pdf"}`),
			`register_deliverable: the argument "contentRef" is given twice; pass each argument once.`},
		{"title as number", with("title", 7), "register_deliverable: title is not a string; pass it as a JSON string."},
		{"missing file", with("contentRef", "out/nope.pdf", "filename", "nope.pdf"), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			text, isErr, _ := call(t, cs, c.args)
			assert.True(t, isErr, "%s", text)
			if c.want != "" {
				assert.Equal(t, c.want, text)
			} else {
				assert.True(t, strings.HasPrefix(text, `register_deliverable: contentRef "out/nope.pdf"`), "%s", text)
			}
		})
	}

	// A key reused for another file: the agent is told to pick a new key.
	_, isErr, res := call(t, cs, with())
	require.False(t, isErr)
	first := result(t, res)
	other := []byte("%PDF-1.7 other")
	writeFile(t, dir, "out/other.pdf", other)
	text, isErr, _ := call(t, cs, args("out/other.pdf", "k1", other))
	assert.True(t, isErr)
	assert.Equal(t, `register_deliverable: idempotencyKey "k1" was already used in this run for attachment `+first.AttachmentID+
		` (report.pdf); this request differs in its filename ("report.pdf" then, "other.pdf" now), byteSize (15 then, 14 now), sha256, `+
		`contentRef ("out/report.pdf" then, "out/other.pdf" now); use a new idempotencyKey for a different file, or that request's arguments to get its receipt.`, text)
	_, err = store.Attachment(t.Context(), first.AttachmentID)
	require.NoError(t, err)
}

// failingStore fails every call with an error naming a host path.
type failingStore struct{}

var errDisk = errors.New("open /var/lib/host-secret/runs/x.json: input/output error")

func (failingStore) Lookup(context.Context, deliverable.Key) (deliverable.Receipt, string, error) {
	return deliverable.Receipt{}, "", errDisk
}
func (failingStore) Put(context.Context, deliverable.Entry, *deliverable.Content) (deliverable.Receipt, error) {
	return deliverable.Receipt{}, errDisk
}
func (failingStore) Open(context.Context, string) (deliverable.Attachment, io.ReadSeekCloser, error) {
	return deliverable.Attachment{}, nil, errDisk
}

// TestHostFailureIsAToolErrorThatRevealsNothing: the agent is told to
// retry with the same key; the cause goes to the host's log only.
func TestHostFailureIsAToolErrorThatRevealsNothing(t *testing.T) {
	dir := t.TempDir()
	ws, err := deliverable.LocalWorkspace(dir)
	require.NoError(t, err)
	data := []byte("%PDF-1.7")
	writeFile(t, dir, "r.pdf", data)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	want := "register_deliverable: the registration failed on the host's side, not because of your request. " +
		"Wait a little and call register_deliverable again with the same arguments and the same idempotencyKey; " +
		"if it keeps failing, say in your report that the file could not be registered."
	for name, s := range map[string]*mcp.Server{
		"store":         mcptool.New(&deliverable.Registrar{Store: failingStore{}}, ws, "task-1", "run-1", mcptool.WithLogger(log)),
		"nil registrar": mcptool.New(nil, ws, "task-1", "run-1", mcptool.WithLogger(log)),
		"bad task id":   mcptool.New(&deliverable.Registrar{Store: failingStore{}}, ws, " task", "run-1", mcptool.WithLogger(log)),
	} {
		text, isErr, _ := call(t, inMemory(t, s), args("r.pdf", "k", data))
		assert.True(t, isErr, name)
		assert.Equal(t, want, text, name)
		assert.NotContains(t, text, "host-secret", name)
	}
	assert.Contains(t, logs.String(), "host-secret", "the cause is logged for the host")
	assert.Contains(t, logs.String(), "Registrar is nil")
}

// TestReceiptEchoesBinding: the host's ids come back in the receipt, the
// replay's included, with the artifact work product.
func TestReceiptEchoesBinding(t *testing.T) {
	store, reg := newStore(t)
	dir := t.TempDir()
	ws, err := deliverable.LocalWorkspace(dir)
	require.NoError(t, err)
	data := []byte("%PDF-1.7 bound")
	writeFile(t, dir, "r.pdf", data)
	issue := deliverable.EntityRef{Type: "issue", ID: "ISS-12"}
	cs := inMemory(t, mcptool.New(reg, ws, "task-1", "run-1", mcptool.WithBinding("cmd-7", "rev-3", issue)))
	_, _, res := call(t, cs, args("r.pdf", "k", data))
	out := result(t, res)
	assert.Equal(t, "cmd-7", out.Command)
	assert.Equal(t, "rev-3", out.Revision)
	assert.Equal(t, []deliverable.EntityRef{issue}, out.EntityRefs.List())
	assert.Equal(t, out.AttachmentID, out.WorkProductID)
	a, err := store.Attachment(t.Context(), out.AttachmentID)
	require.NoError(t, err)
	assert.Equal(t, deliverable.ArtifactWorkProduct(a), out.WorkProduct)
	assert.JSONEq(t, `{"attachmentId":"`+a.ID+`","contentPath":"/api/attachments/`+a.ID+`/content","downloadPath":"/api/attachments/`+a.ID+`/content?download=1"}`,
		string(out.WorkProduct.Metadata))
	assert.Equal(t, "deliverable:"+out.AttachmentID, out.Citation)

	// A replay through a server bound to other ids returns the stored receipt.
	cs2 := inMemory(t, mcptool.New(reg, ws, "task-1", "run-1", mcptool.WithBinding("cmd-8", "rev-4")))
	_, _, res = call(t, cs2, args("r.pdf", "k", data))
	assert.Equal(t, out, result(t, res))
}
