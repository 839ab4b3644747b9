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
	target := flag.String("ssh", "", "the sandbox: a host alias of your ssh config (required)")
	local := flag.String("workspace", ".", "host workspace (a git work tree or a plain directory)")
	remoteDir := flag.String("remote-dir", "", "its copy in the sandbox (default /tmp/airlock-adapter-<random>)")
	stateDir := flag.String("state", "", "host state directory (default <user cache dir>/airlock/adapter)")
	objective := flag.String("objective", "Review the workspace.", "the task's text")
	verbose := flag.Bool("v", false, "debug logs on stderr")
	flag.Var(&dirs, "skill", "a skill directory (repeatable)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, *target, *local, *remoteDir, *stateDir, *objective, dirs, *verbose)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "adapter: %s: %v\n", classify(err), err)
		os.Exit(1)
	}
}

// run dials the sandbox and does one Run with a placeholder agent.
func run(ctx context.Context, target, local, remoteDir, stateDir, objective string, dirs []string, verbose bool) error {
	if target == "" {
		return errors.New("usage: adapter -ssh ALIAS [flags]")
	}
	addr, cfg, err := remote.LoadSSHConfig(target) // as `ssh ALIAS` connects: ~/.ssh/config, the agent, known_hosts
	if err != nil {
		return err
	}
	log := slog.New(slog.DiscardHandler)
	if verbose {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	cfg.Logger = log
	host, err := remote.Dial(ctx, addr, cfg)
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
	if err := files.Tasks().Put(ctx, deliverable.TaskRecord{ID: "task-1", Status: deliverable.StatusInProgress, Objective: objective}); err != nil {
		return err
	}
	r := &Run{
		Sandbox: host, StateDir: stateDir, Skills: sources, Local: local, Remote: remoteDir,
		Session: sessionConfig("adapter/" + filepath.Base(local)),
		TaskID:  "task-1", RunID: "run-" + strings.ToLower(rand.Text()[:8]), Objective: objective,
		Files: files,
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
