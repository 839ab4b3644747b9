package stage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/airlockdev/airlock/internal/shell"
	"github.com/airlockdev/airlock/sandbox"
)

// phase is one step of a Publish through a Bridge. The send command runs
// through the first three; the publish and the cleanup are commands of
// their own, except that a sandbox whose tar stops at the end of its
// archive (shell.Caps.Records) has the send command publish too, once the
// host writes the publish line on its stdin (inline): one session instead
// of two, with the same guarantee, since the host writes that line only
// at the point where it would start the publish command.
//
//	setup   → carry    the temporary directory exists (ReadyLine came)
//	carry   → stream   the unchanged files are carried (CarriedLine came)
//	stream  → publish  the send command read the whole stream and ended
//	publish → done     the new copy is in place, or its outcome is unknown
//	any     → cleanup  a failure after tmp was made, once no command writes into it
//	any     → done     a failure before tmp was made, or with a command that may still write
//	cleanup → done
type phase int

const (
	phaseSetup   phase = iota // the send command makes the temporary directory: a control step
	phaseCarry                // unchanged files are copied inside the sandbox: data
	phaseStream               // the rest of the tree is streamed: data, its end a control step
	phasePublish              // the new copy is moved into place: a control step
	phaseCleanup              // a failed publish's temporary directory is removed
	phaseDone
)

var phaseNames = [...]string{"setup", "carry", "stream", "publish", "cleanup", "done"}

// String returns the phase's name ("setup", …, "done").
func (p phase) String() string {
	if p < 0 || int(p) >= len(phaseNames) {
		return fmt.Sprintf("phase(%d)", int(p))
	}
	return phaseNames[p]
}

// sendOutcome is how a failed send phase left the temporary directory.
type sendOutcome struct {
	// created: the temporary directory was made and the send command has
	// ended (or never got that far), so removing tmp is safe.
	created bool
	// uncertain: the send command may still be running (or its outcome is
	// unknown after a control timeout): send nothing more to tmp.
	uncertain bool
}

// publishRun is one Publish through a Bridge, carried from phase to phase.
type publishRun struct {
	b                        *Bridge
	ctx                      context.Context
	root, name, tmp, dst, mf string
	src                      *Tree
	plan                     shell.CarryPlan
	embed                    bool            // the carry travels in the send command's script
	inline                   bool            // the send command publishes, at the publish line (shell.Send.Publish)
	planIn                   bool            // the carry plan travels on the send command's stdin where its tar stops at its archive's end (shell.Send.PlanIn)
	planned                  chan error      // the plan's writer's outcome, when it writes the plan on stdin; the stream follows it
	cmd                      *sendCmd        // the send command, from setup on
	carried                  map[string]bool // the files the sandbox carried and checked
	early                    *earlyStream    // the stream, written during the carry (streamsEarly)
	streamed                 int64           // the tar stream's bytes, once written
	guard                    []shell.FileID  // the Source and the directories above it (sourceIDs)
	err                      error
}

// run runs the phases from setup to done and returns the publish's error.
func (s *publishRun) run() error {
	for p := phaseSetup; p != phaseDone; {
		next := s.step(p)
		if s.cmd != nil && !s.cmd.deleting && (next > phasePublish || next > phaseStream && !s.inline) {
			s.cmd.cancel() // the send command is over (or abandoned)
		}
		if s.b.onPhase != nil {
			s.b.onPhase(p, next, s.err)
		}
		p = next
	}
	return s.err
}

func (s *publishRun) step(p phase) phase {
	switch p {
	case phaseSetup:
		return s.setup()
	case phaseCarry:
		return s.carry()
	case phaseStream:
		return s.stream()
	case phasePublish:
		return s.publish()
	case phaseCleanup:
		return s.cleanup()
	}
	panic("stage: no phase " + p.String())
}

// failSend ends a send phase with err: the cleanup follows when the
// temporary directory was made and no command may still write into it.
func (s *publishRun) failSend(out sendOutcome, err error) phase {
	s.err = err
	if out.created && !out.uncertain {
		return phaseCleanup
	}
	return phaseDone
}

// setup starts the send command and waits, under the control deadline,
// for it to report the temporary directory made (learning the sandbox's
// tools on the way when the Bridge does not know them).
func (s *publishRun) setup() phase {
	c, known := s.b.knownCaps()
	if u := s.src.Unchanged(); len(u) > 0 && (!known || c.sha256) && s.b.costs.carryPays(u) {
		s.plan = planCarry(u)
		s.plan.Manifest = s.src.base // the sandbox vouches by stamps only while its manifest is this one
	}
	s.embed = s.plan.Size <= maxEmbeddedCarry
	// Where the sandbox's tar stops at its archive's end, the plan travels
	// on the send command's stdin before the stream, whatever its size:
	// one session carries and sends (with Detect, the script decides).
	s.planIn = len(s.plan.Want) > 0 && (!known || c.records) && !s.b.twoSessions
	cmd, err := s.b.startSend(s.ctx, s.sendScript(known, c), s.plan.Want, s.tmp)
	if err != nil {
		return s.failSend(sendOutcome{}, err)
	}
	s.cmd = cmd
	op := "creating temporary directory " + s.tmp
	if out, err := s.awaitReady(op); err != nil {
		return s.failSend(out, err)
	}
	if !known {
		if out, err := s.learnCaps(op); err != nil {
			return s.failSend(out, err)
		}
	}
	if out, err := s.checkReady(op); err != nil {
		return s.failSend(out, err)
	}
	c, _ = s.b.knownCaps()
	s.inline = c.records && !s.b.twoSessions // the script publishes at the publish line exactly when its sandbox's tar stops at its archive's end
	return phaseCarry
}

// sendScript is the send command (shell.SendScript): setup (learning the
// sandbox's tools when known is false), the carry of unchanged files when
// it is embedded, and the extraction of the stream.
func (s *publishRun) sendScript(known bool, c capsState) string {
	send := shell.Send{Root: s.root, Tmp: s.tmp, Dst: s.dst, Detect: !known, Hash: c.sha256, Skip: s.b.inflight.under(s.root), Split: s.src.split}
	if s.embed {
		send.Carry = &s.plan
	}
	if s.planIn {
		send.PlanIn = &s.plan
	}
	if (!known || c.records) && !s.b.twoSessions {
		// Not known yet: the script tries the exchange (an mv without it
		// fails and the two renames follow).
		send.Publish = &shell.Publish{Manifest: s.mf, Name: s.name, Exchange: c.exchange || !known, Guard: s.guard}
	}
	return shell.SendScript(send)
}

// awaitReady waits for ReadyLine or the command's end, under the control
// deadline.
func (s *publishRun) awaitReady(op string) (sendOutcome, error) {
	c := s.cmd
	timer := time.NewTimer(s.b.timeout)
	defer timer.Stop()
	select {
	case <-c.rep.Ready:
	case err := <-c.done:
		c.end(err)
	case <-timer.C:
		c.stop()
		return sendOutcome{uncertain: true}, s.b.timeoutErr(op)
	case <-s.ctx.Done():
		if !c.stop() {
			return sendOutcome{uncertain: true}, fmt.Errorf("%s: %w (%w: %s)", op, s.ctx.Err(), ErrTransport, c.left(op))
		}
		// The exclusive mkdir of a fresh random name either happened or
		// not, and the command has ended: removing that name is safe.
		return sendOutcome{created: true}, fmt.Errorf("%s: %w", op, s.ctx.Err())
	}
	return sendOutcome{}, nil
}

// learnCaps takes what the sandbox offers from the send command's header.
func (s *publishRun) learnCaps(op string) (sendOutcome, error) {
	c := s.cmd
	if caps, err := shell.ParseCaps(c.rep.Caps); err == nil {
		s.b.setCaps(caps)
	}
	if k, ok := s.b.knownCaps(); ok && k.missing != "" {
		return sendOutcome{}, k.missingErr()
	} else if ok {
		return sendOutcome{}, nil
	}
	if c.ended && c.rerr != nil && c.reportErr() == nil {
		return sendOutcome{}, s.b.classify(s.ctx, nil, op, c.rerr, c.stderr)
	}
	ok := c.stop()
	out := sendOutcome{created: ok, uncertain: !ok}
	switch {
	case c.reportErr() != nil:
		return out, fmt.Errorf("%s: %w", op, c.rep.Err)
	case c.rep.Caps != "":
		return out, fmt.Errorf("%s: %w: the setup command reported a malformed capability word %q", op, sandbox.ErrProtocol, shell.Truncate(c.rep.Caps, 64))
	}
	return out, fmt.Errorf("%w: %s: the setup command did not report what the sandbox offers", ErrTransport, op)
}

// checkReady fails the setup of a command that ended before it made the
// directory.
func (s *publishRun) checkReady(op string) (sendOutcome, error) {
	c := s.cmd
	select {
	case <-c.rep.Ready:
		return sendOutcome{}, nil // also when the command got past the setup and then ended
	default:
	}
	switch {
	case c.reportErr() != nil:
		return sendOutcome{}, fmt.Errorf("%s: %w", op, c.rep.Err)
	case c.rerr == nil:
		return sendOutcome{created: true}, fmt.Errorf("%w: %s: the sandbox command ended before it made the directory", ErrTransport, op)
	case s.ctx.Err() != nil:
		// As when the cancellation is seen first (awaitReady): the
		// command has ended, so removing the fresh name is safe.
		return sendOutcome{created: true}, fmt.Errorf("%s: %w", op, s.ctx.Err())
	}
	return sendOutcome{}, s.b.classify(s.ctx, nil, op, c.rerr, c.stderr) // not created by us
}

// carry carries the unchanged files by a command of its own when the plan
// is too long to travel in the send command's script, then waits for the
// send command's CarriedLine (data: bounded by the caller's context).
// Where it may, the stream's writer runs beside the carry (earlyStream);
// a carry that fails stops it before anything reached the command.
func (s *publishRun) carry() phase {
	next := s.carryFiles()
	if s.early != nil && next != phaseStream {
		s.early.stop()
	}
	return next
}

// carryFiles is carry, with the stream's writer started beside it when it
// may (streamsEarly) and released at the carry's end.
func (s *publishRun) carryFiles() phase {
	c := s.cmd
	s.carried = c.rep.Hashes
	if k, _ := s.b.knownCaps(); len(s.plan.Want) > 0 && !c.ended {
		if s.streamsEarly(k.sha256) {
			s.startEarly()
		}
		switch {
		case s.planIn && k.records:
			planned := make(chan error, 1)
			s.planned = planned
			go func() { planned <- shell.WritePlan(sink{c.pw}, &s.plan) }()
		case !s.embed && k.sha256:
			carried, uncertain, err := s.b.carry(s.ctx, s.tmp, s.dst, &s.plan)
			if err != nil {
				ok := c.stop()
				return s.failSend(sendOutcome{created: ok && !uncertain, uncertain: uncertain || !ok}, err)
			}
			s.carried = carried
		}
	}
	op := "sending the tree to " + s.tmp
	if !c.ended {
		select {
		case <-c.rep.Carried:
			if s.early != nil {
				s.early.release(s.carried)
			}
			return phaseStream // the stream waits for the plan's writer (writeStream)
		case err := <-c.done:
			c.end(err)
		case <-s.ctx.Done():
			if !c.stop() {
				return s.failSend(sendOutcome{uncertain: true}, fmt.Errorf("%s: %w (%w: %s)", op, s.ctx.Err(), ErrTransport, c.left(op)))
			}
			return s.failSend(sendOutcome{created: true}, fmt.Errorf("%s: %w", op, s.ctx.Err()))
		}
	}
	if s.planned != nil {
		c.stopWriting()
		<-s.planned
	}
	created := sendOutcome{created: true}
	switch {
	case c.reportErr() != nil:
		return s.failSend(created, fmt.Errorf("%s: %w", op, c.rep.Err))
	case c.rerr != nil:
		return s.failSend(created, s.b.classify(s.ctx, nil, op, c.rerr, c.stderr))
	}
	return s.failSend(created, fmt.Errorf("%w: %s: the sandbox command exited before reading the stream", ErrTransport, op))
}

// stream writes the tar stream of what was not carried and waits for the
// send command's end; once the command has the stream's last byte, the
// wait is a control step.
func (s *publishRun) stream() phase {
	c := s.cmd
	op := "sending the tree to " + s.tmp
	wdone := make(chan error, 1)
	go func() {
		werr := s.writeStream()
		if werr != nil {
			c.cancel() // stop the sandbox side before it sees the end of the stream
		}
		if s.inline && werr == nil {
			c.x.ArmWhenRead(c.pr) // the command goes on reading stdin (the publish line)
		} else if cerr := c.pw.Close(); werr == nil && cerr == nil {
			c.x.ArmWhenRead(c.pr) // the stream's last byte is written: armed once the command has read it
		}
		wdone <- werr
	}()
	var extracted <-chan struct{} // never, unless inline
	if s.inline {
		extracted = c.rep.Extracted
	}
	select {
	case <-extracted:
		return s.extracted(op, wdone)
	case err := <-c.done:
		c.end(err)
		c.stopWriting()
	case <-c.x.Expired():
		// The command has all of the stream and has not ended (or, inline,
		// reported it extracted) within the control deadline: its outcome
		// is unknown; publish nothing. Inline, the sandbox's tar may be
		// waiting for the end of its input after all: the next publish
		// has a command of its own.
		c.cancel()
		if s.inline {
			s.b.dropRecords()
		}
		return s.failSend(sendOutcome{uncertain: true}, fmt.Errorf("%w; its temporary directory %s is left behind: remove it by hand", c.x.TimeoutErr(), s.tmp))
	case <-c.dctx.Done():
		if !c.stop() {
			return s.failSend(sendOutcome{uncertain: true}, s.abandoned(op, wdone))
		}
	}
	werr := <-wdone
	created := sendOutcome{created: true}
	switch {
	case c.reportErr() != nil && s.ctx.Err() == nil: // the report's failure stopped the stream
		return s.failSend(created, fmt.Errorf("%s: %w", op, c.rep.Err))
	case werr != nil && !errors.Is(werr, errSandboxGone):
		return s.failSend(created, werr) // reading the source failed (or the caller cancelled)
	case c.reportErr() != nil:
		return s.failSend(created, fmt.Errorf("%s: %w", op, c.rep.Err))
	case c.rerr != nil:
		return s.failSend(created, s.b.classify(s.ctx, nil, op, c.rerr, c.stderr))
	case werr != nil:
		return s.failSend(created, fmt.Errorf("%w: %s: the sandbox command exited before reading the whole stream", ErrTransport, op))
	case s.inline:
		return s.failSend(created, fmt.Errorf("%w: %s: the sandbox command exited without reporting the stream extracted", ErrTransport, op))
	}
	return phasePublish
}

// extracted follows the command's report that it has extracted the whole
// stream and waits for the publish line (inline): only the writer's end
// is awaited (a sandbox that says so before it has read the stream holds
// the writer until the caller cancels).
func (s *publishRun) extracted(op string, wdone <-chan error) phase {
	c := s.cmd
	var werr error
	select {
	case werr = <-wdone:
		if werr == nil {
			return phasePublish
		}
	case <-c.dctx.Done():
	}
	if !c.stop() {
		return s.failSend(sendOutcome{uncertain: true}, s.abandoned(op, wdone))
	}
	if werr == nil {
		werr = <-wdone // told to stop: the writer fails at its next write
	}
	switch {
	case s.ctx.Err() != nil:
		werr = fmt.Errorf("%s: %w", op, s.ctx.Err())
	case c.reportErr() != nil:
		werr = fmt.Errorf("%s: %w", op, c.rep.Err)
	case werr == nil || errors.Is(werr, errSandboxGone):
		werr = fmt.Errorf("%w: %s: the sandbox command stopped before the publish", ErrTransport, op)
	}
	return s.failSend(sendOutcome{created: true}, werr)
}

// writeStream writes the tar stream of what was not carried into the send
// command's stdin, after the plan when the plan travels there (its writer
// is done once the command has read it); inline, padded to whole records
// (shell.TarRecord) so that the sandbox's tar reads no further than the
// stream's end.
func (s *publishRun) writeStream() error {
	if s.early != nil {
		return <-s.early.done
	}
	if s.planned != nil {
		if err := <-s.planned; err != nil {
			return err
		}
	}
	return s.writeTo(s.cmd.wctx, sink{s.cmd.pw}, s.carried, nil)
}

// writeTo writes the tar stream to dst, taking the files in carried as
// carried (uncarried: see writeTarStream) and padding it when inline.
func (s *publishRun) writeTo(ctx context.Context, dst io.Writer, carried map[string]bool, uncarried func(map[string]string) ([]string, error)) error {
	w := &countWriter{w: dst}
	defer func() { s.streamed = w.n }()
	if _, err := writeTarStream(ctx, w, s.src, carried, s.plan.Want, uncarried); err != nil || !s.inline {
		return err
	}
	if pad := shell.RecordPad(w.n); pad > 0 {
		if _, err := w.Write(make([]byte, pad)); err != nil {
			return err
		}
	}
	return nil
}

// countWriter counts what it passes on.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// abandoned is the error of a stream whose command did not end once told
// to stop.
func (s *publishRun) abandoned(op string, wdone <-chan error) error {
	var werr error
	select {
	case werr = <-wdone:
	case <-time.After(s.b.stopGrace()):
	}
	switch cerr := s.ctx.Err(); {
	case cerr != nil:
		return fmt.Errorf("%s: %w (%w: %s)", op, cerr, ErrTransport, s.cmd.left(op))
	case werr != nil && !errors.Is(werr, errSandboxGone):
		return fmt.Errorf("%w (%w: %s)", werr, ErrTransport, s.cmd.left(op))
	}
	return fmt.Errorf("%w: %s: %s", ErrTransport, op, s.cmd.left(op))
}

// detach has the caller's cancellation no longer end the command; it
// reports false when it already has (or is about to).
func (c *sendCmd) detach() bool {
	return c.unhook() && c.dctx.Err() == nil
}

// publish moves the new copy into place: a control step the caller's
// cancellation does not cut (only the control deadline bounds it). A
// cancellation before it starts, or a publish that failed in the sandbox,
// leads to the cleanup; a transport failure leaves an unknown outcome (the
// command may still be renaming): nothing more is sent.
func (s *publishRun) publish() phase {
	if s.err = s.ctx.Err(); s.err != nil { // the last point at which a cancellation stops the publish
		if s.inline && !s.cmd.stop() {
			s.err = fmt.Errorf("%w (%w: %s)", s.err, ErrTransport, s.cmd.left("moving the new copy into place"))
			return phaseDone
		}
		return phaseCleanup
	}
	if s.inline {
		return s.publishInline()
	}
	caps, _ := s.b.knownCaps()
	s.err = s.b.renameThenDelete(s.ctx, "moving the new copy into place", sandbox.Command{Script: shell.PublishScript(s.tmp, s.dst, s.mf, s.name, caps.exchange, s.src.split, s.guard)})
	if errors.Is(s.err, ErrTransport) {
		s.err = s.leftBehind(s.err)
	}
	if s.err == nil || errors.Is(s.err, ErrTransport) {
		return phaseDone
	}
	return phaseCleanup
}

// leftBehind adds to err, a transport failure of the publish whose
// outcome is unknown (the renames may have happened, so no cleanup
// follows), the temporary directory it leaves.
func (s *publishRun) leftBehind(err error) error {
	return fmt.Errorf("%w; its temporary directory %s may be left behind: a later stage's sweep removes it once no sandbox process owns it", err, s.tmp)
}

// publishInline has the send command publish: it writes the publish line
// on the command's stdin and waits, under the control deadline, for
// PublishedLine (success, whatever follows: see renameThenDelete) or the
// command's end. The caller's cancellation no longer reaches the command.
func (s *publishRun) publishInline() phase {
	c := s.cmd
	op := "moving the new copy into place"
	// A forged PublishedLine read first makes PublishSent false: the line
	// is never written then (the report broke the protocol).
	if c.broken.Load() || !c.detach() || !c.rep.PublishSent() {
		cause := context.Cause(s.ctx)
		if cause == nil { // stopped by the host itself (a broken report)
			cause = fmt.Errorf("%w: the send command was stopped", ErrTransport)
		}
		s.err = fmt.Errorf("%s: %w", op, cause)
		if !c.stop() {
			s.err = fmt.Errorf("%w (%w: %s)", s.err, ErrTransport, c.left(op))
			return phaseDone
		}
		if c.reportErr() != nil { // the report broke the protocol (its end is awaited by stop)
			s.err = fmt.Errorf("%s: %w", op, c.rep.Err)
		}
		return phaseCleanup
	}
	// The command waits for this line: its stdin holds nothing else.
	_ = c.pw.SetWriteDeadline(time.Now().Add(s.b.timeout))
	_, _ = io.WriteString(c.pw, shell.PublishLine+"\n") // a failed write: the command sees no line, its exit says so
	c.pw.Close()
	select {
	case <-c.rep.Published:
		select { // the deletion of the old copy, as renameThenDelete waits for it
		case err := <-c.done:
			c.end(err)
			if s.forgedPublish(op) {
				return phaseCleanup
			}
		case <-c.x.Expired():
			c.deleting = true // not stopped: it may finish the deletion (else the next sweep does)
		}
		return phaseDone
	case err := <-c.done:
		c.end(err)
	case <-c.x.Expired():
		s.err = fmt.Errorf("%w; its temporary directory %s is left behind: remove it by hand", c.x.TimeoutErr(), s.tmp)
		return phaseDone
	}
	var ee *sandbox.ExitError
	switch {
	case s.forgedPublish(op): // both were ready: the select took the end
		return phaseCleanup
	case isClosed(c.rep.Published):
		return phaseDone
	case c.reportErr() != nil: // a broken report is the verdict, whatever the exit
		s.err = fmt.Errorf("%s: %w", op, c.rep.Err)
	case errors.As(c.rerr, &ee) && ee.Status == shell.NoPublishExit:
		// The line did not reach it (its stdin was cut): nothing moved.
		s.err = fmt.Errorf("%w: %s: the sandbox command did not receive the publish line; nothing was published", ErrTransport, op)
		return phaseCleanup
	case c.rerr != nil:
		s.err = s.b.classify(context.WithoutCancel(s.ctx), nil, op, c.rerr, c.stderr)
	default:
		// It exited 0 with its report drowned by a noisy tool: the
		// script exits 0 only at the end of the publish (without the
		// publish line it exits NoPublishExit).
		return phaseDone
	}
	if errors.Is(s.err, ErrTransport) {
		s.err = s.leftBehind(s.err) // the renames may have happened: send nothing more
		return phaseDone
	}
	return phaseCleanup
}

// forgedPublish reports whether the ended send command printed
// PublishedLine and yet exited NoPublishExit, the status of a command
// that received no publish line and moved nothing: the line was forged.
// It sets s.err to say so.
func (s *publishRun) forgedPublish(op string) bool {
	c := s.cmd
	if ee := (*sandbox.ExitError)(nil); !isClosed(c.rep.Published) || !errors.As(c.rerr, &ee) || ee.Status != shell.NoPublishExit {
		return false
	}
	s.err = fmt.Errorf("%w: %s: the sandbox command reported the copy published, then exited %d (it received no publish line and moved nothing)", sandbox.ErrProtocol, op, shell.NoPublishExit)
	return true
}

// cleanup removes the temporary directory of a failed publish (Bridge.cleanup).
func (s *publishRun) cleanup() phase {
	if cerr := s.b.cleanup(s.ctx, s.tmp, s.dst, s.name); cerr != nil {
		s.err = errors.Join(s.err, cerr)
	}
	return phaseDone
}

// sendCmd is a running send command.
type sendCmd struct {
	// dctx is the command's: the caller's context ends it until detach
	// (the publish line is about to be written), never after.
	dctx   context.Context
	wctx   context.Context // the stream writer's: the caller's, ended by cancel too
	cancel context.CancelFunc
	unhook func() bool // stops the caller's context from ending dctx
	pr, pw *os.File    // the tar stream
	rep    *shell.Report
	stderr *limitedBuffer
	x      *sandbox.Watched
	done   chan error
	grace  time.Duration
	tmp    string
	ended  bool        // the Runner returned
	rerr   error       // what it returned
	run    *runEnd     // how the run ended
	broken atomic.Bool // the report broke the protocol: no publish line is sent
	// deleting: the command has published and is left to delete the old
	// copy past the wait for it (see renameThenDelete): not stopped.
	deleting bool
}

// startSend starts the send command script for tmp, whose report accepts
// the hashes of want.
func (b *Bridge) startSend(ctx context.Context, script string, want map[string]string, tmp string) (*sendCmd, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("creating a pipe for the tar stream: %w", err)
	}
	growPipe(pw)
	c := &sendCmd{pr: pr, pw: pw, rep: shell.NewReport(want), stderr: &limitedBuffer{Max: 4 << 10, Truncate: true}, done: make(chan error, 1), grace: b.stopGrace(), tmp: tmp}
	dctx, dcancel := context.WithCancel(context.WithoutCancel(ctx))
	wctx, wcancel := context.WithCancel(ctx)
	c.dctx, c.wctx, c.cancel = dctx, wctx, func() { dcancel(); wcancel() }
	c.run = newRunEnd(dctx)
	c.unhook = context.AfterFunc(ctx, dcancel)
	outR, outW := io.Pipe()
	go c.rep.Read(outR, c.refused)
	cmd := sandbox.Command{Script: script, Stdin: pr, Stdout: outW, Stderr: c.stderr}
	// Once the command has the stream's last byte, the wait for the
	// report's end and the command's exit is a control step.
	c.x = sandbox.Watch(c.dctx, b.r, cmd, sandbox.WatchOptions{Op: "sending the tree to " + tmp, Deadline: b.timeout, After: func(err error) {
		pr.Close()
		outW.Close()
		c.run.returned()
		c.done <- err
	}})
	return c, nil
}

// refused runs when the report broke the protocol: no publish line is
// sent, and the command is left to end by itself for a moment
// (runEnd.refused), so that a run that failed on the transport is told
// apart (reportErr).
func (c *sendCmd) refused() {
	c.broken.Store(true)
	c.run.refused(c.cancel)
}

// reportErr returns the report's protocol error (ErrProtocol), or nil when
// there is none or when the command's run ended by itself with a transport
// failure: its output is then not judged (shell.Unjudged: an exec engine
// that failed prints its own error where the report should be), and the
// run's error says what happened. Read it once the report is done (end).
func (c *sendCmd) reportErr() error {
	if c.rep.Err != nil && c.ended && c.run.unjudged(c.rerr) {
		return nil
	}
	return c.rep.Err
}

// end records the Runner's return, once its report is read.
func (c *sendCmd) end(err error) {
	c.ended, c.rerr = true, err
	<-c.rep.Done
}

func (c *sendCmd) stopWriting() {
	_ = c.pw.SetWriteDeadline(time.Now())
	c.pw.Close()
}

// stop tells the command to stop and waits at most the grace for it to
// end; it reports whether it did.
func (c *sendCmd) stop() bool {
	c.cancel()
	c.stopWriting()
	if c.ended {
		return true
	}
	t := time.NewTimer(c.grace)
	defer t.Stop()
	select {
	case err := <-c.done:
		c.end(err)
		return true
	case <-t.C:
		return false
	}
}

// left says what an abandoned command leaves.
func (c *sendCmd) left(op string) string {
	return fmt.Sprintf("%s: the sandbox command did not end within %s of being stopped and may still be writing; its temporary directory %s is left behind: remove it by hand", op, c.grace, c.tmp)
}
