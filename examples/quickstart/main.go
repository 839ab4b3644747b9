package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/stage/remote"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
)

func main() {
	var o Options
	flag.BoolVar(&o.Keep, "keep", false, "keep the temporary directory (and, with -ssh, the remote workspace)")
	flag.BoolVar(&o.Verbose, "v", false, "slog debug output on stderr")
	flag.BoolVar(&o.JSON, "json", false, "print a machine-readable summary on stdout")
	flag.StringVar(&o.SSH, "ssh", "", "run against a real SSH sandbox: a host alias of your ssh config (default: the embedded remotetest server)")
	flag.StringVar(&o.SSHConfig, "ssh-config", "", "with -ssh: read this ssh_config file instead of ~/.ssh/config and /etc/ssh/ssh_config (as ssh -F)")
	flag.StringVar(&o.RemoteDir, "remote-dir", "", "with -ssh: sandbox workspace, must not exist (default /tmp/airlock-quickstart-<random>)")
	flag.StringVar(&o.Skills, "skills", "", "skill fixtures (default: testdata/skills of this module)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "quickstart: unexpected arguments:", flag.Args())
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	_, err := run(ctx, o, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "quickstart: FAIL:", err)
		os.Exit(1)
	}
}

// Options are the command's flags.
type Options struct {
	Keep, Verbose, JSON bool
	SSH                 string // a host alias of the ssh config (remote.LoadSSHConfig); "" runs the embedded remotetest server
	SSHConfig           string // the ssh_config file to read instead of the user's and the system's
	RemoteDir           string
	Skills              string // fixture directory; "" finds testdata/skills above the working directory
}

// Summary is what every step did; -json prints it.
type Summary struct {
	Sandbox     string          `json:"sandbox"`    // "remotetest 127.0.0.1:PORT" or "ssh user@host:port"
	Dir         string          `json:"dir"`        // the host temporary directory (gone unless -keep)
	RemoteDir   string          `json:"remote_dir"` // the sandbox workspace
	Skills      SkillsResult    `json:"skills"`
	Stage       StageResult     `json:"stage"`
	Prompt      PromptResult    `json:"prompt"`
	Session     SessionResult   `json:"session"`
	Workspace   WorkspaceResult `json:"workspace"`
	Deliverable DeliverResult   `json:"deliverable"`
	Restore     RestoreResult   `json:"restore"`
}

// SkillsResult is step 1.
type SkillsResult struct {
	Kept          []string            `json:"kept"`
	Dropped       map[string]string   `json:"dropped"` // name: reason
	LeftOut       map[string][]string `json:"left_out"`
	Identity      string              `json:"identity"`
	IdentityMoved string              `json:"identity_moved"` // the same selection under another state directory
	NoLink        bool                `json:"no_link"`
	NoSecret      bool                `json:"no_secret"`
}

// StageResult is step 2.
type StageResult struct {
	Root          string `json:"root"` // <remote dir>/.airlock
	Path          string `json:"path"` // the staged bundle in the sandbox
	Files         int    `json:"files"`
	FirstSent     int    `json:"first_sent"`
	AgainReused   bool   `json:"again_reused"`
	Changed       string `json:"changed"` // the skill file changed before the third stage
	ChangedSent   int    `json:"changed_sent"`
	ChangedReused bool   `json:"changed_reused"`
	NoLink        bool   `json:"no_link"`
	NoSecret      bool   `json:"no_secret"`
}

// PromptResult is step 3.
type PromptResult struct {
	SkillRoot string   `json:"skill_root"`
	Files     []string `json:"files"` // the SKILL.md paths the prompt names
	Text      string   `json:"text"`
}

// SessionResult is step 4.
type SessionResult struct {
	Key         string   `json:"key"`
	Schema      string   `json:"schema"`
	Resumed     bool     `json:"resumed"`
	AgentID     string   `json:"agent_session_id"` // from the resumed record
	DriftFields []string `json:"drift_fields"`
	// SkillsDigest is the skill set the session is bound to: the identity
	// of the bundle whose prompt the agent gets.
	SkillsDigest      string   `json:"skills_digest"`
	SkillsDriftFields []string `json:"skills_drift_fields"` // the resume after deselecting a skill
}

// WorkspaceResult is step 5.
type WorkspaceResult struct {
	Round      string `json:"round"`
	Status     string `json:"sandbox_status"` // git status --porcelain in the sandbox after Prepare
	SkillRead  string `json:"skill_read"`     // the path the agent read
	SkillBytes int    `json:"skill_bytes"`
	Commit     string `json:"agent_commit"`
	Report     string `json:"report"`
}

// DeliverResult is step 6.
type DeliverResult struct {
	AttachmentID      string   `json:"attachment_id"`
	Citation          string   `json:"citation"` // from the tool's receipt: deliverable:<attachment id>
	Disposition       string   `json:"disposition"`
	ByteSize          int64    `json:"byte_size"`
	SHA256            string   `json:"sha256"`
	Replayed          bool     `json:"replayed"`
	Accepted          bool     `json:"accepted"`
	ChildAttachmentID string   `json:"child_attachment_id"`
	ChildAccepted     bool     `json:"child_accepted"`
	ChildAloneMissing []string `json:"child_alone_missing"`
}

// RestoreResult is step 7.
type RestoreResult struct {
	Commits        int      `json:"commits"`
	Head           string   `json:"head"`
	Updated        []string `json:"updated"`
	Kept           []string `json:"kept"`
	Runtime        []string `json:"runtime"` // the sandbox's .airlock entries: never restored, no refusal
	RuntimeDirHome bool     `json:"runtime_dir_came_back"`
	RemotesEmpty   bool     `json:"remotes_empty"`
}

// env is one run's directories, sandbox and logger.
type env struct {
	st        *state
	base      string // host temporary directory
	host      *remote.Host
	embedded  bool   // the sandbox is remotetest's, on this machine
	remoteDir string // the sandbox workspace
	log       *slog.Logger
	stderr    io.Writer
}

// progress prints one step's line.
func (e *env) progress(n int, name, format string, args ...any) {
	fmt.Fprintf(e.stderr, "quickstart: %d/7 %-11s %s\n", n, name, fmt.Sprintf(format, args...))
}

// run runs the seven steps and returns what they did. It fails, naming the
// step, as soon as one does not do what it says.
func run(ctx context.Context, o Options, stdout, stderr io.Writer) (_ *Summary, err error) {
	e := &env{stderr: stderr, log: slog.New(slog.DiscardHandler)}
	if o.Verbose {
		e.log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	fixtures, err := findFixtures(o.Skills)
	if err != nil {
		return nil, err
	}
	if e.base, err = os.MkdirTemp("", "airlock-quickstart-"); err != nil {
		return nil, err
	}
	if o.Keep {
		defer fmt.Fprintf(stderr, "quickstart: kept %s\n", e.base)
	} else {
		defer func() { err = errors.Join(err, os.RemoveAll(e.base)) }()
	}
	sum := &Summary{Dir: e.base}
	closeSandbox, err := e.connect(ctx, o, sum)
	if err != nil {
		return nil, fmt.Errorf("connect to the sandbox: %w", err)
	}
	defer func() { err = errors.Join(err, closeSandbox()) }()
	sum.RemoteDir = e.remoteDir

	steps := []struct {
		name string
		fn   func(context.Context, *Summary) error
	}{
		{"materialize", func(ctx context.Context, s *Summary) error { return e.materialize(ctx, fixtures, s) }},
		{"stage", e.stage},
		{"prompt", e.prompt},
		{"session", e.session},
		{"workspace", e.workspace},
		{"deliverable", e.deliverable},
		{"restore", e.restore},
	}
	e.st = &state{}
	for i, s := range steps {
		if err := s.fn(ctx, sum); err != nil {
			return nil, fmt.Errorf("step %d (%s): %w", i+1, s.name, err)
		}
	}
	if o.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return sum, enc.Encode(sum)
	}
	for line := range strings.Lines(sum.Prompt.Text) {
		fmt.Fprintf(stdout, "| %s", line)
	}
	return sum, nil
}

// connect starts the embedded sandbox (or dials -ssh) and picks the sandbox
// workspace. The returned func removes what connect made and closes it.
func (e *env) connect(ctx context.Context, o Options, sum *Summary) (func() error, error) {
	if o.SSH == "" {
		sandbox := filepath.Join(e.base, "sandbox")
		if err := os.Mkdir(sandbox, 0o755); err != nil {
			return nil, err
		}
		srv, err := remotetest.Start(remotetest.WithDir(sandbox))
		if err != nil {
			return nil, err
		}
		cfg := srv.Config()
		cfg.Logger = e.log
		if e.host, err = remote.Dial(ctx, srv.Addr(), cfg); err != nil {
			return nil, errors.Join(err, srv.Close())
		}
		e.remoteDir, e.embedded = filepath.Join(srv.Dir(), "work"), true
		sum.Sandbox = "remotetest " + srv.Addr()
		return func() error { return errors.Join(e.host.Close(), srv.Close()) }, nil
	}
	var opts []remote.SSHConfigOption
	if o.SSHConfig != "" {
		opts = append(opts, remote.WithSSHConfigFiles(o.SSHConfig, ""))
	}
	addr, cfg, err := remote.LoadSSHConfig(o.SSH, opts...)
	if err != nil {
		return nil, err
	}
	cfg.Logger = e.log
	if e.host, err = remote.Dial(ctx, addr, cfg); err != nil {
		return nil, err
	}
	e.remoteDir = o.RemoteDir
	if e.remoteDir == "" {
		e.remoteDir = "/tmp/airlock-quickstart-" + strings.ToLower(rand.Text()[:12])
	}
	sum.Sandbox = "ssh " + cfg.User + "@" + addr
	// The run owns the remote workspace, so it may remove it afterwards.
	if _, err := e.sh(ctx, "", `case $D in /?*) ;; *) echo "not an absolute path" >&2; exit 1;; esac
[ ! -e "$D" ] && [ ! -L "$D" ] || { echo "already exists; pass a new -remote-dir" >&2; exit 1; }`, map[string]string{"D": e.remoteDir}); err != nil {
		return nil, errors.Join(fmt.Errorf("remote workspace %s: %w", e.remoteDir, err), e.host.Close())
	}
	return func() error {
		var err error
		if !o.Keep {
			_, err = e.sh(context.WithoutCancel(ctx), "", `rm -rf -- "$D"`, map[string]string{"D": e.remoteDir})
		}
		return errors.Join(err, e.host.Close())
	}, nil
}

// findFixtures returns dir, or testdata/skills of the module that holds the
// working directory.
func findFixtures(dir string) (string, error) {
	if dir != "" {
		return filepath.Abs(dir)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "testdata", "skills"), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod above %s: run from the airlock module or pass -skills DIR", wd)
		}
	}
}

// skillAssets is the run's one staging site: the skills bundle, which never
// holds a link (Materialize copies none), so any link is an error.
func skillAssets(bundleDir string) []stage.Asset {
	return []stage.Asset{{Name: "skills", Source: bundleDir, Links: stage.RejectLinks}}
}

// sh runs script in the sandbox (in dir, or the login directory when "")
// and returns its stdout; a failure carries its stderr.
func (e *env) sh(ctx context.Context, dir, script string, vars map[string]string) (string, error) {
	var out, errOut strings.Builder
	err := e.host.Run(ctx, sandbox.Command{Script: script, Dir: dir, Env: vars, Stdout: &out, Stderr: &errOut})
	if err != nil {
		return "", fmt.Errorf("sandbox command failed: %w: %s", err, strings.TrimSpace(errOut.String()))
	}
	return out.String(), nil
}

// short cuts a digest for a progress line.
func short(s string) string {
	if i := strings.IndexByte(s, ':'); i >= 0 && len(s) > i+13 {
		return s[:i+13]
	}
	return s
}
