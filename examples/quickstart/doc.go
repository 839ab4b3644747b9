// Command quickstart runs airlock's main job end to end over SSH, with no
// setup and no network:
//
//	go run ./examples/quickstart [-keep] [-v] [-json]
//	go run ./examples/quickstart -ssh ALIAS [-ssh-config FILE] [-remote-dir DIR]
//
// By default the sandbox is remotetest, the in-process SSH server of
// stage/remote/remotetest, reached through remote.Dial like any SSH host;
// everything lives in one temporary directory, removed at the end unless
// -keep is given. With -ssh the same steps run against a real SSH sandbox,
// reached as `ssh ALIAS` reaches it: remote.LoadSSHConfig reads ALIAS's
// HostName, Port, User, IdentityFile, known_hosts and ProxyJump from
// ~/.ssh/config and /etc/ssh/ssh_config (or from -ssh-config FILE alone,
// as ssh -F) and uses the agent at $SSH_AUTH_SOCK; the host key is always
// checked. The sandbox workspace is -remote-dir, which must not exist yet
// (default /tmp/airlock-quickstart-<random>) and is removed at the end
// unless -keep is given.
//
// The steps, each checked by the code that runs it:
//
//  1. skills.Materialize the fixtures of testdata/skills (copied first, links
//     kept as links): two usable skills survive, the one whose SKILL.md is a
//     link is dropped with its reason, the planted link to a host secret is
//     left out, and the bundle holds no link and no byte of the secret; the
//     identity is path-free (the same selection under another state
//     directory has the same identity).
//  2. stage.Stage the bundle over SSH under the sandbox workspace's .airlock/
//     (sandbox.RuntimeDir); stage it again (Reused); change one skill file and
//     stage again (one file sent). The sandbox copy holds no link and no byte
//     of the secret.
//  3. Render the prompt for the sandbox (Bundle.Prompt of the staged path,
//     equal to Runtime.Rewrite of the host prompt) and print it on stdout.
//  4. session.Bind (bound to the staged bundle's skills identity), save the
//     v2 record, resume it, and refuse a resume under another model, then
//     under another skill set (release-notes deselected: drift in
//     skills_digest) (*session.DriftError).
//  5. workspace.Prepare a small git workspace (a commit, a dirty edit, an
//     untracked file) in the sandbox, then play the agent through the SSH
//     runner: read the skill file the prompt names, commit a change, write
//     report.md.
//  6. The agent delivers report.md by calling register_deliverable, the MCP
//     tool of deliverable/mcptool, served on the sandbox's own loopback
//     through the SSH connection (remote.Host.ServeInSandbox) and called with
//     the MCP SDK's client from the sandbox side: the file is read over SSH
//     and hashed on the host, a replay with the same idempotencyKey returns
//     the same receipt, a completion citing deliverable:<id> is validated,
//     then one citing a done child task's file too (and the child's file
//     alone is refused: it is context, not the delivery).
//  7. Round.Restore: the commit and the files come back, the user's dirty
//     edit and untracked file stay, .airlock/ does not come back, and git
//     remote is empty on both sides throughout.
//
// One progress line per step goes to stderr (with -v, slog debug records
// too); -json prints a machine-readable summary on stdout instead of the
// prompt. The exit status is 0 only when every step did what it says.
package main
