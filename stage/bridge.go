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
// and, after a control timeout, nothing else is sent. The data command is
// bounded only by the caller's context.
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
			return fmt.Errorf("%s: %w", op, err)
		}
		return b.timeoutErr(op)
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
	if err := b.control(ctx, "creating temporary directory "+tmp, Command{Script: setup.String()}); err != nil {
		return err // the temporary directory was not created by us (or it is uncertain): leave it
	}

	cleanup := true
	defer func() {
		if err == nil || !cleanup {
			return
		}
		script := fmt.Sprintf(`t=%s; d=%s; o=%s
if [ ! -e "$d" ] && [ ! -L "$d" ] && { [ -e "$o" ] || [ -L "$o" ]; }; then mv "$o" "$d"; fi
rm -rf "$t" 2>/dev/null || { chmod -R u+rwx "$t"; rm -rf "$t"; }`, q(tmp), q(dst), q(path.Join(tmp, tarOld, name)))
		if cerr := b.control(context.WithoutCancel(ctx), "removing temporary directory "+tmp, Command{Script: script}); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()

	if err := b.transfer(ctx, tmp, src); err != nil {
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

// transfer sends src as one tar stream into tmp.
// The stream goes through an OS pipe, so a Runner that hands its stdin to a
// process (LocalRunner) passes the descriptor itself, with no copy.
func (b *Bridge) transfer(ctx context.Context, tmp string, src *Tree) error {
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("creating a pipe for the tar stream: %w", err)
	}
	growPipe(pw)
	var werr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, werr = writeTarStream(dctx, sink{pw}, src)
		if werr != nil {
			cancel() // stop the sandbox side before it sees the end of the stream
		}
		pw.Close()
	}()
	stderr := &limitedBuffer{max: 4 << 10, truncate: true}
	rerr := b.r.Run(dctx, Command{Script: "umask 0\ncd " + q(tmp) + " && exec tar -x -o -f -", Stdin: pr, Stderr: stderr})
	pr.Close() // a write still pending now fails: the sandbox will not read it
	<-done
	op := "sending the tree to " + tmp
	switch {
	case werr != nil && !errors.Is(werr, errSandboxGone):
		return werr // reading the source failed (or the caller cancelled)
	case rerr != nil:
		return b.classify(ctx, nil, op, rerr, stderr)
	case werr != nil:
		return fmt.Errorf("%w: %s: the sandbox command exited before reading the whole stream", ErrTransport, op)
	}
	return nil
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

// Fetch implements Target.
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
	script := fmt.Sprintf(`d=%s
if [ ! -d "$d" ] || [ -L "$d" ]; then echo "$d is not a directory" >&2; exit 3; fi
cd "$d" && exec tar -c -f - .`, q(d))
	rerr := b.r.Run(dctx, Command{Script: script, Stdout: pw, Stderr: stderr})
	pw.Close()
	if err := <-perr; err != nil {
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
