// Package shell is the one home of the shell protocol that stages
// trees into a sandbox that runs POSIX sh: the tar stream the host writes
// (layout, carried entries, the completion marker), the hostile reader of the
// tar streams a sandbox sends back, sh quoting, bounded output buffers, and
// the agent-process protocol of sandbox.Start (process.go: the wrapper that
// starts a command in a session of its own, tagged, and reports it in a
// bounded header line; the scripts that signal and count its processes
// through /proc; the strict parsers of both replies).
//
// stage.Bridge, remote.Host (through Bridge) and workspace all speak it; none
// of them has a tar writer or reader of its own.
//
// Everything read from a sandbox is hostile: ReadTar rejects member names
// that are absolute, unclean or leave the top directory, reports links and
// special files by type and never resolves them, and callers bound what they
// keep.
package shell
