package deliverable_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable"
)

// TestRegisterMessagesForTheAgent pins every rejection's message: written
// for the agent, in the request's JSON field names, saying what to do next,
// naming the tool once and the sentinel still reachable with errors.Is.
func TestRegisterMessagesForTheAgent(t *testing.T) {
	data := []byte("a,b\n")
	other := sum([]byte("other"))
	cases := []struct {
		name    string
		ref     string // "" means "r.csv"
		mutate  func(*deliverable.Request)
		field   string
		want    error
		message string
	}{
		{"empty title", "", func(r *deliverable.Request) { r.Title = " " }, "title", deliverable.ErrInvalidRequest,
			"TOOL: title is empty; pass a short description of the file for the user."},
		{"long title", "", func(r *deliverable.Request) { r.Title = strings.Repeat("t", 513) }, "title", deliverable.ErrInvalidRequest,
			"TOOL: title is 513 bytes long; shorten it to at most 512 bytes."},
		{"control character in the filename", "", func(r *deliverable.Request) { r.Filename = "r\x07.csv" }, "filename", deliverable.ErrInvalidRequest,
			`TOOL: filename "r\a.csv" contains the control character U+0007; remove it.`},
		{"filename with a directory", "", func(r *deliverable.Request) { r.Filename = "out/r.csv" }, "filename", deliverable.ErrInvalidRequest,
			`TOOL: filename "out/r.csv" is not a base name; pass the file's base name, the last element of contentRef, without directories.`},
		{"filename of another file", "", func(r *deliverable.Request) { r.Filename = "report.csv" }, "filename", deliverable.ErrInvalidRequest,
			`TOOL: filename "report.csv" is not the base name of contentRef "r.csv"; pass filename "r.csv", or save the file under the name "report.csv" and register that.`},
		{"content type", "", func(r *deliverable.Request) { r.ContentType = "csv please" }, "contentType", deliverable.ErrInvalidRequest,
			`TOOL: contentType "csv please" is not a media type; pass a media type such as "application/pdf" or "text/csv".`},
		{"empty key", "", func(r *deliverable.Request) { r.IdempotencyKey = "" }, "idempotencyKey", deliverable.ErrInvalidRequest,
			"TOOL: idempotencyKey is empty; pass a key unique to this registration in this run."},
		{"sha256 not hex", "", func(r *deliverable.Request) { r.SHA256 = "abc" }, "sha256", deliverable.ErrInvalidRequest,
			`TOOL: sha256 "abc" is not 64 hex digits; pass the SHA-256 of the file's bytes as 64 hex digits.`},
		{"size zero", "", func(r *deliverable.Request) { r.ByteSize = 0 }, "byteSize", deliverable.ErrSizeDenied,
			"TOOL: byteSize 0 is outside 1..10485760; only a non-empty file of at most 10485760 bytes can be registered; pass its exact size in bytes."},
		{"absolute path", "", func(r *deliverable.Request) { r.ContentRef = "/etc/passwd" }, "contentRef", deliverable.ErrPathDenied,
			`TOOL: contentRef "/etc/passwd" is absolute; pass the file's path relative to the workspace root, such as "out/report.pdf".`},
		{"URL", "", func(r *deliverable.Request) { r.ContentRef = "https://example.com/r.csv" }, "contentRef", deliverable.ErrPathDenied,
			`TOOL: contentRef "https://example.com/r.csv" is a URL or has a scheme; pass the file's path relative to the workspace root, such as "out/report.pdf".`},
		{"home path", "", func(r *deliverable.Request) { r.ContentRef = "~/r.csv" }, "contentRef", deliverable.ErrPathDenied,
			`TOOL: contentRef "~/r.csv" is a home-directory path; pass the file's path relative to the workspace root, such as "out/report.pdf".`},
		{"airlock's own directory", "", func(r *deliverable.Request) { r.ContentRef = ".airlock/skills/r.csv" }, "contentRef", deliverable.ErrPathDenied,
			`TOOL: contentRef ".airlock/skills/r.csv" is in or names .airlock, airlock's own directory, which holds no deliverable; pass the file's path relative to the workspace root, such as "out/report.pdf".`},
		{"a file named as the runtime directory, in another case", "", func(r *deliverable.Request) { r.ContentRef = "out/.AirLock"; r.Filename = ".AirLock" }, "contentRef", deliverable.ErrPathDenied,
			`TOOL: contentRef "out/.AirLock" is in or names .airlock, airlock's own directory, which holds no deliverable; pass the file's path relative to the workspace root, such as "out/report.pdf".`},
		{"git's own data", "", func(r *deliverable.Request) { r.ContentRef = ".GIT/config"; r.Filename = "config" }, "contentRef", deliverable.ErrPathDenied,
			`TOOL: contentRef ".GIT/config" is in or names .git, the repository's own data, which holds no deliverable; pass the file's path relative to the workspace root, such as "out/report.pdf".`},
		{"empty path", "", func(r *deliverable.Request) { r.ContentRef = "" }, "contentRef", deliverable.ErrPathDenied,
			`TOOL: contentRef "" is empty; pass the file's path relative to the workspace root, such as "out/report.pdf".`},
		{"missing file", "", func(r *deliverable.Request) { r.ContentRef = "none.csv"; r.Filename = "none.csv" }, "contentRef", fs.ErrNotExist,
			`TOOL: contentRef "none.csv" does not exist in the workspace; write the file first, or correct contentRef.`},
		{"symbolic link", "link.csv", nil, "contentRef", deliverable.ErrSymlinkDenied,
			`TOOL: contentRef "link.csv" goes through a symbolic link; pass the path of the file's real location inside the workspace, with no link in any component.`},
		{"hard link", "h.csv", nil, "contentRef", deliverable.ErrHardlinkDenied,
			`TOOL: contentRef "h.csv" has 2 hard links; copy it to a new file and register the copy.`},
		{"directory", "dir", func(r *deliverable.Request) { r.Filename = "dir" }, "contentRef", deliverable.ErrPathDenied,
			`TOOL: contentRef "dir" is not a readable regular file; register a regular file, not a directory, device, FIFO or socket.`},
		{"size", "", func(r *deliverable.Request) { r.ByteSize++ }, "byteSize", deliverable.ErrSizeMismatch,
			"TOOL: byteSize is 5 but the file has 4 bytes; recompute byteSize and sha256 from the final file."},
		{"hash", "", func(r *deliverable.Request) { r.SHA256 = other }, "sha256", deliverable.ErrHashMismatch,
			"TOOL: sha256 is " + other + " but the file's bytes hash to " + sum(data) + "; recompute sha256 from the final file."},
	}
	for _, tool := range []string{"", "attach_file"} {
		for _, tc := range cases {
			t.Run(tool+"/"+tc.name, func(t *testing.T) {
				f := newFixture(t)
				f.reg.ToolName = tool
				writeFile(t, f.ws, "r.csv", data)
				require.NoError(t, os.Symlink("r.csv", filepath.Join(f.ws, "link.csv")))
				require.NoError(t, os.Link(writeFile(t, f.ws, "x.csv", data), filepath.Join(f.ws, "h.csv")))
				require.NoError(t, os.Mkdir(filepath.Join(f.ws, "dir"), 0o755))
				ref := tc.ref
				if ref == "" {
					ref = "r.csv"
				}
				req := requestFor(ref, "k", data)
				if tc.mutate != nil {
					tc.mutate(&req)
				}
				_, err := f.reg.Register(t.Context(), local(t, f.ws), "t", "r", req)
				require.ErrorIs(t, err, tc.want)
				var re *deliverable.RequestError
				require.ErrorAs(t, err, &re)
				name := tool
				if name == "" {
					name = deliverable.DefaultToolName
				}
				want := strings.Replace(tc.message, "TOOL", name, 1)
				assert.Equal(t, want, re.Message)
				assert.Equal(t, want, err.Error(), "Error is the agent's message")
				assert.Equal(t, tc.field, re.Field)
				assertAgentMessage(t, re.Message, name)
				var he *deliverable.HostError
				assert.False(t, errors.As(err, &he))
			})
		}
	}
}

// assertAgentMessage checks the properties every message for the agent has.
func assertAgentMessage(t *testing.T, msg, tool string) {
	t.Helper()
	assert.True(t, strings.HasPrefix(msg, tool+": "), "starts with the tool name: %s", msg)
	assert.Equal(t, 1, strings.Count(msg, tool), "names the tool once: %s", msg)
	assert.True(t, strings.HasSuffix(msg, "."), "ends a sentence: %s", msg)
	body := strings.TrimPrefix(msg, tool+": ")
	for _, goName := range []string{"ContentRef", "ByteSize", "SHA256", "Filename", "IdempotencyKey", "ContentType", "Title", "deliverable: ", "denied"} {
		assert.NotContains(t, body, goName, "uses the request's JSON names and no sentinel text: %s", msg)
	}
	parts := strings.Split(strings.TrimSuffix(strings.TrimPrefix(msg, tool+": "), "."), "; ")
	assert.GreaterOrEqual(t, len(parts), 2, "says what is wrong and what to do: %s", msg)
	seen := map[string]bool{}
	for _, p := range parts {
		assert.False(t, seen[p], "repeats itself: %s", msg)
		seen[p] = true
	}
}

func TestRegisterConflictMessage(t *testing.T) {
	f := newFixture(t)
	data := []byte("v1")
	writeFile(t, f.ws, "v.txt", data)
	first, err := f.reg.Register(t.Context(), local(t, f.ws), "t", "r", requestFor("v.txt", "key", data))
	require.NoError(t, err)
	req := requestFor("v.txt", "key", data)
	req.Title = "Other"
	_, err = f.reg.Register(t.Context(), local(t, f.ws), "t", "r", req)
	require.ErrorIs(t, err, deliverable.ErrIdempotencyConflict)
	var re *deliverable.RequestError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, "idempotencyKey", re.Field)
	assert.Equal(t, `register_deliverable: idempotencyKey "key" was already used in this run for attachment `+first.AttachmentID+
		` (v.txt); this request differs only in its title ("Results" then, "Other" now): the file is the same; it is already delivered: cite deliverable:`+
		first.AttachmentID+` (it keeps its first title, "Results", and contentType), or call again with that request's arguments to get its receipt.`, re.Message)
	assertAgentMessage(t, re.Message, deliverable.DefaultToolName)
}

func TestRegisterStoreFailureIsTheHosts(t *testing.T) {
	f := newFixture(t)
	data := []byte("abc")
	writeFile(t, f.ws, "r.csv", data)
	reg := &deliverable.Registrar{Store: failingStore{f.store}}
	_, err := reg.Register(t.Context(), local(t, f.ws), "t", "r", requestFor("r.csv", "k", data))
	he := requireHostError(t, err)
	assert.Equal(t, "store", he.Op)
	assert.ErrorIs(t, err, errInjected)
}

// failingStore fails every Lookup.
type failingStore struct{ deliverable.Store }

func (failingStore) Lookup(context.Context, deliverable.Key) (deliverable.Receipt, string, error) {
	return deliverable.Receipt{}, "", errInjected
}

func TestValidateEvidenceToolName(t *testing.T) {
	ev := deliverable.Evidence{TaskID: "P", RunID: "R", Objective: objNamed, ToolName: "attach_file"}
	for _, tc := range []struct {
		refs []string
		want string
	}{
		{[]string{cite(idGrandchild)}, deliverable.RejectedCitation("attach_file")},
		{[]string{"./output.json"}, `Completion cites "./output.json", a workspace file, not a registered attachment. Use attach_file for that file and cite deliverable:<attachmentId> from its receipt.`},
		{nil, "The task asks for output.json, but the completion cites no attachment registered for it on this task in run R; " +
			"a child task's file does not count. Use attach_file for output.json and cite deliverable:<attachmentId> from its receipt."},
	} {
		ev.Refs = tc.refs
		err := deliverable.ValidateEvidence(t.Context(), evidenceTasks(), ev)
		require.ErrorIs(t, err, deliverable.ErrEvidence)
		var re *deliverable.RequestError
		require.ErrorAs(t, err, &re, "an evidence rejection is a request error too")
		assert.Equal(t, tc.want, re.Message)
		assert.NotContains(t, re.Message, deliverable.DefaultToolName)
	}
	assert.Equal(t, deliverable.RejectedCitationMessage, deliverable.RejectedCitation(""))
	assert.Equal(t, strings.Replace(deliverable.RejectedCitationMessage, deliverable.DefaultToolName, "attach_file", 1), deliverable.RejectedCitation("attach_file"))
}
