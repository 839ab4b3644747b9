package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/afero"

	"github.com/airlockdev/airlock/deliverable"
	"github.com/airlockdev/airlock/session"
	"github.com/airlockdev/airlock/skills"
	"github.com/airlockdev/airlock/stage"
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer) error {
	base, err := os.MkdirTemp("", "airlock-quickstart-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(base)
	dirs := map[string]string{}
	for _, d := range []string{"host/skills", "host/state", "host/secret", "sandbox", "workspace"} {
		dirs[d] = filepath.Join(base, d)
		if err := os.MkdirAll(dirs[d], 0o755); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "airlock quickstart in %s\n\n", base)

	// 1. Skills: one good skill with a link planted to a host secret, and
	// one without a SKILL.md.
	const secret = "host-secret-do-not-leak"
	if err := os.WriteFile(filepath.Join(dirs["host/secret"], "token"), []byte(secret), 0o600); err != nil {
		return err
	}
	review := filepath.Join(dirs["host/skills"], "code-review")
	if err := writeFiles(review, map[string]string{
		"SKILL.md":            "---\nname: code-review\ndescription: Review a change for bugs,\n  security holes and missing tests.\n---\n# Code review\nRead checklist.md first.\n",
		"checklist.md":        "- tests\n- errors\n",
		"scripts/diffstat.sh": "#!/bin/sh\ngit diff --stat\n",
	}); err != nil {
		return err
	}
	if err := os.Symlink(filepath.Join(dirs["host/secret"], "token"), filepath.Join(review, "token")); err != nil {
		return err
	}
	broken := filepath.Join(dirs["host/skills"], "half-done")
	if err := writeFiles(broken, map[string]string{"notes.txt": "no SKILL.md yet"}); err != nil {
		return err
	}
	bundle, err := skills.Materialize(ctx, dirs["host/state"], []skills.Source{
		{Key: "acme/code-review@3", Name: "code-review", Dir: review},
		{Key: "acme/half-done@1", Name: "half-done", Dir: broken},
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "1. skills.Materialize")
	for _, s := range bundle.Skills {
		fmt.Fprintf(out, "   kept    %s: %d files, links left out: %v\n", s.Name, s.Files, s.Skipped)
	}
	for _, d := range bundle.Dropped {
		fmt.Fprintf(out, "   dropped %s: %s\n", d.Name, d.Reason)
	}
	if err := mustNotContain(bundle.Dir, secret); err != nil {
		return err
	}
	fmt.Fprintf(out, "   bundle %s holds no link and no byte of the secret\n", rel(base, bundle.Dir))
	fmt.Fprintf(out, "   identity %s (no host path in it)\n\n", bundle.Identity.Digest)

	// 2. Stage through the command-only bridge: one tar stream, control
	// operations under a hard deadline.
	target := stage.NewBridge(stage.LocalRunner(dirs["sandbox"]))
	root := filepath.Join(dirs["sandbox"], ".airlock", "runtime")
	assets := []stage.Asset{{Name: "skills", Source: bundle.Dir, Links: stage.RejectLinks}}
	rt, err := stage.Stage(ctx, target, root, assets)
	if err != nil {
		return err
	}
	a := rt.Assets[0]
	fmt.Fprintln(out, "2. stage.Stage over stage.NewBridge(stage.LocalRunner(sandbox))")
	fmt.Fprintf(out, "   staged %s -> %s: %d files, %d bytes, reused=%v\n", a.Name, rel(base, a.Path), a.Files, a.Bytes, a.Reused)
	rt, err = stage.Stage(ctx, target, root, assets)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "   staged again unchanged: reused=%v (one probe, nothing written)\n", rt.Assets[0].Reused)
	prompt := rt.Rewrite(bundle.Prompt(bundle.Dir))
	if strings.Contains(prompt, dirs["host/state"]) {
		return errors.New("the rewritten prompt still names a host path")
	}
	fmt.Fprintln(out, "   the agent's prompt, rewritten onto the sandbox:")
	for _, line := range strings.Split(strings.TrimSpace(prompt), "\n") {
		fmt.Fprintf(out, "     | %s\n", strings.ReplaceAll(line, base, "$BASE"))
	}
	fmt.Fprintln(out)

	// 3. Session identity: bind, persist, and refuse a drifted resume.
	profile := session.Profile{Driver: "acp", Protocol: "acp/1", Agent: "claude-code", AgentVersion: "2.1.0",
		ServerPackage: "@zed-industries/claude-code-acp", ServerVersion: "0.5.0",
		CommandDigest: digest("claude-code-acp --stdio"), Model: "claude-sonnet-4-5", PermissionPolicy: "workspace-write"}
	binding, err := session.Bind(session.Config{SessionID: "task-42/run-1", Workspace: dirs["workspace"],
		RuntimeDir: dirs["host/state"], Profile: profile, Model: profile.Model, PermissionMode: session.ApproveReads})
	if err != nil {
		return err
	}
	store := session.NewStore(afero.NewOsFs(), filepath.Join(dirs["host/state"], "sessions"))
	if err := store.Save(ctx, binding.NewRecord("rec-1", "backend-7", "agent-9")); err != nil {
		return err
	}
	if _, err := store.Load(ctx, binding); err != nil {
		return err
	}
	fmt.Fprintln(out, "3. session.Bind + Store")
	fmt.Fprintf(out, "   key %s…, record %s saved and loaded: resume allowed\n", binding.Key[:24], session.Schema)
	other := profile
	other.Model = "claude-opus-4-1"
	drifted, err := session.Bind(session.Config{SessionID: "task-42/run-1", Workspace: dirs["workspace"],
		RuntimeDir: dirs["host/state"], Profile: other, Model: other.Model, PermissionMode: session.ApproveReads})
	if err != nil {
		return err
	}
	_, err = store.Load(ctx, drifted)
	var drift *session.DriftError
	if !errors.As(err, &drift) {
		return fmt.Errorf("a resume under another model was not refused: %v", err)
	}
	fmt.Fprintf(out, "   resume under another model refused: drifted %v -> start a fresh session\n\n", drift.Fields)

	// 4. The agent writes a report in the workspace (here through the same
	// runner); the host registers and verifies it, then checks the evidence.
	agent := stage.LocalRunner(dirs["workspace"])
	if err := agent.Run(ctx, stage.Command{Script: `printf '# Findings\nNo blocking issues.\n' > report.md`}); err != nil {
		return err
	}
	data, err := os.ReadFile(filepath.Join(dirs["workspace"], "report.md"))
	if err != nil {
		return err
	}
	files, err := deliverable.NewFileStore(afero.NewOsFs(), filepath.Join(dirs["host/state"], "attachments"))
	if err != nil {
		return err
	}
	reg := &deliverable.Registrar{Store: files}
	receipt, err := reg.Register(ctx, dirs["workspace"], "task-42", "run-1", deliverable.Request{
		ContentRef: "report.md", Filename: "report.md", ContentType: "text/markdown",
		ByteSize: int64(len(data)), SHA256: digest(string(data))[len("sha256:"):], Title: "Review findings",
		IdempotencyKey: "report-1",
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "4. deliverable.Register + ValidateEvidence")
	fmt.Fprintf(out, "   registered report.md (%d bytes, sha256 verified): %s %s\n", receipt.ByteSize, receipt.Disposition, receipt.ContentPath)
	objective := "Review the change and write the findings to report.md, then attach it."
	fmt.Fprintf(out, "   the task asks for files %v\n", deliverable.DetectRequests(objective).Files)
	tasks := hostTasks{FileStore: files, tasks: map[string]deliverable.Task{"task-42": {ID: "task-42", Status: deliverable.StatusInProgress}}}
	ev := deliverable.Evidence{TaskID: "task-42", RunID: "run-1", Objective: objective}
	ev.Refs = []string{"report.md"}
	err = deliverable.ValidateEvidence(ctx, tasks, ev)
	if !errors.Is(err, deliverable.ErrEvidence) {
		return fmt.Errorf("citing a bare path was accepted: %v", err)
	}
	fmt.Fprintln(out, "   citing the bare path is refused: register it and cite deliverable:<id>")
	ev.Refs = []string{"deliverable:" + receipt.AttachmentID}
	if err := deliverable.ValidateEvidence(ctx, tasks, ev); err != nil {
		return err
	}
	fmt.Fprintf(out, "   citing deliverable:%s is accepted\n", receipt.AttachmentID)
	return nil
}

// hostTasks is the host's task table; attachments come from the FileStore.
type hostTasks struct {
	*deliverable.FileStore
	tasks map[string]deliverable.Task
}

func (h hostTasks) Task(_ context.Context, id string) (deliverable.Task, error) {
	if t, ok := h.tasks[id]; ok {
		return t, nil
	}
	return deliverable.Task{}, fmt.Errorf("task %s: %w", id, deliverable.ErrNotFound)
}

func writeFiles(dir string, files map[string]string) error {
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			return err
		}
	}
	return nil
}

// mustNotContain fails when any file under dir holds needle or is a link.
func mustNotContain(dir, needle string) error {
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&os.ModeSymlink != 0 {
			return fmt.Errorf("link in the bundle: %s", p)
		}
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if strings.Contains(string(b), needle) {
				return fmt.Errorf("secret leaked into %s", p)
			}
		}
		return nil
	})
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func rel(base, p string) string {
	if r, err := filepath.Rel(base, p); err == nil {
		return "$BASE/" + r
	}
	return p
}
