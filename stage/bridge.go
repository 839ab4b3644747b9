package stage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockdev/airlock/internal/keylock"
	"github.com/airlockdev/airlock/internal/shell"
	"github.com/airlockdev/airlock/sandbox"
)

// BridgeOption configures a Bridge.
type BridgeOption func(*Bridge)

// WithControlTimeout sets the deadline of each control operation (setup,
// probe, manifest read, publish and unstage renames, cleanup). The
// effective deadline is min(d, ControlDeadline(r)) for the Bridge's Runner
// r (MaxControlTimeout unless r is a ControlTimeouter with a shorter one);
// d <= 0 means ControlDeadline(r), the default.
func WithControlTimeout(d time.Duration) BridgeOption {
	return func(b *Bridge) {
		b.timeout = min(sandbox.ClampControl(d), b.timeout)
	}
}

// Bridge is a Target for sandboxes that can only run shell commands. It
// needs POSIX sh and tar (plus mkdir, mv, rm, cat, chmod) in the sandbox,
// and stat or ls (to tell that a publish does not replace the host's
// Source, in a sandbox that shares the host's file system); it uses awk,
// cp -al, find, stat and sha256sum or openssl (for delta publish) and mv
// --exchange when the sandbox has them. Without awk, the check for a file
// system mounted in a copy it replaces or removes runs in sh, which
// refuses (ErrTool) a path holding a space, tab, newline or backslash.
//
// A changed asset costs two commands. The first makes the root and an
// exclusive temporary directory (a control step: it must report the
// directory made within the control deadline), carries the unchanged
// files from the previous copy (delta publish: hard links for the files
// whose stamps the last publish recorded and that are unchanged, copies
// checked against their SHA-256 for the others; their list travels on
// the command's stdin, as an archive of its own before the stream, where
// the sandbox's tar stops at its archive's end (see below), elsewhere in
// the script, or, when too long for it, carried by a command of its own;
// none when the Bridge's own publishes show that sending them costs less:
// once it has timed a stream of 8 MiB or more and a carry of 1,000 files
// or more, it sends the unchanged files where carrying them is estimated
// to cost more than 1.2 times sending them; with an Index, the comparison
// that finds them is then skipped too; every fourth carry so given up is
// made anyway and timed again, so that one slow carry does not decide
// for good), and
// then receives the rest of the tree as a single buffered tar stream on its
// stdin (a data step). While the sandbox carries, the host already walks
// the Source and holds what it will send (up to 4 MiB; past that the walk
// waits), taking the planned files as carried; the stream reaches the
// command only after the carry's report, and a planned file the carry did
// not take after all is read again from the host, checked against its
// size, mode and SHA-256, and sent (not with FollowLinksWithin, whose
// walk waits for the report instead). The second checks the transfer completed and moves
// the tree and its manifest into place: renames alone are its control step
// (under the control deadline). It then deletes the old copy, which it
// moved aside into its temporary directory; the host waits at most one
// more control deadline for that, and neither a failure nor the wait's
// expiry fails the publish (the command is left to finish; what it leaves,
// the next sweep removes). Where the sandbox's tar stops reading at the
// end of its archive (GNU tar; learnt by trying, in the first probe or
// send command), the first command does the second's work too: the host
// pads the stream to whole tar records, the command reports the stream
// extracted and waits for a publish line on its stdin, which the host
// writes only where it would otherwise start the second command (not
// after a cancellation, never after a failure); a command whose stdin
// ends instead moves nothing. A changed asset then costs one command. A
// sandbox whose tar reads to the end of its input (BusyBox) gets two; so
// do later publishes of a Bridge whose command, inline, did not report
// the extraction within the control deadline.
// Each setup and each Remove first sweeps the root: it removes the
// temporary directories whose owner process in the sandbox is gone (dead
// or a zombie), which cut transfers, hosts killed between the transfer and
// the publish, and commands killed while deleting leave behind; a shell
// probe that finds such leftovers has them swept by a command of its own,
// so a stage with nothing to publish removes them too. A probe through a
// FileReader runs no shell: it reads each asset's sweep marker alongside
// its manifest (shell.SweepMarkerName), which a publish keeps in place
// from before its first rename until it has deleted what it moved aside,
// and has the root swept when one is there; a retry that finds the copy
// of a publish killed after its renames therefore still removes what that
// publish left. A publish, cleanup or unstage whose host dies mid-command
// still finishes in the sandbox (it ignores SIGPIPE). An unchanged
// asset costs a share of one probe command (none when the Runner is a
// FileReader). No file content is ever base64-encoded or sent one command
// per file.
//
// A publish runs as named phases (setup, carry, stream, publish, cleanup;
// see phase), each a function with explicit transitions.
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
// not coordinated (calls through one *Bridge are), and two host processes
// staging into one root at once can each sweep the other's transfer in the
// instant between its end and its publish (no sandbox process owns it
// then; a Bridge knows only its own): that publish fails retryably
// (sandbox.Retryable; "stage again") and the previous copy stays. Without procfs in
// the sandbox, a zombie owner is recognised only where ps reports it.
type Bridge struct {
	r       sandbox.Runner
	timeout time.Duration
	rand    io.Reader
	locks   keylock.Map
	capsMu  sync.Mutex
	caps    capsState
	// inflight: the temporary directories of this Bridge's publishes under
	// way, which its sweeps leave alone.
	inflight inflight
	// costs: what its publishes taught it of carrying and sending, to
	// choose between them (linkCosts).
	costs linkCosts
	// twoSessions (tests): publish by a command of its own even where the
	// send command could (shell.Caps.Records).
	twoSessions bool
	// onPhase, when set (tests), is told each transition of a Publish.
	onPhase func(from, to phase, err error)
}

var _ Target = (*Bridge)(nil)

// NewBridge returns a Target that stages through r. A nil r gives a Bridge
// whose every operation fails with an error matching sandbox.ErrBadCommand.
func NewBridge(r sandbox.Runner, opts ...BridgeOption) *Bridge {
	if r == nil {
		r = nilRunner{}
	}
	b := &Bridge{r: r, timeout: sandbox.ControlDeadline(r), rand: rand.Reader}
	for _, o := range opts {
		o(b)
	}
	return b
}

// Control runs cmd as a control operation, sandbox.Control under the
// Bridge's control deadline (WithControlTimeout), enforced even when the
// Runner ignores its context. A failure to complete wraps ErrTransport — a
// timeout, a Runner failure, the caller's cancellation — except a command
// that ran and exited non-zero (*ExitError), a reply that broke the
// protocol (ErrProtocol) and the host's own failures (a caller's writer
// or a host file that failed), which keep their class; see
// sandbox.Control. A timeout does not prove that the command stopped, and
// the Runner may still write to cmd.Stdout and cmd.Stderr afterwards, so
// pass writers that tolerate it. Adapters use it for their own short
// sandbox operations (queue reads, input delivery).
func (b *Bridge) Control(ctx context.Context, cmd sandbox.Command) error {
	return sandbox.Control(ctx, controlRunner{b.r, b.timeout}, cmd)
}

// controlRunner is the Bridge's Runner with the Bridge's control deadline
// (WithControlTimeout), for sandbox.Control.
type controlRunner struct {
	sandbox.Runner
	timeout time.Duration
}

// ControlTimeout implements sandbox.ControlTimeouter.
func (r controlRunner) ControlTimeout() time.Duration { return r.timeout }

func (b *Bridge) control(ctx context.Context, op string, cmd sandbox.Command) error {
	return b.runControl(ctx, op, cmd, 0)
}

// runControl is control. When the caller's ctx ends first, it waits up to
// settle more for the Runner to return before it returns the ctx error. A
// reply that cmd.Stdout refuses as a protocol break (a write error that
// wraps ErrProtocol: a reply over its bound, one its parser refused) stops
// the command at once, and is the operation's error (the Runner gets
// stopGrace to return): a sandbox that floods is hostile, not a transport
// that timed out, whatever the Runner makes of the refused write.
func (b *Bridge) runControl(ctx context.Context, op string, cmd sandbox.Command, settle time.Duration) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	stderr := &limitedBuffer{Max: 4 << 10, Truncate: true}
	if cmd.Stderr == nil {
		cmd.Stderr = stderr
	}
	cctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	out := &refusalWriter{w: cmd.Stdout, stop: cancel}
	if cmd.Stdout != nil {
		cmd.Stdout = out
	}
	done := make(chan error, 1)
	go func() { done <- b.r.Run(cctx, cmd) }()
	select {
	case err := <-done:
		if perr := out.refused(); perr != nil && ctx.Err() == nil {
			return fmt.Errorf("%s: %w", op, perr)
		}
		return b.classify(ctx, cctx, op, err, stderr)
	case <-cctx.Done():
		if err := ctx.Err(); err != nil {
			waitFor(done, settle)
			return fmt.Errorf("%s: %w", op, err)
		}
		if perr := out.refused(); perr != nil {
			waitFor(done, b.stopGrace())
			return fmt.Errorf("%s: %w", op, perr)
		}
		return b.timeoutErr(op)
	}
}

// waitFor waits up to d for done to deliver.
func waitFor(done <-chan error, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// refusalWriter is a control command's Stdout: it passes writes on to w
// and, at the first write w refuses as a protocol break, keeps that error
// and calls stop (which stops the command).
type refusalWriter struct {
	w    io.Writer
	stop func()
	mu   sync.Mutex
	perr error
}

// Write implements io.Writer.
func (r *refusalWriter) Write(p []byte) (int, error) {
	n, err := r.w.Write(p)
	if err != nil && errors.Is(err, sandbox.ErrProtocol) {
		r.mu.Lock()
		if r.perr == nil {
			r.perr = err
		}
		r.mu.Unlock()
		r.stop()
	}
	return n, err
}

// refused returns the protocol break w reported, or nil.
func (r *refusalWriter) refused() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.perr
}

// renameThenDelete runs a publish or unstage command: a control operation
// until the command prints shell.PublishedLine (its renames are done) or
// ends, and then, for deleting what it moved aside, a wait of at most the
// control deadline more. Once the line came, the operation has succeeded
// whatever follows: a deletion that fails, is cut or outlasts the wait
// leaves a directory that the next sweep removes (the command is not
// stopped; it may still be deleting). The caller's cancellation cuts
// neither wait short: a cut publish or cleanup would leave its directory
// behind until the next sweep. A command that prints something else first
// (a sandbox's noisy mv) is waited for to its end, under the control
// deadline, and its exit status decides.
func (b *Bridge) renameThenDelete(ctx context.Context, op string, cmd sandbox.Command) error {
	stderr := &limitedBuffer{Max: 4 << 10, Truncate: true}
	cmd.Stderr = stderr
	out := shell.NewLineWatch(shell.PublishedLine)
	cmd.Stdout = out
	rctx, rcancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() {
		defer rcancel()
		done <- b.r.Run(rctx, cmd)
	}()
	timer := time.NewTimer(b.timeout)
	defer timer.Stop()
	select {
	case err := <-done:
		if out.Saw() {
			return nil
		}
		return b.classify(context.WithoutCancel(ctx), nil, op, err, stderr)
	case <-out.Seen():
	case <-timer.C:
		rcancel()
		return b.timeoutErr(op)
	}
	timer.Reset(b.timeout)
	select {
	case <-done:
	case <-timer.C:
	}
	return nil
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
func (b *Bridge) runData(dctx context.Context, op string, cmd sandbox.Command, after, stop func(), armAt <-chan struct{}) (ended bool, err error) {
	x := sandbox.Watch(dctx, b.r, cmd, sandbox.WatchOptions{Op: op, Deadline: b.timeout, After: func(error) {
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
// control context (nil for data commands). A command that ran and failed
// is its *ExitError; a sandbox that broke the protocol (an error wrapping
// ErrProtocol, such as an output over its bound) and a failure of the
// host's own (an *fs.PathError the Runner met on the host: a full disk
// where it writes the script or the output) keep their class, with op
// added, so that sandbox.Retryable answers for them (never retryable, and
// by the errno); anything else the Runner returns is a transport failure.
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
	var ee *sandbox.ExitError
	if errors.As(err, &ee) {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			return fmt.Errorf("%s failed in the sandbox: %w", op, err)
		}
		return fmt.Errorf("%s failed in the sandbox: %w: %s", op, err, msg)
	}
	if !errors.Is(err, sandbox.ErrTransport) && shell.KeepsClass(err) {
		return fmt.Errorf("%s: %w", op, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrTransport, op, err)
}

// nilRunner stands for the nil Runner NewBridge was given: it runs nothing.
type nilRunner struct{}

// errNilRunner is what nilRunner answers.
var errNilRunner = fmt.Errorf("%w: stage: the Bridge was made with a nil sandbox.Runner; pass the sandbox's Runner to NewBridge or Over", sandbox.ErrBadCommand)

func (nilRunner) Run(context.Context, sandbox.Command) error { return errNilRunner }

// MaxProbeBytes bounds the whole reply of one Probe, all manifests
// together: a sandbox that sends more fails the probe with ErrProtocol,
// and the host never holds more than this of its output.
const MaxProbeBytes = MaxManifestBytes + 1<<20

// sandboxCaps is what Bridge learns about a sandbox once, in its first
// probe.
type sandboxCaps struct {
	sha256   bool // sha256sum or openssl is there: unchanged files can be carried over and checked (delta publish)
	exchange bool // mv --exchange (GNU coreutils 9.5+): the publish swaps old and new copies in one rename
	records  bool // tar stops at the end of its archive: the send command publishes (shell.Caps.Records)
}

// Probe implements Target. The sandbox lists the manifests that exist as
// regular files and sends them as one tar stream: one command, one process
// besides the shell, whatever the number of names. The reply is parsed as
// it streams and bounded as a whole by MaxProbeBytes. The first probe of a
// Bridge also learns what the sandbox offers (sha256sum, mv --exchange)
// and fails with a clear error when a tool the protocol needs is missing.
// Through a Runner that is a sandbox.FileReader, the manifests and the
// names' sweep markers are read as files instead (probeFiles) and no
// command runs, unless a marker is there: then one sweep of the root.
func (b *Bridge) Probe(ctx context.Context, root string, names []string) ([][]byte, error) {
	if c, known := b.knownCaps(); known && c.missing != "" {
		return nil, c.missingErr()
	}
	// A probe waits for this Bridge's publishes of the same assets: one
	// that moves a manifest aside while the probe reads it would fail the
	// probe (tar: Cannot stat). Locks are taken in name order, one
	// Publish holds one, so nothing waits in a circle.
	keys := make([]string, len(names))
	for i, n := range names {
		keys[i] = root + "\x00" + n
	}
	slices.Sort(keys)
	for _, k := range slices.Compact(keys) {
		unlock, err := b.locks.Lock(ctx, k)
		if err != nil {
			return nil, err
		}
		defer unlock()
	}
	if fr, ok := b.r.(sandbox.FileReader); ok && len(names) > 0 {
		// No process in the sandbox: an unchanged asset costs no command at
		// all; what the sandbox offers is learnt when a publish needs it. A
		// sweep marker found means a publish was killed before it deleted
		// what it moved aside: the root is swept, as a shell probe that
		// finds leftovers has it swept.
		files, marked, err := b.probeFiles(ctx, fr, root, names)
		if err == nil && marked {
			err = b.sweepRoot(ctx, root)
		}
		if err != nil {
			return nil, err
		}
		return files, nil
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
	files := make([]string, len(names))
	for i, n := range names {
		files[i] = manifestName(n)
	}
	// A link at the root is never followed: nothing is staged there (the
	// next publish replaces it by a directory). Leftovers a sweep would
	// remove are reported, so that a stage with nothing to publish still
	// removes them (see sweepRoot).
	script := shell.ProbeScript(root, !known, b.inflight.under(root), names)
	op := "reading the stored manifests under " + root

	var reply shell.ProbeReply
	pr, pw := io.Pipe()
	parsed := make(chan error, 1)
	refused := make(chan struct{}) // closed before a refusal disturbs the command
	go func() {
		var err error
		reply, err = shell.ReadProbe(pr, files, MaxManifestBytes, MaxProbeBytes)
		if reply.Asked {
			b.setCaps(reply.Caps)
		}
		if err != nil {
			err = fmt.Errorf("%s: %w", op, err)
			close(refused)
		}
		pr.CloseWithError(err) // a reply that breaks the protocol stops the command's output
		parsed <- err
	}()
	err := b.control(ctx, op, sandbox.Command{Script: script, Stdout: pw})
	// A reply the parser refused while the command ran explains the
	// command's failure (its output was cut off: control then returns the
	// refusal); otherwise the command's own error comes first. A run that
	// failed on the transport by itself is that failure: its output is not
	// judged (shell.Unjudged: an engine's own error where the reply should
	// be).
	early := isClosed(refused)
	pw.Close()
	perr := <-parsed
	switch {
	case shell.Unjudged(err):
		return nil, err
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
	if reply.Leftovers {
		if err := b.sweepRoot(ctx, root); err != nil {
			return nil, err
		}
	}
	return reply.Files, nil
}

// sweepRoot runs a sweep of root (shell.SweepRootScript) as a command of its
// own: what a probe that found leftovers runs, so that the next stage of a
// root removes them even when it has nothing to publish. The renames are a
// control step; the deletion follows outside the control deadline (see
// renameThenDelete). A command that ran and failed is not an error (the
// next sweep tries again); a transport failure is.
func (b *Bridge) sweepRoot(ctx context.Context, root string) error {
	script := shell.SweepRootScript(root, b.inflight.under(root))
	err := b.renameThenDelete(ctx, "sweeping the leftovers under "+root, sandbox.Command{Script: script})
	var ee *sandbox.ExitError
	if errors.As(err, &ee) {
		return nil
	}
	return err
}

func (c capsState) missingErr() error {
	return fmt.Errorf("%w: the sandbox lacks%s, which staging needs (POSIX sh with tar, mkdir, mv, rm, cat and chmod); install it in the sandbox image", ErrTool, c.missing)
}

func (b *Bridge) knownCaps() (capsState, bool) {
	b.capsMu.Lock()
	defer b.capsMu.Unlock()
	return b.caps, b.caps.known
}

func (b *Bridge) setCaps(c shell.Caps) {
	b.capsMu.Lock()
	defer b.capsMu.Unlock()
	b.caps = capsState{sandboxCaps: sandboxCaps{sha256: c.SHA256, exchange: c.Exchange, records: c.Records}, known: true, missing: c.Missing}
}

// dropRecords stops the send command from publishing (sandboxCaps.records)
// for this Bridge's later publishes.
func (b *Bridge) dropRecords() {
	b.capsMu.Lock()
	defer b.capsMu.Unlock()
	b.caps.records = false
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
	// Where Stage left the comparison with the copy in place to the
	// Target, it is worth its walk only if carrying every file of that copy
	// might cost less than sending them (a delta never costs more than a
	// full stage); an equal Source then publishes nothing.
	if files, n, ok := src.previous(); ok {
		t0 := time.Now()
		compare := (!known || c.sha256) && b.costs.comparePays(files, n)
		if src.reuseWhole(compare) {
			return nil
		}
		if compare {
			b.costs.learnCompare(files, time.Since(t0))
		}
	}
	// From its transfer's end to its publish no sandbox process owns tmp:
	// this Bridge's sweeps leave it alone.
	tmp, err := b.inflight.add(b.rand, root, name)
	if err != nil {
		return err
	}
	defer b.inflight.remove(tmp)
	dst := path.Join(root, name)
	mf := path.Join(root, manifestName(name))

	s := &publishRun{b: b, ctx: ctx, root: root, name: name, tmp: tmp, dst: dst, mf: mf, src: src, guard: sourceIDs(src.src)}
	start := time.Now()
	if err := s.run(); err != nil {
		return overlapped(raced(err), dst, src.src)
	}
	b.costs.learn(s.streamed, len(s.plan.Want), time.Since(start))
	return nil
}

// racedRename is a publish or unstage whose renames failed
// (shell.RenameExit), most often because another process published or
// removed the asset at that moment: the previous copy stays, and staging
// again succeeds, so sandbox.Retryable reports it retryable.
type racedRename struct{ error }

func (r racedRename) Error() string {
	return r.error.Error() + " (another publish or unstage of this asset may have raced this one: stage again)"
}

func (r racedRename) Unwrap() error { return r.error }

// Retryable reports true: see racedRename.
func (racedRename) Retryable() bool { return true }

// raced returns err as a racedRename when it holds the exit status
// shell.RenameExit, else err.
func raced(err error) error {
	if ee := (*sandbox.ExitError)(nil); errors.As(err, &ee) && ee.Status == shell.RenameExit {
		return racedRename{err}
	}
	return err
}

// ownerFile and gonePrefix are the protocol's names (shell.OwnerFile,
// shell.GonePrefix), which Dir uses too.
const (
	ownerFile  = shell.OwnerFile
	gonePrefix = shell.GonePrefix
)

// carry carries the unchanged files of plan from the previous copy dst
// into tmp/new/tree inside the sandbox (a hard link for a file its stamps
// vouch for, else a copy the sandbox hashes; see shell.StampsName), and
// returns the files linked or whose copy has the SHA-256 the manifest
// gives: those need not be sent. A copy that is missing, not
// a regular file or has other bytes is sent as usual (the transfer
// replaces it). It is the carry of a plan too long to travel in the send
// command's script: its script travels on stdin, so its length is not
// bounded by ARG_MAX; it is a data command (bounded by ctx), as copying
// may take long.
func (b *Bridge) carry(ctx context.Context, tmp, dst string, plan *shell.CarryPlan) (map[string]bool, bool, error) {
	script := shell.CarryScript(plan, tmp, dst)
	rep := shell.NewReport(plan.Want)
	stderr := &limitedBuffer{Max: 4 << 10, Truncate: true}
	op := "carrying unchanged files into " + tmp
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	outR, outW := io.Pipe()
	run := newRunEnd(dctx)
	go rep.Read(outR, func() { run.refused(cancel) })
	ended, rerr := b.runData(dctx, op, sandbox.Command{Script: shell.StdinScript, Stdin: strings.NewReader(script), Stdout: outW, Stderr: stderr}, func() {
		outW.Close()
		run.returned()
	}, run.stopping(cancel), rep.Carried)
	if !ended && rerr != nil {
		return nil, true, fmt.Errorf("%w; its temporary directory %s is left behind: remove it by hand", rerr, tmp)
	}
	if !ended {
		return nil, true, fmt.Errorf("%s: %w (%w: the sandbox command did not end within %s of being stopped; its temporary directory %s is left behind: remove it by hand)", op, context.Cause(ctx), ErrTransport, b.stopGrace(), tmp)
	}
	<-rep.Done
	switch {
	case rep.Err != nil && !run.unjudged(rerr):
		// A report that broke the protocol: the command was stopped for
		// it, or ended by itself other than by a transport failure.
		return nil, false, fmt.Errorf("%s: %w", op, rep.Err)
	case rerr != nil:
		return nil, false, b.classify(ctx, nil, op, rerr, stderr)
	}
	return rep.Hashes, false, nil
}

// runEnd tells how a command's run ended, for the one rule of
// shell.Unjudged: the output of a command whose run failed on the
// transport by itself is not judged; the host's verdict on it stands
// when the host stopped the command (for that verdict or otherwise).
type runEnd struct {
	ctx      context.Context // the command's: ended by the host's stop
	ran      chan struct{}   // closed once the Runner returned
	byItself bool            // it returned before ctx ended (set before ran is closed)
	stopped  atomic.Bool     // the host told the command to stop (stopping)
}

func newRunEnd(ctx context.Context) *runEnd { return &runEnd{ctx: ctx, ran: make(chan struct{})} }

// returned records the Runner's return; it runs in the Runner's goroutine
// (runData's after).
func (e *runEnd) returned() {
	e.byItself = e.ctx.Err() == nil
	close(e.ran)
}

// stopping returns stop, recording first that the host stopped the
// command (a reader that then fails fails by the host's doing).
func (e *runEnd) stopping(stop func()) func() {
	return func() {
		e.stopped.Store(true)
		stop()
	}
}

// settle lets a command whose output was refused end by itself
// (shell.Settle, reading out), unless the host already stopped it; it
// reports whether the Runner returned.
func (e *runEnd) settle(out io.Reader) bool {
	return !e.stopped.Load() && e.ctx.Err() == nil && shell.Settle(e.ran, out)
}

// refused runs when a report's reader (which drains the output itself)
// found the command's output broken: the command is left to end by itself
// for a moment (settle), and stop is called when it does not.
func (e *runEnd) refused(stop func()) {
	go func() {
		if !e.settle(nil) {
			stop()
		}
	}()
}

// unjudged reports whether the command's run ended by itself with rerr, a
// transport failure (shell.Unjudged): its output is not judged, and rerr
// is the command's error. Valid once the Runner returned.
func (e *runEnd) unjudged(rerr error) bool { return e.byItself && shell.Unjudged(rerr) }

// cleanup removes the temporary directory tmp of a failed publish, putting
// back the previous copy if the publish had moved it aside. The putting
// back is a control operation that the caller's cancellation does not cut
// short; the deletion follows it outside the control deadline (see
// renameThenDelete), claiming tmp first so that a cut deletion leaves a
// directory the next sweep removes.
func (b *Bridge) cleanup(ctx context.Context, tmp, dst, name string) error {
	return b.renameThenDelete(ctx, "removing temporary directory "+tmp, sandbox.Command{Script: shell.CleanupScript(tmp, dst, name)})
}

// inflight names the temporary directories of a Bridge's publishes and
// remembers those under way, which the Bridge's sweeps leave alone. Its
// names end in -<random>-<tag><n>: a random part, so that the sandbox
// cannot take the next name first; a tag drawn once per Bridge and a
// number that counts up, so that a sweep script made before a publish
// named its directory leaves that one alone too (shell.Skip): the script
// may run after the directory was made and its transfer ended.
type inflight struct {
	mu  sync.Mutex
	tag string // 8 lower-case hex digits; "" until the first name
	seq uint64
	m   map[string]int
}

// add names a temporary directory for the asset name under root, drawing
// the tag from r the first time, and registers it; remove it when the
// publish is over.
func (s *inflight) add(r io.Reader, root, name string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tag == "" {
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return "", fmt.Errorf("choosing a temporary name: %w", err)
		}
		s.tag = hex.EncodeToString(b[:])
	}
	if s.m == nil {
		s.m = make(map[string]int)
	}
	var b [4]byte // a random part too, so that the sandbox cannot take the next name first
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return "", fmt.Errorf("choosing a temporary name: %w", err)
	}
	s.seq++
	p := path.Join(root, fmt.Sprintf("%s%s-%x-%s%08d", tempPrefix, name, b, s.tag, s.seq))
	s.m[p]++
	return p, nil
}

func (s *inflight) remove(p string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[p]--; s.m[p] <= 0 {
		delete(s.m, p)
	}
}

// under returns what a sweep of dir made now leaves alone: the base names
// of the directories under way directly under dir, sorted, and the names
// given out after this call (shell.Skip).
func (s *inflight) under(dir string) shell.Skip {
	s.mu.Lock()
	defer s.mu.Unlock()
	skip := shell.Skip{Tag: s.tag, Seq: s.seq}
	for p := range s.m {
		if path.Dir(p) == dir {
			skip.Names = append(skip.Names, path.Base(p))
		}
	}
	slices.Sort(skip.Names)
	return skip
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
// with shell.FetchUnusable and says why on stderr).
func (b *Bridge) Fetch(ctx context.Context, root, name string, fn func(e Entry, r io.Reader) error) error {
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	d := path.Join(root, name)
	pr, pw := io.Pipe()
	perr := make(chan error, 1)
	refused := make(chan struct{}) // closed before a refusal stops the command
	tarEnd := make(chan struct{})  // the end of the archive arrived
	run := newRunEnd(dctx)
	go func() {
		err := shell.ReadFetch(pr, func(e shell.Entry, r io.Reader) error {
			return fn(Entry{Path: e.Path, Mode: e.Mode, Size: e.Size}, r)
		}, func() { close(tarEnd) })
		if err != nil {
			judged := errors.Is(err, sandbox.ErrProtocol) // else fn's own error
			if judged {
				err = fmt.Errorf("fetching %s: %w", d, err)
			}
			close(refused)
			if !judged || !run.settle(pr) {
				cancel()
			}
		}
		pr.CloseWithError(errFetchDone)
		perr <- err
	}()
	stderr := &limitedBuffer{Max: 4 << 10, Truncate: true}
	script := shell.FetchScript(root, d)
	ended, rerr := b.runData(dctx, "fetching "+d, sandbox.Command{Script: script, Stdout: pw, Stderr: stderr}, run.returned, run.stopping(func() { pw.CloseWithError(errFetchStopped) }), tarEnd)
	// A parse that failed while the command ran explains its end (the
	// archive broke the protocol); a parse that failed only once the
	// command had ended read a cut archive, which the command's own
	// failure explains.
	early := isClosed(refused)
	pw.Close()
	err := <-perr
	var ee *sandbox.ExitError
	if ended && errors.As(rerr, &ee) && ee.Status == shell.FetchUnusable && ctx.Err() == nil {
		if msg, ok := shell.FetchReason(stderr.String()); ok {
			return fmt.Errorf("%w: the asset directory %s %s in the sandbox", ErrMismatch, d, msg)
		}
	}
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
	failed := rerr != nil && !errors.Is(rerr, errFetchDone)
	if early && errors.Is(err, sandbox.ErrProtocol) && run.unjudged(rerr) {
		// Refused, but the run failed on the transport by itself: its
		// output is not judged (an engine's own error in place of the
		// archive).
		return b.classify(ctx, nil, "fetching "+d, rerr, stderr)
	}
	if err != nil && (early || !failed) {
		if cerr := ctx.Err(); cerr != nil {
			return fmt.Errorf("fetching %s: %w", d, cerr)
		}
		return err
	}
	if failed {
		return b.classify(ctx, nil, "fetching "+d, rerr, stderr)
	}
	return nil
}

var errFetchStopped = errors.New("fetch stopped")

// isClosed reports whether c is closed.
func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

var errFetchDone = errors.New("fetch finished reading")
