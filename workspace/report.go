package workspace

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"

	"github.com/airlockdev/airlock/internal/tree"
	"github.com/airlockdev/airlock/sandbox"
)

// The restore stream a sandbox sends (both kinds):
//
//	airlock-restore 1\n
//	report <n>\n
//	<n bytes of report records: <type><./path>NUL, type h, u, s or r
//	 (see findReport); a git sandbox's then G NUL and the paths its git
//	 did not add, NUL-terminated>
//	<tail line>\n
//	<payload>
//
// A git sandbox's tail is "nochange" (no payload) or "bundle <head|-> <snap>"
// followed by a git bundle; a plain sandbox's is "empty" or "tar" followed
// by a tar stream.
const (
	restoreMagic   = "airlock-restore 1"
	maxReportBytes = 16 << 20
	maxLineBytes   = 256
)

// header is the parsed start of a restore stream.
type header struct {
	special map[string]byte // path -> its report record type (h, u, s or r; see findReport)
	tail    string          // "nochange", "bundle", "empty" or "tar"
	head    string          // bundle: the sandbox HEAD, "" when unborn
	snap    string          // bundle: the snapshot commit
}

// readHeader parses the start of a restore stream from br, leaving br at
// the payload. Everything is bounded: lines by maxLineBytes, the report by
// maxReportBytes.
func readHeader(br *bufio.Reader, git bool) (header, error) {
	h := header{special: map[string]byte{}}
	l, err := readLine(br)
	if err != nil {
		return header{}, err
	}
	if l != restoreMagic {
		return header{}, fmt.Errorf("%w: the restore stream starts with %.80q, want %q", ErrHostile, l, restoreMagic)
	}
	if l, err = readLine(br); err != nil {
		return header{}, err
	}
	ns, ok := strings.CutPrefix(l, "report ")
	n, perr := strconv.Atoi(ns)
	if !ok || perr != nil || n < 0 || n > maxReportBytes || strconv.Itoa(n) != ns {
		return header{}, fmt.Errorf("%w: bad report line %.80q", ErrHostile, l)
	}
	rep := make([]byte, n)
	if _, err := io.ReadFull(br, rep); err != nil {
		return header{}, cutStream("the report ended early", err)
	}
	if h.special, err = parseReport(rep); err != nil {
		return header{}, err
	}
	if l, err = readLine(br); err != nil {
		return header{}, err
	}
	f := strings.Split(l, " ")
	switch {
	case git && len(f) == 1 && f[0] == "nochange", !git && len(f) == 1 && (f[0] == "empty" || f[0] == "tar"):
		h.tail = f[0]
	case git && len(f) == 3 && f[0] == "bundle" && (f[1] == "-" || isHex(f[1])) && isHex(f[2]):
		h.tail, h.snap = "bundle", f[2]
		if f[1] != "-" {
			h.head = f[1]
		}
	default:
		return header{}, fmt.Errorf("%w: bad restore tail line %.80q", ErrHostile, l)
	}
	return h, nil
}

// cutStream is the error of a restore stream that ended early: a
// transport failure when the command's run failed so (the pipe carries
// its error, which wraps sandbox.ErrTransport, or the context's), else the
// sandbox's broken protocol (ErrHostile). Never both.
func cutStream(what string, err error) error {
	if errors.Is(err, sandbox.ErrTransport) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("workspace: %s: %w", what, err)
	}
	return fmt.Errorf("%w: %s: %v", ErrHostile, what, err)
}

func readLine(br *bufio.Reader) (string, error) {
	var b []byte
	for {
		c, err := br.ReadByte()
		if err != nil {
			return "", cutStream("the restore stream ended inside a header line", err)
		}
		if c == '\n' {
			return string(b), nil
		}
		if len(b) >= maxLineBytes {
			return "", fmt.Errorf("%w: a restore header line is longer than %d bytes", ErrHostile, maxLineBytes)
		}
		b = append(b, c)
	}
}

// parseReport reads find records. A record whose path is not a clean
// relative path, or whose type is unknown, is a protocol error, and so is
// a runtime-directory record (r) for a path outside the runtime directory.
// A git sandbox's report ends with a G record (no path) and then the
// paths, NUL-terminated and without "./", that its git did not add to the
// snapshot (an invalid path for git, an unreadable file), recorded as g
// unless an earlier record names them.
func parseReport(rep []byte) (map[string]byte, error) {
	out := map[string]byte{}
	if len(rep) == 0 {
		return out, nil
	}
	if rep[len(rep)-1] != 0 {
		return nil, fmt.Errorf("%w: the report does not end with NUL", ErrHostile)
	}
	notAdded := false
	for _, rec := range bytes.Split(rep[:len(rep)-1], []byte{0}) {
		if notAdded {
			p := strings.TrimSuffix(string(rec), "/") // a directory git could not add as a submodule
			if !tree.ValidPath(p) {
				return nil, fmt.Errorf("%w: the report names %.120q, not a clean relative path", ErrHostile, rec)
			}
			if out[p] == 0 {
				out[p] = 'g'
			}
			continue
		}
		if len(rec) == 1 && rec[0] == 'G' {
			notAdded = true
			continue
		}
		if len(rec) < 3 {
			return nil, fmt.Errorf("%w: a report record is too short", ErrHostile)
		}
		p, ok := strings.CutPrefix(string(rec[1:]), "./")
		if !ok || !tree.ValidPath(p) {
			return nil, fmt.Errorf("%w: the report names %.120q, not a clean relative path", ErrHostile, rec[1:])
		}
		switch rec[0] {
		case 'h', 'u', 's':
		case 'n':
			if path.Base(p) != ".git" || p == ".git" {
				return nil, fmt.Errorf("%w: the report names %.120q as a nested .git", ErrHostile, p)
			}
		case 'r':
			if p != sandbox.RuntimeDir && !strings.HasPrefix(p, sandbox.RuntimeDir+"/") {
				return nil, fmt.Errorf("%w: the report names %.120q as a runtime directory entry", ErrHostile, p)
			}
		default:
			return nil, fmt.Errorf("%w: unknown report record type %q", ErrHostile, rec[0])
		}
		out[p] = rec[0]
	}
	return out, nil
}

// reportReason says why a report record's entry is refused.
func reportReason(c byte) string {
	switch c {
	case 'h':
		return "a regular file with several links"
	case 'u':
		return "a setuid, setgid or sticky file (written without those bits)"
	case 's':
		return "a FIFO, socket or device"
	case 'g':
		return "not added by the sandbox's git (a path git refuses, or an unreadable file)"
	case 'n':
		return whyNestedGit
	}
	return "in the runtime directory, which never comes back"
}

// writtenStripped reports whether a report record's entry may still be written
// (with the offending bits stripped): only a setuid, setgid or sticky file.
func writtenStripped(c byte) bool { return c == 'u' }

// whyNestedGit is the reason a .git below the top of the sandbox's tree
// is refused: it is never written on the host (git would read it as a
// repository of its own), and its content is not looked at.
const whyNestedGit = "a .git directory (nested repository) is never restored"

var errTruncated = errors.New("sandbox stream truncated at the byte limit")

// refuseReported lists the report's entries in res.Refused: runtime
// directory entries always (logged at debug level: staged assets live
// there), the others unless excluded.
func (r *Round) refuseReported(special map[string]byte, res *Result) {
	for p, c := range special {
		switch {
		case c == 'r':
			res.Refused = append(res.Refused, p)
			res.reason(p, reportReason(c))
			r.o.log.Debug("runtime directory entry not restored", "round", r.rec.ID, "path", p)
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
