//go:build linux

package sandbox_test

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/airlockdev/airlock/sandbox"
)

// An agent process: started in the sandbox, fed through Write, read through
// Stdout, and ended with its end verified from the sandbox side.
func ExampleStart() {
	ctx := context.Background()
	r := sandbox.Local(os.TempDir())
	p, err := sandbox.Start(ctx, r, sandbox.Command{Script: `while read -r line; do echo "agent: $line"; done`})
	if err != nil {
		fmt.Println(err)
		return
	}
	out := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(p.Stdout())
		out <- b
	}()
	if err := p.Write(ctx, []byte("hello\n")); err != nil {
		fmt.Println(err) // ErrTransport: the process is being stopped
	}
	_ = p.CloseStdin() // or p.Stop(ctx): TERM, grace, KILL
	exit, err := p.Wait(ctx)
	fmt.Printf("%s", <-out)
	fmt.Println(exit.Status, exit.Exited, exit.Verified, err)
	// Output:
	// agent: hello
	// 0 true true <nil>
}
