package workspace_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

// Give a sandbox a copy of a git work tree, let the agent commit there, and
// bring the work back. stage.LocalRunner plays the sandbox on this machine;
// over SSH the Runner is a remote.Host and Remote a path in the sandbox.
func Example() {
	base, err := os.MkdirTemp("", "workspace-example")
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		if err := os.RemoveAll(base); err != nil {
			log.Print(err)
		}
	}()
	local, sandboxDir := filepath.Join(base, "local"), filepath.Join(base, "sandbox")
	for _, d := range []string{local, sandboxDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			log.Fatal(err)
		}
	}
	// The user's repository: one commit and an uncommitted edit.
	sh := func(dir, script string) {
		cmd := exec.Command("sh", "-c", script)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=Dev", "GIT_AUTHOR_EMAIL=dev@example.com",
			"GIT_COMMITTER_NAME=Dev", "GIT_COMMITTER_EMAIL=dev@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			log.Fatalf("%s: %v\n%s", script, err, out)
		}
	}
	sh(local, `git init -q -b main && echo v1 >notes.txt && git add notes.txt && git commit -qm first && echo v2 >notes.txt`)

	ctx := context.Background()
	spec := workspace.Spec{Local: local, Remote: filepath.Join(sandboxDir, "work"), Runner: sandbox.Local(sandboxDir)}
	round, err := workspace.Prepare(ctx, spec)
	if err != nil {
		log.Fatal(err)
	}

	// The agent, in the sandbox: commits the edit and writes a report.
	sh(spec.Remote, `git commit -qam "agent: notes v2" && echo done >report.md`)

	res, err := round.Restore(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("git:", res.GitBacked, "commits:", res.Commits, "merged:", res.Merged)
	fmt.Println("updated:", res.Updated, "refused:", res.Refused)
	report, err := os.ReadFile(filepath.Join(local, "report.md"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print("report.md: ", string(report))
	// Output:
	// git: true commits: 1 merged: false
	// updated: [report.md] refused: []
	// report.md: done
}
