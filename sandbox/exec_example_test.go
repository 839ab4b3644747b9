package sandbox_test

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"

	"github.com/airlockdev/airlock/sandbox"
)

// sdkSandbox stands in for a provider SDK's sandbox handle (E2B, Daytona,
// Modal…): one exec call with streams. Here it runs on this machine.
type sdkSandbox struct{}

func (sdkSandbox) Exec(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.Stdin, c.Stdout, c.Stderr = stdin, stdout, stderr
	return c.Run()
}

// A provider with a Go SDK exec call becomes a Runner in one line; env
// travels on stdin, the exit status in the wrapper's completion record.
func ExampleFromExec() {
	r := sandbox.FromExec(sdkSandbox{}.Exec)
	var out strings.Builder
	err := r.Run(context.Background(), sandbox.Command{
		Script: `printf '%s, %s\n' "$GREETING" "$(cat)"; exit 3`,
		Env:    map[string]string{"GREETING": "hello"},
		Stdin:  strings.NewReader("world"),
		Stdout: &out,
	})
	fmt.Print(out.String())
	fmt.Println(err)
	// Output:
	// hello, world
	// exited with status 3
}

// A CLI exec engine is a Runner in one line: here the plain sh -c prefix;
// sandbox.Exec("kubectl", "exec", "-i", "pod/agent-7", "--") and
// sandbox.Exec("docker", "exec", "-i", "agent-7") work the same way.
func ExampleExec() {
	r := sandbox.Exec()
	var out strings.Builder
	err := r.Run(context.Background(), sandbox.Command{Script: "echo ran; pwd", Dir: "/", Stdout: &out})
	fmt.Print(out.String(), err, "\n")
	// Output:
	// ran
	// /
	// <nil>
}
