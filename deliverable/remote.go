package deliverable

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/airlockdev/airlock/internal/shell"
	"github.com/airlockdev/airlock/sandbox"
)

// RemoteWorkspace returns the Workspace rooted at dir inside the sandbox
// that r runs commands in: an absolute sandbox path, or one relative to the
// Runner's working directory ("" is that directory). Each Open costs
// one command, which:
//
//  1. enters dir, then walks the path one component at a time, refusing a
//     symbolic link ([ -L ]) or a non-directory ([ -d ]) before entering it
//     and checking with pwd -P that it arrived where it meant to;
//  2. refuses a leaf that is a link or not a readable regular file;
//  3. reports the file's link count, size, inode and modification and change
//     times (stat -c, stat -f or ls -lnid, whichever works) on stderr, then
//     streams the bytes with cat on stdout;
//  4. stats the file again and reports it, so the host can tell a file that
//     changed while it was read.
//
// When r is also a sandbox.FileReader (remote.Host: SFTP) and dir is an
// absolute, clean path, step 3 stops after the report: the host reads the
// file through ReadFile instead of cat, at most its announced size (a file
// that grew is cut off), and then tells the command (on its stdin) to walk
// the path again from dir as in step 1 and report the file as in step 4.
// ReadFile follows links, so the command records each directory's inode and
// change time on both walks: a directory renamed away, a link put in its
// place and the directory renamed back (which changes its change time), a
// changed physical path or a link anywhere fails the read with
// ErrFileChanged, as does any change to a directory on the path while the
// file is read. Files over 16 MiB, a sandbox whose stat cannot report change
// times, and a FileReader that cannot read the file (no SFTP subsystem, a
// leaf no longer a regular file) fall back to cat in the same command.
//
// The host trusts none of it: it parses the reports strictly (ErrProtocol,
// inside a *HostError, for anything malformed), refuses a link count other
// than one and a size other than the declared one before reading any
// content (on the FileReader path, a size other than the declared one is
// first checked by the second walk and stat, without any content: a file
// that changed is ErrFileChanged, not the request's size mismatch), reads at most the announced size and cuts the command off
// (cancelling its context and closing its output) when the sandbox sends
// more (ErrFileChanged), reports a short stream or a different second stat
// as ErrFileChanged, and computes the SHA-256 itself from the bytes it
// received; the sandbox is never asked for a hash.
//
// The command needs POSIX sh, cat, and stat or ls in the sandbox. Its
// context is the one given to Open; once it ends, the read fails. The first
// report is a control step: it must arrive within the control deadline
// (sandbox.ControlDeadline of r: sandbox.MaxControlTimeout, or the Runner's own
// shorter one), or Open fails with sandbox.ErrTransport; and within a few
// seconds of the first content byte, or Open fails with ErrProtocol.
// FileStat.Mode carries no permission bits. A Runner failure other than an
// exit status (a lost connection) wraps sandbox.ErrTransport, never
// ErrProtocol or ErrFileChanged.
//
// Non-guarantees: the sandbox owns its file system, so the link checks are
// the sandbox's own and a hostile sandbox can serve any bytes it likes under
// any name. What the host guarantees is that what it stores is exactly the
// bytes it received, of the declared size and SHA-256, and that it reads no
// more than that. On the FileReader path, the detection of a directory
// swapped and restored during the read relies on the sandbox's file system
// updating a renamed directory's change time (Linux file systems do; POSIX
// does not require it), and the directories above dir are trusted as dir
// itself is.
func RemoteWorkspace(r sandbox.Runner, dir string) Workspace {
	w := remoteWorkspace{r: r, dir: dir}
	if fr, ok := r.(sandbox.FileReader); ok && path.IsAbs(dir) && path.Clean(dir) == dir {
		w.fr = fr // the SFTP path needs an absolute sandbox path that the shell resolves the same way
	}
	return w
}

type remoteWorkspace struct {
	r   sandbox.Runner
	dir string
	fr  sandbox.FileReader // nil: every file is streamed by the command
}

var _ Workspace = remoteWorkspace{}

// Protocol limits and markers.
const (
	remoteHeader  = "airlock-file-v1"
	remoteTrailer = "airlock-file-end-v1"
	maxControl    = 1024 // bytes of stderr: the header and trailer lines
	closeGrace    = 500 * time.Millisecond
	headerGrace   = 5 * time.Second // the longest content may overtake the first report
)

// recheckPause is how long after the first stat a file whose size differs
// from the request's is stat'ed again (see recheck).
const recheckPause = 100 * time.Millisecond

// maxFileReaderBytes is the largest file read through a sandbox.FileReader,
// which returns the whole file at once; larger files are streamed by the
// command. A variable so that tests can lower it.
var maxFileReaderBytes int64 = 16 << 20

// firstWrite passes writes on to w and closes seen at the first one.
type firstWrite struct {
	w    io.Writer
	once sync.Once
	seen chan struct{}
}

func (f *firstWrite) Write(p []byte) (int, error) {
	if len(p) > 0 {
		f.once.Do(func() { close(f.seen) })
	}
	return f.w.Write(p)
}

// remoteScript is the one command of an Open: see RemoteWorkspace. Every
// report goes to the original stderr (fd 3); the tools' own diagnostics are
// discarded so they cannot corrupt the reports.
//
// With ask=1 (a Runner that is also a sandbox.FileReader) the command reports
// the file, then reads the host's decision from stdin: "cat" streams the
// file as without ask; "check" means the host has read the file itself
// (through the FileReader, which follows links) and asks the command to walk
// the path again from the root and report the file's state. The walk
// records every directory's inode and change time (dirs); the second walk
// must find the same physical path, no link, and the same directories, or
// the trailer says "moved".
const remoteScript = `exec 3>&2 2>/dev/null
set -f
LC_ALL=C
export LC_ALL
pass=1
say() { printf '` + remoteHeader + ` %s\n' "$*" >&3; }
bad() {
	if [ "$pass" = 2 ]; then printf '` + remoteTrailer + ` moved\n' >&3; exit 0; fi
	say "$@"; exit 0
}
ok() { case $1 in ''|*[!0-9.\ ]*) return 1;; esac; set -- $1; [ $# -eq 5 ]; }
st() {
	for fmt in '%h %s %i %.9Y %.9Z' '%h %s %i %Y %Z'; do
		s=$(stat -c "$fmt" "$1") && ok "$s" && { printf '%s\n' "$s"; return 0; }
	done
	s=$(stat -f '%l %z %i %m %c' "$1") && ok "$s" && { printf '%s\n' "$s"; return 0; }
	set -- $(ls -lnid "$1") && [ $# -ge 9 ] && printf '%s %s %s %s_%s_%s 0\n' "$3" "$6" "$1" "$7" "$8" "$9"
}
track() {
	[ "$ask" = 1 ] || return 0
	d=$(st .) || bad nostat
	set -- $d
	dirs="$dirs $3:$5"
}
step() {
	if [ -L "./$2" ]; then bad link "$1"; fi
	if [ ! -e "./$2" ]; then bad missing "$1"; fi
	if [ ! -d "./$2" ]; then bad notdir "$1"; fi
	cd -P "./$2" || bad missing "$1"
	want=$want/$2
	[ "$(pwd -P)" = "$want" ] || bad changed "$1"
	track
}
leaf() {
	f=./$2
	if [ -L "$f" ]; then say link "$1"; exit 0; fi
	if [ ! -e "$f" ]; then say missing "$1"; exit 0; fi
	if [ -d "$f" ]; then say type directory; exit 0; fi
	if [ -p "$f" ]; then say type fifo; exit 0; fi
	if [ -S "$f" ]; then say type socket; exit 0; fi
	if [ -b "$f" ] || [ -c "$f" ]; then say type device; exit 0; fi
	if [ ! -f "$f" ]; then say type other; exit 0; fi
	if [ ! -r "$f" ]; then say unreadable; exit 0; fi
	a=$(st "$f") && [ -n "$a" ] || { say nostat; exit 0; }
	say file $a
	how=cat
	if [ "$ask" = 1 ]; then IFS= read -r how || exit 0; fi
	case $how in
	cat) cat "$f" || exit 1 ;;
	check)
		d1=$dirs w1=$want pass=2
		walk
		[ "$dirs" = "$d1" ] && [ "$want" = "$w1" ] || bad
		;;
	*) exit 0 ;;
	esac
	b=$(st "$f") || b=gone
	if [ -L "$f" ]; then b=link; fi
	printf '` + remoteTrailer + ` %s\n' "$b" >&3
	exit 0
}
`

// script returns the command that opens the file whose path components are
// parts; ask makes it wait for the host's decision (see remoteScript).
func (w remoteWorkspace) script(parts []string, ask bool) string {
	root := w.dir
	switch {
	case root == "":
		root = "."
	case !strings.HasPrefix(root, "/"):
		root = "./" + root // never an option to cd
	}
	var b strings.Builder
	b.WriteString(remoteScript)
	if ask {
		b.WriteString("ask=1\n")
	}
	fmt.Fprintf(&b, "walk() {\ncd -P %s || bad root\nwant=$(pwd -P) || bad root\n[ \"$want\" = / ] && want=\ndirs=\ntrack\n", shell.Quote(root))
	for i, p := range parts[:len(parts)-1] {
		fmt.Fprintf(&b, "step %d %s\n", i+1, shell.Quote(p))
	}
	fmt.Fprintf(&b, "}\nwalk\nleaf %d %s\n", len(parts), shell.Quote(parts[len(parts)-1]))
	return b.String()
}

func (w remoteWorkspace) Open(ctx context.Context, name string) (File, error) {
	if err := checkOpen(ctx, name); err != nil {
		return nil, err
	}
	if w.r == nil {
		return nil, errors.New("RemoteWorkspace has no Runner")
	}
	parts := strings.Split(name, "/")
	cctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	f := &remoteFile{name: name, ctx: cctx, cancel: cancel, pr: pr, ctl: newControl()}
	cmd := sandbox.Command{Script: w.script(parts, w.fr != nil), Stderr: f.ctl}
	if w.fr != nil {
		var stdin io.Reader
		stdin, f.decision = io.Pipe()
		cmd.Stdin = stdin
		f.fr, f.path = w.fr, path.Join(w.dir, name)
	}
	out := &firstWrite{w: pw, seen: make(chan struct{})}
	cmd.Stdout = out
	limit := sandbox.ControlDeadline(w.r)
	f.limit = limit
	// Once the host has read every announced byte (and sent its last
	// decision), the wait for the trailer and the command's exit is a
	// control step (f.watch.Arm in Read).
	f.watch = sandbox.Watch(cctx, w.r, cmd, sandbox.WatchOptions{
		Op:       fmt.Sprintf("reading %q from the remote workspace", name),
		Deadline: limit,
		After: func(err error) {
			f.runErr = err
			f.ctl.end()
			_ = pw.Close() // closing a pipe writer never fails
		},
		OnExpire: func(err error) { _ = pw.CloseWithError(err) }, // reads fail with err; always nil
	})
	f.done = f.watch.Done()

	// The first report is a control step: it must come within the control
	// deadline, and within headerGrace of the first content
	// byte (stdout and stderr travel separately, so content may overtake it
	// by a little, never by much).
	start := time.Now()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	seen := out.seen
	for waiting := true; waiting; {
		select {
		case <-f.ctl.header:
			waiting = false
		case <-seen:
			seen = nil
			deadline.Reset(min(headerGrace, limit-time.Since(start)))
		case <-deadline.C:
			_ = f.Close() // always nil
			if seen == nil {
				// Content came, its report did not: the sandbox broke the protocol.
				return nil, fmt.Errorf("%w: open %q: content but no report from the sandbox within %s", ErrProtocol, name, headerGrace)
			}
			return nil, fmt.Errorf("%w: open %q: no report from the sandbox within the %s control deadline; the command may still be running; check the sandbox connection and retry", sandbox.ErrTransport, name, limit)
		case <-ctx.Done():
			_ = f.Close() // always nil
			return nil, ctx.Err()
		}
	}
	lines, extra := f.ctl.lines()
	if len(lines) == 0 {
		if extra {
			_ = f.Close() // always nil
			return nil, fmt.Errorf("%w: open %q: the first report is not a line of at most %d bytes", ErrProtocol, name, maxControl)
		}
		f.decide("")  // a Runner may wait for its stdin to end
		<-f.done      // the header was signaled by the end of the command
		_ = f.Close() // always nil
		if f.runErr != nil {
			return nil, fmt.Errorf("open %q in the remote workspace: %w", name, runFailure(f.runErr))
		}
		return nil, fmt.Errorf("%w: open %q: the command reported nothing", ErrProtocol, name)
	}
	st, sig, err := parseHeader(lines[0], parts)
	if err != nil {
		_ = f.Close() // always nil
		return nil, err
	}
	f.st, f.sig, f.remain = st, sig, st.Size
	f.src = f.pr
	return f, nil
}

// parseHeader reads the first report: "file <stat>" or a refusal naming a
// component (1-based) of parts.
func parseHeader(line string, parts []string) (FileStat, string, error) {
	name := strings.Join(parts, "/")
	bad := func() (FileStat, string, error) {
		return FileStat{}, "", fmt.Errorf("%w: open %q: unexpected report %q", ErrProtocol, name, clip(line))
	}
	rest, ok := strings.CutPrefix(line, remoteHeader+" ")
	if !ok {
		return bad()
	}
	f := strings.Split(rest, " ")
	refuse := func(sentinel error, format string, args ...any) (FileStat, string, error) {
		return FileStat{}, "", &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)}
	}
	component := func() (string, bool) {
		if len(f) != 2 || !isDigits(f[1]) {
			return "", false
		}
		i, err := strconv.Atoi(f[1])
		if err != nil || i < 1 || i > len(parts) {
			return "", false
		}
		return strings.Join(parts[:i], "/"), true
	}
	switch f[0] {
	case "file":
		st, sig, ok := parseStat(strings.Join(f[1:], " "))
		if !ok {
			return bad()
		}
		return st, sig, nil
	case "link":
		if c, ok := component(); ok {
			return refuse(ErrSymlinkDenied, "%q is a symbolic link", c)
		}
	case "missing":
		if c, ok := component(); ok {
			return refuse(fs.ErrNotExist, "%q does not exist", c)
		}
	case "notdir":
		if c, ok := component(); ok && c != name {
			return refuse(ErrPathDenied, "%q is not a directory", c)
		}
	case "changed":
		if c, ok := component(); ok {
			return refuse(ErrFileChanged, "%q changed while the path was walked", c)
		}
	case "type":
		if len(f) == 2 && strings.Contains(" directory fifo socket device other ", " "+f[1]+" ") {
			return refuse(ErrPathDenied, "it is a %s, not a regular file", f[1])
		}
	case "unreadable":
		if len(f) == 1 {
			return refuse(ErrPathDenied, "it is not readable")
		}
	case "root":
		if len(f) == 1 {
			return FileStat{}, "", errors.New("the remote workspace root cannot be entered")
		}
	case "nostat":
		if len(f) == 1 {
			return FileStat{}, "", errors.New("the sandbox has neither stat nor ls to describe the file")
		}
	}
	return bad()
}

// parseStat reads "<links> <size> <inode> <mtime> <ctime>" and returns the
// link count and size, and the whole line as the file's signature. Every
// token is 1 to 40 bytes of [0-9A-Za-z:._-]; links and size are decimal.
func parseStat(s string) (FileStat, string, bool) {
	f := strings.Split(s, " ")
	if len(f) != 5 {
		return FileStat{}, "", false
	}
	for _, t := range f {
		if len(t) == 0 || len(t) > 40 || strings.Trim(t, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ:._-") != "" {
			return FileStat{}, "", false
		}
	}
	if !isDigits(f[0]) || !isDigits(f[1]) {
		return FileStat{}, "", false
	}
	links, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return FileStat{}, "", false
	}
	size, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return FileStat{}, "", false
	}
	return FileStat{Size: size, Links: links}, s, true
}

func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// control collects the command's reports from stderr, at most maxControl
// bytes, and signals when the first line is complete or the command ended.
type control struct {
	mu       sync.Mutex
	buf      bytes.Buffer
	overflow bool
	header   chan struct{}
	signaled bool
}

func newControl() *control { return &control{header: make(chan struct{})} }

func (c *control) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := maxControl - c.buf.Len(); len(p) > room {
		c.overflow = true
		p = p[:max(room, 0)]
	}
	c.buf.Write(p)
	if !c.signaled && (c.overflow || bytes.IndexByte(c.buf.Bytes(), '\n') >= 0) {
		c.signaled = true
		close(c.header)
	}
	return len(p), nil
}

// end signals that the command ended (there will be no header if there is none yet).
func (c *control) end() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.signaled {
		c.signaled = true
		close(c.header)
	}
}

// lines returns the complete lines and whether anything else (a partial
// line, bytes over the limit) was written.
func (c *control) lines() ([]string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.buf.String()
	var out []string
	for {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			break
		}
		out = append(out, s[:i])
		s = s[i+1:]
	}
	return out, c.overflow || s != ""
}

// remoteFile streams the content of one Open.
type remoteFile struct {
	name   string
	ctx    context.Context // the command's
	cancel context.CancelFunc
	pr     *io.PipeReader
	src    io.Reader // the content: pr, or what fr returned followed by pr

	// With a FileReader: the file's absolute sandbox path, and the command's
	// stdin, which takes one decision line (see remoteScript).
	fr       sandbox.FileReader
	path     string
	decision *io.PipeWriter
	decided  sync.Once
	started  bool
	check    bool // the content came from fr: ask for the check once it has been read
	ctl      *control
	watch    *sandbox.Watched
	done     <-chan struct{} // watch.Done()
	runErr   error           // set before done is closed
	limit    time.Duration   // the control deadline

	st     FileStat
	sig    string
	remain int64
	err    error
	eof    bool
	once   sync.Once
}

var _ File = (*remoteFile)(nil)

var errClosed = errors.New("remote file closed")

func (f *remoteFile) Stat() FileStat { return f.st }

// Close stops the command (cancels its context, closes its output) and
// waits briefly for the Runner to return; a Runner that does not is
// abandoned. It always returns nil.
func (f *remoteFile) Close() error {
	f.once.Do(func() {
		f.decide("")
		f.cancel()
		_ = f.pr.CloseWithError(errClosed) // always nil
		t := time.NewTimer(closeGrace)
		defer t.Stop()
		select {
		case <-f.done:
		case <-t.C:
		}
	})
	return nil
}

// decide sends the command its decision line (none when line is "") and
// ends its stdin; only the first call does anything. A command without a
// decision pipe is left alone.
func (f *remoteFile) decide(line string) {
	if f.decision == nil {
		return
	}
	f.decided.Do(func() {
		if line != "" {
			// A command that already ended (cancelled, killed) fails the
			// write; the read then fails on its own terms.
			_, _ = io.WriteString(f.decision, line+"\n")
		}
		_ = f.decision.Close() // closing a pipe writer never fails
	})
}

// begin runs before the first byte is read when the Runner is a
// sandbox.FileReader: a file of at most maxFileReaderBytes whose stat came
// with a change time (stat(1), not ls) is read through it, at most its
// announced size, and once the caller has read it all the command is asked
// to check that the path and the file are unchanged. Otherwise, or when the
// FileReader cannot read the file (no SFTP, a missing or replaced leaf), the
// command streams it.
func (f *remoteFile) begin() error {
	if f.fr == nil {
		return nil
	}
	if t := strings.Fields(f.sig); f.st.Size > maxFileReaderBytes || len(t) != 5 || t[4] == "0" {
		f.decide("cat")
		return nil
	}
	data, err := f.fr.ReadFile(f.ctx, f.path, f.st.Size)
	switch {
	case err == nil && int64(len(data)) == f.st.Size:
		f.check = true                                      // at the end of the read, as File promises
		f.src = io.MultiReader(bytes.NewReader(data), f.pr) // then the command's stdout, which must be empty
		return nil
	case err == nil:
		return f.changed("it has %d bytes, not the announced %d: the file changed while it was read", len(data), f.st.Size)
	case errors.Is(err, sandbox.ErrLimit):
		return f.changed("it grew past the announced %d bytes while it was read; the read was cut off", f.st.Size)
	case f.ctx.Err() != nil:
		return fmt.Errorf("read %q from the remote workspace: %w", f.name, f.ctx.Err())
	}
	f.decide("cat") // the command's own stream is as safe; only slower
	return nil
}

// recheck tells a file whose announced size differs from the request's
// from one that changed while it was opened: when the command waits for
// the host's decision (a sandbox.FileReader Runner), it is asked to walk the
// path again and stat the file without sending any content, and a second
// stat that differs from the first (or a path that moved) is
// ErrFileChanged, as during a read. nil means the file held still (or,
// without a decision pipe, that nothing more can be learnt without reading
// it). Any other failure is the host's (a transport failure, a broken
// protocol).
func (f *remoteFile) recheck() error {
	if f.decision == nil || f.started {
		return nil
	}
	f.started = true // no read follows
	// The second stat comes a little later than the round trip alone
	// would make it, so that a sandbox swapping the file in a loop is
	// caught changing it (the first stat saw one state of the loop); it
	// costs only a request that already failed.
	t := time.NewTimer(recheckPause)
	select {
	case <-t.C:
	case <-f.ctx.Done():
		t.Stop()
		return fmt.Errorf("open %q in the remote workspace: %w", f.name, f.ctx.Err())
	}
	f.decide("check")
	f.watch.Arm() // the host has sent all it will: a control step
	select {
	case <-f.done:
	case <-f.watch.Expired():
		return fmt.Errorf("open %q in the remote workspace: %w", f.name, f.watch.TimeoutErr())
	}
	if f.runErr != nil {
		return fmt.Errorf("open %q in the remote workspace: %w", f.name, runFailure(f.runErr))
	}
	lines, extra := f.ctl.lines()
	if extra || len(lines) != 2 {
		return fmt.Errorf("%w: open %q: the reports are not exactly a header and a trailer line", ErrProtocol, f.name)
	}
	after, ok := strings.CutPrefix(lines[1], remoteTrailer+" ")
	switch {
	case !ok:
		return fmt.Errorf("%w: open %q: unexpected trailer %q", ErrProtocol, f.name, clip(lines[1]))
	case after == "gone":
		return f.changed("the file was removed while it was opened")
	case after == "link":
		return f.changed("the file was replaced by a symbolic link while it was opened")
	case after == "moved":
		return f.changed("a directory on its path was moved, replaced or changed while it was opened")
	}
	if _, _, ok := parseStat(after); !ok {
		return fmt.Errorf("%w: open %q: unexpected trailer %q", ErrProtocol, f.name, clip(lines[1]))
	}
	if after != f.sig {
		return f.changed("its links, size, identity or times changed while it was opened (%q, then %q)", f.sig, after)
	}
	return nil
}

// runFailure marks a Runner failure that is not an exit status (nor the
// caller's cancellation) as a transport failure: the command could not be
// followed to its end.
func runFailure(err error) error {
	var ee *sandbox.ExitError
	switch {
	case err == nil, errors.Is(err, sandbox.ErrTransport), errors.As(err, &ee),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	return fmt.Errorf("%w: %w", sandbox.ErrTransport, err)
}

func (f *remoteFile) fail(err error) (int, error) {
	f.err = err
	f.decide("")
	f.cancel()
	_ = f.pr.CloseWithError(errClosed) // always nil
	return 0, err
}

func (f *remoteFile) changed(format string, args ...any) error {
	return &fs.PathError{Op: "read", Path: f.name, Err: fmt.Errorf("%w: "+format, append([]any{ErrFileChanged}, args...)...)}
}

func (f *remoteFile) Read(p []byte) (int, error) {
	if f.err != nil {
		return 0, f.err
	}
	if f.eof {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !f.started {
		f.started = true
		if err := f.begin(); err != nil {
			return f.fail(err)
		}
	}
	if f.remain > 0 {
		if int64(len(p)) > f.remain {
			p = p[:f.remain]
		}
		n, err := f.src.Read(p)
		f.remain -= int64(n)
		if errors.Is(err, io.EOF) && f.remain > 0 {
			<-f.done
			if f.runErr != nil {
				_, err := f.fail(fmt.Errorf("read %q from the remote workspace: %w", f.name, runFailure(f.runErr)))
				return n, err
			}
			_, err := f.fail(f.changed("the stream ended %d bytes short of the announced %d: the file shrank while it was read", f.remain, f.st.Size))
			return n, err
		}
		if err != nil && !errors.Is(err, io.EOF) {
			_, err := f.fail(fmt.Errorf("read %q from the remote workspace: %w", f.name, err))
			return n, err
		}
		return n, nil
	}
	// All announced bytes are in: the stream must end here, and the
	// second stat must match the first.
	if f.check {
		f.check = false
		f.decide("check")
	}
	// The host has all it asked for (and has sent its last decision): the
	// wait for the end of the stream, the trailer and the command's exit
	// is a control step, bounded even when the Runner never returns.
	f.watch.Arm()
	var one [1]byte
	n, err := f.src.Read(one[:])
	if n > 0 {
		return f.fail(f.changed("the sandbox sent more than the announced %d bytes; the read was cut off", f.st.Size))
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return f.fail(fmt.Errorf("read %q from the remote workspace: %w", f.name, err))
	}
	if err == nil {
		return 0, nil // an empty read; try again
	}
	select {
	case <-f.done:
	case <-f.watch.Expired():
		return f.fail(fmt.Errorf("read %q from the remote workspace: %w", f.name, f.watch.TimeoutErr()))
	}
	if f.runErr != nil {
		return f.fail(fmt.Errorf("read %q from the remote workspace: %w", f.name, runFailure(f.runErr)))
	}
	lines, extra := f.ctl.lines()
	if extra || len(lines) != 2 {
		return f.fail(fmt.Errorf("%w: read %q: the reports are not exactly a header and a trailer line", ErrProtocol, f.name))
	}
	after, ok := strings.CutPrefix(lines[1], remoteTrailer+" ")
	switch {
	case !ok:
		return f.fail(fmt.Errorf("%w: read %q: unexpected trailer %q", ErrProtocol, f.name, clip(lines[1])))
	case after == "gone":
		return f.fail(f.changed("the file was removed while it was read"))
	case after == "link":
		return f.fail(f.changed("the file was replaced by a symbolic link while it was read"))
	case after == "moved" && f.fr != nil:
		return f.fail(f.changed("a directory on its path was moved, replaced or changed while it was read"))
	}
	if _, _, ok := parseStat(after); !ok {
		return f.fail(fmt.Errorf("%w: read %q: unexpected trailer %q", ErrProtocol, f.name, clip(lines[1])))
	}
	if after != f.sig {
		return f.fail(f.changed("its links, size, identity or times changed while it was read (%q, then %q)", f.sig, after))
	}
	f.eof = true
	return 0, io.EOF
}
