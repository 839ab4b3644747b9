// Package remote makes an SSH machine a sandbox: [Host] is one SSH
// connection (golang.org/x/crypto/ssh, with github.com/pkg/sftp where it
// saves round trips) that is both a sandbox.Runner — scripts run by the
// server's /bin/sh — and a stage.Target, speaking the shell protocol of
// stage.Bridge over that runner. workspace and deliverable reach the
// sandbox through the same Host.
//
// [LoadSSHConfig] builds the address and [Config] from the user's OpenSSH
// configuration, the way `ssh alias` connects: HostName, Port, User,
// IdentityFile and IdentitiesOnly, the agent at SSH_AUTH_SOCK, the
// known_hosts files under StrictHostKeyChecking yes or accept-new (never
// no), ProxyJump hops ([Config].Jumps), ConnectTimeout and
// ServerAliveInterval:
//
//	addr, cfg, err := remote.LoadSSHConfig("sandbox")
//	host, err := remote.Dial(ctx, addr, cfg)
//
// Guarantees:
//   - The server's host key is always verified: [Config].HostKeyCallback is
//     required ([KnownHosts], [FixedHostKey], or LoadSSHConfig's), and so is
//     each ProxyJump hop's; there is no insecure default, and a refused key
//     is a [*HostKeyError] naming the host, the presented key's SHA256
//     fingerprint and how to trust it.
//   - Command.Env values travel on the session's stdin, never in the exec
//     request, an SSH env request or any argv; a bad key is refused before
//     anything is sent.
//   - Every control operation runs under the control deadline
//     (Config.ControlTimeout, at most sandbox.MaxControlTimeout; the Host is
//     a sandbox.ControlTimeouter, so workspace and deliverable use it too)
//     even when the server never answers; a
//     cancelled command is stopped with everything it started, on servers
//     that ignore signal requests (OpenSSH) too; keepalives find a dead
//     peer, after which every call fails with sandbox.ErrTransport.
//   - Output read from the sandbox for control operations is bounded.
//   - [Host.ServeInSandbox] serves an http.Handler on a loopback port or a
//     unix socket inside the sandbox through the same SSH connection (remote
//     forwarding), so the sandbox reaches it with no route to the host; the
//     forward ends with its context or the Host, and the sandbox's
//     connections, headers and bodies are bounded (MaxForwardConns,
//     MaxForwardHeaderBytes, MaxForwardBodyBytes).
//
// Where SFTP is used: the stored manifests of Probe (no process in the
// sandbox), the read-back of WithVerify (Fetch) for copies of at most 64
// files, and deliverable.RemoteWorkspace's file reads. A larger read-back
// and every write (the tree, large files included) travel as one tar
// stream over an exec session: measured over a real sshd, SFTP was 4x
// slower for the standard 2,000-file tree and no faster for a 256 MiB file
// (fetch.go), and the publish must stay the shell protocol's, since SFTP
// has no exchange-rename.
//
// Non-guarantees: the sandbox owns its file system (see stage.Bridge);
// SFTP has no O_NOFOLLOW, so what is read over SFTP is checked with Lstat
// first and again on the open handle; a link swapped in between can make
// the host read another file of the sandbox, which then fails its hash
// check. Only LoadSSHConfig reads the environment (the home directory,
// SSH_AUTH_SOCK, the current user; options replace the first two); Dial
// and the Host read none: with a hand-built Config, an ssh-agent is used
// when the caller passes agent.NewClient(...)'s signers in Config.Auth.
// LoadSSHConfig understands the ssh_config keywords its doc lists, and
// nothing else (no ProxyCommand, no Match exec, no certificates).
//
// stage/remote/remotetest is an in-process SSH server for tests and the
// examples' embedded sandbox.
package remote
