//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
)

func main() {
	var o Options
	flag.BoolVar(&o.Keep, "keep", false, "keep the temporary directory")
	flag.BoolVar(&o.JSON, "json", false, "print a machine-readable summary on stdout")
	flag.StringVar(&o.Bwrap, "bwrap", "", "bwrap's path (default "+DefaultBwrap+", then PATH)")
	flag.StringVar(&o.Skills, "skills", "", "skill fixtures (default: testdata/skills of this module)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "bwrap: unexpected arguments:", flag.Args())
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	_, err := run(ctx, o, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bwrap: FAIL:", err)
		os.Exit(1)
	}
}

// Options are the command's flags.
type Options struct {
	Keep, JSON bool
	Bwrap      string // "" means DefaultBwrap, then PATH
	Skills     string // fixture directory; "" finds testdata/skills above the working directory
}

// Summary is what the run did; -json prints it.
type Summary struct {
	Dir        string            `json:"dir"`        // the host temporary directory (gone unless -keep)
	Argv       []string          `json:"bwrap_argv"` // bwrap and its flags
	Staged     string            `json:"staged"`     // the skills in the sandbox
	SkillFiles int               `json:"skill_files"`
	Attempts   map[string]string `json:"attempts"` // escape attempt: "denied: <why>" (or what leaked)
	SkillRead  string            `json:"skill_read"`
	Commit     string            `json:"agent_commit"`
	Restored   []string          `json:"restored"` // files the restore updated
	Commits    int               `json:"restored_commits"`
	Attachment string            `json:"attachment_id"`
	ByteSize   int64             `json:"byte_size"`
}

// run builds the sandbox, stages, runs the agent, restores and
// registers; it fails as soon as a step does not do what it says, and when
// any escape attempt of the agent was not denied.
func run(ctx context.Context, o Options, stdout, stderr io.Writer) (_ *Summary, err error) {
	fixtures, err := findFixtures(o.Skills)
	if err != nil {
		return nil, err
	}
	base, err := os.MkdirTemp("", "airlock-bwrap-")
	if err != nil {
		return nil, err
	}
	if o.Keep {
		defer fmt.Fprintf(stderr, "bwrap: kept %s\n", base)
	} else {
		defer func() { err = errors.Join(err, os.RemoveAll(base)) }()
	}
	e, err := newEnv(ctx, base, o.Bwrap, stderr)
	if err != nil {
		return nil, err
	}
	sum := &Summary{Dir: base, Argv: e.box.Argv()}
	steps := []struct {
		name string
		fn   func(context.Context, *Summary) error
	}{
		{"stage", func(ctx context.Context, s *Summary) error { return e.stage(ctx, fixtures, s) }},
		{"agent", e.agent},
		{"restore", e.restore},
		{"deliverable", e.deliverable},
	}
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
	return sum, nil
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
