package main

import (
	"cmp"
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
	"path"
	"path/filepath"
	"strings"
	"time"

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
// sshCfg, when not nil, replaces the SSH configuration LoadSSHConfig
// builds (tests).
func run(ctx context.Context, args []string, stdout, stderr io.Writer, sshCfg *remote.Config) error {
	fl := flag.NewFlagSet("stage", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	src := fl.String("src", "", "host directory to stage (required)")
	to := fl.String("to", "", "stage root: a local directory or ssh://[user@]host[:port]/abs/path (required)")
	name := fl.String("name", "", "directory under the root (default: base name of -src)")
	links := fl.String("links", "skip", "symbolic links: skip, reject or within (follow those that stay inside -src)")
	asJSON := fl.Bool("json", false, "print one JSON object")
	debug := fl.Bool("debug", false, "log each step of the stage on stderr, with the time")
	showProgress := fl.String("progress", progressAuto, "progress on stderr: auto (off with -json, a bar on a terminal, plain lines otherwise), bar, lines or off")
	state := fl.String("state", "", "index directory (default: <user cache dir>/airlock/stage-index)")
	sshConfig := fl.String("ssh-config", "", "ssh_config file to read instead of ~/.ssh/config and /etc/ssh/ssh_config (as ssh -F)")
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fl.SetOutput(stderr)
			fl.Usage()
		}
		return err
	}
	if *src == "" || *to == "" || fl.NArg() > 0 {
		return errors.New("usage: stage -src DIR -to DEST [-name NAME] [-links skip|reject|within] [-json] [-state DIR] [-ssh-config FILE]")
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
		addr, cfg, dir, err := sshDest(*to, sshCfg, *sshConfig)
		if err != nil {
			return err
		}
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
	opts := append(prog.options(), stage.WithIndex(ix))
	if *debug {
		opts = append(opts, stage.WithLogger(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	}
	rt, err := stage.Stage(ctx, target, root, []stage.Asset{{Name: *name, Source: source, Links: policy}}, opts...)
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
// configuration: cfg when given, else the one `ssh host` would use
// (remote.LoadSSHConfig), with the user and port of dest winning.
func sshDest(dest string, cfg *remote.Config, sshConfig string) (addr string, _ remote.Config, dir string, _ error) {
	u, err := url.Parse(dest)
	if err != nil {
		return "", remote.Config{}, "", fmt.Errorf("-to: %w", err)
	}
	if _, hasPass := u.User.Password(); hasPass || u.RawQuery != "" || u.Fragment != "" || u.Hostname() == "" {
		return "", remote.Config{}, "", fmt.Errorf("-to %q: want ssh://[user@]host[:port]/abs/path (no password, query or fragment)", dest)
	}
	if dir = u.Path; dir == "" || path.Clean(dir) != dir || dir == "/" {
		return "", remote.Config{}, "", fmt.Errorf("-to %q: the path %q must be absolute, clean and below /", dest, u.Path)
	}
	if cfg != nil {
		return net.JoinHostPort(u.Hostname(), cmp.Or(u.Port(), "22")), *cfg, dir, nil
	}
	var opts []remote.SSHConfigOption
	if sshConfig != "" {
		opts = append(opts, remote.WithSSHConfigFiles(sshConfig, ""))
	}
	addr, c, err := remote.LoadSSHConfig(u.Hostname(), opts...)
	if err != nil {
		return "", remote.Config{}, "", err
	}
	c.User = cmp.Or(u.User.Username(), c.User)
	if port := u.Port(); port != "" {
		host, _, _ := net.SplitHostPort(addr) // LoadSSHConfig's addr is host:port
		addr = net.JoinHostPort(host, port)
	}
	return addr, c, dir, nil
}
