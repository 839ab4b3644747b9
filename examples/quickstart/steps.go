package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/airlockdev/airlock/deliverable"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/session"
	"github.com/airlockdev/airlock/skills"
	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/workspace"
)

// state is what one step hands the next.
type state struct {
	skillsDir string // host copy of the fixtures
	stateDir  string // host state: bundles, sessions, attachments
	secret    string // the bytes no copy may hold
	bundle    *skills.Bundle
	rt        *stage.Runtime
	prompt    string
	local     string // host workspace
	round     *workspace.Round
	report    string // what the agent wrote to report.md
	commit    string // the agent's commit, as the sandbox named it
}

// The fixture selection (testdata/skills): two usable skills, one whose
// SKILL.md is a link.
func (st *state) sources() []skills.Source {
	var out []skills.Source
	for _, n := range []string{"code-review", "release-notes", "borrowed"} {
		out = append(out, skills.Source{Key: "acme/" + n + "@1", Name: n, Dir: filepath.Join(st.skillsDir, n)})
	}
	return out
}

// 1. Materialize: survivors, the dropped skill and why, the link left out,
// a bundle without links or secret bytes, and a path-free identity.
func (e *env) materialize(ctx context.Context, fixtures string, s *Summary) error {
	st := e.st
	st.skillsDir = filepath.Join(e.base, "host", "skills")
	st.stateDir = filepath.Join(e.base, "host", "state")
	// os.CopyFS recreates the fixtures' links as links (os.DirFS is a ReadLinkFS).
	if err := os.CopyFS(st.skillsDir, os.DirFS(fixtures)); err != nil {
		return fmt.Errorf("copy the fixtures %s: %w", fixtures, err)
	}
	for _, l := range []string{"code-review/refs/token", "borrowed/SKILL.md"} {
		if fi, err := os.Lstat(filepath.Join(st.skillsDir, l)); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return fmt.Errorf("fixture %s is not a symbolic link (a checkout without core.symlinks?): %v", l, err)
		}
	}
	secret, err := os.ReadFile(filepath.Join(st.skillsDir, "secret.txt"))
	if err != nil {
		return err
	}
	st.secret = strings.TrimSpace(string(secret))
	b, err := skills.Materialize(ctx, filepath.Join(st.stateDir, "skills"), st.sources(), skills.WithLogger(e.log))
	if err != nil {
		return err
	}
	st.bundle = b
	r := &s.Skills
	r.Dropped, r.LeftOut, r.Identity = map[string]string{}, map[string][]string{}, b.Identity.Digest
	for _, k := range b.Skills {
		r.Kept = append(r.Kept, k.Name)
		if len(k.Skipped) > 0 {
			r.LeftOut[k.Name] = k.Skipped
		}
	}
	for _, d := range b.Dropped {
		r.Dropped[d.Name] = d.Reason
	}
	if !slices.Equal(r.Kept, []string{"code-review", "release-notes"}) {
		return fmt.Errorf("kept %v, want [code-review release-notes]", r.Kept)
	}
	if len(r.Dropped) != 1 || !strings.Contains(r.Dropped["borrowed"], "link") {
		return fmt.Errorf("dropped %v, want borrowed for its linked SKILL.md", r.Dropped)
	}
	if !reflect.DeepEqual(r.LeftOut, map[string][]string{"code-review": {"refs/token"}}) {
		return fmt.Errorf("links left out %v, want code-review: [refs/token]", r.LeftOut)
	}
	if r.NoLink, r.NoSecret, err = scanHost(b.Dir, st.secret); err != nil {
		return err
	}
	if !r.NoLink || !r.NoSecret {
		return fmt.Errorf("bundle %s holds a link (%v) or the secret (%v)", b.Dir, !r.NoLink, !r.NoSecret)
	}
	moved, err := skills.Materialize(ctx, filepath.Join(e.base, "host", "moved-state"), st.sources())
	if err != nil {
		return err
	}
	if r.IdentityMoved = moved.Identity.Digest; r.IdentityMoved != r.Identity || moved.Dir == b.Dir {
		return fmt.Errorf("identity depends on the state directory: %s vs %s", r.Identity, r.IdentityMoved)
	}
	e.progress(1, "materialize", "kept %s; dropped borrowed (%s); left out code-review/refs/token; no link, no secret; identity %s (path-free)",
		strings.Join(r.Kept, ", "), r.Dropped["borrowed"], short(r.Identity))
	return nil
}

// 2. Stage over SSH under <remote dir>/.airlock: fresh, reused, then a delta
// of one file.
func (e *env) stage(ctx context.Context, s *Summary) error {
	st, r := e.st, &s.Stage
	r.Root = path.Join(e.remoteDir, sandbox.RuntimeDir)
	opts := []stage.Option{stage.WithLogger(e.log)}
	rt, err := stage.Stage(ctx, e.host, r.Root, skillAssets(st.bundle.Dir), opts...)
	if err != nil {
		return err
	}
	a := rt.Assets[0]
	r.Path, r.Files, r.FirstSent = a.Path, a.Files, a.Sent
	if a.Path != r.Root+"/skills" || a.Reused || a.Sent != a.Files || a.Files == 0 {
		return fmt.Errorf("first stage: path %s, reused %v, sent %d of %d files; want %s/skills, fresh, all sent", a.Path, a.Reused, a.Sent, a.Files, r.Root)
	}
	if rt, err = stage.Stage(ctx, e.host, r.Root, skillAssets(st.bundle.Dir), opts...); err != nil {
		return err
	}
	if r.AgainReused = rt.Assets[0].Reused; !r.AgainReused || rt.Assets[0].Sent != 0 {
		return fmt.Errorf("staging unchanged content again: reused %v, sent %d; want reused, none sent", rt.Assets[0].Reused, rt.Assets[0].Sent)
	}

	// The user edits one skill file; the selection is materialized again
	// (a new bundle, a new identity) and only that file crosses.
	r.Changed = "code-review/checklist.md"
	f, err := os.OpenFile(filepath.Join(st.skillsDir, r.Changed), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString("- Every exported error can be matched with errors.Is.\n")
	if err = errors.Join(err, f.Close()); err != nil {
		return err
	}
	b, err := skills.Materialize(ctx, filepath.Join(st.stateDir, "skills"), st.sources(), skills.WithLogger(e.log))
	if err != nil {
		return err
	}
	if b.Identity == st.bundle.Identity {
		return errors.New("a changed skill file left the bundle identity unchanged")
	}
	st.bundle = b
	if st.rt, err = stage.Stage(ctx, e.host, r.Root, skillAssets(b.Dir), opts...); err != nil {
		return err
	}
	a = st.rt.Assets[0]
	r.ChangedSent, r.ChangedReused = a.Sent, a.Reused
	if a.Reused || a.Sent != 1 || a.Files != r.Files {
		return fmt.Errorf("after changing %s: reused %v, sent %d of %d files; want 1 sent", r.Changed, a.Reused, a.Sent, a.Files)
	}
	want, err := os.ReadFile(filepath.Join(b.Dir, r.Changed))
	if err != nil {
		return err
	}
	got, err := e.sh(ctx, "", `cat -- "$F"`, map[string]string{"F": a.Path + "/" + r.Changed})
	if err != nil {
		return err
	}
	if got != string(want) {
		return fmt.Errorf("the sandbox copy of %s is not the changed file", r.Changed)
	}
	out, err := e.sh(ctx, "", `cd -- "$P" || exit 1
if [ -n "$(find . -type l)" ]; then echo link; fi
if grep -rqF -e "$SECRET" .; then echo secret; fi`, map[string]string{"P": a.Path, "SECRET": st.secret})
	if err != nil {
		return err
	}
	r.NoLink, r.NoSecret = !strings.Contains(out, "link"), !strings.Contains(out, "secret")
	if !r.NoLink || !r.NoSecret {
		return fmt.Errorf("the sandbox copy %s holds a link (%v) or the secret (%v)", a.Path, !r.NoLink, !r.NoSecret)
	}
	e.progress(2, "stage", "%s: %d files sent over SSH; again: reused; after editing %s: %d file sent; no link, no secret in the sandbox",
		r.Path, r.FirstSent, r.Changed, r.ChangedSent)
	return nil
}

// 3. The prompt for the sandbox: Skill root is the staged path, every file
// it names is in the sandbox, no host path is left.
func (e *env) prompt(ctx context.Context, s *Summary) error {
	st, r := e.st, &s.Prompt
	root := st.rt.Assets[0].Path
	st.prompt = st.bundle.Prompt(root)
	r.Text, r.SkillRoot = st.prompt, root
	if rewritten := st.rt.Rewrite(st.bundle.Prompt(st.bundle.Dir)); rewritten != st.prompt {
		return fmt.Errorf("Runtime.Rewrite of the host prompt differs from the prompt rendered for the sandbox:\n%s\nvs\n%s", rewritten, st.prompt)
	}
	if !strings.Contains(st.prompt, "\nSkill root: "+root+"\n") {
		return fmt.Errorf("the prompt does not name the skill root %s:\n%s", root, st.prompt)
	}
	if strings.Contains(st.prompt, st.stateDir) || strings.Contains(st.prompt, st.skillsDir) {
		return fmt.Errorf("the prompt names a host path:\n%s", st.prompt)
	}
	for _, k := range st.bundle.Skills {
		f, ok := promptFile(st.prompt, k.Name)
		if !ok || f != root+"/"+k.Name+"/SKILL.md" {
			return fmt.Errorf("the prompt names %q for %s, want %s/%s/SKILL.md", f, k.Name, root, k.Name)
		}
		r.Files = append(r.Files, f)
	}
	for _, f := range r.Files {
		if _, err := e.sh(ctx, "", `[ -f "$F" ] && [ ! -L "$F" ] || { echo "$F is not a regular file in the sandbox" >&2; exit 1; }`, map[string]string{"F": f}); err != nil {
			return err
		}
	}
	e.progress(3, "prompt", "Skill root: %s; %d skill files named, each present in the sandbox (prompt on stdout)", root, len(r.Files))
	return nil
}

// promptFile returns the "(file: …)" path of the prompt's line for skill.
func promptFile(prompt, skill string) (string, bool) {
	for line := range strings.Lines(prompt) {
		line = strings.TrimSuffix(line, "\n")
		if !strings.HasPrefix(line, "- "+skill+": ") && !strings.HasPrefix(line, "- "+skill+" (") {
			continue
		}
		i := strings.LastIndex(line, " (file: ")
		if i < 0 || !strings.HasSuffix(line, ")") {
			return "", false
		}
		return line[i+len(" (file: ") : len(line)-1], true
	}
	return "", false
}

// profile is the qualified agent profile of the run.
func profile(model string) session.Profile {
	return session.Profile{Driver: "acp", Protocol: "acp/1", Agent: "claude-code", AgentVersion: "2.1.0",
		ServerPackage: "@zed-industries/claude-code-acp", ServerVersion: "0.5.0",
		CommandDigest: digest([]byte("claude-code-acp --stdio")), Model: model, PermissionPolicy: "workspace-write"}
}

// 4. Session: bind (to the skill set the prompt lists), save, resume; a
// resume under another model, or another skill set, is refused.
func (e *env) session(ctx context.Context, s *Summary) error {
	st, r := e.st, &s.Session
	st.local = filepath.Join(e.base, "host", "workspace")
	if err := os.MkdirAll(st.local, 0o755); err != nil {
		return err
	}
	r.SkillsDigest = st.bundle.Identity.Digest
	bind := func(model, skillsDigest string) (session.Binding, error) {
		return session.Bind(session.Config{SessionID: "task-42/run-1", Workspace: st.local, StateDir: st.stateDir,
			Profile: profile(model), Model: model, PermissionMode: session.ApproveReads, SkillsDigest: skillsDigest})
	}
	b, err := bind("claude-sonnet-4-5", r.SkillsDigest)
	if err != nil {
		return err
	}
	r.Key, r.Schema = b.Key, session.Schema
	store, err := session.OpenStore(filepath.Join(st.stateDir, "sessions"))
	if err != nil {
		return err
	}
	if err := store.Save(ctx, b.NewRecord(session.RecordIDs{RecordID: "rec-1", BackendSessionID: "backend-7", AgentSessionID: "agent-9"})); err != nil {
		return err
	}
	res, err := store.Resume(ctx, b)
	if err != nil {
		return fmt.Errorf("resume of the saved session: %w", err)
	}
	if res.Fresh != nil {
		return fmt.Errorf("the saved session was not resumable: %s (%v)", res.Fresh.Reason, res.Fresh.Err)
	}
	rec := res.Record
	r.Resumed, r.AgentID = true, rec.AgentSessionID
	if rec.AgentSessionID != "agent-9" || rec.Schema != session.Schema {
		return fmt.Errorf("resumed record %+v, want agent session agent-9 under %s", rec, session.Schema)
	}
	drifted, err := bind("claude-opus-4-1", r.SkillsDigest)
	if err != nil {
		return err
	}
	res, err = store.Resume(ctx, drifted)
	if err != nil {
		return fmt.Errorf("resume under another model: %w", err)
	}
	if res.Fresh == nil || res.Fresh.Reason != session.Drifted || !slices.Contains(res.Fresh.Fields, "model") {
		return fmt.Errorf("a resume under another model was not refused as drift: %+v", res.Fresh)
	}
	var drift *session.DriftError
	if !errors.As(res.Fresh.Err, &drift) || !errors.Is(res.Fresh.Err, session.ErrDrift) {
		return fmt.Errorf("the start-fresh answer does not carry the drift: %v", res.Fresh.Err)
	}
	r.DriftFields = drift.Fields
	if r.SkillsDriftFields, err = e.skillsDrift(ctx, store, func(d string) (session.Binding, error) { return bind("claude-sonnet-4-5", d) }); err != nil {
		return err
	}
	e.progress(4, "session", "key %s…; %s saved and resumed; another model refused: drifted %v; "+
		"skill set changed (release-notes deselected): drifted %v (start fresh)",
		r.Key[:20], r.Schema, r.DriftFields, r.SkillsDriftFields)
	return nil
}

// skillsDrift deselects release-notes and resumes under the new skill set:
// the warm session's prompt lists the old skills, so the resume must be
// refused, naming skills_digest.
func (e *env) skillsDrift(ctx context.Context, store *session.Store, bind func(skillsDigest string) (session.Binding, error)) ([]string, error) {
	st := e.st
	var fewer []skills.Source
	for _, src := range st.sources() {
		if src.Name != "release-notes" {
			fewer = append(fewer, src)
		}
	}
	b, err := skills.Materialize(ctx, filepath.Join(st.stateDir, "skills"), fewer, skills.WithLogger(e.log))
	if err != nil {
		return nil, err
	}
	if b.Identity == st.bundle.Identity {
		return nil, errors.New("deselecting a skill left the bundle identity unchanged")
	}
	other, err := bind(b.Identity.Digest)
	if err != nil {
		return nil, err
	}
	res, err := store.Resume(ctx, other)
	if err != nil {
		return nil, fmt.Errorf("resume under another skill set: %w", err)
	}
	if res.Fresh == nil || res.Fresh.Reason != session.Drifted || !slices.Equal(res.Fresh.Fields, []string{"skills_digest"}) {
		return nil, fmt.Errorf("a resume under another skill set was not refused as drift in skills_digest alone: %+v", res.Fresh)
	}
	return res.Fresh.Fields, nil
}

// The local workspace's files.
const (
	appV1    = "v1\n"
	appDirty = "v1\nlocal edit, not committed\n"
	notes    = "an untracked local note\n"
	changelg = "- review: the error of os.WriteFile is handled\n"
)

// 5. Prepare the git workspace in the sandbox and play the agent there.
func (e *env) workspace(ctx context.Context, s *Summary) error {
	st, r := e.st, &s.Workspace
	if err := initRepo(st.local); err != nil {
		return err
	}
	round, err := workspace.Prepare(ctx, workspace.Spec{Local: st.local, Remote: e.remoteDir, Runner: e.host}, workspace.WithLogger(e.log))
	if err != nil {
		return err
	}
	st.round, r.Round = round, round.ID()
	gitVars := map[string]string{"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
	out, err := e.sh(ctx, e.remoteDir, `git status --porcelain --untracked-files=all -- . ':!.airlock' && echo "remotes: $(git remote)" && cat app.txt`, gitVars)
	if err != nil {
		return err
	}
	r.Status, _, _ = strings.Cut(out, "remotes:")
	if !strings.Contains(r.Status, " M app.txt\n") || !strings.Contains(r.Status, "?? notes.txt\n") ||
		!strings.HasSuffix(out, "remotes: \n"+appDirty) {
		return fmt.Errorf("the sandbox work tree after Prepare is not the local one (a dirty app.txt, an untracked notes.txt, no remote):\n%s", out)
	}

	// The agent: it reads the skill the prompt names, commits, reports.
	skillFile, _ := promptFile(st.prompt, "code-review")
	got, err := e.sh(ctx, e.remoteDir, `cat -- "$F"`, map[string]string{"F": skillFile})
	if err != nil {
		return fmt.Errorf("the agent reads %s: %w", skillFile, err)
	}
	want, err := os.ReadFile(filepath.Join(st.bundle.Dir, "code-review", "SKILL.md"))
	if err != nil {
		return err
	}
	if got != string(want) {
		return fmt.Errorf("the sandbox's %s is not the bundle's SKILL.md", skillFile)
	}
	r.SkillRead, r.SkillBytes = skillFile, len(got)
	st.report = "# Findings\n\nChecked against " + skillFile + ".\nNo blocking issues; one changelog entry committed.\n"
	vars := map[string]string{"ENTRY": changelg, "REPORT": st.report}
	for k, v := range gitVars {
		vars[k] = v
	}
	out, err = e.sh(ctx, e.remoteDir, `set -e
printf '%s' "$ENTRY" >> CHANGELOG.md
git add CHANGELOG.md
git -c user.name=agent -c user.email=agent@sandbox.invalid commit -q -m "agent: add a changelog entry"
git rev-parse HEAD
printf '%s' "$REPORT" > report.md`, vars)
	if err != nil {
		return fmt.Errorf("the agent's commit: %w", err)
	}
	r.Commit, r.Report = strings.TrimSpace(out), "report.md"
	st.commit = r.Commit
	if len(r.Commit) != 40 {
		return fmt.Errorf("the agent's commit is %q, not a commit id", r.Commit)
	}
	e.progress(5, "workspace", "prepared %s (dirty app.txt, untracked notes.txt, no remote); agent read %s, committed %s, wrote report.md",
		e.remoteDir, r.SkillRead, r.Commit[:12])
	return nil
}

// 6. Register report.md from the remote workspace, replay it, validate the
// evidence, then evidence citing a done child's file.
func (e *env) deliverable(ctx context.Context, s *Summary) error {
	st, r := e.st, &s.Deliverable
	files, err := deliverable.OpenFileStore(filepath.Join(st.stateDir, "attachments"))
	if err != nil {
		return err
	}
	reg := &deliverable.Registrar{Store: files}
	ws := deliverable.RemoteWorkspace(e.host, e.remoteDir)
	req := deliverable.Request{ContentRef: "report.md", Filename: "report.md", ContentType: "text/markdown",
		ByteSize: int64(len(st.report)), SHA256: hex.EncodeToString(sha(st.report)), Title: "Review findings",
		IdempotencyKey: "report-1"}
	// The agent registers its report through the tool, and again with the same key.
	first, second, err := e.agentRegisters(ctx, reg, ws, req)
	if err != nil {
		return err
	}
	rc := first.Receipt
	r.AttachmentID, r.Disposition, r.ByteSize, r.SHA256, r.Citation = rc.AttachmentID, string(rc.Disposition), rc.ByteSize, rc.SHA256, first.Citation
	if rc.Disposition != deliverable.Applied || rc.ByteSize != req.ByteSize {
		return fmt.Errorf("receipt %+v, want a new attachment of %d bytes", rc, req.ByteSize)
	}
	if err := storedIs(ctx, files, rc.AttachmentID, st.report); err != nil {
		return err
	}
	if r.Replayed = second.Receipt == rc; !r.Replayed {
		return fmt.Errorf("the replay under the same key gave %+v, want %+v", second.Receipt, rc)
	}

	// A done child task delivered the changelog in its own run.
	child, err := reg.Register(ctx, ws, "task-43", "run-7", deliverable.Request{ContentRef: "CHANGELOG.md", Filename: "CHANGELOG.md",
		ContentType: "text/markdown", ByteSize: int64(len(changelg)), SHA256: hex.EncodeToString(sha(changelg)),
		Title: "Changelog entry", IdempotencyKey: "changelog-1"})
	if err != nil {
		return fmt.Errorf("the child's file: %w", err)
	}
	r.ChildAttachmentID = child.AttachmentID
	// The host's tasks, kept beside the attachments.
	tasks := files.Tasks()
	for _, t := range []deliverable.TaskRecord{
		{ID: "task-42", Status: deliverable.StatusInProgress, Objective: "Review the change and write the findings to report.md, then attach it."},
		{ID: "task-43", ParentID: "task-42", Status: deliverable.StatusDone, Objective: "Add a changelog entry to CHANGELOG.md."},
	} {
		if err := tasks.Put(ctx, t); err != nil {
			return err
		}
	}
	ev := deliverable.Evidence{TaskID: "task-42", RunID: "run-1",
		Objective: "Review the change and write the findings to report.md, then attach it.",
		Refs:      []string{first.Citation}}
	if err := deliverable.ValidateEvidence(ctx, tasks, ev); err != nil {
		return fmt.Errorf("evidence citing the report: %w", err)
	}
	r.Accepted = true
	ev.Refs = append(ev.Refs, child.ContentPath)
	if err := deliverable.ValidateEvidence(ctx, tasks, ev); err != nil {
		return fmt.Errorf("evidence citing the report and the done child's file: %w", err)
	}
	r.ChildAccepted = true
	ev.Refs = []string{"deliverable:" + child.AttachmentID}
	err = deliverable.ValidateEvidence(ctx, tasks, ev)
	var evErr *deliverable.EvidenceError
	if !errors.As(err, &evErr) || !slices.Equal(evErr.Missing, []string{"report.md"}) {
		return fmt.Errorf("the child's file alone was not refused for the missing report.md: %v", err)
	}
	r.ChildAloneMissing = evErr.Missing
	e.progress(6, "deliverable", "the agent called register_deliverable over MCP in the sandbox: report.md read over SSH, %d bytes, SHA-256 verified on the host, cited as %s; replay: same receipt; evidence accepted, also with a done child's file (alone it is refused)",
		r.ByteSize, r.Citation)
	return nil
}

// storedIs checks that the store holds exactly want under id.
func storedIs(ctx context.Context, files *deliverable.FileStore, id, want string) error {
	_, rc, err := files.Open(ctx, id)
	if err != nil {
		return err
	}
	var got bytes.Buffer
	_, err = got.ReadFrom(rc)
	if err = errors.Join(err, rc.Close()); err != nil {
		return err
	}
	if got.String() != want {
		return fmt.Errorf("attachment %s holds other bytes than the agent wrote", id)
	}
	return nil
}

// 7. Restore: the commit and the files arrive, .airlock/ does not, no git
// remote anywhere.
func (e *env) restore(ctx context.Context, s *Summary) error {
	st, r := e.st, &s.Restore
	res, err := st.round.Restore(ctx)
	if err != nil {
		return err
	}
	r.Commits, r.Head, r.Updated, r.Kept, r.Runtime = res.Commits, res.Head, res.Updated, res.Kept, res.Runtime
	if len(res.Refused) > 0 { // the staged skills are listed in Runtime, not here
		return fmt.Errorf("restore refused %v: %v", res.Refused, res.Reasons)
	}
	if res.Commits != 1 || res.Head != st.commit {
		return fmt.Errorf("restored %d commits to HEAD %s, want 1, the agent's %s", res.Commits, res.Head, st.commit)
	}
	head, err := git(st.local, "log", "-1", "--format=%H %s")
	if err != nil {
		return err
	}
	if head != st.commit+" agent: add a changelog entry\n" {
		return fmt.Errorf("local HEAD is %q, not the agent's commit", head)
	}
	for name, want := range map[string]string{"report.md": st.report, "CHANGELOG.md": changelg, "app.txt": appDirty, "notes.txt": notes} {
		got, err := os.ReadFile(filepath.Join(st.local, name))
		if err != nil || string(got) != want {
			return fmt.Errorf("local %s after restore: %q, %v; want %q", name, got, err, want)
		}
	}
	for _, p := range res.Updated {
		if p == sandbox.RuntimeDir || strings.HasPrefix(p, sandbox.RuntimeDir+"/") {
			return fmt.Errorf("restore updated %s", p)
		}
	}
	_, err = os.Lstat(filepath.Join(st.local, sandbox.RuntimeDir))
	if r.RuntimeDirHome = !errors.Is(err, fs.ErrNotExist); r.RuntimeDirHome {
		return fmt.Errorf("%s came back to the local workspace (%v)", sandbox.RuntimeDir, err)
	}
	if _, err := e.sh(ctx, e.remoteDir, `[ -d .airlock/skills ] || { echo ".airlock/skills is gone from the sandbox" >&2; exit 1; }`, nil); err != nil {
		return err
	}
	local, err := git(st.local, "remote")
	if err != nil {
		return err
	}
	remotes, err := e.sh(ctx, e.remoteDir, "git remote", map[string]string{"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"})
	if err != nil {
		return err
	}
	if r.RemotesEmpty = local == "" && remotes == ""; !r.RemotesEmpty {
		return fmt.Errorf("git remote is not empty: local %q, sandbox %q", local, remotes)
	}
	e.progress(7, "restore", "%d commit back (HEAD %s), updated %v; dirty app.txt and notes.txt kept; %s stayed in the sandbox; git remote empty on both sides",
		r.Commits, r.Head[:12], r.Updated, sandbox.RuntimeDir)
	return nil
}

// initRepo makes the user's workspace: one commit, a dirty edit, an
// untracked file, and no remote.
func initRepo(dir string) error {
	if _, err := git(dir, "init", "-q", "-b", "main"); err != nil {
		return err
	}
	write := func(name, content string) error {
		return os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644)
	}
	if err := errors.Join(write("README.md", "# demo\n"), write("app.txt", appV1)); err != nil {
		return err
	}
	if _, err := git(dir, "add", "README.md", "app.txt"); err != nil {
		return err
	}
	if _, err := git(dir, "commit", "-q", "-m", "initial"); err != nil {
		return err
	}
	if err := errors.Join(write("app.txt", appDirty), write("notes.txt", notes)); err != nil {
		return err
	}
	if out, err := git(dir, "remote"); err != nil || out != "" {
		return fmt.Errorf("the new workspace has a git remote %q (%v)", out, err)
	}
	return nil
}

// git runs the host's git in dir with the user's configuration and GIT_*
// variables left out.
func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-c", "user.name=quickstart", "-c", "user.email=quickstart@host.invalid"}, args...)...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
	}
	return out.String(), nil
}

// scanHost walks dir and reports whether it holds no link and no file
// containing needle.
func scanHost(dir, needle string) (noLink, noSecret bool, err error) {
	noLink, noSecret = true, true
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			noLink = false
		}
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			noSecret = noSecret && !bytes.Contains(b, []byte(needle))
		}
		return nil
	})
	return noLink, noSecret, err
}

func sha(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
