package stage

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"sync"
	"time"
)

// Command is one POSIX sh script to run in the sandbox.
type Command struct {
	Script string            // POSIX sh script
	Env    map[string]string // delivered without ever appearing in argv
	Dir    string            // working directory; "" means the Runner's default
	Stdin  io.Reader         // nil: empty
	Stdout io.Writer         // nil: discarded
	Stderr io.Writer         // nil: discarded
}

// Runner runs commands in a sandbox. It is all a command-only provider
// (Kubernetes exec, Daytona, E2B, …) has to offer.
//
// Run returns nil when the script exited with status 0 and an error that
// errors.As finds as *ExitError when it exited otherwise; any other error
// means the command could not be run or followed to its end (a transport
// failure). Run should return when ctx ends; Bridge does not rely on it.
// Env values must never appear in a command line.
type Runner interface {
	Run(ctx context.Context, cmd Command) error
}

// ExitError reports a sandbox command that ran and failed.
type ExitError struct {
	Status int // exit status; -1 when the command was killed by a signal
}

func (e *ExitError) Error() string {
	if e.Status < 0 {
		return "sandbox command was killed by a signal"
	}
	return fmt.Sprintf("sandbox command exited with status %d", e.Status)
}

// MaxControlTimeout caps the deadline of every control operation.
const MaxControlTimeout = 30 * time.Second

// BridgeOption configures a Bridge.
type BridgeOption func(*Bridge)

// WithControlTimeout sets the deadline of each control operation (setup,
// probe, manifest read, publish, cleanup). The effective deadline is
// min(d, MaxControlTimeout); d <= 0 means MaxControlTimeout, the default.
func WithControlTimeout(d time.Duration) BridgeOption {
	return func(b *Bridge) {
		if d <= 0 || d > MaxControlTimeout {
			d = MaxControlTimeout
		}
		b.timeout = d
	}
}

// Bridge is a Target for sandboxes that can only run shell commands. It
// needs POSIX sh and tar (plus mkdir, mv, rm, cat, wc, chmod) in the sandbox.
//
// A changed asset costs three commands: a control command that creates the
// root and an exclusive temporary directory, one data command that receives
// the whole tree as a single buffered tar stream on its stdin, and a control
// command that checks the transfer completed and moves the tree and its
// manifest into place. An unchanged asset costs a share of one probe
// command. No file content is ever base64-encoded or sent one command per
// file.
//
// Every control command runs under the control deadline, enforced on the
// host even when the Runner ignores its context: by then the operation
// fails with ErrTransport (the Runner's goroutine is abandoned; the command
// may still be running). A write whose outcome is unknown is never replayed
// and, after a control timeout, nothing else is sent. The data commands (the
// transfer, and the read-back of WithVerify) are bounded only by the
// caller's context, also enforced on the host: once it ends, the Runner
// gets a short grace (at most 500 ms) to return; if it does not, the
// operation fails with the context's error and ErrTransport, and a
// transfer's temporary directory, named in the error, is left behind
// untouched, since the command may still be writing into it.
//
// Non-guarantees: the sandbox owns its file system. A sandbox process that
// races the publish (replacing the root or the temporary directory while it
// is used) can make its own copy wrong; it cannot make the host write or read
// anything on the host. Two processes publishing the same asset at once are
// not coordinated (calls through one *Bridge are).
type Bridge struct {
	r       Runner
	timeout time.Duration
	rand    io.Reader
	locks   keyLock
}

var _ Target = (*Bridge)(nil)

// NewBridge returns a Target that stages through r.
func NewBridge(r Runner, opts ...BridgeOption) *Bridge {
	b := &Bridge{r: r, timeout: MaxControlTimeout, rand: rand.Reader}
	for _, o := range opts {
		o(b)
	}
	return b
}

// ControlTimeout returns the deadline each control operation runs under.
func (b *Bridge) ControlTimeout() time.Duration { return b.timeout }

// Control runs cmd as a control operation: under the control deadline,
// enforced even when the Runner ignores its context. A timeout is reported
// as ErrTransport; it does not prove that the command stopped, and the
// Runner may still write to cmd.Stdout and cmd.Stderr afterwards, so pass
// writers that tolerate it. Adapters use it for their own short sandbox
// operations (queue reads, input delivery).
func (b *Bridge) Control(ctx context.Context, cmd Command) error {
	return b.control(ctx, "sandbox command", cmd)
}

func (b *Bridge) control(ctx context.Context, op string, cmd Command) error {
	return b.runControl(ctx, op, cmd, 0)
}

// runControl is control. When the caller's ctx ends first, it waits up to
// settle more for the Runner to return before it returns the ctx error.
func (b *Bridge) runControl(ctx context.Context, op string, cmd Command, settle time.Duration) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	stderr := &limitedBuffer{max: 4 << 10, truncate: true}
	if cmd.Stderr == nil {
		cmd.Stderr = stderr
	}
	cctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- b.r.Run(cctx, cmd) }()
	select {
	case err := <-done:
		return b.classify(ctx, cctx, op, err, stderr)
	case <-cctx.Done():
		if err := ctx.Err(); err != nil {
			if settle > 0 {
				t := time.NewTimer(settle)
				defer t.Stop()
				select {
				case <-done:
				case <-t.C:
				}
			}
			return fmt.Errorf("%s: %w", op, err)
		}
		return b.timeoutErr(op)
	}
}

// maxStopGrace bounds how long a data command (and a cancelled setup) gets
// to end once it has been told to stop.
const maxStopGrace = 500 * time.Millisecond

// stopGrace is how long a command gets to end once its context has ended:
// min(maxStopGrace, the control deadline).
func (b *Bridge) stopGrace() time.Duration { return min(maxStopGrace, b.timeout) }

// runData runs a data command, which only dctx bounds, in its own goroutine;
// after, if not nil, runs there once the Runner has returned. When dctx ends
// first, stop is called (it closes the host's end of the command's pipe) and
// the Runner gets stopGrace more to return. ended reports whether it
// returned; when it did not, the command may still be running and is
// abandoned.
func (b *Bridge) runData(dctx context.Context, cmd Command, after, stop func()) (ended bool, err error) {
	done := make(chan error, 1)
	go func() {
		err := b.r.Run(dctx, cmd)
		if after != nil {
			after()
		}
		done <- err
	}()
	select {
	case err := <-done:
		return true, err
	case <-dctx.Done():
	}
	stop()
	t := time.NewTimer(b.stopGrace())
	defer t.Stop()
	select {
	case err := <-done:
		return true, err
	case <-t.C:
		return false, nil
	}
}

func (b *Bridge) timeoutErr(op string) error {
	return fmt.Errorf("%w: %s did not finish within the %s control deadline; the sandbox command may still be running and is not retried; check the sandbox connection",
		ErrTransport, op, b.timeout)
}

// classify maps a Runner result onto the package's errors. cctx is the
// control context (nil for data commands).
func (b *Bridge) classify(ctx, cctx context.Context, op string, err error, stderr *limitedBuffer) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%s: %w", op, cerr)
	}
	if cctx != nil && cctx.Err() != nil {
		return b.timeoutErr(op)
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			return fmt.Errorf("%s failed in the sandbox: %w", op, err)
		}
		return fmt.Errorf("%s failed in the sandbox: %w: %s", op, err, msg)
	}
	return fmt.Errorf("%w: %s: %w", ErrTransport, op, err)
}

// q quotes s for POSIX sh.
func q(s string) string { return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'" }

// Probe implements Target. The sandbox lists the manifests that exist as
// regular files and sends them as one tar stream: one command, one process
// besides the shell, whatever the number of names.
func (b *Bridge) Probe(ctx context.Context, root string, names []string) ([][]byte, error) {
	if len(names) == 0 {
		return [][]byte{}, nil
	}
	want := make(map[string]int, len(names))
	var sb strings.Builder
	fmt.Fprintf(&sb, "cd %s 2>/dev/null || exit 0\nset --\nfor f in", q(root))
	for i, n := range names {
		want[manifestName(n)] = i
		sb.WriteString(" " + q(manifestName(n)))
	}
	sb.WriteString("; do if [ -f \"$f\" ] && [ ! -L \"$f\" ]; then set -- \"$@\" \"$f\"; fi; done\n[ $# -eq 0 ] || exec tar -c -f - \"$@\"")
	out := &limitedBuffer{max: len(names) * (MaxManifestBytes + 64<<10)}
	op := "reading the stored manifests under " + root
	if err := b.control(ctx, op, Command{Script: sb.String(), Stdout: out}); err != nil {
		return nil, err
	}
	res := make([][]byte, len(names))
	if out.Len() == 0 {
		return res, nil
	}
	seen := make([]bool, len(names))
	err := readTarStream(bytes.NewReader(out.Bytes()), func(e Entry, r io.Reader) error {
		i, ok := want[e.Path]
		switch {
		case !ok:
			return fmt.Errorf("%w: %s: the sandbox sent %q, which was not asked for", ErrTransport, op, e.Path)
		case seen[i]:
			return fmt.Errorf("%w: %s: the sandbox sent %q twice", ErrTransport, op, e.Path)
		}
		seen[i] = true
		if !e.Mode.IsRegular() || e.Size > MaxManifestBytes {
			return nil // not a usable manifest
		}
		data, err := io.ReadAll(r)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrTransport, op, err)
		}
		res[i] = data
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// Publish implements Target.
func (b *Bridge) Publish(ctx context.Context, root, name string, src *Tree) (err error) {
	unlock, err := b.locks.lock(ctx, root+"\x00"+name)
	if err != nil {
		return err
	}
	defer unlock()
	tmpName, err := tempName(b.rand, name)
	if err != nil {
		return err
	}
	tmp := path.Join(root, tmpName)
	dst := path.Join(root, name)
	mf := path.Join(root, manifestName(name))

	var setup strings.Builder
	setup.WriteString("umask 022\n")
	if parent := path.Dir(root); parent != "/" {
		fmt.Fprintf(&setup, "p=%s\n[ -d \"$p\" ] || mkdir -p \"$p\" || exit 1\n", q(parent))
	}
	// A link or non-directory at the root is replaced, never followed.
	fmt.Fprintf(&setup, "r=%s\nif [ -L \"$r\" ] || { [ -e \"$r\" ] && [ ! -d \"$r\" ]; }; then rm -f \"$r\" || exit 1; fi\n", q(root))
	setup.WriteString("[ -d \"$r\" ] || mkdir \"$r\" || exit 1\n")
	fmt.Fprintf(&setup, "exec mkdir -m 700 %s\n", q(tmp))
	// A cancelled setup gets a short grace to end, so that the cleanup below
	// does not overtake it.
	if err := b.runControl(ctx, "creating temporary directory "+tmp, Command{Script: setup.String()}, b.stopGrace()); err != nil {
		if ctx.Err() == nil || errors.Is(err, ErrTransport) {
			return err // not created by us, or uncertain after a control timeout: leave it
		}
		// The caller gave up while the setup ran: the exclusive mkdir of a
		// fresh random name either happened or not, so removing that name is
		// safe and keeps the promise of leaving no temporary directory.
		if cerr := b.cleanup(ctx, tmp, dst, name); cerr != nil {
			return errors.Join(err, cerr)
		}
		return err
	}

	cleanup := true
	defer func() {
		if err == nil || !cleanup {
			return
		}
		if cerr := b.cleanup(ctx, tmp, dst, name); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()

	if uncertain, err := b.transfer(ctx, tmp, src); err != nil {
		if uncertain {
			cleanup = false // the data command may still be writing into tmp: send nothing more
		}
		return err
	}
	if err := ctx.Err(); err != nil {
		return err // the last point at which a cancellation stops the publish
	}
	// The old manifest leaves before the old tree, in one mv, so that no
	// moment pairs a manifest with a tree it does not describe.
	script := fmt.Sprintf(`t=%s; d=%s; m=%s
if [ ! -f "$t/complete" ] || [ ! -d "$t/new/tree" ] || [ -L "$t/new/tree" ] || [ ! -f "$t/new/manifest.json" ] || [ -L "$t/new/manifest.json" ] || [ ! -d "$t/old" ] || [ -L "$t/old" ]; then echo "transfer incomplete: $t lacks part of the stream" >&2; exit 3; fi
set --
if [ -e "$m" ] || [ -L "$m" ]; then set -- "$m"; fi
if [ -e "$d" ] || [ -L "$d" ]; then set -- "$@" "$d"; fi
if [ $# -gt 0 ]; then mv -f "$@" "$t/old/" || exit 4; fi
if ! mv "$t/new/tree" "$d"; then mv %s "$d"; exit 4; fi
mv -f "$t/new/manifest.json" "$m" || exit 5
rm -rf "$t" 2>/dev/null || { chmod -R u+rwx "$t"; rm -rf "$t"; } || { echo "published, but $t could not be removed; remove it by hand" >&2; exit 6; }`, q(tmp), q(dst), q(mf), q(path.Join(tmp, tarOld, name)))
	// The publish is short and must not be cut in half by the caller: only
	// the control deadline bounds it.
	err = b.control(context.WithoutCancel(ctx), "moving the new copy into place", Command{Script: script})
	if errors.Is(err, ErrTransport) {
		cleanup = false // its outcome is unknown: send nothing more
	}
	return err
}

// cleanup removes the temporary directory tmp of a failed publish, putting
// back the previous copy if the publish had moved it aside. It runs as a
// control operation that the caller's cancellation does not cut short.
func (b *Bridge) cleanup(ctx context.Context, tmp, dst, name string) error {
	script := fmt.Sprintf(`t=%s; d=%s; o=%s
if [ ! -e "$d" ] && [ ! -L "$d" ] && { [ -e "$o" ] || [ -L "$o" ]; }; then mv "$o" "$d"; fi
rm -rf "$t" 2>/dev/null || { chmod -R u+rwx "$t"; rm -rf "$t"; }`, q(tmp), q(dst), q(path.Join(tmp, tarOld, name)))
	return b.control(context.WithoutCancel(ctx), "removing temporary directory "+tmp, Command{Script: script})
}

// transfer sends src as one tar stream into tmp.
// The stream goes through an OS pipe, so a Runner that hands its stdin to a
// process (LocalRunner) passes the descriptor itself, with no copy.
//
// The Runner runs in its own goroutine: when the caller's ctx ends (or the
// source cannot be read) and the Runner does not return within stopGrace,
// transfer returns anyway. uncertain then reports that the sandbox command
// may still be writing into tmp; the error names tmp, which is left behind.
func (b *Bridge) transfer(ctx context.Context, tmp string, src *Tree) (uncertain bool, err error) {
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw, err := os.Pipe()
	if err != nil {
		return false, fmt.Errorf("creating a pipe for the tar stream: %w", err)
	}
	growPipe(pw)
	wdone := make(chan error, 1)
	go func() {
		_, werr := writeTarStream(dctx, sink{pw}, src)
		if werr != nil {
			cancel() // stop the sandbox side before it sees the end of the stream
		}
		pw.Close()
		wdone <- werr
	}()
	// stopWriting makes a write still pending fail and ends the stream: the
	// sandbox will not read it. (The read end is closed only once the Runner
	// has returned, as it may still be handing it to a process; and a
	// process that inherited it may keep it open, so closing our copy alone
	// would not be enough.)
	stopWriting := func() {
		_ = pw.SetWriteDeadline(time.Now())
		pw.Close()
	}
	stderr := &limitedBuffer{max: 4 << 10, truncate: true}
	op := "sending the tree to " + tmp
	cmd := Command{Script: "umask 0\ncd " + q(tmp) + " && exec tar -x -o -f -", Stdin: pr, Stderr: stderr}
	ended, rerr := b.runData(dctx, cmd, func() { pr.Close() }, stopWriting)
	stopWriting()
	if !ended {
		var werr error
		select {
		case werr = <-wdone:
		case <-time.After(b.stopGrace()):
		}
		left := fmt.Sprintf("the sandbox command did not end within %s of being stopped and may still be writing; its temporary directory %s is left behind: remove it by hand", b.stopGrace(), tmp)
		switch cerr := ctx.Err(); {
		case cerr != nil:
			return true, fmt.Errorf("%s: %w (%w: %s)", op, cerr, ErrTransport, left)
		case werr != nil && !errors.Is(werr, errSandboxGone):
			return true, fmt.Errorf("%w (%w: %s)", werr, ErrTransport, left)
		default:
			return true, fmt.Errorf("%w: %s: %s", ErrTransport, op, left)
		}
	}
	werr := <-wdone
	switch {
	case werr != nil && !errors.Is(werr, errSandboxGone):
		return false, werr // reading the source failed (or the caller cancelled)
	case rerr != nil:
		return false, b.classify(ctx, nil, op, rerr, stderr)
	case werr != nil:
		return false, fmt.Errorf("%w: %s: the sandbox command exited before reading the whole stream", ErrTransport, op)
	}
	return false, nil
}

// sink marks every write error as the sandbox's going away.
type sink struct{ w io.Writer }

func (s sink) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	if err != nil {
		err = fmt.Errorf("%w: %w", errSandboxGone, err)
	}
	return n, err
}

var errSandboxGone = errors.New("the sandbox command has ended")

// Fetch implements Target. An asset directory that is missing, a link, not
// a directory or not readable is reported as ErrMismatch (the script exits
// with fetchUnusable and says why on stderr).
func (b *Bridge) Fetch(ctx context.Context, root, name string, fn func(e Entry, r io.Reader) error) error {
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	d := path.Join(root, name)
	pr, pw := io.Pipe()
	perr := make(chan error, 1)
	go func() {
		err := readTarStream(pr, fn)
		if err != nil {
			cancel()
		} else {
			// tar pads its output; accept a little, never an endless tail.
			if n, _ := io.Copy(io.Discard, io.LimitReader(pr, 1<<20)); n == 1<<20 {
				err = fmt.Errorf("%w: fetching %s: data after the end of the archive", ErrTransport, d)
				cancel()
			}
		}
		pr.CloseWithError(errFetchDone)
		perr <- err
	}()
	stderr := &limitedBuffer{max: 4 << 10, truncate: true}
	script := fmt.Sprintf(`d=%s; w=
if [ -L "$d" ]; then w='is a symbolic link'
elif [ ! -e "$d" ]; then w='is missing'
elif [ ! -d "$d" ]; then w='is not a directory'
elif [ ! -r "$d" ] || [ ! -x "$d" ] || ! cd "$d" 2>/dev/null; then w='is not readable'
fi
if [ -n "$w" ]; then echo "%s$w" >&2; exit %d; fi
exec tar -c -f - .`, q(d), fetchUnusableMarker, fetchUnusable)
	ended, rerr := b.runData(dctx, Command{Script: script, Stdout: pw, Stderr: stderr}, nil, func() { pw.CloseWithError(errFetchStopped) })
	pw.Close()
	var ee *ExitError
	if ended && errors.As(rerr, &ee) && ee.Status == fetchUnusable && ctx.Err() == nil {
		if msg, ok := strings.CutPrefix(strings.TrimSpace(stderr.String()), fetchUnusableMarker); ok {
			return fmt.Errorf("%w: the asset directory %s %s in the sandbox", ErrMismatch, d, msg)
		}
	}
	err := <-perr
	if !ended {
		// The Runner ignored its context: abandon the command (it only reads).
		switch cerr := ctx.Err(); {
		case cerr != nil:
			return fmt.Errorf("fetching %s: %w (%w: the sandbox command did not end within %s of being stopped and was abandoned)", d, cerr, ErrTransport, b.stopGrace())
		case err != nil:
			return err
		default: // not reached: dctx ends early only with ctx or a read error
			return fmt.Errorf("%w: fetching %s: the sandbox command did not end", ErrTransport, d)
		}
	}
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return fmt.Errorf("fetching %s: %w", d, cerr)
		}
		return err
	}
	if rerr != nil && !errors.Is(rerr, errFetchDone) {
		return b.classify(ctx, nil, "fetching "+d, rerr, stderr)
	}
	return nil
}

// The Fetch script's report of an unusable asset directory.
const (
	fetchUnusable       = 3
	fetchUnusableMarker = "airlock-fetch: "
)

var errFetchStopped = errors.New("fetch stopped")

var errFetchDone = errors.New("fetch finished reading")

// limitedBuffer collects output up to max bytes. Beyond that it either
// drops the rest (truncate) or fails the write.
type limitedBuffer struct {
	mu       sync.Mutex
	buf      bytes.Buffer
	max      int
	truncate bool
}

var errOutputTooLarge = errors.New("sandbox output exceeds its limit")

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	room := b.max - b.buf.Len()
	if len(p) > room {
		if !b.truncate {
			return 0, errOutputTooLarge
		}
		b.buf.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return b.buf.Write(p)
}

func (b *limitedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Bytes()
}

func (b *limitedBuffer) String() string { return string(b.Bytes()) }

func (b *limitedBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}
