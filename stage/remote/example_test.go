package remote_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"golang.org/x/crypto/ssh"

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

// Connect the way `ssh sandbox` connects: the host alias is looked up in
// ~/.ssh/config and /etc/ssh/ssh_config (HostName, Port, User,
// IdentityFile, known_hosts, ProxyJump, …), and the agent at SSH_AUTH_SOCK
// is used. A program needs one line:
//
//	addr, cfg, err := remote.LoadSSHConfig("sandbox")
//
// This example writes its own configuration and key first, so that it
// runs anywhere, and shows what the Config holds; Dial(ctx, addr, cfg)
// would then go through the bastion to the sandbox, checking both host
// keys.
func ExampleLoadSSHConfig() {
	home, err := os.MkdirTemp("", "sshconfig")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(home)
	config := filepath.Join(home, ".ssh", "config")
	if err := writeExampleKey(filepath.Join(home, ".ssh", "sandbox_ed25519")); err != nil {
		log.Fatal(err)
	}
	err = os.WriteFile(config, []byte(`Host sandbox
  HostName sandbox.example.com
  Port 2222
  User agent
  ProxyJump bastion
  StrictHostKeyChecking accept-new
  ConnectTimeout 5
  ServerAliveInterval 30
Host bastion
  HostName bastion.example.com
  User jump
Host *
  IdentityFile ~/.ssh/sandbox_ed25519
  IdentitiesOnly yes
`), 0o600)
	if err != nil {
		log.Fatal(err)
	}

	addr, cfg, err := remote.LoadSSHConfig("sandbox",
		remote.WithSSHConfigFiles(config, ""), remote.WithSSHHome(home), remote.WithSSHAgent(""))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(addr, "as", cfg.User, "dial timeout", cfg.DialTimeout, "keepalive", cfg.KeepAlive)
	for _, j := range cfg.Jumps {
		fmt.Println("through", j.Addr, "as", j.Config.User)
	}

	// Output:
	// sandbox.example.com:2222 as agent dial timeout 5s keepalive 30s
	// through bastion.example.com:22 as jump
}

// writeExampleKey writes a fresh, unencrypted ed25519 key to file.
func writeExampleKey(file string) error {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return err
	}
	return os.WriteFile(file, pem.EncodeToMemory(block), 0o600)
}
