package deliverable_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable"
	"github.com/airlockdev/airlock/internal/fuzzseed"
)

// memLookup is a host's registry of workspaces: issue I1 of project P1 in
// company C1 has execution workspace E1 and project workspace W1; project
// P2 (same company) has W2; project P3 (company C2) has W3.
type memLookup struct {
	issues   map[string]deliverable.IssueWorkspaces
	projects map[[2]string]deliverable.RegisteredWorkspace
	failWith error
}

var _ deliverable.WorkspaceLookup = (*memLookup)(nil)

func (m *memLookup) IssueWorkspaces(_ context.Context, issueID string) (deliverable.IssueWorkspaces, error) {
	if m.failWith != nil {
		return deliverable.IssueWorkspaces{}, m.failWith
	}
	iw, ok := m.issues[issueID]
	if !ok {
		return deliverable.IssueWorkspaces{}, fmt.Errorf("issue %s: %w", issueID, deliverable.ErrNotFound)
	}
	return iw, nil
}

func (m *memLookup) ProjectWorkspace(_ context.Context, projectID, workspaceID string) (deliverable.RegisteredWorkspace, error) {
	if m.failWith != nil {
		return deliverable.RegisteredWorkspace{}, m.failWith
	}
	w, ok := m.projects[[2]string{projectID, workspaceID}]
	if !ok {
		return deliverable.RegisteredWorkspace{}, &fs.PathError{Op: "open", Path: "/host/projects/" + projectID, Err: fs.ErrNotExist}
	}
	return w, nil
}

// newLookup builds the registry with one directory per workspace (under
// base, named after the workspace id), each made through wf.
func newLookup(t *testing.T, wf workspaceFactory, base string) *memLookup {
	t.Helper()
	reg := func(kind deliverable.WorkspaceKind, id, project, company string) *deliverable.RegisteredWorkspace {
		dir := filepath.Join(base, id)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		return &deliverable.RegisteredWorkspace{Kind: kind, ID: id, ProjectID: project, CompanyID: company, Workspace: wf.make(t, dir)}
	}
	m := &memLookup{
		issues: map[string]deliverable.IssueWorkspaces{
			"I1": {CompanyID: "C1", ProjectID: "P1",
				Execution: reg(deliverable.ExecutionWorkspace, "E1", "P1", "C1"),
				Project:   reg(deliverable.ProjectWorkspace, "W1", "P1", "C1")},
			"I9": {CompanyID: "C1", ProjectID: "P1"}, // no workspaces registered
		},
		projects: map[[2]string]deliverable.RegisteredWorkspace{},
	}
	m.projects[[2]string{"P1", "W1"}] = *m.issues["I1"].Project
	m.projects[[2]string{"P2", "W2"}] = *reg(deliverable.ProjectWorkspace, "W2", "P2", "C1")
	m.projects[[2]string{"P3", "W3"}] = *reg(deliverable.ProjectWorkspace, "W3", "P3", "C2")
	m.projects[[2]string{"P2", "E2"}] = *reg(deliverable.ExecutionWorkspace, "E2", "P2", "C1") // a faulty host
	return m
}

func mustRef(t *testing.T, r deliverable.WorkspaceRef) deliverable.WorkspaceRef {
	t.Helper()
	r, err := deliverable.NewWorkspaceRef(r)
	require.NoError(t, err)
	return r
}

func TestWorkspaceRefOpen(t *testing.T) {
	exec, proj := deliverable.ExecutionWorkspace, deliverable.ProjectWorkspace
	cases := []struct {
		name    string
		issue   string // the issue the host acts for; "" means I1
		ref     deliverable.WorkspaceRef
		want    error  // nil: opens
		content string // when it opens
		host    bool   // the error is a *HostError
	}{
		{name: "execution workspace", ref: deliverable.WorkspaceRef{IssueID: "I1", WorkspaceKind: exec, WorkspaceID: "E1", RelativePath: "src/main.go", Line: 3}, content: "exec main"},
		{name: "project workspace", ref: deliverable.WorkspaceRef{IssueID: "I1", WorkspaceKind: proj, WorkspaceID: "W1", RelativePath: "docs/a.md"}, content: "project doc"},
		{name: "project workspace with the issue's own project", ref: deliverable.WorkspaceRef{IssueID: "I1", ProjectID: "P1", WorkspaceKind: proj, WorkspaceID: "W1", RelativePath: "docs/a.md"}, content: "project doc"},
		{name: "another project of the company", ref: deliverable.WorkspaceRef{IssueID: "I1", ProjectID: "P2", WorkspaceKind: proj, WorkspaceID: "W2", RelativePath: "shared.txt"}, content: "shared"},
		{name: "another project's workspace without its projectId", ref: deliverable.WorkspaceRef{IssueID: "I1", WorkspaceKind: proj, WorkspaceID: "W2", RelativePath: "shared.txt"}, want: deliverable.ErrNotFound},
		{name: "another project's execution workspace", ref: deliverable.WorkspaceRef{IssueID: "I1", ProjectID: "P2", WorkspaceKind: exec, WorkspaceID: "E2", RelativePath: "x.txt"}, want: deliverable.ErrPathDenied},
		{name: "another company's project", ref: deliverable.WorkspaceRef{IssueID: "I1", ProjectID: "P3", WorkspaceKind: proj, WorkspaceID: "W3", RelativePath: "secret.txt"}, want: deliverable.ErrPathDenied},
		{name: "unknown project workspace", ref: deliverable.WorkspaceRef{IssueID: "I1", ProjectID: "P2", WorkspaceKind: proj, WorkspaceID: "W9", RelativePath: "x.txt"}, want: deliverable.ErrNotFound},
		{name: "kind that does not match the id", ref: deliverable.WorkspaceRef{IssueID: "I1", WorkspaceKind: exec, WorkspaceID: "W1", RelativePath: "docs/a.md"}, want: deliverable.ErrNotFound},
		{name: "unknown workspace", ref: deliverable.WorkspaceRef{IssueID: "I1", WorkspaceKind: exec, WorkspaceID: "E9", RelativePath: "src/main.go"}, want: deliverable.ErrNotFound},
		{name: "issue without workspaces", issue: "I9", ref: deliverable.WorkspaceRef{IssueID: "I9", WorkspaceKind: exec, WorkspaceID: "E1", RelativePath: "src/main.go"}, want: deliverable.ErrNotFound},
		{name: "unknown issue", issue: "I7", ref: deliverable.WorkspaceRef{IssueID: "I7", WorkspaceKind: exec, WorkspaceID: "E1", RelativePath: "src/main.go"}, want: deliverable.ErrNotFound},
		{name: "reference of another issue (fails even without confinement)", issue: "I9", ref: deliverable.WorkspaceRef{IssueID: "I1", WorkspaceKind: exec, WorkspaceID: "E1", RelativePath: "src/main.go"}, want: deliverable.ErrPathDenied},
		{name: "link inside the workspace (fails even without confinement)", ref: deliverable.WorkspaceRef{IssueID: "I1", WorkspaceKind: exec, WorkspaceID: "E1", RelativePath: "inside.go"}, want: deliverable.ErrSymlinkDenied},
		{name: "link directory inside the workspace", ref: deliverable.WorkspaceRef{IssueID: "I1", WorkspaceKind: exec, WorkspaceID: "E1", RelativePath: "alias/main.go"}, want: deliverable.ErrSymlinkDenied},
		{name: "link to another company's file", ref: deliverable.WorkspaceRef{IssueID: "I1", WorkspaceKind: exec, WorkspaceID: "E1", RelativePath: "out.txt"}, want: deliverable.ErrSymlinkDenied},
		{name: "hard link", ref: deliverable.WorkspaceRef{IssueID: "I1", WorkspaceKind: exec, WorkspaceID: "E1", RelativePath: "hard.txt"}, want: deliverable.ErrHardlinkDenied},
		{name: "directory", ref: deliverable.WorkspaceRef{IssueID: "I1", WorkspaceKind: exec, WorkspaceID: "E1", RelativePath: "src"}, want: deliverable.ErrPathDenied},
		{name: "missing", ref: deliverable.WorkspaceRef{IssueID: "I1", WorkspaceKind: exec, WorkspaceID: "E1", RelativePath: "nope.go"}, want: fs.ErrNotExist},
		{name: "host returns another workspace", ref: deliverable.WorkspaceRef{IssueID: "I1", ProjectID: "P2", WorkspaceKind: proj, WorkspaceID: "E2", RelativePath: "x.txt"}, host: true},
	}
	for _, wf := range workspaceFactories() {
		t.Run(wf.name, func(t *testing.T) {
			base := t.TempDir()
			lookup := newLookup(t, wf, base)
			writeFile(t, base, "E1/src/main.go", []byte("exec main"))
			writeFile(t, base, "W1/docs/a.md", []byte("project doc"))
			writeFile(t, base, "W2/shared.txt", []byte("shared"))
			writeFile(t, base, "W3/secret.txt", []byte("other company"))
			require.NoError(t, os.Symlink("src/main.go", filepath.Join(base, "E1/inside.go")))
			require.NoError(t, os.Symlink("src", filepath.Join(base, "E1/alias")))
			require.NoError(t, os.Symlink(filepath.Join(base, "W3/secret.txt"), filepath.Join(base, "E1/out.txt")))
			require.NoError(t, os.Link(writeFile(t, base, "W2/linked.txt", []byte("linked")), filepath.Join(base, "E1/hard.txt")))
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					issue := tc.issue
					if issue == "" {
						issue = "I1"
					}
					ref := mustRef(t, tc.ref)
					f, err := ref.Open(t.Context(), lookup, issue)
					if tc.host {
						requireHostError(t, err)
						assert.Nil(t, f)
						return
					}
					if tc.want != nil {
						require.ErrorIs(t, err, tc.want)
						var pe *fs.PathError
						require.ErrorAs(t, err, &pe)
						assert.Equal(t, ref.RelativePath, pe.Path)
						assert.Nil(t, f)
						return
					}
					require.NoError(t, err)
					assert.Equal(t, int64(len(tc.content)), f.Stat().Size)
					got, err := io.ReadAll(f)
					require.NoError(t, errors.Join(err, f.Close()))
					assert.Equal(t, tc.content, string(got))
				})
			}
		})
	}
}

func TestWorkspaceRefOpenHostFailures(t *testing.T) {
	lookup := newLookup(t, workspaceFactories()[0], t.TempDir())
	ref := mustRef(t, deliverable.WorkspaceRef{IssueID: "I1", WorkspaceKind: deliverable.ExecutionWorkspace, WorkspaceID: "E1", RelativePath: "a.txt"})
	lookup.failWith = errInjected
	_, err := ref.Open(t.Context(), lookup, "I1")
	requireHostError(t, err)
	assert.ErrorIs(t, err, errInjected)

	_, err = ref.Open(t.Context(), nil, "I1")
	requireHostError(t, err)

	_, err = deliverable.WorkspaceRef{IssueID: "I1", RelativePath: "a.txt"}.Open(t.Context(), lookup, "I1")
	assert.ErrorIs(t, err, deliverable.ErrInvalidRequest, "an incomplete reference is refused before any lookup")
}

func TestNewWorkspaceRef(t *testing.T) {
	r, err := deliverable.NewWorkspaceRef(deliverable.WorkspaceRef{IssueID: "I1", WorkspaceKind: deliverable.ExecutionWorkspace,
		WorkspaceID: "E1", RelativePath: " ./src//main.go", Line: 12, Column: 3})
	require.NoError(t, err)
	assert.Equal(t, deliverable.WorkspaceRef{Kind: deliverable.KindWorkspaceFile, IssueID: "I1", WorkspaceKind: deliverable.ExecutionWorkspace,
		WorkspaceID: "E1", RelativePath: "src/main.go", Line: 12, Column: 3, DisplayPath: "src/main.go:12:3"}, r)

	ok := deliverable.WorkspaceRef{IssueID: "I1", WorkspaceKind: deliverable.ProjectWorkspace, WorkspaceID: "W1", RelativePath: "a.md"}
	for _, tc := range []struct {
		name   string
		mutate func(*deliverable.WorkspaceRef)
		want   error
	}{
		{"absolute path", func(r *deliverable.WorkspaceRef) { r.RelativePath = "/home/u/ws/a.md" }, deliverable.ErrPathDenied},
		{"home path", func(r *deliverable.WorkspaceRef) { r.RelativePath = "~/a.md" }, deliverable.ErrPathDenied},
		{"other user's home", func(r *deliverable.WorkspaceRef) { r.RelativePath = "~root/.profile" }, deliverable.ErrPathDenied},
		{"URL", func(r *deliverable.WorkspaceRef) { r.RelativePath = "file:///etc/passwd" }, deliverable.ErrPathDenied},
		{"dot-dot", func(r *deliverable.WorkspaceRef) { r.RelativePath = "../x" }, deliverable.ErrPathDenied},
		{"dot-dot inside (fails even without confinement)", func(r *deliverable.WorkspaceRef) { r.RelativePath = "a/../a.md" }, deliverable.ErrPathDenied},
		{"backslash", func(r *deliverable.WorkspaceRef) { r.RelativePath = `docs\a.md` }, deliverable.ErrPathDenied},
		{"root", func(r *deliverable.WorkspaceRef) { r.RelativePath = "." }, deliverable.ErrPathDenied},
		{"empty path", func(r *deliverable.WorkspaceRef) { r.RelativePath = "" }, deliverable.ErrPathDenied},
		{"other kind", func(r *deliverable.WorkspaceRef) { r.Kind = "url" }, deliverable.ErrInvalidRequest},
		{"no issue", func(r *deliverable.WorkspaceRef) { r.IssueID = "" }, deliverable.ErrInvalidRequest},
		{"issue id that is a path", func(r *deliverable.WorkspaceRef) { r.IssueID = "/home/u" }, deliverable.ErrInvalidRequest},
		{"project id with a space", func(r *deliverable.WorkspaceRef) { r.ProjectID = "P 1" }, deliverable.ErrInvalidRequest},
		{"no workspace kind", func(r *deliverable.WorkspaceRef) { r.WorkspaceKind = "" }, deliverable.ErrInvalidRequest},
		{"unknown workspace kind", func(r *deliverable.WorkspaceRef) { r.WorkspaceKind = "home_workspace" }, deliverable.ErrInvalidRequest},
		{"no workspace id", func(r *deliverable.WorkspaceRef) { r.WorkspaceID = "" }, deliverable.ErrInvalidRequest},
		{"negative line", func(r *deliverable.WorkspaceRef) { r.Line = -1 }, deliverable.ErrInvalidRequest},
		{"column without line", func(r *deliverable.WorkspaceRef) { r.Column = 2 }, deliverable.ErrInvalidRequest},
		{"wrong display path", func(r *deliverable.WorkspaceRef) { r.DisplayPath = "/home/u/ws/a.md" }, deliverable.ErrInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ok
			tc.mutate(&r)
			_, err := deliverable.NewWorkspaceRef(r)
			assert.ErrorIs(t, err, tc.want)
		})
	}
}

const canonicalRef = `{"kind":"workspace_file","issueId":"I1","projectId":"P2","workspaceKind":"project_workspace","workspaceId":"W2",` +
	`"relativePath":"docs/<b>&ü.md","line":12,"column":3,"displayPath":"docs/<b>&ü.md:12:3"}`

func TestWorkspaceRefEncoding(t *testing.T) {
	r := mustRef(t, deliverable.WorkspaceRef{IssueID: "I1", ProjectID: "P2", WorkspaceKind: deliverable.ProjectWorkspace,
		WorkspaceID: "W2", RelativePath: "docs/<b>&ü.md", Line: 12, Column: 3})
	enc, err := r.Encode()
	require.NoError(t, err)
	assert.Equal(t, canonicalRef, string(enc))

	minimal := mustRef(t, deliverable.WorkspaceRef{IssueID: "I1", WorkspaceKind: deliverable.ExecutionWorkspace, WorkspaceID: "E1", RelativePath: "a.go"})
	enc, err = minimal.Encode()
	require.NoError(t, err)
	assert.Equal(t, `{"kind":"workspace_file","issueId":"I1","workspaceKind":"execution_workspace","workspaceId":"E1","relativePath":"a.go","displayPath":"a.go"}`, string(enc))

	got, err := deliverable.DecodeWorkspaceRef([]byte(canonicalRef))
	require.NoError(t, err)
	assert.Equal(t, r, got)

	// Inside another document, through encoding/json.
	type comment struct {
		Ref deliverable.WorkspaceRef `json:"ref"`
	}
	doc, err := json.Marshal(comment{Ref: r})
	require.NoError(t, err)
	var back comment
	require.NoError(t, json.Unmarshal(doc, &back))
	assert.Equal(t, r, back.Ref)
	assert.ErrorIs(t, json.Unmarshal([]byte(`{"ref":{"kind":"workspace_file"}}`), &back), deliverable.ErrInvalidRequest)

	_, err = deliverable.WorkspaceRef{}.Encode()
	assert.ErrorIs(t, err, deliverable.ErrInvalidRequest, "Encode refuses what Decode would")
}

func TestDecodeWorkspaceRefIsStrict(t *testing.T) {
	swap := func(old, new string) string {
		require.Contains(t, canonicalRef, old)
		return strings.Replace(canonicalRef, old, new, 1)
	}
	accepted := []struct{ name, data string }{
		{"spaces and newlines", " {\n\"kind\" : \"workspace_file\", " + canonicalRef[len(`{"kind":"workspace_file",`):] + "\n"},
		{"another key order", `{"displayPath":"a.go","relativePath":"a.go","workspaceId":"E1","workspaceKind":"execution_workspace","issueId":"I1","kind":"workspace_file"}`},
		{"escapes", swap(`"I1"`, `"\u0049\u0031"`)},
		{"escaped surrogate pair", `{"kind":"workspace_file","issueId":"I1","workspaceKind":"execution_workspace","workspaceId":"E1","relativePath":"\ud83e\udd80.md","displayPath":"🦀.md"}`},
	}
	for _, tc := range accepted {
		t.Run("accepts "+tc.name, func(t *testing.T) {
			_, err := deliverable.DecodeWorkspaceRef([]byte(tc.data))
			assert.NoError(t, err)
		})
	}
	rejected := []struct {
		name, data string
		want       error
	}{
		{"unknown key", swap(`"kind"`, `"host":"/home/u","kind"`), deliverable.ErrInvalidRequest},
		{"duplicate key", swap(`"issueId":"I1"`, `"issueId":"I1","issueId":"I2"`), deliverable.ErrInvalidRequest},
		{"duplicate key after unescaping", swap(`"issueId":"I1"`, `"issueId":"I1","issue\u0049d":"I1"`), deliverable.ErrInvalidRequest},
		{"wrong case", swap(`"issueId"`, `"issueID"`), deliverable.ErrInvalidRequest},
		{"trailing data", canonicalRef + "x", deliverable.ErrInvalidRequest},
		{"two objects", canonicalRef + canonicalRef, deliverable.ErrInvalidRequest},
		{"not an object", `["workspace_file"]`, deliverable.ErrInvalidRequest},
		{"null", `null`, deliverable.ErrInvalidRequest},
		{"empty", ``, deliverable.ErrInvalidRequest},
		{"missing key", swap(`"workspaceId":"W2",`, ``), deliverable.ErrInvalidRequest},
		{"null value", swap(`"I1"`, `null`), deliverable.ErrInvalidRequest},
		{"number for a string", swap(`"I1"`, `1`), deliverable.ErrInvalidRequest},
		{"string for a number", swap(`"line":12`, `"line":"12"`), deliverable.ErrInvalidRequest},
		{"line zero", swap(`"line":12,"column":3,"displayPath":"docs/<b>&ü.md:12:3"`, `"line":0,"displayPath":"docs/<b>&ü.md"`), deliverable.ErrInvalidRequest},
		{"line with a fraction", swap(`"line":12`, `"line":12.0`), deliverable.ErrInvalidRequest},
		{"line with an exponent", swap(`"line":12`, `"line":1.2e1`), deliverable.ErrInvalidRequest},
		{"line with a leading zero", swap(`"line":12`, `"line":012`), deliverable.ErrInvalidRequest},
		{"negative line", swap(`"line":12`, `"line":-12`), deliverable.ErrInvalidRequest},
		{"huge line", swap(`"line":12`, `"line":99999999999`), deliverable.ErrInvalidRequest},
		{"column without line", swap(`"line":12,"column":3,"displayPath":"docs/<b>&ü.md:12:3"`, `"column":3,"displayPath":"docs/<b>&ü.md:3"`), deliverable.ErrInvalidRequest},
		{"display path that disagrees", swap(`:12:3"`, `:12:4"`), deliverable.ErrInvalidRequest},
		{"display path that is a host path", swap(`"docs/<b>&ü.md:12:3"`, `"/home/u/ws/docs/<b>&ü.md:12:3"`), deliverable.ErrInvalidRequest},
		{"absolute relative path", swap(`"relativePath":"docs/<b>&ü.md"`, `"relativePath":"/home/u/ws/docs/<b>&ü.md"`), deliverable.ErrPathDenied},
		{"unclean relative path", swap(`"relativePath":"docs/<b>&ü.md"`, `"relativePath":"./docs/<b>&ü.md"`), deliverable.ErrPathDenied},
		{"escaping relative path", swap(`"relativePath":"docs/<b>&ü.md"`, `"relativePath":"../docs/<b>&ü.md"`), deliverable.ErrPathDenied},
		{"empty projectId", swap(`"P2"`, `""`), deliverable.ErrInvalidRequest},
		{"lone surrogate", swap(`"I1"`, `"I\ud800"`), deliverable.ErrInvalidRequest},
		{"invalid UTF-8", swap(`"I1"`, "\"I\xff\""), deliverable.ErrInvalidRequest},
		{"too large", `{"kind":"` + strings.Repeat("x", 17<<10) + `"}`, deliverable.ErrInvalidRequest},
	}
	for _, tc := range rejected {
		t.Run("rejects "+tc.name, func(t *testing.T) {
			r, err := deliverable.DecodeWorkspaceRef([]byte(tc.data))
			assert.ErrorIs(t, err, tc.want)
			assert.Equal(t, deliverable.WorkspaceRef{}, r)
		})
	}
}

// FuzzDecodeWorkspaceRef checks the decoder's closure property: whatever it
// accepts re-encodes to canonical bytes that decode to the same reference
// and re-encode to the same bytes, and it never holds an absolute or
// escaping path. Seeds live in testdata/fuzz/FuzzDecodeWorkspaceRef and below.
func FuzzDecodeWorkspaceRef(f *testing.F) {
	f.Add([]byte(canonicalRef))
	f.Add([]byte(` {"displayPath":"a.go","relativePath":"a.go","workspaceId":"E1","workspaceKind":"execution_workspace","issueId":"I1","kind":"workspace_file"} `))
	f.Add([]byte(strings.Replace(canonicalRef, `"I1"`, `"\u0049\u0031"`, 1)))
	f.Add([]byte(canonicalRef + canonicalRef))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := deliverable.DecodeWorkspaceRef(data)
		if err != nil {
			if r != (deliverable.WorkspaceRef{}) {
				t.Fatalf("a failed decode returned %+v", r)
			}
			return
		}
		enc, err := r.Encode()
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", r, err)
		}
		r2, err := deliverable.DecodeWorkspaceRef(enc)
		if err != nil || r2 != r {
			t.Fatalf("round trip of %q: %+v, %v; want %+v", enc, r2, err, r)
		}
		enc2, err := r2.Encode()
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not canonical:\n%q\n%q (%v)", enc, enc2, err)
		}
		if strings.HasPrefix(r.RelativePath, "/") || slices.Contains(strings.Split(r.RelativePath, "/"), "..") {
			t.Fatalf("decoded a host path or an escape: %+v", r)
		}
	})
}

// FuzzWorkspaceRefRoundTrip builds references from arbitrary fields: every
// one NewWorkspaceRef accepts encodes, and decode(encode(x)) == x.
func FuzzWorkspaceRefRoundTrip(f *testing.F) {
	f.Add("I1", "", true, "E1", "src/main.go", 12, 3)
	f.Add("I1", "P2", false, "W2", "docs/<b>&ü \"q\".md", 0, 0)
	f.Add("i", "p", false, "w", "./a//b/", 1, 0)
	f.Fuzz(func(t *testing.T, issue, project string, execution bool, workspace, path string, line, column int) {
		kind := deliverable.ProjectWorkspace
		if execution {
			kind = deliverable.ExecutionWorkspace
		}
		r, err := deliverable.NewWorkspaceRef(deliverable.WorkspaceRef{IssueID: issue, ProjectID: project, WorkspaceKind: kind,
			WorkspaceID: workspace, RelativePath: path, Line: line, Column: column})
		if err != nil {
			return
		}
		enc, err := r.Encode()
		if err != nil {
			t.Fatalf("%+v passed NewWorkspaceRef but does not encode: %v", r, err)
		}
		got, err := deliverable.DecodeWorkspaceRef(enc)
		if err != nil || got != r {
			t.Fatalf("decode(encode(%+v)) = %+v, %v", r, got, err)
		}
		again, err := got.Encode()
		if err != nil || !bytes.Equal(enc, again) {
			t.Fatalf("re-encoding changed the bytes:\n%q\n%q (%v)", enc, again, err)
		}
	})
}

// TestWorkspaceRefFuzzSeeds pins what each checked-in seed is, so the corpus
// keeps covering both sides of the decoder.
func TestWorkspaceRefFuzzSeeds(t *testing.T) {
	want := map[string]error{
		"valid-pretty":        nil,
		"valid-cross-project": nil,
		"host-path":           deliverable.ErrPathDenied,
		"wrong-case":          deliverable.ErrInvalidRequest,
		"display-mismatch":    deliverable.ErrInvalidRequest,
		"lone-surrogate":      deliverable.ErrInvalidRequest,
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzDecodeWorkspaceRef")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, len(want))
	for _, e := range entries {
		t.Run(e.Name(), func(t *testing.T) {
			sentinel, ok := want[e.Name()]
			require.True(t, ok, "unexpected seed %s", e.Name())
			_, err = deliverable.DecodeWorkspaceRef(fuzzseed.Bytes(t, filepath.Join(dir, e.Name())))
			if sentinel == nil {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, sentinel)
			}
		})
	}
}
