// Package shell is the one home of the shell protocol that talks to a
// sandbox that runs POSIX sh: every script airlock's packages send and
// every parser of what comes back.
//
//   - tar.go: the tar stream the host writes (layout, carried entries, the
//     completion marker) and the hostile readers of the tar streams a
//     sandbox sends back (Members, ReadTar, ReadLimited);
//   - workspace.go, restore.go, report.go, staged.go: package workspace's
//     probe, git and plain prepares and restores, the restore stream
//     ("airlock-restore 1"), its report of entries no tar header shows and
//     a git sandbox's staged section (its index against the baseline's);
//   - file.go: package deliverable's file command ("airlock-file-v1"), its
//     reports and a bounded collector of them;
//   - stage.go: package stage's probe reply, ready/carried/published lines,
//     send report and fetch framing, with bounded headers and trailers;
//   - stageroot.go, stagepublish.go, stageprune.go: stage.Bridge's scripts
//     and the names it reserves under a stage root: the probe, the sweep
//     of what dead processes left, the send command with its carry of
//     unchanged files (PlanCarry), the publish and the cleanup, and the
//     unstage's listing (with its NUL-list parser) and removal;
//   - wrap.go, wrap_exec.go: the env prelude (env on stdin), remote.Host's
//     supervisor, its header, its session command and the script that
//     stops it from a second session, and sandbox.Exec's wrapper (the
//     nonce-tagged completion record, the in-sandbox watchdog, the kill by
//     run id);
//   - watch.go: sandbox.Watch's end line (the wrapper that reports a
//     command's end on stderr, and the writer that finds it);
//   - process.go: sandbox.Start's agent-process protocol (the wrapper that
//     starts a command in a session of its own, tagged, and reports it in
//     a bounded header line; the scripts that signal and count its
//     processes through /proc; the strict parsers of both replies);
//   - quote.go, buffer.go: sh quoting (Quote, and QuoteWord, which leaves
//     safe words bare) and bounded output buffers (a reply over its bound
//     is ErrOutputTooLarge, a protocol break).
//
// stage.Bridge and stage.Dir (the names under a stage root), remote.Host
// (its wrapper: EnvReader, HeaderScript, Supervise; its staging through
// Bridge), sandbox (Exec, Start, Watch), workspace and deliverable all
// speak it; none of them has a script or a reply parser of its own.
//
// Everything read from a sandbox is hostile: ReadTar rejects member names
// that are absolute, unclean or leave the top directory, reports links and
// special files by type and never resolves them, and callers bound what they
// keep. One error class per failure kind: a reply that breaks the protocol
// is an error that errors.Is matches to ErrProtocol (a package gives it its
// own name with ProtocolSentinel: workspace.ErrHostile,
// deliverable.ErrProtocol); a reply cut by the transport keeps the
// transport's error (ErrTransport, or the context's), never ErrProtocol,
// and the reply of a command whose run failed on the transport by itself
// is not judged at all (Unjudged; a parser that refused it while the
// command ran lets the command end first: Settle).
//
// Every script is POSIX sh: the tests parse each (scriptSamples) with
// dash -n, busybox sh -n and sh -n, and the packages' tests run them under
// dash and busybox sh.
package shell
