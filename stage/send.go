package stage

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"
)

// One publish over a shell target runs two sandbox commands: the send
// command (setup, carry, transfer) and the publish (a control operation).
// The send command reports on stdout as it goes:
//
//	airlock-probe <caps>   only when the Bridge does not know the sandbox yet
//	airlock-ready          the temporary directory exists (exclusive mkdir)
//	<sha256> <path> ...    the carried files' hashes, when files are carried
//	airlock-carried        the carry is over
//
// and then reads the tar stream of what was not carried on its stdin. The
// host waits for airlock-ready under the control deadline, exactly as it
// waited for the separate setup command it replaces, so a sandbox that
// never answers is still a transport failure within the deadline; once the
// directory exists the command is a data command, bounded by the caller's
// context only.
const (
	readyLine   = "airlock-ready"
	carriedLine = "airlock-carried"
)

// maxEmbeddedCarry bounds the carry part of a send command's script (the
// quoted names of the unchanged files). A longer list is carried by a
// command of its own, which reads its script on stdin, while the send
// command waits for the stream.
var maxEmbeddedCarry = 64 << 10 // a variable so that tests can lower it

// carryFuncs defines the carry's shell functions. H hashes its arguments
// (openssl when the sandbox has it, which is several times faster than
// most sha256sum builds, else sha256sum; both print "<hex> <flag><path>").
// C MODE NAMES... copies NAMES from the previous copy (the working
// directory) into $n with tar, drops whatever arrived that is not a
// regular file, sets the manifest's MODE and hashes the rest. Errors are
// not fatal: a file whose hash is not reported is sent.
const carryFuncs = `H() { if command -v openssl >/dev/null 2>&1; then openssl dgst -sha256 -r "$@"; else sha256sum -- "$@"; fi; }
C() { m=$1; shift
tar -c -f - -- "$@" 2>/dev/null | (cd "$n" && tar -x -o -f - 2>/dev/null)
(cd "$n" && for f; do if [ -L "$f" ] || { [ -e "$f" ] && [ ! -f "$f" ]; }; then rm -rf -- "$f"; fi; done; chmod "$m" -- "$@"; H "$@") 2>/dev/null; }
`

// carryPlan is the carry part of a publish: the files to copy inside the
// sandbox, as calls of C in batches, and the hash each must have.
type carryPlan struct {
	calls []string          // "C 644 'a' 'b'"; each under maxCarryArgs bytes
	want  map[string]string // path → lowercase hex SHA-256
	size  int               // bytes of calls
}

// planCarry plans carrying files. Files whose names the hash tools would
// print escaped, or that tar would read as options, are left out (sent).
func planCarry(files []UnchangedFile) carryPlan {
	p := carryPlan{want: make(map[string]string, len(files))}
	byMode := make(map[string][]string)
	var modes []string
	for _, f := range files {
		if strings.ContainsAny(f.Path, "\\\n\r") || strings.HasPrefix(f.Path, "-") {
			continue
		}
		m := fmt.Sprintf("%o", f.Mode.Perm())
		if _, ok := byMode[m]; !ok {
			modes = append(modes, m)
		}
		byMode[m] = append(byMode[m], qa(f.Path))
		p.want[f.Path] = f.SHA256
	}
	sort.Strings(modes)
	for _, m := range modes {
		var sb strings.Builder
		flush := func() {
			if sb.Len() > 0 {
				p.calls = append(p.calls, sb.String())
				p.size += sb.Len() + 1
				sb.Reset()
			}
		}
		for _, a := range byMode[m] {
			if sb.Len() > 0 && sb.Len()+1+len(a) > maxCarryArgs {
				flush()
			}
			if sb.Len() == 0 {
				sb.WriteString("C " + m)
			}
			sb.WriteString(" " + a)
		}
		flush()
	}
	return p
}

// qa quotes p as one shell word, leaving a name of only safe characters
// bare: a carry names thousands of files, and its script may be quoted
// again by a Runner (remote.Host quotes it twice), which multiplies every
// quote.
func qa(p string) string {
	for i := 0; i < len(p); i++ {
		c := p[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("._/-+,@%:", c) >= 0) {
			return q(p)
		}
	}
	if p == "" || p[0] == '-' {
		return q(p)
	}
	return p
}

// script returns the carry as shell lines: from the previous copy dst into
// n, reporting the hashes, then the end marker. It leaves the working
// directory where it found it.
func (p carryPlan) script(n, dst string) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "n=%s\nif [ \"$ah\" = 1 ] && mkdir -p \"$n\" && cd %s 2>/dev/null; then\n", q(n), q(dst))
	sb.WriteString(carryFuncs)
	for _, c := range p.calls {
		sb.WriteString(c)
		sb.WriteByte('\n')
	}
	sb.WriteString("cd / || exit 1\nfi\n")
	return sb.String()
}

// sendReport parses what a send (or carry) command prints on stdout.
type sendReport struct {
	want    map[string]string
	caps    string        // the word after probeHeader; "" when none came
	ready   chan struct{} // closed at readyLine
	carried chan struct{} // closed at carriedLine
	done    chan struct{} // closed when stdout ends
	hashes  map[string]bool
	err     error // a malformed report; set before done is closed
}

func newSendReport(want map[string]string) *sendReport {
	return &sendReport{want: want, ready: make(chan struct{}), carried: make(chan struct{}), done: make(chan struct{}), hashes: make(map[string]bool)}
}

// maxReportLine bounds one line of a send command's report (a hash line
// holds a path, at most a few KiB).
const maxReportLine = 8 << 10

// read parses r until it ends. Lines before readyLine may only be the
// capability header; lines between readyLine and carriedLine are hash
// lines (at most one per wanted file, plus a little); after carriedLine
// nothing is expected and at most a little is accepted.
func (s *sendReport) read(r io.Reader, onErr func()) {
	defer close(s.done)
	br := bufio.NewReaderSize(r, 16<<10)
	phase := 0 // 0: before ready, 1: carrying, 2: after carried
	lines := 0
	fail := func(format string, a ...any) {
		if s.err == nil {
			s.err = fmt.Errorf(format, a...)
			onErr()
		}
		_, _ = io.Copy(io.Discard, r) // let the command finish writing
	}
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) || len(line) > maxReportLine {
			fail("a report line of more than %d bytes", maxReportLine)
			return
		}
		if len(line) > 0 && line[len(line)-1] == '\n' {
			l := string(line[:len(line)-1])
			lines++
			switch {
			case phase == 0 && l == readyLine:
				phase = 1
				close(s.ready)
			case phase == 0 && strings.HasPrefix(l, probeHeader) && s.caps == "":
				s.caps = strings.TrimPrefix(l, probeHeader)
			case phase == 0:
				fail("unexpected output before the temporary directory was made: %q", truncate(l, 80))
				return
			case phase == 1 && l == carriedLine:
				phase = 2
				close(s.carried)
			case phase == 1:
				if lines > len(s.want)+16 {
					fail("more hash lines than files carried")
					return
				}
				if len(l) >= 67 && l[64] == ' ' && (l[65] == ' ' || l[65] == '*') {
					if p := l[66:]; s.want[p] == l[:64] {
						s.hashes[p] = true
					}
				}
			default:
				if lines > len(s.want)+64 {
					fail("output after the carry")
					return
				}
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				s.err = fmt.Errorf("reading the report: %w", err)
			}
			return
		}
	}
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// sendOutcome is what send reports besides its error.
type sendOutcome struct {
	// created: the temporary directory was made and the send command has
	// ended (or never got that far), so removing tmp is safe.
	created bool
	// uncertain: the send command may still be running (or its outcome is
	// unknown after a control timeout): send nothing more to tmp.
	uncertain bool
}

// send runs the send command for src into tmp: setup (learning the
// sandbox's tools when the Bridge does not know them), the carry of
// unchanged files from dst, and the tar stream of the rest.
func (b *Bridge) send(ctx context.Context, root, tmp, dst string, src *Tree) (sendOutcome, error) {
	c, known := b.knownCaps()
	var plan carryPlan
	if u := src.Unchanged(); len(u) > 0 && (!known || c.sha256) {
		plan = planCarry(u)
	}
	embed := plan.size <= maxEmbeddedCarry

	var sb strings.Builder
	if !known {
		// Learn the tools first; refuse before changing anything when one
		// is missing (exit 97, the header names them).
		sb.WriteString(detectScript)
		fmt.Fprintf(&sb, "echo \"%s$c\"\ncase \"$c\" in *' '*) exit 97;; esac\nah=$s\n", probeHeader)
	} else if c.sha256 {
		sb.WriteString("ah=1\n") // the sandbox can hash: carry
	}
	sb.WriteString("umask 022\n")
	if parent := path.Dir(root); parent != "/" {
		fmt.Fprintf(&sb, "p=%s\n[ -d \"$p\" ] || mkdir -p \"$p\" || exit 1\n", q(parent))
	}
	// A link or non-directory at the root is replaced, never followed.
	fmt.Fprintf(&sb, "r=%s\nif [ -L \"$r\" ] || { [ -e \"$r\" ] && [ ! -d \"$r\" ]; }; then rm -f \"$r\" || exit 1; fi\n", q(root))
	sb.WriteString("[ -d \"$r\" ] || mkdir \"$r\" || exit 1\n")
	sb.WriteString(sweepFuncs)
	sb.WriteString(sweepScript(b.inflight.under(root)))
	// The owner file names the process that writes into tmp (this shell,
	// then tar through exec), so that a later setup can tell a cut
	// transfer's directory from a live one (sweepScript); tmp never exists
	// without it (mkOwnedScript).
	sb.WriteString(mkOwnedScript(tmp))
	fmt.Fprintf(&sb, "echo %s\numask 0\n", readyLine)
	// What the sweep moved away is deleted now, outside the control
	// deadline (a data step, bounded by the caller's context).
	sb.WriteString("D\n")
	if len(plan.want) > 0 && embed {
		sb.WriteString(plan.script(tmp+"/new/tree", dst))
	}
	fmt.Fprintf(&sb, "echo %s\ncd %s || exit 1\nexec tar -x -o -f -\n", carriedLine, q(tmp))

	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw, err := os.Pipe()
	if err != nil {
		return sendOutcome{}, fmt.Errorf("creating a pipe for the tar stream: %w", err)
	}
	growPipe(pw)
	stopWriting := func() {
		_ = pw.SetWriteDeadline(time.Now())
		pw.Close()
	}
	outR, outW := io.Pipe()
	rep := newSendReport(plan.want)
	go rep.read(outR, cancel)
	stderr := &limitedBuffer{Max: 4 << 10, Truncate: true}
	cmd := Command{Script: sb.String(), Stdin: pr, Stdout: outW, Stderr: stderr}
	done := make(chan error, 1)
	// Once the command has the stream's last byte, the wait for the
	// report's end and the command's exit is a control step.
	x := Watch(dctx, b.r, cmd, WatchOptions{Op: "sending the tree to " + tmp, Deadline: b.timeout, After: func(err error) {
		pr.Close()
		outW.Close()
		done <- err
	}})
	// wait waits for the command after it was told to stop.
	wait := func() (error, bool) {
		stopWriting()
		t := time.NewTimer(b.stopGrace())
		defer t.Stop()
		select {
		case err := <-done:
			<-rep.done
			return err, true
		case <-t.C:
			return nil, false
		}
	}
	left := func(op string) string {
		return fmt.Sprintf("%s: the sandbox command did not end within %s of being stopped and may still be writing; its temporary directory %s is left behind: remove it by hand", op, b.stopGrace(), tmp)
	}

	// Setup: a control operation.
	op := "creating temporary directory " + tmp
	timer := time.NewTimer(b.timeout)
	defer timer.Stop()
	var rerr error
	ended := false
	select {
	case <-rep.ready:
	case rerr = <-done:
		ended = true
		<-rep.done
	case <-timer.C:
		cancel()
		if _, ok := wait(); !ok {
			return sendOutcome{uncertain: true}, b.timeoutErr(op)
		}
		return sendOutcome{uncertain: true}, b.timeoutErr(op)
	case <-ctx.Done():
		cancel()
		if _, ok := wait(); !ok {
			return sendOutcome{uncertain: true}, fmt.Errorf("%s: %w (%w: %s)", op, ctx.Err(), ErrTransport, left(op))
		}
		// The exclusive mkdir of a fresh random name either happened or
		// not, and the command has ended: removing that name is safe.
		return sendOutcome{created: true}, fmt.Errorf("%s: %w", op, ctx.Err())
	}
	if !known {
		if w := rep.caps; len(w) >= 2 && strings.Trim(w[:2], "01") == "" {
			b.setCaps(sandboxCaps{sha256: w[0] == '1', exchange: w[1] == '1'}, w[2:])
		}
		if c, ok := b.knownCaps(); ok && c.missing != "" {
			return sendOutcome{}, c.missingErr()
		}
		if _, ok := b.knownCaps(); !ok {
			if ended && rerr != nil {
				return sendOutcome{}, b.classify(ctx, nil, op, rerr, stderr)
			}
			cancel()
			_, ok := wait()
			return sendOutcome{created: ok, uncertain: !ok}, fmt.Errorf("%w: %s: the setup command did not report what the sandbox offers", ErrTransport, op)
		}
	}
	readySeen := false
	select {
	case <-rep.ready:
		readySeen = true // also when the command got past the setup and then ended
	default:
	}
	if ended && !readySeen {
		if rep.err != nil {
			return sendOutcome{}, fmt.Errorf("%w: %s: %w", ErrTransport, op, rep.err)
		}
		if rerr == nil {
			return sendOutcome{created: true}, fmt.Errorf("%w: %s: the sandbox command ended before it made the directory", ErrTransport, op)
		}
		return sendOutcome{}, b.classify(ctx, nil, op, rerr, stderr) // not created by us
	}

	// The carry and the transfer: data, bounded by ctx only.
	op = "sending the tree to " + tmp
	carried := rep.hashes
	if len(plan.want) > 0 && !embed {
		if c, _ := b.knownCaps(); c.sha256 {
			var uncertain bool
			carried, uncertain, err = b.carry(ctx, tmp, dst, plan)
			if err != nil {
				cancel()
				_, ok := wait()
				return sendOutcome{created: ok && !uncertain, uncertain: uncertain || !ok}, err
			}
		}
	}
	if !ended {
		select {
		case <-rep.carried:
		case rerr = <-done:
			<-rep.done
			ended = true
		case <-ctx.Done():
			cancel()
			if _, ok := wait(); !ok {
				return sendOutcome{uncertain: true}, fmt.Errorf("%s: %w (%w: %s)", op, ctx.Err(), ErrTransport, left(op))
			}
			return sendOutcome{created: true}, fmt.Errorf("%s: %w", op, ctx.Err())
		}
	}
	if ended {
		if rep.err != nil {
			return sendOutcome{created: true}, fmt.Errorf("%w: %s: %w", ErrTransport, op, rep.err)
		}
		if rerr != nil {
			return sendOutcome{created: true}, b.classify(ctx, nil, op, rerr, stderr)
		}
		return sendOutcome{created: true}, fmt.Errorf("%w: %s: the sandbox command exited before reading the stream", ErrTransport, op)
	}

	wdone := make(chan error, 1)
	go func() {
		_, werr := writeTarStream(dctx, sink{pw}, src, carried)
		if werr != nil {
			cancel() // stop the sandbox side before it sees the end of the stream
		}
		if cerr := pw.Close(); werr == nil && cerr == nil {
			x.ArmWhenRead(pr) // the stream's last byte is written: armed once the command has read it
		}
		wdone <- werr
	}()
	select {
	case rerr = <-done:
		<-rep.done
		stopWriting()
	case <-x.Expired():
		// The command has all of the stream and has not ended within the
		// control deadline: its outcome is unknown; publish nothing.
		cancel()
		return sendOutcome{uncertain: true}, fmt.Errorf("%w; its temporary directory %s is left behind: remove it by hand", x.TimeoutErr(), tmp)
	case <-dctx.Done():
		rerr, ended = wait()
		if !ended {
			var werr error
			select {
			case werr = <-wdone:
			case <-time.After(b.stopGrace()):
			}
			switch cerr := ctx.Err(); {
			case cerr != nil:
				return sendOutcome{uncertain: true}, fmt.Errorf("%s: %w (%w: %s)", op, cerr, ErrTransport, left(op))
			case werr != nil && !errors.Is(werr, errSandboxGone):
				return sendOutcome{uncertain: true}, fmt.Errorf("%w (%w: %s)", werr, ErrTransport, left(op))
			default:
				return sendOutcome{uncertain: true}, fmt.Errorf("%w: %s: %s", ErrTransport, op, left(op))
			}
		}
	}
	werr := <-wdone
	switch {
	case werr != nil && !errors.Is(werr, errSandboxGone):
		return sendOutcome{created: true}, werr // reading the source failed (or the caller cancelled)
	case rep.err != nil:
		return sendOutcome{created: true}, fmt.Errorf("%w: %s: %w", ErrTransport, op, rep.err)
	case rerr != nil:
		return sendOutcome{created: true}, b.classify(ctx, nil, op, rerr, stderr)
	case werr != nil:
		return sendOutcome{created: true}, fmt.Errorf("%w: %s: the sandbox command exited before reading the whole stream", ErrTransport, op)
	}
	return sendOutcome{created: true}, nil
}
