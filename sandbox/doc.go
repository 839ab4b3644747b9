// Package sandbox is the vocabulary every airlock package shares, and the
// runners that reach a sandbox: the ground floor of the module, importing
// no other public airlock package.
//
// The words: a [Runner] runs one POSIX sh [Command] (script, env, working
// directory, stdin, stdout, stderr) in the sandbox. A script that ran and
// failed is an [*ExitError]; a command that could not be run or followed to
// its end is [ErrTransport]; a sandbox that answered but broke a protocol
// (a reply that does not parse, a tar stream that leaves its directory) is
// [ErrProtocol]. A control step — a short operation such as a setup, a
// probe, an input delivery — runs under [Control], with a deadline of at
// most [MaxControlTimeout] (30 s) enforced even when the Runner ignores its
// context; [Watch] bounds the end of a data command once its input is
// delivered. [Retryable] says which errors may succeed if tried again
// unchanged. [RuntimeDir] is the name reserved for airlock's own files in a
// sandbox directory and a work tree; [Progress] is what long operations
// report.
//
// The runners:
//   - [Local] runs scripts with /bin/sh on this machine (no isolation), with
//     a minimal environment unless [WithEnviron] says otherwise.
//   - [Exec] runs them through any CLI exec engine — kubectl, docker,
//     podman, bwrap — as `argv... sh -c <wrapper>`; [FromExec] does the same
//     through a provider SDK's exec call. The wrapper carries the env on
//     stdin (never in an argv), reports the script's status in a completion
//     record tagged with a per-call nonce (no record is ErrTransport), runs a
//     watchdog for the control deadline inside the sandbox, and on
//     cancellation kills the sandbox-side process group by a second exec;
//     a [*StopError] says whether that termination was verified.
//   - remote.Host (package stage/remote) is a Runner over one SSH
//     connection.
//
// Every Runner passes stagetest.TestRunner, which checks the contract
// written on [Runner].
//
// Agent processes, which run for hours, are started with [Start]: input
// delivery ([Process.Write]) is a control step, and [Process.Stop] ends the
// whole process tree (TERM, a grace, KILL) and reports in [Exit].Verified
// whether the sandbox confirmed that none of it is left.
//
// The shell protocol itself — every script airlock sends and every parser
// of what comes back — lives in one internal package (internal/shell) that
// this package and the others share.
package sandbox
