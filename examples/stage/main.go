package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/signal"
	"os/user"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/stage/remote"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, nil)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		msg := strings.ReplaceAll(err.Error(), "\n", "; ")
		if !strings.HasPrefix(msg, "stage: ") {
			msg = "stage: " + msg
		}
		fmt.Fprintln(os.Stderr, msg)
		os.Exit(1)
	}
}

// report is what a run prints.
type report struct {
	Path    string  `json:"path"` // the staged directory: a host path, or ssh://…/path`
	Digest  string  `json:"digest"`
	Files   int     `json:"files"`
	Sent    int     `json:"sent"`
	Bytes   int64   `json:"bytes"`
	Reused  bool    `json:"reused"`
	Skipped int     `json:"skipped"`
	Seconds float64 `json:"seconds"`
}

// run is the command: parse args, build the target, stage once, print.
// sshCfg, when not nil, replaces the SSH configuration built from -i,
// -agent and -known-hosts (tests).
func run(ctx context.Context, args []string, stdout, stderr io.Writer, sshCfg *remote.Config) error {
	fl := flag.NewFlagSet("stage", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	src := fl.String("src", "", "host directory to stage (required)")
	to := fl.String("to", "", "stage root: a local directory or ssh://[user@]host[:port]/abs/path (required)")
	name := fl.String("name", "", "directory under the root (default: base name of -src)")
	links := fl.String("links", "skip", "symbolic links: skip, reject or within (follow those that stay inside -src)")
	asJSON := fl.Bool("json", false, "print one JSON object")
	showProgress := fl.String("progress", progressAuto, "progress on stderr: auto (off with -json, a bar on a terminal, plain lines otherwise), bar, lines or off")
	state := fl.String("state", "", "index directory (default: <user cache dir>/airlock/stage-index)")
	keyFile := fl.String("i", "", "SSH private key file")
	useAgent := fl.Bool("agent", false, "authenticate with the SSH agent at $SSH_AUTH_SOCK")
	knownHosts := fl.String("known-hosts", "", "known_hosts file (default: ~/.ssh/known_hosts)")
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fl.SetOutput(stderr)
			fl.Usage()
		}
		return err
	}
	if *src == "" || *to == "" || fl.NArg() > 0 {
		return errors.New("usage: stage -src DIR -to DEST [-name NAME] [-links skip|reject|within] [-json] [-state DIR] [-i KEY | -agent] [-known-hosts FILE]")
	}
	policy, ok := map[string]stage.LinkPolicy{"skip": stage.SkipLinks, "reject": stage.RejectLinks, "within": stage.FollowLinksWithin}[*links]
	if !ok {
		return fmt.Errorf("-links %q: want skip, reject or within", *links)
	}
	prog, err := newProgress(*showProgress, *asJSON, stdout, stderr)
	if err != nil {
		return err
	}
	source, err := filepath.Abs(*src)
	if err != nil {
		return err
	}
	if *name == "" {
		*name = filepath.Base(source)
	}
	ix, err := openIndex(*state, stderr)
	if err != nil {
		return err
	}

	start := time.Now()
	var target stage.Target
	var root string
	var where func(p string) string // the staged path as the user names it
	if strings.HasPrefix(*to, "ssh://") {
		addr, cfg, dir, done, err := sshDest(*to, sshCfg, *keyFile, *useAgent, *knownHosts)
		if err != nil {
			return err
		}
		defer done()
		h, err := remote.Dial(ctx, addr, cfg)
		if err != nil {
			return err
		}
		defer h.Close()
		target, root = h, dir
		where = func(p string) string { return strings.TrimSuffix(*to, dir) + p }
	} else {
		dest, err := filepath.Abs(*to)
		if err != nil {
			return err
		}
		if dest == "/" {
			return errors.New("-to /: pick a directory below /")
		}
		// The parent is the sandbox: Dir confines every write to it.
		d, err := stage.NewDir(filepath.Dir(dest))
		if err != nil {
			return fmt.Errorf("-to %s: %w (its parent directory must exist)", dest, err)
		}
		target, root = d, "/"+filepath.Base(dest)
		parent := filepath.Dir(dest)
		where = func(p string) string { return filepath.Join(parent, filepath.FromSlash(p)) }
	}
	rt, err := stage.Stage(ctx, target, root, []stage.Asset{{Name: *name, Source: source, Links: policy}},
		append(prog.options(), stage.WithIndex(ix))...)
	if err := errors.Join(err, prog.finish()); err != nil {
		return err
	}
	a := rt.Assets[0]
	r := report{Path: where(a.Path), Digest: a.Digest, Files: a.Files, Sent: a.Sent, Bytes: a.Bytes, Reused: a.Reused,
		Skipped: len(a.Skipped), Seconds: time.Since(start).Seconds()}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(r)
	}
	_, err = fmt.Fprintf(stdout, "staged  %s\ndigest  %s\nfiles   %d (sent %d, links and special files left out %d)\nbytes   %d\nreused  %t\ntook    %s\n",
		r.Path, r.Digest, r.Files, r.Sent, r.Skipped, r.Bytes, r.Reused, time.Duration(r.Seconds*float64(time.Second)).Round(time.Millisecond))
	return err
}

// openIndex opens the persistent index in dir, or in the default place;
// the index's warnings go to stderr.
func openIndex(dir string, stderr io.Writer) (*stage.Index, error) {
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return nil, fmt.Errorf("no default -state directory: %w; pass -state DIR", err)
		}
		dir = filepath.Join(cache, "airlock", "stage-index")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return stage.OpenIndex(dir, stage.WithIndexLogger(log))
}

// sshDest parses ssh://[user@]host[:port]/abs/path and builds the client
// configuration: cfg when given, else from the key file or the agent and
// the known_hosts file. done releases the agent connection.
func sshDest(dest string, cfg *remote.Config, keyFile string, useAgent bool, knownHosts string) (addr string, _ remote.Config, dir string, done func(), _ error) {
	done = func() {}
	u, err := url.Parse(dest)
	if err != nil {
		return "", remote.Config{}, "", nil, fmt.Errorf("-to: %w", err)
	}
	if _, hasPass := u.User.Password(); hasPass || u.RawQuery != "" || u.Fragment != "" || u.Hostname() == "" {
		return "", remote.Config{}, "", nil, fmt.Errorf("-to %q: want ssh://[user@]host[:port]/abs/path (no password, query or fragment)", dest)
	}
	if dir = u.Path; dir == "" || path.Clean(dir) != dir || dir == "/" {
		return "", remote.Config{}, "", nil, fmt.Errorf("-to %q: the path %q must be absolute, clean and below /", dest, u.Path)
	}
	port := u.Port()
	if port == "" {
		port = "22"
	}
	addr = net.JoinHostPort(u.Hostname(), port)
	if cfg != nil {
		return addr, *cfg, dir, done, nil
	}
	c := remote.Config{User: u.User.Username()}
	if c.User == "" {
		me, err := user.Current()
		if err != nil {
			return "", remote.Config{}, "", nil, fmt.Errorf("-to %q names no user and the current one is unknown: %w", dest, err)
		}
		c.User = me.Username
	}
	switch {
	case keyFile != "" && useAgent:
		return "", remote.Config{}, "", nil, errors.New("pass -i KEY or -agent, not both")
	case keyFile != "":
		pem, err := os.ReadFile(keyFile)
		if err != nil {
			return "", remote.Config{}, "", nil, fmt.Errorf("-i: %w", err)
		}
		signer, err := ssh.ParsePrivateKey(pem)
		if _, encrypted := errors.AsType[*ssh.PassphraseMissingError](err); encrypted {
			return "", remote.Config{}, "", nil, fmt.Errorf("-i %s: the key is encrypted; load it into an agent (ssh-add) and pass -agent", keyFile)
		}
		if err != nil {
			return "", remote.Config{}, "", nil, fmt.Errorf("-i %s: %w", keyFile, err)
		}
		c.Auth = []ssh.AuthMethod{ssh.PublicKeys(signer)}
	case useAgent:
		sock := os.Getenv("SSH_AUTH_SOCK")
		if sock == "" {
			return "", remote.Config{}, "", nil, errors.New("-agent: SSH_AUTH_SOCK is not set; start an agent (eval $(ssh-agent); ssh-add) or pass -i KEY")
		}
		// The signers call the agent during the handshake.
		conn, err := net.Dial("unix", sock)
		if err != nil {
			return "", remote.Config{}, "", nil, fmt.Errorf("-agent: %w", err)
		}
		done = func() { conn.Close() }
		c.Auth = []ssh.AuthMethod{ssh.PublicKeysCallback(agent.NewClient(conn).Signers)}
	default:
		return "", remote.Config{}, "", nil, errors.New("an ssh:// destination needs -i KEY or -agent")
	}
	if knownHosts == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			done()
			return "", remote.Config{}, "", nil, fmt.Errorf("no default -known-hosts: %w; pass -known-hosts FILE", err)
		}
		knownHosts = filepath.Join(home, ".ssh", "known_hosts")
	}
	if c.HostKeyCallback, err = remote.KnownHosts(knownHosts); err != nil {
		done()
		return "", remote.Config{}, "", nil, fmt.Errorf("%w (pass -known-hosts FILE)", err)
	}
	return addr, c, dir, done, nil
}
