// Command stage copies one host directory into a sandbox with stage.Stage
// and reports what it did:
//
//	go run ./examples/stage -src DIR -to DEST [-name NAME] [-links skip|reject|within] [-json] [-ssh-config FILE] [-debug]
//
// DEST is the stage root; the copy lands in DEST/NAME (NAME defaults to
// the base name of DIR). DEST is either a local directory (its parent must
// exist; the parent is the sandbox, stage.NewDir, so nothing is written
// outside it) or an SSH destination, ssh://[user@]host[:port]/abs/path,
// reached with stage/remote the way `ssh host` reaches it: host is looked
// up in ~/.ssh/config and /etc/ssh/ssh_config (or in -ssh-config FILE
// alone, as ssh -F) by remote.LoadSSHConfig — HostName, Port, User,
// IdentityFile, the agent at $SSH_AUTH_SOCK, known_hosts, ProxyJump — and
// the user and port in DEST win over the file's. The host key is always
// checked (StrictHostKeyChecking no is refused).
//
// The metadata index is kept under -state DIR (default
// <user cache dir>/airlock/stage-index, stage.OpenIndex), so a later run on
// an unchanged DIR costs a metadata walk and one round trip, and one on a
// changed DIR reads only the files whose stamps moved. -debug logs each
// step (probe, compare, publish) on stderr with the time it took.
//
// It prints the staged path, the manifest digest, the files staged and
// sent, the bytes, whether the sandbox copy was reused and the time taken,
// as text or, with -json, as one JSON object. On failure it prints one line
// and exits 1.
//
// Progress (stage.WithProgress) goes to stderr, so stdout keeps exactly the
// report: -progress auto (the default) draws a progress bar
// (github.com/schollz/progressbar) when stdout and stderr are both
// terminals, writes plain lines otherwise ("progress NAME 40% (2/3 files,
// 7/17 bytes)", one when the stage starts and one each time it passes
// another tenth, for logs and pipes), and shows nothing with -json;
// -progress bar, lines or off chooses one. The code is in progress.go.
//
// bench.sh times it against tar over ssh, rsync, scp and cp -a on a
// throwaway loopback sshd.
package main
