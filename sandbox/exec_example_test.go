package sandbox_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/airlockdev/airlock/sandbox"
)

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
