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

// fakeSDK stands for a provider's Go SDK (E2B, Daytona, Modal…) whose
// exec call runs an argv in one of its sandboxes with the streams wired.
// This one runs it on this machine.
type fakeSDK struct{}

func (fakeSDK) Exec(ctx context.Context, sandboxID string, argv []string, stdin io.Reader, stdout, stderr io.Writer) (exitCode int, err error) {
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.Stdin, c.Stdout, c.Stderr = stdin, stdout, stderr
	err = c.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), nil
	}
	return 0, err
}

// A provider whose SDK has an exec call becomes a Runner: FromExec adds env
// on stdin, the completion record, the in-sandbox watchdog and
// cancellation by a second call. The exit code the SDK reports is not
// needed (the completion record says how the script ended).
func ExampleFromExec() {
	client := fakeSDK{}
	r := sandbox.FromExec(func(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
		code, err := client.Exec(ctx, "sbx-42", argv, stdin, stdout, stderr)
		if err == nil && code != 0 {
			err = fmt.Errorf("exit code %d", code)
		}
		return err
	})

	var out bytes.Buffer
	err := r.Run(context.Background(), sandbox.Command{
		Script: `printf '%s, %s\n' "$GREETING" "$(cat)"; exit 3`,
		Env:    map[string]string{"GREETING": "hello"},
		Stdin:  bytes.NewBufferString("sandbox"),
		Stdout: &out,
	})
	var ee *sandbox.ExitError
	if !errors.As(err, &ee) {
		log.Fatal(err)
	}
	fmt.Print(out.String())
	fmt.Println("status", ee.Status, "retryable", sandbox.Retryable(err))
	// Output:
	// hello, sandbox
	// status 3 retryable false
}
