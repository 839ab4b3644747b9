package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/airlockdev/airlock/deliverable"
	"github.com/airlockdev/airlock/session"
	"github.com/airlockdev/airlock/skills"
	"github.com/airlockdev/airlock/stage/remote"
)

// skillDirs collects repeated -skill flags.
type skillDirs []string

func (s *skillDirs) String() string     { return strings.Join(*s, ",") }
func (s *skillDirs) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	var dirs skillDirs
	target := flag.String("ssh", "", "sandbox, user@host[:port] (required)")
	keyFile := flag.String("i", "", "unencrypted private key file (required)")
	knownHosts := flag.String("known-hosts", "", "known_hosts file that lists the sandbox (required)")
	local := flag.String("workspace", ".", "host workspace (a git work tree or a plain directory)")
	remoteDir := flag.String("remote-dir", "", "its copy in the sandbox (default /tmp/airlock-adapter-<random>)")
	stateDir := flag.String("state", "", "host state directory (default <user cache dir>/airlock/adapter)")
	objective := flag.String("objective", "Review the workspace.", "the task's text")
	verbose := flag.Bool("v", false, "debug logs on stderr")
	flag.Var(&dirs, "skill", "a skill directory (repeatable)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, *target, *keyFile, *knownHosts, *local, *remoteDir, *stateDir, *objective, dirs, *verbose)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "adapter: %s: %v\n", classify(err), err)
		os.Exit(1)
	}
}

// run dials the sandbox and does one Run with a placeholder agent.
func run(ctx context.Context, target, keyFile, knownHosts, local, remoteDir, stateDir, objective string, dirs []string, verbose bool) error {
	user, addr, ok := strings.Cut(target, "@")
	if !ok || user == "" || addr == "" || keyFile == "" || knownHosts == "" {
		return errors.New("usage: adapter -ssh user@host[:port] -i KEYFILE -known-hosts FILE [flags]")
	}
	hostKeys, err := remote.KnownHosts(knownHosts)
	if err != nil {
		return err
	}
	pem, err := os.ReadFile(keyFile)
	if err != nil {
		return err
	}
	signer, err := ssh.ParsePrivateKey(pem)
	if err != nil {
		return fmt.Errorf("-i %s: %w", keyFile, err)
	}
	log := slog.New(slog.DiscardHandler)
	if verbose {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	host, err := remote.Dial(ctx, addr, remote.Config{User: user, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)}, HostKeyCallback: hostKeys, Logger: log})
	if err != nil {
		return err
	}
	defer host.Close()
	if local, err = filepath.Abs(local); err != nil {
		return err
	}
	if remoteDir == "" {
		remoteDir = "/tmp/airlock-adapter-" + strings.ToLower(rand.Text()[:12])
	}
	if stateDir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return err
		}
		stateDir = filepath.Join(cache, "airlock", "adapter")
	}
	var sources []skills.Source
	for _, d := range dirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			return err
		}
		sources = append(sources, skills.Source{Key: "local/" + filepath.Base(abs), Name: filepath.Base(abs), Dir: abs})
	}
	files, err := deliverable.OpenFileStore(filepath.Join(stateDir, "attachments"))
	if err != nil {
		return err
	}
	tasks := files.Tasks() // the host's task table, beside the attachments
	if err := tasks.Put(ctx, deliverable.TaskRecord{ID: "task-1", Status: deliverable.StatusInProgress, Objective: objective}); err != nil {
		return err
	}
	r := &Run{
		Sandbox: host, StateDir: stateDir, Skills: sources, Local: local, Remote: remoteDir,
		Session: sessionConfig("adapter/" + filepath.Base(local)),
		TaskID:  "task-1", RunID: "run-" + strings.ToLower(rand.Text()[:8]), Objective: objective,
		Files: files,
		Tasks: tasks,
		Agent: placeholderAgent,
		Log:   log,
	}
	out, err := r.Do(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("%s\nsession resumed: %v; restored %d commits, %d files; %d deliverables\n",
		out.Prompt, out.Resumed, out.Restored.Commits, len(out.Restored.Updated), len(out.Receipts))
	return nil
}

// placeholderAgent is where the agent runs (out of scope here): it gets the
// prompt and the sandbox workspace, and reports what it delivered.
func placeholderAgent(_ context.Context, t Turn) (Completion, error) {
	fmt.Fprintf(os.Stderr, "adapter: the agent would run in %s now (resume %q)\n", t.Remote, t.ResumeID)
	return Completion{BackendSessionID: "placeholder-backend", AgentSessionID: "placeholder-agent"}, nil
}

// sessionConfig is the agent profile the adapter runs under.
func sessionConfig(id string) session.Config {
	p := session.Profile{Driver: "acp", Protocol: "acp/1", Agent: "claude-code", AgentVersion: "2.1.0",
		ServerPackage: "@zed-industries/claude-code-acp", ServerVersion: "0.5.0",
		CommandDigest: "sha256:" + strings.Repeat("0", 64), Model: "claude-sonnet-4-5", PermissionPolicy: "workspace-write"}
	return session.Config{SessionID: id, Profile: p, Model: p.Model, PermissionMode: session.ApproveReads}
}
