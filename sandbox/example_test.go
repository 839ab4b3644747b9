package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/airlockdev/airlock/sandbox"
)

// Run a script through a Runner: here Local, which plays the sandbox on this
// machine in a directory of its own. Secrets travel in Env (never in the
// script or an argv), input on Stdin; a script that runs and fails is an
// *ExitError, which retrying will not fix.
func ExampleLocal() {
	dir, err := os.MkdirTemp("", "sandbox-example")
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		if err := os.RemoveAll(dir); err != nil {
			log.Print(err)
		}
	}()
	r := sandbox.Local(dir)
	ctx := context.Background()

	var out strings.Builder
	err = r.Run(ctx, sandbox.Command{
		Script: `read -r name; printf '%s, %s\n' "$GREETING" "$name" >greeting.txt; cat greeting.txt`,
		Env:    map[string]string{"GREETING": "hello"},
		Stdin:  strings.NewReader("agent\n"),
		Stdout: &out,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(out.String())
	written, err := os.ReadFile(filepath.Join(dir, "greeting.txt"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print("in the sandbox directory: ", string(written))

	err = r.Run(ctx, sandbox.Command{Script: "exit 3"})
	var ee *sandbox.ExitError
	if !errors.As(err, &ee) {
		log.Fatalf("want an *ExitError, got %v", err)
	}
	fmt.Println("status", ee.Status, "retryable", sandbox.Retryable(err), "transport", errors.Is(err, sandbox.ErrTransport))
	// Output:
	// hello, agent
	// in the sandbox directory: hello, agent
	// status 3 retryable false transport false
}

// A short operation of an adapter's own (reading a queue, delivering
// input) runs under Control, whose deadline holds even when the Runner
// ignores its context; a failure to complete wraps ErrTransport.
func ExampleControl() {
	r := sandbox.Local(os.TempDir())
	var out strings.Builder
	err := sandbox.Control(context.Background(), r, sandbox.Command{Script: "echo queue-empty", Stdout: &out})
	fmt.Print(out.String(), err, "\n")
	fmt.Println(sandbox.ControlDeadline(r) <= sandbox.MaxControlTimeout)
	// Output:
	// queue-empty
	// <nil>
	// true
}
