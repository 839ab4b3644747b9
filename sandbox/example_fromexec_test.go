package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os/exec"

	"github.com/airlockdev/airlock/sandbox"
)

// providerSDK stands for a provider's Go SDK (E2B, Daytona, Modal…) whose exec
// call runs an argv in one of its sandboxes with the streams wired. This
// one runs it on this machine.
type providerSDK struct{}

func (providerSDK) Exec(ctx context.Context, id string, argv []string, in io.Reader, out, errw io.Writer) (int, error) {
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.Stdin, c.Stdout, c.Stderr = in, out, errw
	if err := c.Run(); err != nil {
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			return ee.ExitCode(), nil
		}
		return 0, err
	}
	return 0, nil
}

// A provider whose SDK has an exec call becomes a Runner: FromExec adds the
// env on stdin, the completion record, the in-sandbox watchdog and the kill
// by a second call. The SDK's exit code is not needed: the completion
// record says how the script ended.
func ExampleFromExec() {
	sdk := providerSDK{}
	r := sandbox.FromExec(func(ctx context.Context, argv []string, in io.Reader, out, errw io.Writer) error {
		_, err := sdk.Exec(ctx, "sbx-42", argv, in, out, errw)
		return err
	})

	var out bytes.Buffer
	err := r.Run(context.Background(), sandbox.Command{
		Script: `printf '%s, %s\n' "$GREETING" "$(cat)"; exit 3`,
		Env:    map[string]string{"GREETING": "hello"},
		Stdin:  bytes.NewBufferString("sandbox"),
		Stdout: &out,
	})
	ee, ok := errors.AsType[*sandbox.ExitError](err)
	if !ok {
		log.Fatal(err)
	}
	fmt.Print(out.String())
	fmt.Println("status", ee.Status, "retryable", sandbox.Retryable(err))
	// Output:
	// hello, sandbox
	// status 3 retryable false
}
