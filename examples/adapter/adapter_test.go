package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/session"
	"github.com/airlockdev/airlock/skills"
	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/stage/remote"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
	"github.com/airlockdev/airlock/stage/stagetest"
	"github.com/airlockdev/airlock/workspace"
)

// TestLinkPolicy pins the reviewed link policy of every place this adapter
// stages assets: a new site, or a changed policy, fails here until reviewed.
func TestLinkPolicy(t *testing.T) {
	sites, err := stagetest.ScanSites(".")
	require.NoError(t, err)
	var got []string
	for _, s := range sites {
		got = append(got, fmt.Sprintf("%s %s %s", s.File, s.Name, s.Links))
	}
	// The skills bundle never holds a link (Materialize copies none).
	assert.Equal(t, []string{`adapter.go "skills" RejectLinks`}, got)
}

const objective = "Review the change and write the findings to report.md, then attach it."

func TestRun(t *testing.T) {
	srv := remotetest.NewServer(t) // the sandbox: an SSH server in this process
	r := newRun(t, srv.Dial(t), srv.Dir()+"/work")

	var turns []Turn
	r.Agent = func(ctx context.Context, turn Turn) (Completion, error) {
		turns = append(turns, turn)
		return reviewer(ctx, t, turn, "findings for "+r.RunID+"\n", 0)
	}
	out, err := r.Do(t.Context())
	require.NoError(t, err)
	root := r.Remote + "/.airlock/skills"
	assert.Contains(t, out.Prompt, "\nSkill root: "+root+"\n")
	assert.Contains(t, out.Prompt, "(file: "+root+"/code-review/SKILL.md)")
	assert.NotContains(t, out.Prompt, "borrowed", "the skill whose SKILL.md is a link is dropped")
	assert.False(t, out.Resumed)
	assert.Equal(t, "", turns[0].ResumeID)
	require.Len(t, out.Receipts, 1)
	assert.Equal(t, deliverable.Applied, out.Receipts[0].Disposition)
	assert.Equal(t, 1, out.Restored.Commits)
	assert.Equal(t, "findings for run-1\n", read(t, r.Local, "report.md"))
	assert.Equal(t, "agent commit 0\n", git(t, r.Local, "log", "-1", "--format=%s"))
	assert.NoDirExists(t, filepath.Join(r.Local, sandbox.RuntimeDir))
	assert.Empty(t, out.Restored.Refused, "the staged skills are no refusal")
	assert.Contains(t, out.Restored.Runtime, sandbox.RuntimeDir+"/skills", "listed apart, with the manifest beside it")

	// The next run resumes the session the first one saved.
	r.RunID = "run-2"
	out, err = r.Do(t.Context())
	require.NoError(t, err)
	assert.True(t, out.Resumed)
	assert.Equal(t, "agent-1", turns[1].ResumeID)
	assert.Equal(t, "findings for run-2\n", read(t, r.Local, "report.md"))

	// Under another model the saved session drifts: the run starts fresh.
	r.RunID, r.Session.Model, r.Session.Profile.Model = "run-3", "claude-opus-4-1", "claude-opus-4-1"
	out, err = r.Do(t.Context())
	require.NoError(t, err)
	assert.False(t, out.Resumed)
	assert.Equal(t, "", turns[2].ResumeID)
}

// TestRunErrors: each failure comes back sorted, and the agent's work is
// restored whatever happened after Prepare.
func TestRunErrors(t *testing.T) {
	srv := remotetest.NewServer(t)
	host := srv.Dial(t)

	for i, tc := range []struct {
		name   string
		agent  func(ctx context.Context, t *testing.T, turn Turn) (Completion, error)
		action Action
		check  func(t *testing.T, err error)
	}{
		{"wrong size declared", func(ctx context.Context, t *testing.T, turn Turn) (Completion, error) {
			return reviewer(ctx, t, turn, "findings\n", 1)
		}, TellAgent, func(t *testing.T, err error) {
			var re *deliverable.RequestError
			require.ErrorAs(t, err, &re)
			assert.ErrorIs(t, err, deliverable.ErrSizeMismatch)
			assert.Equal(t, "byteSize", re.Field)
		}},
		{"requested file not delivered", func(ctx context.Context, t *testing.T, turn Turn) (Completion, error) {
			c, err := reviewer(ctx, t, turn, "findings\n", 0)
			c.Deliver = nil
			return c, err
		}, TellAgent, func(t *testing.T, err error) {
			var ee *deliverable.EvidenceError
			require.ErrorAs(t, err, &ee)
			assert.Equal(t, []string{"report.md"}, ee.Missing)
		}},
		{"agent lost its transport", func(ctx context.Context, t *testing.T, turn Turn) (Completion, error) {
			_, err := reviewer(ctx, t, turn, "findings\n", 0)
			return Completion{}, errors.Join(err, fmt.Errorf("acp: %w: connection reset", sandbox.ErrTransport))
		}, Retry, nil},
		{"agent crashed", func(ctx context.Context, t *testing.T, turn Turn) (Completion, error) {
			_, err := reviewer(ctx, t, turn, "findings\n", 0)
			return Completion{}, errors.Join(err, errors.New("agent exited with status 2"))
		}, HostFault, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRun(t, host, fmt.Sprintf("%s/work-%d", srv.Dir(), i))
			r.Agent = func(ctx context.Context, turn Turn) (Completion, error) { return tc.agent(ctx, t, turn) }
			out, err := r.Do(t.Context())
			require.Error(t, err)
			assert.Equal(t, tc.action, classify(err), "%v", err)
			if tc.check != nil {
				tc.check(t, err)
			}
			require.NotNil(t, out)
			require.NotNil(t, out.Restored, "the work comes home even when the run fails")
			assert.Equal(t, 1, out.Restored.Commits)
			assert.Equal(t, "findings\n", read(t, r.Local, "report.md"))
		})
	}
}

// TestClassify: the agent's errors and the session's are the adapter's to
// sort; whatever else may be retried, sandbox.Retryable says, including
// errors classify does not name.
func TestClassify(t *testing.T) {
	changed := &fs.PathError{Op: "read", Path: "report.md", Err: fmt.Errorf("%w: %w", deliverable.ErrFileChanged, stage.ErrChanged)}
	for _, tc := range []struct {
		err  error
		want Action
	}{
		{fmt.Errorf("stage skills: %w", &stage.AssetError{Op: "publish", Err: sandbox.ErrTransport}), Retry},
		{&deliverable.HostError{Op: "read workspace", Err: sandbox.ErrTransport}, Retry},
		{fmt.Errorf("materialize skills: %w", skills.ErrChanged), Retry},
		{fmt.Errorf("restore workspace: %w", &fs.PathError{Op: "lock", Path: "/w", Err: workspace.ErrLocked}), Retry},
		{workspace.ErrRace, Retry},
		{&deliverable.HostError{Op: "validate evidence", Err: deliverable.ErrBusy}, Retry},
		{fmt.Errorf("%w: a control command did not finish within the 30s control deadline", sandbox.ErrTransport), Retry},
		{&fs.PathError{Op: "read", Path: "/w/a", Err: syscall.EINTR}, Retry}, // says it is temporary
		{&session.DriftError{Fields: []string{"model"}}, StartFresh},
		// Save refusing a record the run built (an empty session id) is the
		// adapter's bug, not a reason to start fresh on every run.
		{fmt.Errorf("save session: %w", session.ErrMalformedRecord), HostFault},
		{&deliverable.RequestError{Field: "sha256", Message: "fix it", Err: deliverable.ErrHashMismatch}, TellAgent},
		{&deliverable.RequestError{Field: "contentRef", Message: "register it once it is complete", Err: changed}, TellAgent},
		{&deliverable.EvidenceError{Message: "cite it"}, TellAgent},
		{&remote.HostKeyError{Host: "h:22", Err: remote.ErrHostKeyMismatch}, HostFault},
		{&deliverable.HostError{Op: "store", Err: errors.New("disk full")}, HostFault},
		{&deliverable.HostError{Op: "store", Err: &fs.PathError{Op: "write", Path: "/att/x", Err: syscall.ENOSPC}}, HostFault},
		{&deliverable.HostError{Op: "read workspace", Err: deliverable.ErrProtocol}, HostFault},
		{fmt.Errorf("stage skills: %w", &stage.AssetError{Op: "publish", Err: fmt.Errorf("%w: bad reply", sandbox.ErrProtocol)}), HostFault},
		{&workspace.ToolError{Tool: "git", Where: "sandbox"}, HostFault},
		{&workspace.ConflictError{Paths: []string{"a"}}, HostFault},
		{fmt.Errorf("x: %w", workspace.ErrHostile), HostFault},
		{fmt.Errorf("agent: %w", &sandbox.ExitError{Status: 2}), HostFault},
		{stage.ErrLink, HostFault},
		{context.Canceled, HostFault},
		{context.DeadlineExceeded, HostFault}, // the caller's own deadline: its decision, not a transient fault
		{errors.New("anything else"), HostFault},
	} {
		assert.Equal(t, tc.want, classify(tc.err), "%v", tc.err)
	}
}

// newRun is a Run on a fresh git workspace, the fixture skills and a fresh
// host state; its Agent is the caller's.
func newRun(t *testing.T, sb stage.Sandbox, remoteDir string) *Run {
	t.Helper()
	base := t.TempDir()
	local, state := filepath.Join(base, "workspace"), filepath.Join(base, "state")
	require.NoError(t, os.MkdirAll(local, 0o755)) // the state directory: created by the run
	git(t, local, "init", "-q", "-b", "main")
	require.NoError(t, os.WriteFile(filepath.Join(local, "app.txt"), []byte("v1\n"), 0o644))
	git(t, local, "add", "app.txt")
	git(t, local, "commit", "-q", "-m", "initial")
	fixtures, err := filepath.Abs("../../testdata/skills")
	require.NoError(t, err)
	var sources []skills.Source
	for _, n := range []string{"code-review", "release-notes", "borrowed"} {
		sources = append(sources, skills.Source{Key: "acme/" + n, Name: n, Dir: filepath.Join(fixtures, n)})
	}
	files, err := deliverable.OpenFileStore(filepath.Join(state, "attachments"))
	require.NoError(t, err)
	require.NoError(t, files.Tasks().Put(t.Context(), deliverable.TaskRecord{ID: "task-1", Status: deliverable.StatusInProgress, Objective: objective}))
	return &Run{Sandbox: sb, StateDir: state, Skills: sources, Local: local, Remote: remoteDir,
		Session: sessionConfig("task-1"), TaskID: "task-1", RunID: "run-1", Objective: objective, Files: files}
}

var skillFile = regexp.MustCompile(`\(file: (\S+/code-review/SKILL\.md)\)`)

// reviewer plays the agent in the sandbox: it reads the skill the prompt
// names, commits, writes report.md, and declares it (sizeOff bytes off).
func reviewer(ctx context.Context, t *testing.T, turn Turn, report string, sizeOff int64) (Completion, error) {
	m := skillFile.FindStringSubmatch(turn.Prompt)
	require.NotNil(t, m, turn.Prompt)
	var skill strings.Builder
	err := turn.Runner.Run(ctx, sandbox.Command{Dir: turn.Remote, Stdout: &skill, Env: map[string]string{
		"SKILL": m[1], "REPORT": report, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"},
		Script: `set -e
cat -- "$SKILL"
n=$(git rev-list --count HEAD)
echo "$n" >> log.txt && git add log.txt
git -c user.name=agent -c user.email=agent@sandbox.invalid commit -q -m "agent commit $((n - 1))"
printf '%s' "$REPORT" > report.md`})
	require.NoError(t, err)
	require.Contains(t, skill.String(), "name: code-review")
	sum := sha256.Sum256([]byte(report))
	return Completion{BackendSessionID: "backend-1", AgentSessionID: "agent-1", Deliver: []deliverable.Request{{
		ContentRef: "report.md", Filename: "report.md", ContentType: "text/markdown", ByteSize: int64(len(report)) + sizeOff,
		SHA256: hex.EncodeToString(sum[:]), Title: "Findings", IdempotencyKey: "report"}}}, nil
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=test", "-c", "user.email=test@host.invalid"}, args...)...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return string(out)
}

func read(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	require.NoError(t, err)
	return string(b)
}
