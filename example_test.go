package airlock_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path"
	"path/filepath"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/skills"
	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/stage/remote"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
)

// Example stages the user's skills into an SSH sandbox and renders the
// prompt the agent sees there. (README.md shows this code.)
func Example() {
	ctx := context.Background()
	srv, err := remotetest.Start() // the sandbox: an in-process SSH server
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	host, err := remote.Dial(ctx, srv.Addr(), srv.Config()) // host key pinned, no insecure default
	if err != nil {
		log.Fatal(err)
	}
	defer host.Close()

	state, _ := os.MkdirTemp("", "airlock-state")
	defer os.RemoveAll(state)
	bundle, err := skills.Materialize(ctx, state, []skills.Source{{Key: "cr", Name: "code-review", Dir: mustAbs("testdata/skills/code-review")}})
	if err != nil {
		log.Fatal(err)
	}
	root := path.Join(srv.Dir(), "work", sandbox.RuntimeDir)
	rt, err := stage.Stage(ctx, host, root, []stage.Asset{{Name: "skills", Source: bundle.Dir}})
	if err != nil {
		log.Fatal(err)
	}
	skillRoot, _ := rt.Path("skills")
	fmt.Println(len(bundle.Skills), "skill,", rt.Assets[0].Sent, "files sent, links left out:", bundle.Skills[0].Skipped)
	fmt.Println(bundle.Prompt(skillRoot) != "" && filepath.IsAbs(skillRoot))
	// Output:
	// 1 skill, 3 files sent, links left out: [refs/token]
	// true
}

func mustAbs(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		log.Fatal(err)
	}
	return abs
}
