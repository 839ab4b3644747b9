// Package remotetest is an in-process SSH server that stands in for a remote
// sandbox in tests and in the examples.
//
// A Server listens on 127.0.0.1 only, runs every "exec" request as
// /bin/sh -c COMMAND in its directory, serves the "sftp" subsystem with
// github.com/pkg/sftp, serves remote forwarding ("tcpip-forward" on
// loopback addresses and "streamlocal-forward@openssh.com" on absolute
// socket paths, each connection relayed over a channel it opens to the
// client; WithoutForwarding refuses both), and accepts exactly one
// ephemeral ed25519 client key.
// Server.Config returns a client configuration that trusts exactly this
// server's ephemeral host key (through remote.FixedHostKey, so a wrong key
// fails with the production *remote.HostKeyError, fingerprint and advice
// included) and authenticates with that client key, so a test never needs
// key files, known_hosts or InsecureIgnoreHostKey:
//
//	func TestStage(t *testing.T) {
//		srv := remotetest.NewServer(t) // closed when the test ends
//		host := srv.Dial(t)            // remote.Dial with srv.Config(); closed when the test ends
//		// ... stage into srv.Dir() through host and check the result on disk.
//	}
//
// (srv.Dial is remote.Dial(t.Context(), srv.Addr(), srv.Config()) with the
// error and the Close checked.) The server serves session channels and the
// forwards only: a "direct-tcpip" channel (ssh -L, ssh.Client.Dial) is
// refused, so a test's agent-side client reaches a forwarded address
// directly on this machine, where the server runs.
//
// Faults are injected with options: WithLatency delays every byte in both
// directions without limiting throughput, WithHang makes matching exec
// requests never answer, and WithDropAfter cuts each connection after a given
// number of client-to-server bytes. Execs and Conns count what the server
// received, so a test can pin how many round trips an operation costs.
//
// # Guarantees
//
//   - Keys live in memory only; nothing is written outside Dir.
//   - Each command runs in its own process group. A "signal" request is sent
//     to the whole group; when the client closes the channel or the
//     connection, or the server is closed, the group is killed with SIGKILL.
//   - A command's stdout and stderr are forwarded in full before its
//     "exit-status" (or "exit-signal", when a signal killed it) is sent; like
//     OpenSSH, the server waits for the command's output to reach end of file,
//     so a background process that keeps stdout open keeps the session open.
//   - "env" requests are refused and never applied, as most real servers do;
//     "pty-req", "shell" and unknown channel requests are refused too.
//   - Close kills every running command, closes every connection and returns
//     only when every goroutine the server started has finished. A
//     connection's forwards are closed when it ends.
//
// # Non-guarantees
//
// The server is not a sandbox: commands run as the test process's user with
// its environment and can read and write anything that user can, and SFTP is
// rooted at "/" (relative paths resolve in Dir). A process that leaves the
// command's process group (setsid) is not killed. Authentication accepts any
// user name. Nothing here is meant to face an untrusted network.
package remotetest
