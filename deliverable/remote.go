package deliverable

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"sync"
	"sync/atomic"
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
// ErrProtocol or ErrFileChanged, also when what the command sent before it
// does not parse: a refused first report is judged only once the command,
// left half a second to end by itself, did not fail on the transport (an exec
// engine that failed prints its own error where the reports should be:
// up to 4 KiB of stdout that come before anything on stderr are kept, so
// that such a command can end; other content waits for the first report to
// be judged). But a Runner that reports a broken
// protocol of its own (sandbox.ErrProtocol: Exec's garbled completion
// record) is ErrProtocol, and the host's own failure (a host file the
// Runner could not write: see sandbox.Control) is returned as it is, with
// its path.
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

// Protocol limits. The protocol itself (the command, its reports and
// their parsers) is the shell protocol's: shell.FileScript,
// shell.ParseFileReport, shell.ParseFileTrailer.
const (
	closeGrace  = 500 * time.Millisecond
	headerGrace = 5 * time.Second // the longest content may overtake the first report
)

// recheckPause is how long after the first stat a file whose size differs
// from the request's is stat'ed again (see recheck).
const recheckPause = 100 * time.Millisecond

// maxFileReaderBytes is the largest file read through a sandbox.FileReader,
// which returns the whole file at once; larger files are streamed by the
// command. A variable so that tests can lower it.
var maxFileReaderBytes int64 = 16 << 20

// firstWrite passes writes on to w and closes seen at the first one.
// Until open is called, and while the command has written nothing on its
// stderr (quiet), it keeps up to maxEarly bytes itself instead of passing
// them on: all an exec engine that failed before it reached the sandbox
// prints (docker's "OCI runtime exec failed: …" on the client's stdout),
// so that such a command can end, and its run's error be judged, without
// the host reading content. Any other write before open is held back.
type firstWrite struct {
	w     io.Writer
	once  sync.Once
	seen  chan struct{}
	quiet func() bool // the command has written nothing on stderr

	mu     sync.Mutex
	early  []byte
	held   int           // writes held back until open
	opened chan struct{} // closed by open
}

// maxEarly bounds what firstWrite keeps before open: an engine's error
// message, not content.
const maxEarly = 4 << 10

func newFirstWrite(w io.Writer, quiet func() bool) *firstWrite {
	return &firstWrite{w: w, seen: make(chan struct{}), quiet: quiet, opened: make(chan struct{})}
}

func (f *firstWrite) Write(p []byte) (int, error) {
	if len(p) > 0 {
		f.once.Do(func() { close(f.seen) })
	}
	f.mu.Lock()
	select {
	case <-f.opened:
		f.mu.Unlock()
		return f.w.Write(p)
	default:
	}
	if f.quiet() && len(f.early)+len(p) <= maxEarly {
		f.early = append(f.early, p...)
		f.mu.Unlock()
		return len(p), nil
	}
	f.held++
	f.mu.Unlock()
	<-f.opened
	return f.w.Write(p)
}

// holding reports whether a write is held back: the command cannot end
// before open.
func (f *firstWrite) holding() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.held > 0
}

// open ends the holding back and returns what was kept, which comes
// before anything written to w after it. Only the first call returns it.
func (f *firstWrite) open() []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.opened:
		return nil
	default:
	}
	early := f.early
	f.early = nil
	close(f.opened)
	return early
}

// quietWriter passes writes on to w and records that one came.
type quietWriter struct {
	w    io.Writer
	said atomic.Bool
}

func (q *quietWriter) Write(p []byte) (int, error) {
	if len(p) > 0 {
		q.said.Store(true)
	}
	return q.w.Write(p)
}

func (q *quietWriter) quiet() bool { return !q.said.Load() }

// script returns the command that opens the file whose path components are
// parts (shell.FileScript); ask makes it wait for the host's decision.
func (w remoteWorkspace) script(parts []string, ask bool) string {
	return shell.FileScript(w.dir, parts, ask)
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
	f := &remoteFile{name: name, root: w.dir, ctx: cctx, cancel: cancel, pr: pr, ctl: shell.NewReports(shell.MaxFileReports)}
	stderr := &quietWriter{w: f.ctl}
	cmd := sandbox.Command{Script: w.script(parts, w.fr != nil), Stderr: stderr}
	if w.fr != nil {
		var stdin io.Reader
		stdin, f.decision = io.Pipe()
		cmd.Stdin = stdin
		f.fr, f.path = w.fr, path.Join(w.dir, name)
	}
	out := newFirstWrite(pw, stderr.quiet)
	f.out = out
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
			f.ctl.End()
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
		case <-f.ctl.First():
			waiting = false
		case <-seen:
			seen = nil
			deadline.Reset(min(headerGrace, limit-time.Since(start)))
		case <-deadline.C:
			if seen == nil {
				// Content came, its report did not: the sandbox broke the protocol.
				return nil, f.refuse(fmt.Errorf("%w: open %q: content but no report from the sandbox within %s", ErrProtocol, name, headerGrace))
			}
			_ = f.Close() // always nil
			return nil, fmt.Errorf("%w: open %q: no report from the sandbox within the %s control deadline; the command may still be running; check the sandbox connection and retry", sandbox.ErrTransport, name, limit)
		case <-ctx.Done():
			_ = f.Close() // always nil
			return nil, ctx.Err()
		}
	}
	lines, extra := f.ctl.Lines()
	if len(lines) == 0 && !extra {
		f.decide("")  // a Runner may wait for its stdin to end
		<-f.done      // the header was signaled by the end of the command
		_ = f.Close() // always nil
		if f.runErr != nil {
			return nil, fmt.Errorf("open %q in the remote workspace: %w", name, runFailure(f.runErr))
		}
		return nil, fmt.Errorf("%w: open %q: the command reported nothing", ErrProtocol, name)
	}
	var err error
	st, sig := FileStat{}, ""
	if extra && len(lines) == 0 {
		err = fmt.Errorf("%w: open %q: the first report is not a line of at most %d bytes", ErrProtocol, name, shell.MaxFileReports)
	} else {
		st, sig, err = parseHeader(lines[0], parts, f.root)
	}
	if err != nil {
		return nil, f.refuse(err)
	}
	f.st, f.sig, f.remain = st, sig, st.Size
	f.src = io.MultiReader(bytes.NewReader(f.out.open()), f.pr)
	return f, nil
}

// refuse closes f, whose first report Open refused with err, and returns
// the error of the Open. A refusal that is the verdict on the sandbox's
// output (ErrProtocol) stands unless the command, left to end by itself
// for a moment (shell.Settle; not when a write of its content is held
// back, which it cannot get past), failed on the transport: then its
// output is not judged (shell.Unjudged: an exec engine that failed prints
// its own error where the report should be), and the run's failure is the
// error.
func (f *remoteFile) refuse(err error) error {
	if errors.Is(err, ErrProtocol) && !f.out.holding() && shell.Settle(f.done, nil) && shell.Unjudged(f.runErr) {
		err = fmt.Errorf("open %q in the remote workspace: %w", f.name, runFailure(f.runErr))
	}
	_ = f.Close() // always nil
	return err
}

// parseHeader reads the first report (shell.ParseFileReport): the file's
// stat, or a refusal naming a component of parts (below root, the remote
// workspace's directory).
func parseHeader(line string, parts []string, root string) (FileStat, string, error) {
	name := strings.Join(parts, "/")
	r, err := shell.ParseFileReport(line, len(parts))
	if err != nil {
		return FileStat{}, "", fmt.Errorf("%w: open %q: %w", ErrProtocol, name, err)
	}
	refuse := func(sentinel error, format string, args ...any) (FileStat, string, error) {
		return FileStat{}, "", &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)}
	}
	c := strings.Join(parts[:r.Component], "/")
	switch r.Kind {
	case shell.FileOK:
		return FileStat{Size: r.Stat.Size, Links: r.Stat.Links}, r.Stat.Sig, nil
	case shell.FileLink:
		return refuse(ErrSymlinkDenied, "%q is a symbolic link", c)
	case shell.FileMissing:
		return refuse(fs.ErrNotExist, "%q does not exist", c)
	case shell.FileNotDir:
		return refuse(ErrPathDenied, "%q is not a directory", c)
	case shell.FileChanged:
		return refuse(ErrFileChanged, "%q changed while the path was walked", c)
	case shell.FileType:
		return refuse(ErrPathDenied, "it is a %s, not a regular file", r.Type)
	case shell.FileUnreadable:
		return refuse(ErrPathDenied, "it is not readable")
	case shell.FileRoot:
		return FileStat{}, "", fmt.Errorf("the remote workspace root %s cannot be entered in the sandbox (missing, not a directory, or not searchable); pass RemoteWorkspace the sandbox's workspace directory", root)
	}
	return FileStat{}, "", fmt.Errorf("the sandbox has neither stat nor ls to describe %q; install stat (coreutils or BusyBox) in the sandbox", name) // shell.FileNoStat
}

// remoteFile streams the content of one Open.
type remoteFile struct {
	name   string
	root   string          // the remote workspace's directory
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
	ctl      *shell.Reports
	out      *firstWrite // the command's stdout, held back until Open judged the first report
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
		f.out.open()                       // a write held back fails on the closed pipe
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
	if f.st.Size > maxFileReaderBytes || !(shell.FileStat{Sig: f.sig}).ChangeTime() {
		f.decide("cat")
		return nil
	}
	data, err := f.fr.ReadFile(f.ctx, f.path, f.st.Size)
	switch {
	case err == nil && int64(len(data)) == f.st.Size:
		f.check = true                                       // at the end of the read, as File promises
		f.src = io.MultiReader(bytes.NewReader(data), f.src) // then the command's stdout, which must be empty
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
	return f.checkTrailer("open", "opened", true)
}

// checkTrailer reads the reports of a command that ended: exactly the
// header and a trailer (shell.ParseFileTrailer) whose stat matches the
// header's, else ErrFileChanged (the file changed while it was opened or
// read: while says which) or ErrProtocol (op, "open" or "read", names the
// step). moved says whether the command walked the path twice, so that a
// "moved" trailer can come.
func (f *remoteFile) checkTrailer(op, while string, moved bool) error {
	lines, extra := f.ctl.Lines()
	if extra || len(lines) != 2 {
		return fmt.Errorf("%w: %s %q: the reports are not exactly a header and a trailer line", ErrProtocol, op, f.name)
	}
	end, err := shell.ParseFileTrailer(lines[1])
	if err != nil {
		return fmt.Errorf("%w: %s %q: %w", ErrProtocol, op, f.name, err)
	}
	switch end.Kind {
	case shell.EndGone:
		return f.changed("the file was removed while it was %s", while)
	case shell.EndLink:
		return f.changed("the file was replaced by a symbolic link while it was %s", while)
	case shell.EndMoved:
		if !moved {
			return fmt.Errorf("%w: %s %q: trailer %q, but the path was walked once", ErrProtocol, op, f.name, clip(lines[1]))
		}
		return f.changed("a directory on its path was moved, replaced or changed while it was %s", while)
	}
	if end.Stat.Sig != f.sig {
		return f.changed("its links, size, identity or times changed while it was %s (%q, then %q)", while, f.sig, end.Stat.Sig)
	}
	return nil
}

// runFailure marks a Runner failure that is not an exit status, a broken
// protocol, the caller's cancellation nor the host's own failure (a host
// file the Runner could not write, named by its path: see sandbox.Control)
// as a transport failure: the command could not be followed to its end. A
// broken protocol (sandbox.ErrProtocol: a garbled completion record) is
// ErrProtocol, this package's.
func runFailure(err error) error {
	var ee *sandbox.ExitError
	switch {
	case errors.Is(err, sandbox.ErrProtocol) && !errors.Is(err, ErrProtocol):
		return fmt.Errorf("%w: %w", ErrProtocol, err) // the Runner's own protocol (Exec's completion record)
	case err == nil, errors.As(err, &ee), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), shell.KeepsClass(err):
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
	if err := f.checkTrailer("read", "read", f.fr != nil); err != nil {
		return f.fail(err)
	}
	f.eof = true
	return 0, io.EOF
}
