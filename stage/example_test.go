package stage_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
)

// scratch returns a new temporary directory; the caller removes it.
func scratch(prefix string) string {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		log.Fatal(err)
	}
	return dir
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

func Example() {
	// A host directory with one skill, and a scratch directory that plays
	// the sandbox.
	host, sandbox := scratch("skills"), scratch("sandbox")
	defer os.RemoveAll(host)
	defer os.RemoveAll(sandbox)
	check(os.MkdirAll(filepath.Join(host, "review"), 0o755))
	check(os.WriteFile(filepath.Join(host, "review", "SKILL.md"), []byte("---\nname: review\n---\n"), 0o644))

	target, err := stage.NewDir(sandbox)
	if err != nil {
		log.Fatal(err)
	}
	assets := []stage.Asset{{Name: "skills", Source: host, Links: stage.SkipLinks}}
	rt, err := stage.Stage(context.Background(), target, "/home/agent/.airlock/rt", assets)
	if err != nil {
		log.Fatal(err)
	}
	a := rt.Assets[0]
	fmt.Println(a.Path, a.Files, a.Reused)

	// The prompt was rendered with host paths; the agent needs sandbox paths.
	fmt.Print(rt.Rewrite("Skill root: " + host + "\n- review (file: " + host + "/review/SKILL.md)\n"))

	// Unchanged content: one probe, nothing written.
	rt, err = stage.Stage(context.Background(), target, "/home/agent/.airlock/rt", assets)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rt.Assets[0].Reused)
	// Output:
	// /home/agent/.airlock/rt/skills 1 false
	// Skill root: /home/agent/.airlock/rt/skills
	// - review (file: /home/agent/.airlock/rt/skills/review/SKILL.md)
	// true
}

func ExampleNewBridge() {
	// Any sandbox that runs shell commands: here, this machine.
	dir, host := scratch("sandbox"), scratch("tools")
	defer os.RemoveAll(dir)
	defer os.RemoveAll(host)
	check(os.WriteFile(filepath.Join(host, "run.sh"), []byte("#!/bin/sh\n"), 0o755))

	b := stage.NewBridge(sandbox.Local(dir), stage.WithControlTimeout(10*time.Second))
	rt, err := stage.Stage(context.Background(), b, filepath.Join(dir, "rt"), []stage.Asset{{Name: "tools", Source: host}}, stage.WithVerify())
	if err != nil {
		log.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "rt", "tools", "run.sh"))
	check(err)
	fmt.Println(rt.Assets[0].Files, fi.Mode())
	// Output:
	// 1 -rwxr-xr-x
}

func ExampleOver() {
	// A command-only sandbox (here this machine; in real use sandbox.Exec
	// over kubectl or docker) as the one value a run stages into and runs in.
	dir, host := scratch("sandbox"), scratch("skills")
	defer os.RemoveAll(dir)
	defer os.RemoveAll(host)
	check(os.WriteFile(filepath.Join(host, "SKILL.md"), []byte("---\nname: review\n---\n"), 0o644))

	var sb stage.Sandbox = stage.Over(sandbox.Local(dir))
	root := filepath.Join(dir, "work", sandbox.RuntimeDir)
	rt, err := stage.Stage(context.Background(), sb, root, []stage.Asset{{Name: "skills", Source: host}}, stage.WithPrune())
	check(err)
	p, _ := rt.Path("skills")
	var out strings.Builder
	check(sb.Run(context.Background(), sandbox.Command{Script: `head -n 2 "$F"`, Env: map[string]string{"F": p + "/SKILL.md"}, Stdout: &out}))
	fmt.Print(out.String())
	// Output:
	// ---
	// name: review
}

func ExampleCache() {
	cache := stage.NewCache(0) // default idle expiry
	turn := func(fingerprint string) {
		lease, err := cache.Acquire(context.Background(), "session-1", fingerprint, func(ctx context.Context) (*stage.Runtime, error) {
			return &stage.Runtime{Root: "/rt"}, nil // stage.Stage(ctx, …) in real use
		})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(fingerprint, "reused:", lease.Reused())
		lease.Release(nil) // pass the turn's error: a failed turn discards the Runtime
	}
	turn("bundle-a")
	turn("bundle-a")
	turn("bundle-b")
	// Output:
	// bundle-a reused: false
	// bundle-a reused: true
	// bundle-b reused: false
}

// WithProgress reports a stage as it advances: Files and Bytes done so far
// against estimated totals, every field only growing. A command-line host
// draws a bar from it (examples/stage); this one keeps the last report.
func ExampleWithProgress() {
	host, sandboxDir := scratch("docs"), scratch("sandbox")
	defer os.RemoveAll(host)
	defer os.RemoveAll(sandboxDir)
	for i, text := range []string{"one\n", "two\n", "three\n"} {
		check(os.WriteFile(filepath.Join(host, fmt.Sprintf("page-%d.md", i)), []byte(text), 0o644))
	}
	target, err := stage.NewDir(sandboxDir)
	check(err)

	var last sandbox.Progress
	_, err = stage.Stage(context.Background(), target, "/rt", []stage.Asset{{Name: "docs", Source: host}},
		stage.WithProgress(func(p sandbox.Progress) { last = p }))
	check(err)
	fmt.Printf("%s: %d/%d files, %d/%d bytes\n", last.Asset, last.Files, last.TotalFiles, last.Bytes, last.TotalBytes)
	// Output:
	// docs: 3/3 files, 14/14 bytes
}
