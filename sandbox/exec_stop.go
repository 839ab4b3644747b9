package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"time"

	"github.com/airlockdev/airlock/internal/shell"
)

// stopper stops one call of an execRunner.
type stopper struct {
	r      *execRunner
	call   shell.ExecCall
	rec    *shell.RecordWriter
	cancel context.CancelFunc // the first call's context
	done   <-chan error       // the first call's result
	pr, pw *os.File           // its stdin
}

// stop kills the local client (cancelling the first call's context), kills
// the script's group in the sandbox through a second call, waits briefly
// for the first call to return, and only then ends its stdin: a sandbox
// whose script is still alive must not read an end of its input that the
// host never meant.
func (s *stopper) stop(cause error) error {
	s.cancel()
	if s.r.endsAll {
		return s.stopWithClient(cause)
	}
	rs := s.rec.Records()
	outcome, detail, kerr := s.kill(rs)
	t := time.NewTimer(abandonAfter)
	defer t.Stop()
	select {
	case <-s.done:
	case <-t.C:
		detail += fmt.Sprintf("; %s did not return within %s of its cancellation and was abandoned", s.r.name, abandonAfter)
	}
	s.close()
	return &StopError{Verified: outcome == shell.KillGone, Err: cause, Detail: detail, KillErr: kerr}
}

// stopWithClient is stop for a sandbox that ends with its client
// (ExecOptions.ClientEndsSandbox): verified when the killed client exited
// and its output closed before clientWaitDelay could force it (no process
// of the sandbox still held it).
func (s *stopper) stopWithClient(cause error) error {
	start := time.Now()
	t := time.NewTimer(killTimeout)
	defer t.Stop()
	se := &StopError{Err: cause}
	select {
	case <-s.done:
		if time.Since(start) < clientWaitDelay {
			se.Verified = true
		} else {
			se.Detail = fmt.Sprintf("%s was killed, but something kept its output open for %s", s.r.name, clientWaitDelay)
		}
	case <-t.C:
		se.Detail = fmt.Sprintf("%s did not end within %s of SIGKILL", s.r.name, killTimeout)
	}
	s.close()
	return se
}

// close ends the first call's stdin and flushes its stderr.
func (s *stopper) close() {
	s.pw.Close()
	s.pr.Close()
	s.rec.Flush()
}

// kill runs the kill script through the runner's ExecFunc and returns
// what it found, the detail of an unverified stop, and the kill step's
// failure when it gave no usable answer (see StopError.KillErr).
func (s *stopper) kill(rs shell.ExecRecords) (shell.KillOutcome, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), killTimeout)
	defer cancel()
	var out, errb bytes.Buffer
	pid, mode := "", ""
	if rs.Started {
		pid, mode = rs.Pid, rs.Group
	}
	err := s.r.fn(ctx, []string{"sh", "-c", shell.KillScript(s.call.ID, pid, mode)}, bytes.NewReader(nil), &out, &errb)
	switch o := shell.ParseKill(out.Bytes()); {
	case o == shell.KillGone:
		return o, "", nil
	case o == shell.KillPidGone:
		return o, "the command ran without a process group of its own (no setsid in the sandbox): its children cannot be told apart", nil
	case o == shell.KillNotFound && !rs.Started:
		return o, "the command had not reported its start, and no trace of it was found in the sandbox", nil
	case o == shell.KillNotFound:
		return o, "the command's process was not found", nil
	case o == shell.KillUnconfirmed:
		return o, "the command's run file was not found in the sandbox, so the process killed could not be confirmed as the command's", nil
	case o == shell.KillOtherNS:
		return o, "the kill exec ran in another PID namespace than the command (does each exec start a sandbox of its own? then set ExecOptions.ClientEndsSandbox)", nil
	case o == shell.KillAlive:
		return o, "processes of its group were still alive two seconds after SIGKILL", nil
	case err != nil:
		d := fmt.Sprintf("the kill call through %s failed: %v (%s)", s.r.name, err, shell.Truncate(string(bytes.TrimSpace(errb.Bytes())), 200))
		return o, d, fmt.Errorf("%w: sandbox: %s", ErrTransport, d)
	case out.Len() == 0:
		d := fmt.Sprintf("the kill call through %s gave no answer (%s)", s.r.name, shell.Truncate(string(bytes.TrimSpace(errb.Bytes())), 200))
		return o, d, fmt.Errorf("%w: sandbox: %s", ErrTransport, d)
	default:
		// The call succeeded and the sandbox answered, but not with the
		// kill script's line.
		d := fmt.Sprintf("the sandbox's answer to the kill call through %s does not parse (stdout %q)", s.r.name, shell.Truncate(out.String(), 200))
		return o, d, fmt.Errorf("%w: sandbox: %s; the sandbox is broken or hostile", ErrProtocol, d)
	}
}
