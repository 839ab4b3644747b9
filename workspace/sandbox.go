package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/airlockdev/airlock/internal/gitexec"
	"github.com/airlockdev/airlock/internal/shell"
	"github.com/airlockdev/airlock/sandbox"
)

// The sandbox's scripts and the parsers of their output are the shell
// protocol's (internal/shell: WorkspaceProbeScript, GitPrepareScript,
// PlainPrepareScript, GitRestoreScript, PlainRestoreScript).

// probe is what the sandbox said about itself.
type probe = shell.WorkspaceProbe

// probe runs the probe as a control operation (bounded by the control
// deadline even when the Runner ignores its context).
func (r *Round) probe(ctx context.Context) (probe, error) {
	var out bytes.Buffer
	lw := &limitWriter{w: &out, n: 1 << 20}
	// The Bridge's control deadline is the Runner's own when it has one
	// (sandbox.ControlDeadline).
	err := sandbox.Control(ctx, r.spec.Runner, sandbox.Command{Script: shell.WorkspaceProbeScript(r.spec.Remote), Stdout: lw})
	if lw.over {
		// The host stopped reading at the limit: that is the reason,
		// whatever the command's end (a broken pipe) says.
		return probe{}, fmt.Errorf("%w: the sandbox probe of %s wrote more than 1 MiB", ErrHostile, r.spec.Remote)
	}
	if err != nil {
		return probe{}, fmt.Errorf("workspace: probing the sandbox at %s: %w", r.spec.Remote, err)
	}
	p, err := shell.ParseWorkspaceProbe(out.Bytes())
	if err != nil {
		return probe{}, fmt.Errorf("%w: probing the sandbox at %s: %w", ErrHostile, r.spec.Remote, err)
	}
	return p, nil
}

// checkTools fails, naming the tool, when the sandbox lacks one.
func checkTools(p probe, git bool) error {
	need := []string{"tar"}
	if git {
		need = []string{"git"}
	}
	for _, t := range need {
		if !p.Tools[t] {
			return &ToolError{Tool: t, Where: "sandbox"}
		}
	}
	if git {
		maj, min, ok := gitexec.ParseVersion(p.GitVersion)
		if !ok || maj < minGuestGitMajor || (maj == minGuestGitMajor && min < minGuestGitMinor) {
			return &ToolError{Tool: "git", Where: "sandbox", Have: strings.TrimPrefix(p.GitVersion, "git version "), Need: fmt.Sprintf("%d.%d", minGuestGitMajor, minGuestGitMinor)}
		}
	}
	return nil
}

// guestStopGrace is how long a cancelled guest command's Runner gets to
// return before it is abandoned.
const guestStopGrace = 500 * time.Millisecond

// runGuest runs a data command (bounded by ctx only) and maps its failure:
// an exit status becomes an error carrying the script's stderr; a Runner
// that reports a broken protocol of its own (sandbox.ErrProtocol) is
// ErrHostile; the host's own failure (a write to cmd.Stdout that failed, a
// host file the Runner could not write: see sandbox.Control) is returned
// as it is; anything else wraps sandbox.ErrTransport. The script reports its end (sandbox.Watch,
// ArmAtEnd): from then on the Runner must return within the control
// deadline (sandbox.ControlDeadline), or the command is abandoned, expire
// (when not nil) runs with the error, which wraps sandbox.ErrTransport, and
// so does runGuest's.
func runGuest(ctx context.Context, run sandbox.Runner, op string, cmd sandbox.Command, expire func(error)) error {
	stderr := &shell.LimitedBuffer{Max: 4 << 10, Truncate: true}
	cmd.Stderr = stderr
	var out *shell.WriteTracker
	cmd.Stdout, out = shell.TrackWriter(cmd.Stdout)
	x := sandbox.Watch(ctx, run, cmd, sandbox.WatchOptions{Op: op, ArmAtEnd: true, OnExpire: expire})
	var err error
	select {
	case <-x.Done():
		err = x.Err()
	case <-x.Expired():
		err = x.TimeoutErr()
	case <-ctx.Done():
		// A Runner that ignores its context gets a short grace, then is
		// abandoned.
		t := time.NewTimer(guestStopGrace)
		defer t.Stop()
		select {
		case <-x.Done():
			err = x.Err()
		case <-x.Expired():
			err = x.TimeoutErr()
		case <-t.C:
			return fmt.Errorf("workspace: %s: %w (%w: the sandbox command did not end within %s of being stopped and was abandoned)", op, ctx.Err(), sandbox.ErrTransport, guestStopGrace)
		}
	}
	if err == nil {
		return nil
	}
	var ee *sandbox.ExitError
	switch {
	case errors.Is(err, sandbox.ErrProtocol) && !errors.Is(err, ErrHostile):
		return fmt.Errorf("%w: %s: %w", ErrHostile, op, err) // the Runner's own protocol (Exec's completion record)
	case errors.Is(err, sandbox.ErrTransport), errors.Is(err, sandbox.ErrProtocol):
		return fmt.Errorf("workspace: %s: %w", op, err)
	case ctx.Err() != nil:
		return fmt.Errorf("workspace: %s: %w", op, ctx.Err())
	case errors.As(err, &ee):
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			return fmt.Errorf("workspace: %s failed in the sandbox: %w", op, err)
		}
		return fmt.Errorf("workspace: %s failed in the sandbox: %w: %s", op, err, msg)
	case shell.KeepsClass(err, out.Err()):
		return fmt.Errorf("workspace: %s: %w", op, err)
	}
	return fmt.Errorf("workspace: %w: %s: %w", sandbox.ErrTransport, op, err)
}

// prepareTurn orders this prepare after those begun before it.
func (r *Round) prepareTurn() shell.PrepareTurn {
	return shell.PrepareTurn{Seq: time.Now().UnixMicro(), Wait: r.o.prepareWait}
}

// prepareLocked marks a prepare or restore script's failure to take the
// work tree's lock in the sandbox in time (shell.PrepareLocked: another
// prepare or restore still runs there) as ErrLocked.
func prepareLocked(err error) error {
	var ee *sandbox.ExitError
	if errors.As(err, &ee) && ee.Status == shell.PrepareLocked {
		return fmt.Errorf("%w: %w", ErrLocked, err)
	}
	return err
}

// limitWriter passes at most n bytes to w and then fails every write.
type limitWriter struct {
	w    interface{ Write([]byte) (int, error) }
	n    int64
	over bool
}

var errLimit = errors.New("output limit exceeded")

// Write writes p to w, or fails with errLimit when p exceeds what is left of
// n.
func (l *limitWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > l.n {
		l.over = true
		return 0, errLimit
	}
	l.n -= int64(len(p))
	return l.w.Write(p)
}
