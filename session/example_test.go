package session_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/afero"

	"github.com/airlockdev/airlock/session"
)

// mkdirs creates a workspace and a state directory for the examples.
func mkdirs() (workspace, stateDir string, cleanup func()) {
	root, err := os.MkdirTemp("", "session-example-")
	if err != nil {
		panic(err)
	}
	workspace = filepath.Join(root, "project")
	stateDir = filepath.Join(root, "state")
	for _, d := range []string{workspace, stateDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			panic(err)
		}
	}
	return workspace, stateDir, func() {
		if err := os.RemoveAll(root); err != nil {
			panic(err)
		}
	}
}

func ExampleBind() {
	workspace, stateDir, cleanup := mkdirs()
	defer cleanup()

	profile := session.Profile{Driver: "acp", Agent: "claude", AgentVersion: "1.2.3", Model: "claude-sonnet-4"}
	b, err := session.Bind(session.Config{
		SessionID:      "task-42/run-1",
		Workspace:      workspace,
		StateDir:       stateDir,
		Profile:        profile, // Profile.Model is the session's model; Config.Model may stay empty
		PermissionMode: session.ApproveReads,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(b.Model)
	fmt.Println(filepath.Base(b.SessionDir))
	fmt.Println(filepath.Base(filepath.Dir(b.SessionDir)))

	// A controller that asks for another model and no permission mode drifts.
	id := b.Identity()
	id.Model = "claude-opus-4"
	id.PermissionMode = ""
	var drift *session.DriftError
	if err := b.Verify(id); errors.As(err, &drift) {
		fmt.Println("drift:", drift.Fields)
	}
	// Output:
	// claude-sonnet-4
	// task-42_run-1-e7b0c27b6c3876d7
	// sessions
	// drift: [model permission_mode]
}

func ExampleDecodeRecord() {
	_, err := session.DecodeRecord([]byte(`{"session_id":"s","model":"m"}`))
	fmt.Println(errors.Is(err, session.ErrUnsupportedSchema))
	// Output:
	// true
}

func ExampleStore() {
	workspace, stateDir, cleanup := mkdirs()
	defer cleanup()
	ctx := context.Background()
	cfg := session.Config{
		SessionID:      "session-1",
		Workspace:      workspace,
		StateDir:       stateDir,
		Profile:        session.Profile{Agent: "codex", Model: "gpt-5"},
		Model:          "gpt-5",
		PermissionMode: session.DenyAll,
	}
	b, err := session.Bind(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	store := session.NewStore(afero.NewMemMapFs(), "/state/sessions")

	if _, err := store.Load(ctx, b); errors.Is(err, fs.ErrNotExist) {
		fmt.Println("no record yet: start a fresh session")
	}
	if err := store.Save(ctx, b.NewRecord(session.RecordIDs{RecordID: "rec-1", BackendSessionID: "backend-7", AgentSessionID: "agent-9"})); err != nil {
		fmt.Println(err)
		return
	}
	r, err := store.Load(ctx, b)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("resume agent session", r.AgentSessionID)

	// The same session id under a looser permission mode must not resume.
	cfg.PermissionMode = session.ApproveAll
	b2, err := session.Bind(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = store.Load(ctx, b2)
	fmt.Println(errors.Is(err, session.ErrDrift))
	// Output:
	// no record yet: start a fresh session
	// resume agent session agent-9
	// true
}

func ExampleStore_Resume() {
	workspace, stateDir, cleanup := mkdirs()
	defer cleanup()
	ctx := context.Background()
	cfg := session.Config{
		SessionID:      "task-7/run-2",
		Workspace:      workspace,
		StateDir:       stateDir,
		Profile:        session.Profile{Agent: "claude", Model: "claude-sonnet-4"},
		Model:          "claude-sonnet-4",
		PermissionMode: session.ApproveReads,
	}
	b, err := session.Bind(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	store := session.NewStore(afero.NewMemMapFs(), "/state/sessions")

	resume := func(b session.Binding) {
		r, err := store.Resume(ctx, b)
		switch {
		case err != nil:
			fmt.Println("cannot decide:", err)
		case r.Fresh != nil:
			fmt.Println("start fresh:", r.Fresh.Reason, r.Fresh.Fields)
		default:
			fmt.Println("resume agent session", r.Record.AgentSessionID)
		}
	}
	resume(b)
	if err := store.Save(ctx, b.NewRecord(session.RecordIDs{RecordID: "run-2", BackendSessionID: "backend-1", AgentSessionID: "agent-1"})); err != nil {
		fmt.Println(err)
		return
	}
	resume(b)

	cfg.PermissionMode = session.ApproveAll
	looser, err := session.Bind(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	resume(looser)
	// Output:
	// start fresh: no_record []
	// resume agent session agent-1
	// start fresh: drift [permission_mode]
}
