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
	rs := s.rec.Records()
	outcome, detail := s.kill(rs)
	t := time.NewTimer(abandonAfter)
	defer t.Stop()
	select {
	case <-s.done:
	case <-t.C:
		detail += fmt.Sprintf("; %s did not return within %s of its cancellation and was abandoned", s.r.name, abandonAfter)
	}
	s.pw.Close()
	s.pr.Close()
	s.rec.Flush()
	return &StopError{Verified: outcome == shell.KillGone, Err: cause, Detail: detail}
}

// kill runs the kill script through the runner's ExecFunc.
func (s *stopper) kill(rs shell.ExecRecords) (shell.KillOutcome, string) {
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
		return o, ""
	case o == shell.KillPidGone:
		return o, "the command ran without a process group of its own (no setsid in the sandbox): its children cannot be told apart"
	case o == shell.KillNotFound && !rs.Started:
		return o, "the command had not reported its start, and no trace of it was found in the sandbox"
	case o == shell.KillNotFound:
		return o, "the command's process was not found"
	case o == shell.KillAlive:
		return o, "processes of its group were still alive two seconds after SIGKILL"
	case err != nil:
		return o, fmt.Sprintf("the kill call through %s failed: %v (%s)", s.r.name, err, shell.Truncate(string(bytes.TrimSpace(errb.Bytes())), 200))
	default:
		return o, fmt.Sprintf("the kill call through %s gave no answer (stdout %q)", s.r.name, shell.Truncate(out.String(), 200))
	}
}
