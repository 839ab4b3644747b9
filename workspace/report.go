package workspace

import (
	"bufio"
	"errors"
	"fmt"

	"github.com/airlockdev/airlock/internal/shell"
	"github.com/airlockdev/airlock/sandbox"
)

// The restore stream a sandbox sends, its report and its parser are the
// shell protocol's (shell.ReadRestoreHeader, shell.ParseReport).

// header is the parsed start of a restore stream.
type header = shell.RestoreHeader

// readHeader parses the start of a restore stream from br, leaving br at
// the payload (shell.ReadRestoreHeader): a stream that breaks the protocol
// is ErrHostile (and sandbox.ErrProtocol), and says nothing was written,
// as nothing is before the header is whole; one cut by the transport wraps
// sandbox.ErrTransport.
func readHeader(br *bufio.Reader, git bool) (header, error) {
	h, err := shell.ReadRestoreHeader(br, git)
	if errors.Is(err, sandbox.ErrProtocol) {
		return h, fmt.Errorf("%w (nothing was written)", hostile(err))
	}
	return h, hostile(err)
}

// cutStream is the error of a restore stream that ended early
// (shell.Cut): wrapping sandbox.ErrTransport when the transport cut it,
// else ErrHostile. Never both.
func cutStream(what string, err error) error { return hostile(shell.Cut(what, err)) }

// hostile gives an error of the shell protocol's parsers workspace's
// words: a protocol error (sandbox.ErrProtocol) is ErrHostile; any other
// (a cut stream: sandbox.ErrTransport or the context's) gets workspace's
// prefix.
func hostile(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrHostile):
		return err
	case errors.Is(err, sandbox.ErrProtocol):
		return fmt.Errorf("%w: %w", ErrHostile, err)
	}
	return fmt.Errorf("workspace: %w", err)
}

// reportReason says why a report record's entry is refused.
func reportReason(c byte) string {
	switch c {
	case shell.ReportHardLink:
		return "a regular file with several links"
	case shell.ReportSetID:
		return "a setuid, setgid or sticky file (written without those bits)"
	case shell.ReportSpecial:
		return "a FIFO, socket or device"
	case shell.ReportNotAdded:
		return "not added by the sandbox's git (a path git refuses, or a file it cannot read or convert)"
	case shell.ReportNestedGit:
		return whyNestedGit
	case shell.ReportSubmodule:
		return "a submodule (gitlink) directory: nothing in it comes back (a round carries neither a submodule's files nor its commits)"
	}
	return "in the runtime directory, which never comes back"
}

// whyRuntimeNotDir is the reason a sandbox's runtime directory that is not
// a directory (a link, a file) is refused.
const whyRuntimeNotDir = "the runtime directory is not a directory (a link or a file); it never comes back"

// writtenStripped reports whether a report record's entry may still be written
// (with the offending bits stripped): only a setuid, setgid or sticky file.
func writtenStripped(c byte) bool { return c == shell.ReportSetID }

// whyNestedGit is the reason a .git below the top of the sandbox's tree
// is refused: it is never written on the host (git would read it as a
// repository of its own), and its content is not looked at.
const whyNestedGit = "a .git directory (nested repository) is never restored"

// refuseReported lists the report's entries: the runtime directory's in
// res.Runtime (logged at debug level: staged assets live there), a runtime
// directory that is not one in res.Refused, the others in res.Refused
// unless excluded.
func (r *Round) refuseReported(special map[string]byte, res *Result) {
	for p, c := range special {
		switch {
		case c == shell.ReportRuntime && p != sandbox.RuntimeDir:
			res.Runtime = append(res.Runtime, p)
			r.o.log.Debug("runtime directory entry not restored", "round", r.rec.ID, "path", p)
		case c == shell.ReportRuntime:
			r.refuse(res, p, whyRuntimeNotDir)
		case !excluded(r.rec.Exclude, p):
			r.refuse(res, p, reportReason(c))
		}
	}
}

// refuse lists the sandbox entry p in res.Refused and logs why.
func (r *Round) refuse(res *Result, p, why string) {
	res.Refused = append(res.Refused, p)
	res.reason(p, why)
	r.o.log.Warn("refused sandbox entry", "round", r.rec.ID, "path", p, "reason", why)
}

// reason records why p was refused, keeping the first reason.
func (res *Result) reason(p, why string) {
	if res.Reasons == nil {
		res.Reasons = map[string]string{}
	}
	if _, ok := res.Reasons[p]; !ok {
		res.Reasons[p] = why
	}
}
