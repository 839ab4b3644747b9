//go:build linux

package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/airlockdev/airlock/deliverable"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/skills"
	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/workspace"
)

// The sandbox paths of the run.
const (
	remoteWS  = SandboxWork + "/ws" // the workspace in the sandbox
	planted   = "planted"           // under SandboxWork: links planted to the host
	agentName = "agent"
)

// env is one run's directories, sandbox and what each step hands the next.
type env struct {
	base    string // host temporary directory
	work    string // bound at SandboxWork
	outside string // host files the sandbox must not reach
	secret  string // the content of outside/secret.txt
	box     *Box
	r       sandbox.Runner
	stderr  io.Writer
	local   string // the host workspace
	bundle  *skills.Bundle
	skill   string // the sandbox path of a staged SKILL.md
	round   *workspace.Round
	report  string
	commit  string
}

// newEnv makes the host side (a secret and an empty target directory
// outside the work directory, links to them planted in it, a git
// workspace) and builds the sandbox.
func newEnv(ctx context.Context, base, bwrap string, stderr io.Writer) (*env, error) {
	e := &env{base: base, work: filepath.Join(base, "work"), outside: filepath.Join(base, "outside"),
		local: filepath.Join(base, "local"), stderr: stderr, secret: "airlock-host-secret-" + rand.Text()}
	for _, d := range []string{e.work, filepath.Join(e.work, planted), filepath.Join(e.outside, "target"), e.local} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	secretFile := filepath.Join(e.outside, "secret.txt")
	if err := os.WriteFile(secretFile, []byte(e.secret), 0o644); err != nil {
		return nil, err
	}
	links := map[string]string{"abs": secretFile, "rel": "../../outside/secret.txt", "dir": filepath.Join(e.outside, "target")}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(e.work, planted, name)); err != nil {
			return nil, err
		}
	}
	// Without the sandbox the links reach the secret: a denial inside is
	// the sandbox's doing, not a broken link.
	for _, name := range []string{"abs", "rel"} {
		if b, err := os.ReadFile(filepath.Join(e.work, planted, name)); err != nil || string(b) != e.secret {
			return nil, fmt.Errorf("the planted link %s does not reach the secret on the host (%v)", name, err)
		}
	}
	if err := initRepo(e.local); err != nil {
		return nil, err
	}
	box, err := New(ctx, Config{Bwrap: bwrap, Work: e.work})
	if err != nil {
		return nil, err
	}
	e.box, e.r = box, box.Runner()
	fmt.Fprintf(stderr, "bwrap: sandbox probed: %s\n", strings.Join(box.Argv(), " "))
	return e, nil
}

// 1. Materialize the fixtures, stage the bundle under the sandbox
// workspace's .airlock/, and prepare the workspace there.
func (e *env) stage(ctx context.Context, fixtures string, s *Summary) error {
	var srcs []skills.Source
	for _, n := range []string{"code-review", "release-notes"} {
		srcs = append(srcs, skills.Source{Key: "acme/" + n + "@1", Name: n, Dir: filepath.Join(fixtures, n)})
	}
	b, err := skills.Materialize(ctx, filepath.Join(e.base, "state", "skills"), srcs)
	if err != nil {
		return err
	}
	e.bundle = b
	root := path.Join(remoteWS, sandbox.RuntimeDir)
	rt, err := stage.Stage(ctx, stage.Over(e.r), root, []stage.Asset{{Name: "skills", Source: b.Dir, Links: stage.RejectLinks}})
	if err != nil {
		return err
	}
	a := rt.Assets[0]
	s.Staged, s.SkillFiles = a.Path, a.Files
	if a.Path != root+"/skills" || a.Sent != a.Files || a.Files == 0 {
		return fmt.Errorf("stage: path %s, sent %d of %d; want %s/skills, all sent", a.Path, a.Sent, a.Files, root)
	}
	e.skill = a.Path + "/code-review/SKILL.md"
	if e.round, err = workspace.Prepare(ctx, workspace.Spec{Local: e.local, Remote: remoteWS, Runner: e.r}); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "bwrap: 1/4 stage       %d skill files at %s; workspace prepared at %s\n", a.Files, a.Path, remoteWS)
	return nil
}

// attempts is the agent's part that tries to get out. Each line is
// "name: denied: <first line of the error>" or "name: LEAKED: <output>".
const attempts = `cd /work || exit 1
try() { name=$1; shift
  if out=$("$@" 2>&1); then echo "$name: LEAKED: $(printf %s "$out" | head -c 200 | tr '\n' ' ')"
  else echo "$name: denied: $(printf %s "$out" | head -n 1)"; fi; }
try read-secret cat -- "$SECRET_PATH"
try list-home ls -a /home
try list-root-home ls -a /root
try follow-link-abs cat planted/abs
try follow-link-rel cat planted/rel
try write-through-link sh -c 'echo pwned > planted/dir/pwned'
try write-host-path sh -c 'echo pwned > "$TARGET/pwned"'
try write-usr sh -c 'echo pwned > /usr/pwned'
try write-root sh -c 'echo pwned > ../pwned'
try remount-usr-rw mount -o remount,rw /usr
try network git -c http.lowSpeedTime=5 ls-remote "http://127.0.0.1:$PORT/repo"
try see-host-process test -e "/proc/$HOSTPID/cmdline"
try read-bwrap-environ grep -c . /proc/1/environ
`

// agentWork is the agent's real work: read the skill, commit, report.
const agentWork = `set -e
cd /work/ws
sha256sum < "$SKILL" | cut -d' ' -f1
printf '%s\n' '- reviewed in a bubblewrap sandbox' >> CHANGELOG.md
git add CHANGELOG.md
git -c user.name=agent -c user.email=agent@sandbox.invalid commit -q -m "agent: changelog"
git rev-parse HEAD
printf '%s' "$REPORT" > report.md
`

// 2. The agent: every escape attempt must be denied (and leave nothing
// on the host); then its work.
func (e *env) agent(ctx context.Context, s *Summary) error {
	ln, accepted, err := e.listener()
	if err != nil {
		return err
	}
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	env := map[string]string{"SECRET_PATH": filepath.Join(e.outside, "secret.txt"), "TARGET": filepath.Join(e.outside, "target"),
		"PORT": port, "HOSTPID": strconv.Itoa(os.Getpid()), "GIT_CONFIG_NOSYSTEM": "1"}
	out, err := e.sh(ctx, attempts, env)
	if err != nil {
		return err
	}
	s.Attempts = map[string]string{}
	for line := range strings.Lines(out) {
		name, res, _ := strings.Cut(strings.TrimSuffix(line, "\n"), ": ")
		s.Attempts[name] = res
	}
	var leaked []string
	for name, res := range s.Attempts {
		if !strings.HasPrefix(res, "denied") {
			leaked = append(leaked, name+" ("+res+")")
		}
	}
	if len(leaked) > 0 || strings.Contains(out, e.secret) {
		return fmt.Errorf("escape attempts not denied: %v", leaked)
	}
	if n := accepted.Load(); n != 1 {
		return fmt.Errorf("the host listener saw %d connections, want the host's own control one only", n)
	}
	if err := e.nothingWritten(); err != nil {
		return err
	}
	e.report = "# Findings\n\nRead " + e.skill + " in the sandbox.\n"
	out, err = e.sh(ctx, agentWork, map[string]string{"SKILL": e.skill, "REPORT": e.report, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"})
	if err != nil {
		return fmt.Errorf("the agent's work: %w", err)
	}
	want, err := os.ReadFile(filepath.Join(e.bundle.Dir, "code-review", "SKILL.md"))
	if err != nil {
		return err
	}
	sum, commit, _ := strings.Cut(strings.TrimSpace(out), "\n")
	if sum != hex.EncodeToString(sha(string(want))) || len(commit) != 40 {
		return fmt.Errorf("the agent read other bytes than the bundle's SKILL.md, or made no commit: %q", out)
	}
	s.SkillRead, s.Commit, e.commit = e.skill, commit, commit
	fmt.Fprintf(e.stderr, "bwrap: 2/4 agent       %d escape attempts denied; read %s, committed %s, wrote report.md\n", len(s.Attempts), e.skill, commit[:12])
	return nil
}

// listener starts a host TCP listener on loopback that counts and closes
// connections, and checks that the agent's network attempt reaches it
// from the host: the sandbox's denial is then the sandbox's doing.
func (e *env) listener() (net.Listener, *atomic.Int32, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	var n atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", "ls-remote", "http://"+ln.Addr().String()+"/repo")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=" + e.base}
	cmd.Run() // fails: the listener closes the connection; it only has to arrive
	for range 100 {
		if n.Load() > 0 {
			return ln, &n, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	ln.Close()
	return nil, nil, errors.New("git ls-remote from the host did not reach the host listener: the network attempt would prove nothing")
}

// nothingWritten checks the host after the attempts: the target directory
// is empty, and no pwned file is at /pwned, /usr/pwned, or beside work.
func (e *env) nothingWritten() error {
	entries, err := os.ReadDir(filepath.Join(e.outside, "target"))
	if err != nil || len(entries) > 0 {
		return fmt.Errorf("the host directory %s/target was written from the sandbox (%v)", e.outside, err)
	}
	for _, p := range []string{"/pwned", "/usr/pwned", filepath.Join(e.base, "pwned")} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s exists on the host after the agent ran (%v)", p, err)
		}
	}
	return nil
}

// 3. Restore: the agent's commit and report.md come back.
func (e *env) restore(ctx context.Context, s *Summary) error {
	res, err := e.round.Restore(ctx)
	if err != nil {
		return err
	}
	s.Restored, s.Commits = res.Updated, res.Commits
	if res.Commits != 1 || res.Head != e.commit {
		return fmt.Errorf("restored %d commits to %s, want the agent's %s", res.Commits, res.Head, e.commit)
	}
	got, err := os.ReadFile(filepath.Join(e.local, "report.md"))
	if err != nil || string(got) != e.report {
		return fmt.Errorf("local report.md after restore: %q, %v", got, err)
	}
	if _, err := os.Lstat(filepath.Join(e.local, sandbox.RuntimeDir)); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s came back to the local workspace (%v)", sandbox.RuntimeDir, err)
	}
	fmt.Fprintf(e.stderr, "bwrap: 3/4 restore     %d commit (HEAD %s), updated %v\n", res.Commits, res.Head[:12], res.Updated)
	return nil
}

// 4. Register report.md from the sandbox workspace, hashed on the host.
func (e *env) deliverable(ctx context.Context, s *Summary) error {
	files, err := deliverable.OpenFileStore(filepath.Join(e.base, "state", "attachments"))
	if err != nil {
		return err
	}
	reg := &deliverable.Registrar{Store: files}
	req := deliverable.Request{ContentRef: "report.md", Filename: "report.md", ContentType: "text/markdown",
		ByteSize: int64(len(e.report)), SHA256: hex.EncodeToString(sha(e.report)), Title: "Findings", IdempotencyKey: "report-1"}
	rc, err := reg.Register(ctx, deliverable.RemoteWorkspace(e.r, remoteWS), "task-1", "run-1", req)
	if err != nil {
		return err
	}
	if rc.Disposition != deliverable.Applied || rc.ByteSize != req.ByteSize {
		return fmt.Errorf("receipt %+v, want a new attachment of %d bytes", rc, req.ByteSize)
	}
	s.Attachment, s.ByteSize = rc.AttachmentID, rc.ByteSize
	fmt.Fprintf(e.stderr, "bwrap: 4/4 deliverable report.md read from the sandbox, %d bytes, attachment %s\n", rc.ByteSize, rc.AttachmentID)
	return nil
}

// sh runs script in the sandbox and returns its stdout; a failure
// carries its stderr.
func (e *env) sh(ctx context.Context, script string, vars map[string]string) (string, error) {
	var out, errOut bytes.Buffer
	err := e.r.Run(ctx, sandbox.Command{Script: script, Env: vars, Stdout: &out, Stderr: &errOut})
	if err != nil {
		return "", fmt.Errorf("%w: %s", err, strings.TrimSpace(errOut.String()))
	}
	return out.String(), nil
}

// initRepo makes the user's workspace: one commit, no remote.
func initRepo(dir string) error {
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "."}, {"commit", "-q", "-m", "initial"}} {
		if args[0] == "add" {
			if err := os.WriteFile(filepath.Join(dir, "CHANGELOG.md"), []byte("# Changes\n"), 0o644); err != nil {
				return err
			}
		}
		cmd := exec.Command("git", append([]string{"-c", "user.name=host", "-c", "user.email=host@host.invalid"}, args...)...)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=" + dir}
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

func sha(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}
