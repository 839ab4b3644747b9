package deliverable_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/afero"

	"github.com/airlockdev/airlock/deliverable"
	"github.com/airlockdev/airlock/sandbox"
)

func ExampleRegistrar_Register() {
	dir, err := os.MkdirTemp("", "workspace-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	data := []byte("name,score\nada,3\n")
	if err := os.WriteFile(filepath.Join(dir, "scores.csv"), data, 0o644); err != nil {
		fmt.Println(err)
		return
	}
	workspace, err := deliverable.LocalWorkspace(dir)
	if err != nil {
		fmt.Println(err)
		return
	}

	store, err := deliverable.NewFileStore(afero.NewMemMapFs(), "/attachments")
	if err != nil {
		fmt.Println(err)
		return
	}
	reg := &deliverable.Registrar{Store: store}
	sum := sha256.Sum256(data)
	req := deliverable.Request{
		ContentRef:     "scores.csv",
		Filename:       "scores.csv",
		ContentType:    "text/csv",
		ByteSize:       int64(len(data)),
		SHA256:         hex.EncodeToString(sum[:]),
		Title:          "Scores",
		IdempotencyKey: "scores-1",
	}
	ctx := context.Background()
	rc, err := reg.Register(ctx, workspace, "task-7", "run-1", req)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(rc.Disposition, rc.Filename, rc.ByteSize)
	fmt.Println(rc.ContentPath == "/api/attachments/"+rc.AttachmentID+"/content")

	req.IdempotencyKey = "scores-2" // same content, new key
	dup, err := reg.Register(ctx, workspace, "task-7", "run-1", req)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(dup.Disposition, dup.AttachmentID == rc.AttachmentID)

	// A rejection tells the agent what to do, in the request's field names.
	req.ContentRef = "../etc/passwd"
	req.IdempotencyKey = "scores-3"
	_, err = reg.Register(ctx, workspace, "task-7", "run-1", req)
	var re *deliverable.RequestError
	if errors.As(err, &re) {
		fmt.Println(errors.Is(err, deliverable.ErrPathDenied), re.Field)
		fmt.Println(re.Message)
	}
	// Output:
	// applied scores.csv 17
	// true
	// duplicate true
	// true contentRef
	// register_deliverable: contentRef "../etc/passwd" contains ".."; pass the file's path relative to the workspace root, such as "out/report.pdf".
}

// A sandbox that only runs commands: here a local shell stands in for it.
// The bytes are hashed on the host as they arrive; the sandbox is never
// asked for a hash.
func ExampleRemoteWorkspace() {
	dir, err := os.MkdirTemp("", "sandbox-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	runner := sandbox.Local(dir)
	ctx := context.Background()
	if err := runner.Run(ctx, sandbox.Command{Script: "mkdir out && printf 'done\\n' > out/log.txt && ln -s out link"}); err != nil {
		fmt.Println(err)
		return
	}
	store, err := deliverable.NewFileStore(afero.NewMemMapFs(), "/attachments")
	if err != nil {
		fmt.Println(err)
		return
	}
	reg := &deliverable.Registrar{Store: store, ToolName: "attach_file"}
	workspace := deliverable.RemoteWorkspace(runner, dir)
	sum := sha256.Sum256([]byte("done\n"))
	req := deliverable.Request{
		ContentRef: "out/log.txt", Filename: "log.txt", ContentType: "text/plain",
		ByteSize: 5, SHA256: hex.EncodeToString(sum[:]), Title: "Log", IdempotencyKey: "log-1",
	}
	rc, err := reg.Register(ctx, workspace, "task-7", "run-1", req)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(rc.Disposition, rc.Filename, rc.ByteSize)

	req.ContentRef, req.IdempotencyKey = "link/log.txt", "log-2"
	_, err = reg.Register(ctx, workspace, "task-7", "run-1", req)
	fmt.Println(err)
	// Output:
	// applied log.txt 5
	// attach_file: contentRef "link/log.txt" goes through a symbolic link; pass the path of the file's real location inside the workspace, with no link in any component.
}

func ExampleParseCitation() {
	for _, ref := range []string{
		"deliverable:0F8FAD5B-D9CB-469F-A165-70867728950E",
		"/api/attachments/0f8fad5b-d9cb-469f-a165-70867728950e/content?download=1",
		"https://example.com/report.pdf",
	} {
		fmt.Println(deliverable.ParseCitation(ref))
	}
	// Output:
	// 0f8fad5b-d9cb-469f-a165-70867728950e true
	// 0f8fad5b-d9cb-469f-a165-70867728950e true
	//  false
}

// hostTasks is what a host might provide: here, two maps.
type hostTasks struct {
	tasks       map[string]deliverable.Task
	attachments map[string]deliverable.Attachment
}

func (h hostTasks) Task(_ context.Context, id string) (deliverable.Task, error) {
	if t, ok := h.tasks[id]; ok {
		return t, nil
	}
	return deliverable.Task{}, fmt.Errorf("task %s: %w", id, deliverable.ErrNotFound)
}

func (h hostTasks) Attachment(_ context.Context, id string) (deliverable.Attachment, error) {
	if a, ok := h.attachments[id]; ok {
		return a, nil
	}
	return deliverable.Attachment{}, fmt.Errorf("attachment %s: %w", id, deliverable.ErrNotFound)
}

func ExampleValidateEvidence() {
	const childFile = "0f8fad5b-d9cb-469f-a165-70867728950e"
	tasks := hostTasks{
		tasks: map[string]deliverable.Task{
			"root":   {ID: "root", Status: deliverable.StatusInProgress},
			"parent": {ID: "parent", ParentID: "root", Status: deliverable.StatusInProgress},
			"child":  {ID: "child", ParentID: "parent", Status: deliverable.StatusDone},
		},
		attachments: map[string]deliverable.Attachment{
			childFile: {ID: childFile, TaskID: "child", RunID: "r9", Filename: "summary.txt"},
		},
	}
	ev := deliverable.Evidence{
		TaskID:    "parent",
		RunID:     "r1",
		Objective: "Explain how a newsletter works.",
		Refs:      []string{"deliverable:" + childFile},
	}
	fmt.Println(deliverable.ValidateEvidence(context.Background(), tasks, ev))

	ev.TaskID = "root" // the file is a grandchild's
	err := deliverable.ValidateEvidence(context.Background(), tasks, ev)
	var ee *deliverable.EvidenceError
	if errors.As(err, &ee) {
		fmt.Println(ee.Message)
	}
	// Output:
	// <nil>
	// Completion cites no registered attachment on this task or its completed child tasks. Use register_deliverable for the requested file and cite deliverable:<attachmentId> from its receipt.
}

// A host with no task table of its own keeps its tasks beside the
// attachments, and completes them through FileTasks.
func ExampleFileTasks() {
	dir, err := os.MkdirTemp("", "airlock-state-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	store, err := deliverable.OpenFileStore(filepath.Join(dir, "attachments"))
	if err != nil {
		fmt.Println(err)
		return
	}
	tasks, ctx := store.Tasks(), context.Background()
	for _, r := range []deliverable.TaskRecord{
		{ID: "parent", Status: deliverable.StatusInProgress, Objective: "Explain how a newsletter works."},
		{ID: "child", ParentID: "parent", Status: deliverable.StatusInProgress, Objective: "Write a summary to summary.txt."},
	} {
		if err := tasks.Put(ctx, r); err != nil {
			fmt.Println(err)
			return
		}
	}

	// The child's agent delivers summary.txt.
	data := []byte("A newsletter is a letter to many.\n")
	if err := os.WriteFile(filepath.Join(dir, "summary.txt"), data, 0o644); err != nil {
		fmt.Println(err)
		return
	}
	ws, err := deliverable.LocalWorkspace(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	sum := sha256.Sum256(data)
	rc, err := (&deliverable.Registrar{Store: store}).Register(ctx, ws, "child", "run-2", deliverable.Request{
		ContentRef: "summary.txt", Filename: "summary.txt", ContentType: "text/plain", ByteSize: int64(len(data)),
		SHA256: hex.EncodeToString(sum[:]), Title: "Summary", IdempotencyKey: "summary"})
	if err != nil {
		fmt.Println(err)
		return
	}
	cite := []string{"deliverable:" + rc.AttachmentID}

	// Until the child is done, its file proves nothing for the parent.
	err = tasks.Complete(ctx, deliverable.Evidence{TaskID: "parent", RunID: "run-1", Refs: cite})
	fmt.Println(errors.Is(err, deliverable.ErrEvidence))
	fmt.Println(tasks.Complete(ctx, deliverable.Evidence{TaskID: "child", RunID: "run-2", Refs: cite}))
	fmt.Println(tasks.Complete(ctx, deliverable.Evidence{TaskID: "parent", RunID: "run-1", Refs: cite}))
	parent, err := tasks.Task(ctx, "parent")
	fmt.Println(parent.Status, err)
	// Output:
	// true
	// <nil>
	// <nil>
	// done <nil>
}

func ExampleContentDisposition() {
	fmt.Println(deliverable.ContentDisposition("attachment", "Übersicht 2024.pdf"))
	// Output:
	// attachment; filename="_bersicht 2024.pdf"; filename*=UTF-8''%C3%9Cbersicht%202024.pdf
}

func ExampleNewWorkspaceRef() {
	ref, err := deliverable.NewWorkspaceRef(deliverable.WorkspaceRef{
		IssueID:       "ISS-42",
		WorkspaceKind: deliverable.ExecutionWorkspace,
		WorkspaceID:   "ws-7",
		RelativePath:  "./src//main.go",
		Line:          12,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	enc, err := ref.Encode()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(enc))

	// A host path never makes it into a reference.
	_, err = deliverable.NewWorkspaceRef(deliverable.WorkspaceRef{
		IssueID: "ISS-42", WorkspaceKind: deliverable.ExecutionWorkspace, WorkspaceID: "ws-7",
		RelativePath: "/home/ada/ws/src/main.go",
	})
	fmt.Println(errors.Is(err, deliverable.ErrPathDenied))
	// Output:
	// {"kind":"workspace_file","issueId":"ISS-42","workspaceKind":"execution_workspace","workspaceId":"ws-7","relativePath":"src/main.go","line":12,"displayPath":"src/main.go:12"}
	// true
}

func ExampleDecodeWorkspaceRef() {
	_, err := deliverable.DecodeWorkspaceRef([]byte(`{"kind":"workspace_file","issueId":"ISS-42","workspaceKind":"execution_workspace",` +
		`"workspaceId":"ws-7","relativePath":"src/main.go","line":12,"displayPath":"src/main.go:13"}`))
	fmt.Println(err)
	// Output:
	// deliverable: invalid request: workspace reference: displayPath "src/main.go:13" is not "src/main.go:12", what relativePath, line and column give
}

// DetectRequests reads the task's own text by the rules of the package
// documentation (section "Requested files"): which objectives ask for a
// file, and which files they name as outputs.
func ExampleDetectRequests() {
	for _, objective := range []string{
		"Export the Q3 numbers as q3.xlsx and attach it.",
		"Summarize data.json and answer in chat.",
		"Convert users.csv to JSON.",
		"Deliverables:\n- dist/index.html\n- update styles.css\n",
		"Write memory.txt. This is personal memory, not a task deliverable.",
		"Bitte exportiere die Tabelle als umsatz.xlsx und hänge sie an.",
		"Render the chart as a PNG.",
	} {
		r := deliverable.DetectRequests(objective)
		fmt.Printf("%t %q\n", r.File, r.Files)
	}
	// Output:
	// true ["q3.xlsx"]
	// false []
	// false []
	// true ["dist/index.html"]
	// false []
	// true ["umsatz.xlsx"]
	// true []
}
