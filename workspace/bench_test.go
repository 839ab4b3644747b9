package workspace_test

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/airlockdev/airlock/internal/shell"
	"github.com/airlockdev/airlock/internal/sshdtest"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
	"github.com/airlockdev/airlock/workspace"
)

// genRepo writes the benchmark repository: 2,000 files in 40 directories,
// 200 commits (each later one edits 10 files), and a few dirty edits.
func genRepo(b *testing.B, dir string) {
	b.Helper()
	sh := func(script string) {
		cmd := exec.Command("/bin/sh", "-c", script)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), gitEnv...)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%s: %v: %s", script, err, out)
		}
	}
	sh("git init -q -b main")
	for d := range 40 {
		p := filepath.Join(dir, fmt.Sprintf("pkg%02d", d))
		if err := os.MkdirAll(p, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := range 50 {
			body := strings.Repeat(fmt.Sprintf("line %d of file %d in %d\n", f, f, d), 40+f)
			if err := os.WriteFile(filepath.Join(p, fmt.Sprintf("f%02d.txt", f)), []byte(body), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	sh("git add -A && git commit -q -m c0")
	sh(`i=1; while [ $i -lt 200 ]; do for j in 0 1 2 3 4 5 6 7 8 9; do d=$(( (i*7+j) % 40 )); echo "edit $i" >> pkg$(printf %02d $d)/f$(printf %02d $j).txt; done; git commit -q -am c$i; i=$((i+1)); done`)
	sh("echo dirty >> pkg00/f00.txt && echo dirty >> pkg01/f01.txt && echo new > untracked.txt && git add pkg01/f01.txt")
}

func agentCommit(b *testing.B, remote string, i int) {
	cmd := exec.Command("/bin/sh", "-c", fmt.Sprintf("echo agent %d >> pkg05/f05.txt && git commit -q -am agent%d && echo dirty%d > agent-dirty.txt", i, i, i))
	cmd.Dir = remote
	cmd.Env = append(os.Environ(), gitEnv...)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("%v: %s", err, out)
	}
}

// BenchmarkRoundTrip measures Prepare + Restore against the equivalent
// manual commands, and a second Prepare on the same sandbox. The manual
// commands run on this machine ("manual", compare with workspace/local),
// through remote.Host to remotetest ("manual-remotetest", compare with
// workspace/remotetest), and through the OpenSSH client to the real sshd
// ("manual-sshd", compare with workspace/sshd; one multiplexed connection
// opened before timing, as the workspace runner's is).
//
//	go test -run '^$' -bench BenchmarkRoundTrip -benchtime 5x ./workspace/
func BenchmarkRoundTrip(b *testing.B) {
	src := b.TempDir()
	genRepo(b, src)
	clone := func(b *testing.B) string {
		dir := filepath.Join(b.TempDir(), "local")
		cmd := exec.Command("/bin/sh", "-c", `cp -a "$0" "$1"`, src, dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
		return dir
	}
	// The round trip over each runner: LocalRunner, and remote.Host over
	// remotetest and a real sshd (skipped without one).
	runnerFor := map[string]func(b *testing.B) sandbox.Runner{
		"local": func(*testing.B) sandbox.Runner { return sandbox.Local("/") },
		"remotetest": func(b *testing.B) sandbox.Runner {
			srv := remotetest.NewServer(b)
			return dialHost(b, srv.Addr(), srv.Config(), "/")
		},
		"sshd": func(b *testing.B) sandbox.Runner {
			srv := sshdtest.Start(b)
			return dialHost(b, srv.Addr(), srv.Config(), "/")
		},
	}
	for _, rn := range []string{"local", "remotetest", "sshd"} {
		b.Run("workspace/"+rn, func(b *testing.B) {
			runner := runnerFor[rn](b)
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				local := clone(b)
				remote := filepath.Join(b.TempDir(), "sandbox")
				spec := workspace.Spec{Local: local, Remote: remote, Runner: runner}
				b.StartTimer()
				r, err := workspace.Prepare(b.Context(), spec)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				agentCommit(b, remote, i)
				b.StartTimer()
				if _, err := r.Restore(b.Context()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("manual", func(b *testing.B) {
		run := sandbox.Local("/")
		for i := 0; b.Loop(); i++ {
			b.StopTimer()
			local := clone(b)
			remote := filepath.Join(b.TempDir(), "sandbox")
			b.StartTimer()
			// git bundle create | clone; tar of the dirty files | tar x.
			script := fmt.Sprintf(`set -e
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
cd %[1]s
git bundle create -q %[1]s.bundle --all
git clone -q -b main %[1]s.bundle %[2]s
{ git diff --name-only; git diff --cached --name-only; git ls-files -o --exclude-standard; } | sort -u | tar -c -f - -T - | (cd %[2]s && tar -x -f -)
`, local, remote)
			if err := run.Run(b.Context(), sandbox.Command{Script: script}); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			agentCommit(b, remote, i)
			b.StartTimer()
			// git bundle back; fetch; fast-forward; tar of the dirty files back.
			script = fmt.Sprintf(`set -e
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
cd %[2]s
git bundle create -q %[2]s.back main ^origin/main
{ git diff --name-only; git ls-files -o --exclude-standard; } | sort -u | tar -c -f %[2]s.tar -T -
cd %[1]s
git fetch -q %[2]s.back main:refs/heads/back
git update-ref refs/heads/main refs/heads/back
tar -x -f %[2]s.tar
`, local, remote)
			if err := run.Run(b.Context(), sandbox.Command{Script: script}); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The manual commands with the remote half over a transport: the
	// OpenSSH client to the real sshd, or remote.Host to remotetest (the
	// OpenSSH client cannot use remotetest's in-memory key).
	manualOver := map[string]func(b *testing.B) transport{
		"manual-remotetest": func(b *testing.B) transport {
			srv := remotetest.NewServer(b)
			return runnerTransport{dialHost(b, srv.Addr(), srv.Config(), "/")}
		},
		"manual-sshd": func(b *testing.B) transport { return newSSHClient(b) },
	}
	for _, name := range []string{"manual-remotetest", "manual-sshd"} {
		b.Run(name, func(b *testing.B) {
			c := manualOver[name](b)
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				local := clone(b)
				remote := filepath.Join(b.TempDir(), "sandbox")
				l, r := shell.Quote(local), shell.Quote(remote)
				b.StartTimer()
				// git bundle create | ssh (clone); tar of the dirty files | ssh tar x.
				c.send(b, `cd `+l+` && git bundle create -q - --all`,
					gitIsolation+`cat > `+r+`.bundle && git clone -q -b main `+r+`.bundle `+r+` && rm `+r+`.bundle`)
				c.send(b, `cd `+l+` && { git diff --name-only; git diff --cached --name-only; git ls-files -o --exclude-standard; } | sort -u | tar -c -f - -T -`,
					`cd `+r+` && tar -x -f -`)
				b.StopTimer()
				agentCommit(b, remote, i)
				b.StartTimer()
				// ssh git bundle back; ssh tar of the dirty files back; fetch;
				// fast-forward; tar x.
				c.recv(b, gitIsolation+`cd `+r+` && git bundle create -q - main ^origin/main`, `cat > `+l+`.back`)
				c.recv(b, gitIsolation+`cd `+r+` && { git diff --name-only; git ls-files -o --exclude-standard; } | sort -u | tar -c -f - -T -`, `cat > `+l+`.tar`)
				localSh(b, `cd `+l+` && git fetch -q `+l+`.back main:refs/heads/back && git update-ref refs/heads/main refs/heads/back && tar -x -f `+l+`.tar`, nil, nil)
			}
		})
	}
	for _, name := range []string{"first-prepare", "second-prepare"} {
		b.Run(name, func(b *testing.B) {
			local := clone(b)
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				remote := filepath.Join(b.TempDir(), "sandbox")
				spec := workspace.Spec{Local: local, Remote: remote, Runner: sandbox.Local("/")}
				if name == "second-prepare" {
					if _, err := workspace.Prepare(b.Context(), spec); err != nil {
						b.Fatal(err)
					}
					cmd := exec.Command("/bin/sh", "-c", fmt.Sprintf("echo more%d >> pkg09/f09.txt && git commit -q -am more%d", i, i))
					cmd.Dir = local
					cmd.Env = append(os.Environ(), gitEnv...)
					if out, err := cmd.CombinedOutput(); err != nil {
						b.Fatalf("%v: %s", err, out)
					}
				}
				b.StartTimer()
				if _, err := workspace.Prepare(b.Context(), spec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

const gitIsolation = "export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null; "

// sshClient is the OpenSSH client logged in to a throwaway sshd, over one
// master connection that every command shares.
type sshClient struct{ argv []string }

// newSSHClient starts sshd and opens the master connection with the
// harness's client key and known_hosts file. It skips b when the ssh client is missing (sshd
// itself is checked by sshdtest.Start).
func newSSHClient(b *testing.B) sshClient {
	b.Helper()
	srv := sshdtest.Start(b)
	sshPath, err := exec.LookPath("ssh")
	if err != nil {
		b.Skipf("the OpenSSH client (ssh) is not on PATH (%v); install openssh-client to run the manual SSH baseline", err)
	}
	dir, err := os.MkdirTemp("", "ssh") // short: a control socket path is limited to about 100 bytes
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			b.Errorf("removing %s: %v", dir, err)
		}
	})
	key, knownHosts := srv.KeyFile(), srv.KnownHostsFile()
	_, port, err := net.SplitHostPort(srv.Addr())
	if err != nil {
		b.Fatal(err)
	}
	host := "127.0.0.1" // as sshdtest's known_hosts names it
	u, err := user.Current()
	if err != nil {
		b.Fatal(err)
	}
	ctl := filepath.Join(dir, "cm")
	c := sshClient{argv: []string{sshPath, "-F", "/dev/null", "-i", key, "-p", port,
		"-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
		"-o", "UserKnownHostsFile=" + knownHosts, "-o", "GlobalKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
		"-o", "ControlMaster=auto", "-o", "ControlPath=" + ctl, "-o", "ControlPersist=600",
		u.Username + "@" + host}}
	c.run(b, `"$@"`, "true") // the master connection, before any timing
	b.Cleanup(func() {
		args := append(slices.Clone(c.argv[:len(c.argv)-1]), "-O", "exit", c.argv[len(c.argv)-1])
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			b.Errorf("stopping the ssh master: %v: %s", err, out)
		}
	})
	return c
}

// transport runs the remote half of the manual baseline: send pipes a
// local script's output into a remote command, recv a remote command's
// output into a local script.
type transport interface {
	send(b *testing.B, local, remote string)
	recv(b *testing.B, remote, local string)
}

func (c sshClient) send(b *testing.B, local, remote string) { c.run(b, local+` | "$@"`, remote) }
func (c sshClient) recv(b *testing.B, remote, local string) {
	c.run(b, `"$@" | { `+local+`; }`, remote)
}

// runnerTransport is the remote half over a sandbox.Runner (remote.Host).
type runnerTransport struct{ run sandbox.Runner }

func (t runnerTransport) send(b *testing.B, local, remote string) { t.pipe(b, local, remote, true) }
func (t runnerTransport) recv(b *testing.B, remote, local string) { t.pipe(b, local, remote, false) }

// pipe connects local's output to remote's input (toRemote), or remote's
// output to local's input.
func (t runnerTransport) pipe(b *testing.B, local, remote string, toRemote bool) {
	b.Helper()
	pr, pw := io.Pipe()
	cmd := sandbox.Command{Script: remote}
	var in io.Reader
	var out io.Writer
	if toRemote {
		cmd.Stdin, out = pr, pw
	} else {
		cmd.Stdout, in = pw, pr
	}
	done := make(chan error, 1)
	go func() {
		err := t.run.Run(b.Context(), cmd)
		if toRemote {
			pr.CloseWithError(err) // the local side's writes fail
		} else {
			pw.CloseWithError(err) // EOF, or err, for the local side
		}
		done <- err
	}()
	localSh(b, local, in, out)
	pw.Close() // EOF for the remote's input
	pr.Close() // the remote's output is no longer read
	if err := <-done; err != nil {
		b.Fatalf("%s: %v", remote, err)
	}
}

// localSh runs script with sh on this machine, git isolated as in the
// sandbox.
func localSh(b *testing.B, script string, stdin io.Reader, stdout io.Writer) {
	b.Helper()
	cmd := exec.Command("/bin/sh", "-c", "set -e; "+gitIsolation+script)
	cmd.Env = append(os.Environ(), gitEnv...)
	cmd.Stdin, cmd.Stdout = stdin, stdout
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		b.Fatalf("%s: %v: %s", script, err, stderr.String())
	}
}

// run runs the local sh script with "$@" set to the ssh command line
// followed by the remote command (none when remote is "").
func (c sshClient) run(b *testing.B, script, remote string) {
	b.Helper()
	args := append([]string{"-c", "set -e; " + gitIsolation + script, "sh"}, c.argv...)
	if remote != "" {
		args = append(args, remote)
	}
	cmd := exec.Command("/bin/sh", args...)
	cmd.Env = append(os.Environ(), gitEnv...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		b.Fatalf("%s [remote: %s]: %v: %s", script, remote, err, stderr.String())
	}
}
