package remotetest_test

import (
	"fmt"
	"log"

	"golang.org/x/crypto/ssh"

	"github.com/airlockdev/airlock/stage/remote/remotetest"
)

// A test usually calls remotetest.NewServer(t) and hands srv.Config() to
// remote.Dial. Start and Close work outside tests too, with any SSH client.
func Example() {
	srv, err := remotetest.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	cfg := srv.Config() // trusts exactly this server's host key
	client, err := ssh.Dial("tcp", srv.Addr(), &ssh.ClientConfig{
		User:            cfg.User,
		Auth:            cfg.Auth,
		HostKeyCallback: cfg.HostKeyCallback,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	sess, err := client.NewSession()
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close()
	out, err := sess.Output("echo hello from $(basename $PWD | cut -c1-11)")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(string(out))
	fmt.Println("execs:", srv.Execs())
	// Output:
	// hello from remotetest-
	// execs: 1
}
