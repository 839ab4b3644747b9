package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"path/filepath"

	"github.com/airlockdev/airlock/deliverable"
	"github.com/airlockdev/airlock/deliverable/mcptool"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/session"
	"github.com/airlockdev/airlock/skills"
	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/workspace"
)

// Run is one agent run in a sandbox. Every field is required but Log.
type Run struct {
	Sandbox                  stage.Sandbox // *remote.Host, or stage.Over(any sandbox.Runner)
	StateDir                 string        // host state: bundles, session records
	Skills                   []skills.Source
	Local, Remote            string                 // the host workspace and its sandbox copy
	Session                  session.Config         // Workspace and StateDir are filled in
	TaskID, RunID, Objective string                 // Objective: the task's own text, bound by the host
	Files                    *deliverable.FileStore // delivered files, and the host's tasks beside them (Files.Tasks)
	Agent                    func(context.Context, Turn) (Completion, error)
	Log                      *slog.Logger
}

// Turn is the agent's prompt, workspace, runner, session to resume ("": fresh) and MCP tool URL in the sandbox ("": none).
type Turn struct {
	Prompt, Remote, SessionKey, ResumeID, ToolURL string
	Runner                                        sandbox.Runner
}

// Completion is the agent's report: session ids, files delivered, other citations.
type Completion struct {
	BackendSessionID, AgentSessionID string
	Deliver                          []deliverable.Request
	Refs                             []string
}

// Outcome is what a run did.
type Outcome struct {
	Prompt   string
	Resumed  bool
	Restored *workspace.Result
	Receipts []deliverable.Receipt
}

// Do runs r: materialize, stage, prompt, session, prepare, agent, restore,
// register, validate. Its error says what to do through classify.
func (r *Run) Do(ctx context.Context) (*Outcome, error) {
	log, out := cmp.Or(r.Log, slog.New(slog.DiscardHandler)), &Outcome{}
	bundle, err := skills.Materialize(ctx, filepath.Join(r.StateDir, "skills"), r.Skills, skills.WithLogger(log))
	if err != nil {
		return nil, fmt.Errorf("materialize skills: %w", err)
	}
	var assets []stage.Asset // no skill survived: stage none, and WithPrune removes an earlier run's
	if bundle.Dir != "" {
		assets = []stage.Asset{{Name: "skills", Source: bundle.Dir, Links: stage.RejectLinks}} // a bundle holds no link
	}
	rt, err := stage.Stage(ctx, r.Sandbox, path.Join(r.Remote, sandbox.RuntimeDir), assets, stage.WithPrune(), stage.WithLogger(log))
	if err != nil {
		return nil, fmt.Errorf("stage skills: %w", err)
	}
	if root, ok := rt.Path("skills"); ok {
		out.Prompt = bundle.Prompt(root) // rendered for the sandbox's path
	}
	cfg := r.Session
	cfg.Workspace, cfg.StateDir, cfg.SkillsDigest = r.Local, r.StateDir, bundle.Identity.Digest // bound to the skills its prompt lists
	bind, err := session.Bind(cfg)
	if err != nil {
		return nil, fmt.Errorf("bind session: %w", err)
	}
	store, err := session.OpenStore(filepath.Join(r.StateDir, "sessions"))
	if err != nil {
		return nil, err
	}
	turn := Turn{Prompt: out.Prompt, Remote: r.Remote, SessionKey: bind.Key, Runner: r.Sandbox}
	res, err := store.Resume(ctx, bind)
	if err != nil {
		return nil, fmt.Errorf("load session: %w", err)
	}
	if turn.ResumeID, out.Resumed = res.Record.AgentSessionID, res.Fresh == nil; res.Fresh != nil { // Record is zero then
		log.Info("starting a fresh session", "reason", res.Fresh.Reason, "err", res.Fresh.Err)
	}
	reg, ws := &deliverable.Registrar{Store: r.Files}, deliverable.RemoteWorkspace(r.Sandbox, r.Remote)
	if f, ok := r.Sandbox.(mcptool.Forwarder); ok { // the agent's tool, on the sandbox's loopback, through the SSH connection
		tctx, stop := context.WithCancel(ctx) // the forward ends with the run
		defer stop()
		if turn.ToolURL, err = mcptool.ServeInSandbox(tctx, f, mcptool.New(reg, ws, r.TaskID, r.RunID)); err != nil {
			return nil, err
		}
	} else {
		log.Warn("the sandbox cannot forward (not an mcptool.Forwarder): the agent gets no register_deliverable tool; serve mcptool.Handler where the sandbox can reach it (see README)")
	}
	round, err := workspace.Prepare(ctx, workspace.Spec{Local: r.Local, Remote: r.Remote, Runner: r.Sandbox}, workspace.WithLogger(log))
	if err != nil {
		return nil, fmt.Errorf("prepare workspace: %w", err)
	}
	done, agentErr := r.Agent(ctx, turn)
	if out.Restored, err = round.Restore(ctx); err != nil { // even if the agent failed (a failed restore: workspace.Reopen by id)
		return out, fmt.Errorf("restore workspace (round %s; the agent: %v): %w", round.ID(), agentErr, err) // the restore's error decides
	}
	if agentErr != nil {
		return out, fmt.Errorf("agent: %w", agentErr)
	}
	if err := store.Save(ctx, bind.NewRecord(session.RecordIDs{RecordID: r.RunID, BackendSessionID: done.BackendSessionID, AgentSessionID: done.AgentSessionID})); err != nil {
		return out, fmt.Errorf("save session: %w", err)
	}
	refs := done.Refs // the agent's citations, those of the tool's receipts among them
	for _, req := range done.Deliver {
		rc, err := reg.Register(ctx, ws, r.TaskID, r.RunID, req)
		if err != nil {
			return out, fmt.Errorf("register %q: %w", req.ContentRef, err)
		}
		out.Receipts, refs = append(out.Receipts, rc), append(refs, "deliverable:"+rc.AttachmentID)
	}
	if err := deliverable.ValidateEvidence(ctx, r.Files.Tasks(), deliverable.Evidence{TaskID: r.TaskID, RunID: r.RunID, Objective: r.Objective, Refs: refs}); err != nil {
		return out, fmt.Errorf("validate evidence: %w", err)
	}
	return out, nil
}

// Action is what the caller of a failed run does next.
type Action string

const (
	HostFault  Action = "host fault"  // ours or the sandbox's: alert, do not blame the agent
	Retry      Action = "retry"       // transient: run the turn again
	StartFresh Action = "start fresh" // the session cannot resume: start a new one
	TellAgent  Action = "tell agent"  // the agent can fix it: show it err's message
)

// classify sorts a non-nil error of Do (or of remote.Dial) into an Action; sandbox.Retryable says what may be retried.
func classify(err error) Action {
	var reqErr *deliverable.RequestError // an *EvidenceError is one too
	switch {
	case errors.As(err, &reqErr):
		return TellAgent
	case errors.Is(err, session.ErrDrift): // Resume answers a drifted or unreadable record with Fresh; Save's ErrMalformedRecord is our bug
		return StartFresh
	case sandbox.Retryable(err):
		return Retry
	}
	return HostFault // host key refused, bad input, tools missing, conflicts, hostile sandbox, full disk, …
}
