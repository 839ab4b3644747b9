// Command bwrap runs an "agent" in a really isolated local sandbox made by
// bubblewrap (Debian's bubblewrap package), with skills and a workspace
// staged into it through airlock:
//
//	go run ./examples/bwrap [-keep] [-json] [-bwrap PATH] [-skills DIR]
//
// The sandbox (Box) is a fresh bwrap per command, sharing one private
// writable directory, seen at /work: read-only /usr (and the host's
// top-level links into it), a read-only root, a private /tmp, /proc and
// /dev, every namespace unshared (no network, a new PID namespace), no
// host /etc, /home or /root, and always --unshare-pid --die-with-parent
// --new-session --cap-drop ALL (as root, without --cap-drop ALL the
// sandboxed process can remount a read-only bind writable). bwrap itself
// starts with an empty environment, since its own environ is readable
// inside as /proc/1/environ; from a goroutine locked to its OS thread,
// since the parent-death signal is per thread; and with --json-status-fd,
// which tells bwrap failing to build the sandbox (*StartError) from a
// command that exited 1. New probes every one of these guarantees in a
// sandbox made with exactly those flags and returns an *UnsupportedError
// naming the one this machine cannot give: the example never runs with
// weaker isolation. Box.Runner speaks sandbox.Exec's protocol (env on
// stdin, a nonce-tagged completion record) through sandbox.FromExec.
//
// The steps, each checked by the code that runs it:
//
//  1. skills.Materialize two fixtures of testdata/skills and stage.Stage the
//     bundle (through stage.Over, a Bridge over the sandbox's Runner) under
//     /work/ws/.airlock; workspace.Prepare a git workspace at /work/ws.
//  2. The agent tries to read a host secret (a file outside the work
//     directory, by its host path), list /home and /root, follow links
//     planted in its directory to the secret (absolute and relative), write
//     through a planted link to a host directory, to a host path, to /usr
//     and to /, remount /usr writable, reach a listener on the host's
//     loopback, see the host's process, and read bwrap's environment. Each
//     attempt must fail — the program first checks from the host that the
//     links and the listener work without the sandbox, so that a denial is
//     the sandbox's doing — and nothing may appear on the host. Then it
//     reads the staged skill, commits, and writes report.md.
//  3. Round.Restore brings the commit and report.md back.
//  4. deliverable.Register report.md from the sandbox workspace (read
//     through the Runner, hashed on the host).
//
// The exit status is 0 only when every step did what it says.
package main
