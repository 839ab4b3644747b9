package stage

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/airlockdev/airlock/internal/keylock"
	"github.com/airlockdev/airlock/internal/shellproto"
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
// Env values must never appear in a command line. Bridge's scripts stay
// under about 72 KiB (a delta publish names up to 64 KiB of unchanged
// files in its send command; longer lists travel on stdin), which the
// Runner must be able to pass to sh.
type Runner interface {
	// Run runs cmd in the sandbox and waits for it to end.
	Run(ctx context.Context, cmd Command) error
}

// ExitError reports a sandbox command that ran and failed.
type ExitError struct {
	Status int    // exit status; -1 when the command was killed by a signal
	Signal string // the signal's name without "SIG" ("KILL", "TERM"), when one ended the command and the Runner knows it
}

// Error implements error: "exited with status N", or "killed by signal
// NAME" for a command a signal ended.
func (e *ExitError) Error() string {
	switch {
	case e.Status < 0 && e.Signal != "":
		return "killed by signal " + e.Signal
	case e.Status < 0:
		return "killed by a signal"
	}
	return fmt.Sprintf("exited with status %d", e.Status)
}

// MaxControlTimeout caps the deadline of every control operation.
const MaxControlTimeout = 30 * time.Second

// BridgeOption configures a Bridge.
type BridgeOption func(*Bridge)

// WithControlTimeout sets the deadline of each control operation (setup,
// probe, manifest read, publish, cleanup). The effective deadline is
// min(d, ControlDeadline(r)) for the Bridge's Runner r (MaxControlTimeout
// unless r is a ControlTimeouter with a shorter one); d <= 0 means
// ControlDeadline(r), the default.
func WithControlTimeout(d time.Duration) BridgeOption {
	return func(b *Bridge) {
		b.timeout = min(clampControl(d), b.timeout)
	}
}

// Bridge is a Target for sandboxes that can only run shell commands. It
// needs POSIX sh and tar (plus mkdir, mv, rm, cat, chmod) in the sandbox,
// and uses sha256sum or openssl (for delta publish) and mv --exchange when
// the sandbox has them.
//
// A changed asset costs two commands. The first makes the root and an
// exclusive temporary directory (a control step: it must report the
// directory made within the control deadline), copies the unchanged files
// from the previous copy and checks their SHA-256 in the sandbox (delta
// publish; a long list of them is carried by a command of its own), and
// then receives the rest of the tree as a single buffered tar stream on its
// stdin (a data step). The second, a control command, checks the transfer
// completed and moves the tree and its manifest into place. An unchanged
// asset costs a share of one probe command (none when the Runner is a
// FileReader). No file content is ever base64-encoded or sent one command
// per file.
//
// Every control command runs under the control deadline (ControlDeadline
// of the Runner, or shorter with WithControlTimeout), enforced on the
// host even when the Runner ignores its context: by then the operation
// fails with ErrTransport (the Runner's goroutine is abandoned; the command
// may still be running). A write whose outcome is unknown is never replayed
// and, after a control timeout, nothing else is sent. The data commands (the
// transfer, and the read-back of WithVerify) are bounded only by the
// caller's context, also enforced on the host: once it ends, the Runner
// gets a short grace (at most 500 ms) to return; if it does not, the
// operation fails with the context's error and ErrTransport, and a
// transfer's temporary directory, named in the error, is left behind
// untouched, since the command may still be writing into it. Once a data
// command has all it was fed (the transfer has read the stream's last
// byte, the carry reported its end, the read-back sent the archive's
// end), the wait for its end is a control step (Watch): a Runner that
// never returns after its command ended fails the operation with
// ErrTransport within the control deadline, and nothing is published.
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
	locks   keylock.Map
	capsMu  sync.Mutex
	caps    capsState
}

var _ Target = (*Bridge)(nil)

// NewBridge returns a Target that stages through r.
func NewBridge(r Runner, opts ...BridgeOption) *Bridge {
	b := &Bridge{r: r, timeout: ControlDeadline(r), rand: rand.Reader}
	for _, o := range opts {
		o(b)
	}
	return b
}

// Control runs cmd as a control operation: under the control deadline,
// enforced even when the Runner ignores its context. Every failure to
// complete wraps ErrTransport — a timeout, a Runner failure, the caller's
// cancellation — except a command that ran and exited non-zero, which wraps
// *ExitError. A timeout does not prove that the command stopped, and the
// Runner may still write to cmd.Stdout and cmd.Stderr afterwards, so pass
// writers that tolerate it. Adapters use it for their own short sandbox
// operations (queue reads, input delivery).
func (b *Bridge) Control(ctx context.Context, cmd Command) error {
	err := b.control(ctx, "command", cmd)
	var ee *ExitError
	if err == nil || errors.Is(err, ErrTransport) || errors.As(err, &ee) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrTransport, err)
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
	stderr := &limitedBuffer{Max: 4 << 10, Truncate: true}
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

// runData runs a data command, which only dctx bounds, in its own goroutine
// (Watch); after, if not nil, runs there once the Runner has returned. When
// dctx ends first, stop is called (it closes the host's end of the
// command's pipe) and the Runner gets stopGrace more to return. When
// armAt, if not nil, is closed (the host has all the command was to
// send), the wait for the command's end becomes a control step: past the
// control deadline, stop is called and the command abandoned. ended
// reports whether it returned; when it did not, the command may still be
// running and is abandoned, and err is the expired deadline's (wrapping
// ErrTransport) or nil when dctx ended.
func (b *Bridge) runData(dctx context.Context, op string, cmd Command, after, stop func(), armAt <-chan struct{}) (ended bool, err error) {
	x := Watch(dctx, b.r, cmd, WatchOptions{Op: op, Deadline: b.timeout, After: func(error) {
		if after != nil {
			after()
		}
	}})
	if armAt != nil {
		go func() {
			select {
			case <-armAt:
				x.Arm()
			case <-x.Done():
			}
		}()
	}
	select {
	case <-x.Done():
		return true, x.Err()
	case <-x.Expired():
		stop()
		return false, x.TimeoutErr()
	case <-dctx.Done():
	}
	stop()
	t := time.NewTimer(b.stopGrace())
	defer t.Stop()
	select {
	case <-x.Done():
		return true, x.Err()
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

// MaxProbeBytes bounds the whole reply of one Probe, all manifests
// together: a sandbox that sends more fails the probe with ErrTransport,
// and the host never holds more than this of its output.
const MaxProbeBytes = MaxManifestBytes + 1<<20

// sandboxCaps is what Bridge learns about a sandbox once, in its first
// probe.
type sandboxCaps struct {
	sha256   bool // sha256sum or openssl is there: unchanged files can be carried over and checked (delta publish)
	exchange bool // mv --exchange (GNU coreutils 9.5+): the publish swaps old and new copies in one rename
}

// probeHeader starts every probe reply: "airlock-probe <caps>\n", where caps
// is "-" when not asked, else two digits (sha256sum, mv --exchange) and, when
// a required tool is missing, a space and the missing tools' names.
const probeHeader = "airlock-probe "

// detectScript prints the capability word of probeHeader.
const detectScript = `m=
for t in tar mkdir mv rm cat chmod; do command -v "$t" >/dev/null 2>&1 || m="$m $t"; done
s=0; { command -v sha256sum || command -v openssl; } >/dev/null 2>&1 && s=1
x=0; mv --help 2>/dev/null | grep -q -e '--exchange' && x=1
c="$s$x$m"
`

// Probe implements Target. The sandbox lists the manifests that exist as
// regular files and sends them as one tar stream: one command, one process
// besides the shell, whatever the number of names. The reply is parsed as
// it streams and bounded as a whole by MaxProbeBytes. The first probe of a
// Bridge also learns what the sandbox offers (sha256sum, mv --exchange)
// and fails with a clear error when a tool the protocol needs is missing.
func (b *Bridge) Probe(ctx context.Context, root string, names []string) ([][]byte, error) {
	if c, known := b.knownCaps(); known && c.missing != "" {
		return nil, c.missingErr()
	}
	if fr, ok := b.r.(FileReader); ok && len(names) > 0 {
		// No process in the sandbox: an unchanged asset costs no command at
		// all; what the sandbox offers is learnt when a publish needs it.
		return b.probeFiles(ctx, fr, root, names)
	}
	return b.probeShell(ctx, root, names)
}

// probeShell is Probe through one shell command (which, the first time,
// also learns what the sandbox offers).
func (b *Bridge) probeShell(ctx context.Context, root string, names []string) ([][]byte, error) {
	_, known := b.knownCaps()
	if len(names) == 0 && known {
		return [][]byte{}, nil
	}
	want := make(map[string]int, len(names))
	var sb strings.Builder
	if known {
		sb.WriteString("c=-\n")
	} else {
		sb.WriteString(detectScript)
	}
	fmt.Fprintf(&sb, "echo \"%s$c\"\ncd %s 2>/dev/null || exit 0\nset --\nfor f in", probeHeader, q(root))
	for i, n := range names {
		want[manifestName(n)] = i
		sb.WriteString(" " + q(manifestName(n)))
	}
	sb.WriteString("; do if [ -f \"$f\" ] && [ ! -L \"$f\" ]; then set -- \"$@\" \"$f\"; fi; done\n[ $# -eq 0 ] || exec tar -c -f - \"$@\"")
	op := "reading the stored manifests under " + root

	res := make([][]byte, len(names))
	pr, pw := io.Pipe()
	parsed := make(chan error, 1)
	go func() {
		err := b.parseProbe(pr, op, want, res)
		pr.CloseWithError(err) // a reply that breaks the protocol stops the command's output
		parsed <- err
	}()
	err := b.control(ctx, op, Command{Script: sb.String(), Stdout: pw})
	// A reply the parser refused while the command ran explains the
	// command's failure (its output was cut off); otherwise the command's
	// own error comes first.
	var perr error
	early := false
	select {
	case perr = <-parsed:
		early = true
	default:
	}
	pw.Close()
	if !early {
		perr = <-parsed
	}
	switch {
	case perr != nil && early && ctx.Err() == nil:
		return nil, perr
	case err != nil:
		return nil, err
	case perr != nil:
		return nil, perr
	}
	if c, ok := b.knownCaps(); ok && c.missing != "" {
		return nil, c.missingErr()
	}
	return res, nil
}

func (c capsState) missingErr() error {
	return fmt.Errorf("%w: the sandbox lacks%s, which staging needs (POSIX sh with tar, mkdir, mv, rm, cat and chmod); install it in the sandbox image", ErrTransport, c.missing)
}

// parseProbe reads a probe reply: the header, then the manifests' tar
// stream, filling res.
func (b *Bridge) parseProbe(r io.Reader, op string, want map[string]int, res [][]byte) error {
	lr := &io.LimitedReader{R: r, N: MaxProbeBytes + 1}
	br := bufio.NewReaderSize(lr, 4<<10)
	line, err := br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, io.EOF) && len(line) == 0 {
			return fmt.Errorf("%w: %s: the sandbox's reply is empty (is /bin/sh there?)", ErrTransport, op)
		}
		return fmt.Errorf("%w: %s: the reply does not start with a header line: %v", ErrTransport, op, err)
	}
	word, ok := strings.CutPrefix(strings.TrimSuffix(string(line), "\n"), probeHeader)
	if !ok {
		return fmt.Errorf("%w: %s: the reply starts with %q, not the probe header", ErrTransport, op, shellproto.Truncate(string(line), 64))
	}
	if word != "-" {
		if len(word) < 2 || (word[0] != '0' && word[0] != '1') || (word[1] != '0' && word[1] != '1') {
			return fmt.Errorf("%w: %s: malformed capability word %q", ErrTransport, op, shellproto.Truncate(word, 64))
		}
		b.setCaps(sandboxCaps{sha256: word[0] == '1', exchange: word[1] == '1'}, word[2:])
	}
	seen := make([]bool, len(res))
	err = readTarStream(br, func(e Entry, r io.Reader) error {
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
	if err == nil && lr.N <= 0 {
		err = fmt.Errorf("%w: %s: the sandbox sent more than %d bytes", ErrTransport, op, MaxProbeBytes)
	}
	if err != nil {
		return err
	}
	// tar pads its output; accept a little, never an endless tail.
	if n, _ := io.Copy(io.Discard, io.LimitReader(br, 1<<20)); n == 1<<20 {
		return fmt.Errorf("%w: %s: data after the end of the archive", ErrTransport, op)
	}
	if lr.N <= 0 {
		return fmt.Errorf("%w: %s: the sandbox sent more than %d bytes", ErrTransport, op, MaxProbeBytes)
	}
	return nil
}

func (b *Bridge) knownCaps() (capsState, bool) {
	b.capsMu.Lock()
	defer b.capsMu.Unlock()
	return b.caps, b.caps.known
}

func (b *Bridge) setCaps(c sandboxCaps, missing string) {
	b.capsMu.Lock()
	defer b.capsMu.Unlock()
	b.caps = capsState{sandboxCaps: c, known: true, missing: missing}
}

// capsState is what the first probe learnt.
type capsState struct {
	sandboxCaps
	known   bool
	missing string // " tar mv": required tools the sandbox lacks
}

// Publish implements Target.
func (b *Bridge) Publish(ctx context.Context, root, name string, src *Tree) (err error) {
	unlock, err := b.locks.Lock(ctx, root+"\x00"+name)
	if err != nil {
		return err
	}
	defer unlock()
	// What the sandbox offers is learnt by the first probe, or else by this
	// publish's send command (no extra round trip).
	c, known := b.knownCaps()
	if known && c.missing != "" {
		return c.missingErr()
	}
	tmpName, err := tempName(b.rand, name)
	if err != nil {
		return err
	}
	tmp := path.Join(root, tmpName)
	dst := path.Join(root, name)
	mf := path.Join(root, manifestName(name))

	out, err := b.send(ctx, root, tmp, dst, src)
	if err == nil {
		caps, _ := b.knownCaps()
		if err = ctx.Err(); err == nil { // the last point at which a cancellation stops the publish
			// The publish is short and must not be cut in half by the
			// caller: only the control deadline bounds it.
			err = b.control(context.WithoutCancel(ctx), "moving the new copy into place", Command{Script: publishScript(tmp, dst, mf, name, caps.exchange)})
			if err == nil || errors.Is(err, ErrTransport) {
				return err // on a transport failure its outcome is unknown: send nothing more
			}
		}
	} else if !out.created || out.uncertain {
		return err // not created by us, or the sandbox may still be writing into it
	}
	if cerr := b.cleanup(ctx, tmp, dst, name); cerr != nil {
		return errors.Join(err, cerr)
	}
	return err
}

// ownerFile, in a temporary directory, holds the process id of the tar
// that writes into it. It is no member of the stream.
const ownerFile = "owner"

// sweepScript, part of every publish's setup (with $r the root), removes
// the temporary directories that cut transfers left behind: those whose
// tar has died (its owner process is gone) before the stream's last
// member, "complete", arrived. A directory whose transfer has not begun
// (no owner file), is still running, or has finished and awaits its
// publish is left alone. The directory is first renamed out of the way in
// one step, so a publish that races the sweep either moved the whole new
// tree first or finds it gone and fails; it never publishes part of one.
// The check relies on the sandbox's process ids: a root shared between
// machines (or PID namespaces) can lose a live transfer's directory, which
// fails that transfer, never its sandbox's copy. Best effort: a failure
// here never fails the setup.
const sweepScript = `for s in "$r"/` + tempPrefix + `*; do
[ -d "$s" ] && [ ! -L "$s" ] && [ -f "$s/` + ownerFile + `" ] && [ ! -L "$s/` + ownerFile + `" ] && [ ! -e "$s/complete" ] && [ ! -L "$s/complete" ] || continue
p=; read -r p <"$s/` + ownerFile + `" 2>/dev/null
case "$p" in ''|*[!0-9]*) continue;; esac
if kill -0 "$p" 2>/dev/null || [ -d "/proc/$p" ]; then continue; fi
g="$r/` + reservedPrefix + `-gone-$$"
mv "$s" "$g" 2>/dev/null || continue
rm -rf "$g" 2>/dev/null || { chmod -R u+rwx "$g"; rm -rf "$g"; } 2>/dev/null
done
`

// publishScript moves the transferred tree in tmp into place at dst and its
// manifest to mf. The old manifest leaves before the old tree, in one mv,
// so that no moment pairs a manifest with a tree it does not describe. With
// exchange (mv --exchange), the new tree and the old one trade places in one
// atomic rename, so a reader finds either copy at dst, never nothing;
// without it, or when the exchange fails, two renames leave dst absent for
// an instant (never partial).
func publishScript(tmp, dst, mf, name string, exchange bool) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, `t=%s; d=%s; m=%s
if [ ! -f "$t/complete" ] || [ ! -d "$t/new/tree" ] || [ -L "$t/new/tree" ] || [ ! -f "$t/new/manifest.json" ] || [ -L "$t/new/manifest.json" ] || [ ! -d "$t/old" ] || [ -L "$t/old" ]; then echo "transfer incomplete: $t lacks part of the stream" >&2; exit 3; fi
if [ -e "$m" ] || [ -L "$m" ]; then mv -f "$m" "$t/old/" || exit 4; fi
x=
`, q(tmp), q(dst), q(mf))
	if exchange {
		sb.WriteString(`if [ -d "$d" ] && [ ! -L "$d" ] && mv --exchange "$t/new/tree" "$d" 2>/dev/null; then x=1; fi
`)
	}
	fmt.Fprintf(&sb, `if [ -z "$x" ]; then
if [ -e "$d" ] || [ -L "$d" ]; then mv -f "$d" "$t/old/" || exit 4; fi
if ! mv "$t/new/tree" "$d"; then mv %s "$d"; exit 4; fi
fi
mv -f "$t/new/manifest.json" "$m" || exit 5
rm -rf "$t" 2>/dev/null || { chmod -R u+rwx "$t"; rm -rf "$t"; } || { echo "published, but $t could not be removed; remove it by hand" >&2; exit 6; }`, q(path.Join(tmp, tarOld, name)))
	return sb.String()
}

// maxCarryArgs bounds the bytes of file names one carry command line holds
// (ARG_MAX is 128 KiB per argument and about 2 MiB in all on Linux).
const maxCarryArgs = 96 << 10

// carry copies the unchanged files of plan from the previous copy dst
// into tmp/new/tree inside the sandbox (a copy, never a link), has the
// sandbox hash each copy, and returns the files whose copy has the SHA-256
// the manifest gives: those need not be sent. A copy that is missing, not
// a regular file or has other bytes is sent as usual (the transfer
// replaces it). It is the carry of a plan too long to travel in the send
// command's script: its script travels on stdin, so its length is not
// bounded by ARG_MAX; it is a data command (bounded by ctx), as copying
// may take long.
func (b *Bridge) carry(ctx context.Context, tmp, dst string, plan carryPlan) (map[string]bool, bool, error) {
	script := "umask 0\nah=1\necho " + readyLine + "\n" + plan.script(tmp+"/new/tree", dst) + "echo " + carriedLine + "\nexit 0\n"
	rep := newSendReport(plan.want)
	stderr := &limitedBuffer{Max: 4 << 10, Truncate: true}
	op := "carrying unchanged files into " + tmp
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	outR, outW := io.Pipe()
	go rep.read(outR, cancel)
	ended, rerr := b.runData(dctx, op, Command{Script: "exec /bin/sh -s", Stdin: strings.NewReader(script), Stdout: outW, Stderr: stderr}, func() { outW.Close() }, cancel, rep.carried)
	if !ended && rerr != nil {
		return nil, true, fmt.Errorf("%w; its temporary directory %s is left behind: remove it by hand", rerr, tmp)
	}
	if !ended {
		return nil, true, fmt.Errorf("%s: %w (%w: the sandbox command did not end within %s of being stopped; its temporary directory %s is left behind: remove it by hand)", op, context.Cause(ctx), ErrTransport, b.stopGrace(), tmp)
	}
	<-rep.done
	if rerr != nil {
		return nil, false, b.classify(ctx, nil, op, rerr, stderr)
	}
	if rep.err != nil {
		return nil, false, fmt.Errorf("%w: %s: %w", ErrTransport, op, rep.err)
	}
	return rep.hashes, false, nil
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

// sink marks every write error as the sandbox's going away.
type sink struct{ w io.Writer }

// Write writes p to the underlying writer, wrapping any error in
// errSandboxGone.
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
	tarEnd := make(chan struct{}) // the end of the archive arrived
	go func() {
		err := readTarStream(pr, fn)
		if err != nil {
			cancel()
		} else {
			close(tarEnd)
			// tar pads its output; accept a little, never an endless tail.
			if n, _ := io.Copy(io.Discard, io.LimitReader(pr, 1<<20)); n == 1<<20 {
				err = fmt.Errorf("%w: fetching %s: data after the end of the archive", ErrTransport, d)
				cancel()
			}
		}
		pr.CloseWithError(errFetchDone)
		perr <- err
	}()
	stderr := &limitedBuffer{Max: 4 << 10, Truncate: true}
	script := fmt.Sprintf(`d=%s; w=
if [ -L "$d" ]; then w='is a symbolic link'
elif [ ! -e "$d" ]; then w='is missing'
elif [ ! -d "$d" ]; then w='is not a directory'
elif [ ! -r "$d" ] || [ ! -x "$d" ] || ! cd "$d" 2>/dev/null; then w='is not readable'
fi
if [ -n "$w" ]; then echo "%s$w" >&2; exit %d; fi
exec tar -c -f - .`, q(d), fetchUnusableMarker, fetchUnusable)
	ended, rerr := b.runData(dctx, "fetching "+d, Command{Script: script, Stdout: pw, Stderr: stderr}, nil, func() { pw.CloseWithError(errFetchStopped) }, tarEnd)
	pw.Close()
	var ee *ExitError
	if ended && errors.As(rerr, &ee) && ee.Status == fetchUnusable && ctx.Err() == nil {
		if msg, ok := strings.CutPrefix(strings.TrimSpace(stderr.String()), fetchUnusableMarker); ok {
			return fmt.Errorf("%w: the asset directory %s %s in the sandbox", ErrMismatch, d, msg)
		}
	}
	err := <-perr
	if !ended && rerr != nil {
		return rerr // the archive came whole, the command never ended: abandon it (it only reads)
	}
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
