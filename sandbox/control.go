package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/airlockdev/airlock/internal/shell"
)

// Control runs cmd through r as a control step: a short operation that must
// end within the control deadline, ControlDeadline(r) (at most
// MaxControlTimeout). The deadline is enforced here even when r ignores its
// context: past it, Control returns an error wrapping ErrTransport and the
// Runner's goroutine is abandoned (the command may still be running; it is
// never replayed). Every failure to complete wraps ErrTransport: an expired
// deadline, a Runner failure, the caller's cancellation (which also wraps
// ctx's error). A command that ran and exited non-zero is an *ExitError,
// with the first 4 KiB of its stderr in the message when cmd.Stderr is nil.
// A Runner error that wraps ErrProtocol (the sandbox broke the protocol)
// keeps that class, never also ErrTransport, and so does a command the
// Runner refused before running anything (ErrBadCommand: an env CheckEnv
// refuses, a TTY flag in Exec's argv).
//
// The host's own failures are not the transport's: they are returned with
// op's context but otherwise unchanged, so that Retryable follows what
// they wrap (a full disk is not retryable). They are the Runner errors
// that wrap an error cmd.Stdout or cmd.Stderr returned (a writer of the
// caller's that failed: a full disk, a limit of its own) or an
// *fs.PathError (a host file named by its path that the Runner could not
// create or write, such as Local's temporary file for a large script; or
// the missing working directory, fs.ErrNotExist, for which nothing ran).
// Any other Runner error, one that follows no part of the Runner contract,
// wraps ErrTransport.
// The Runner may still write to cmd.Stdout and cmd.Stderr after a timeout,
// so pass writers that tolerate it. Adapters use it for their own short
// sandbox operations (queue reads, input delivery).
func Control(ctx context.Context, r Runner, cmd Command) error {
	return control(ctx, r, ControlDeadline(r), "a control command", cmd)
}

func control(ctx context.Context, r Runner, d time.Duration, op string, cmd Command) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrTransport, op, err)
	}
	var stderr *shell.LimitedBuffer
	var outT, errT *shell.WriteTracker
	cmd.Stdout, outT = shell.TrackWriter(cmd.Stdout)
	cmd.Stderr, errT = shell.TrackWriter(cmd.Stderr)
	if cmd.Stderr == nil {
		stderr = &shell.LimitedBuffer{Max: 4 << 10, Truncate: true}
		cmd.Stderr = stderr
	}
	cctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.Run(cctx, cmd) }()
	select {
	case err := <-done:
		if err == nil {
			return nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return fmt.Errorf("%w: %s: %w", ErrTransport, op, cerr)
		}
		if cctx.Err() != nil {
			return controlTimeout(op, d)
		}
		var ee *ExitError
		if errors.As(err, &ee) {
			if stderr != nil {
				if msg := strings.TrimSpace(stderr.String()); msg != "" {
					return fmt.Errorf("%s failed in the sandbox: %w: %s", op, err, msg)
				}
			}
			return fmt.Errorf("%s failed in the sandbox: %w", op, err)
		}
		if shell.KeepsClass(err, outT.Err(), errT.Err()) {
			return fmt.Errorf("%s: %w", op, err)
		}
		return fmt.Errorf("%w: %s: %w", ErrTransport, op, err)
	case <-cctx.Done():
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrTransport, op, err)
		}
		return controlTimeout(op, d)
	}
}

// controlTimeout is the error of a control step whose deadline expired.
func controlTimeout(op string, d time.Duration) error {
	return fmt.Errorf("%w: %s did not finish within the %s control deadline; the sandbox command may still be running and is not retried; check the sandbox connection", ErrTransport, op, d)
}
