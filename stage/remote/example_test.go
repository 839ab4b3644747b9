package remote_test

import (
	"bytes"
	"context"
	"fmt"
	"log"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage/remote"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
)

// Dial a sandbox (here the in-process remotetest server; in production a
// Config with a known_hosts callback) and run one command in it. Secrets go
// in Env, never in the script.
func ExampleHost_Run() {
	srv, err := remotetest.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		if err := srv.Close(); err != nil {
			log.Print(err)
		}
	}()

	ctx := context.Background()
	host, err := remote.Dial(ctx, srv.Addr(), srv.Config())
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		if err := host.Close(); err != nil {
			log.Print(err)
		}
	}()

	var out bytes.Buffer
	err = host.Run(ctx, sandbox.Command{
		Script: `printf 'hello %s\n' "$WHO"; printf '%s\n' "$(basename "$PWD" | cut -c1-11)"`,
		Env:    map[string]string{"WHO": "sandbox"},
		Stdout: &out,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(out.String())
	// Output:
	// hello sandbox
	// remotetest-
}
