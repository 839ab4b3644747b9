package sandbox_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
)

// scriptedSandbox is a hostile or broken sandbox: the wrapper's run writes
// header to stdout and then runs until it is cancelled; each signal step
// prints reply(tag). It records the signal steps' scripts.
type scriptedSandbox struct {
	header func(tag string) string
	reply  func(tag string) string
	d      time.Duration
	// stopped is what the run returns when it is cancelled (nil: an
	// ErrTransport error).
	stopped func(cause error) error

	mu    sync.Mutex
	steps []string
}

var tagInScript = regexp.MustCompile(sandbox.ProcessTagVar + `=([0-9a-f]{32})`)

func (s *scriptedSandbox) Run(ctx context.Context, cmd sandbox.Command) error {
	m := tagInScript.FindStringSubmatch(cmd.Script)
	if m == nil {
		return fmt.Errorf("scriptedSandbox: no tag in the script %q", cmd.Script)
	}
	if strings.HasPrefix(cmd.Script, "__t=") {
		s.mu.Lock()
		s.steps = append(s.steps, cmd.Script)
		s.mu.Unlock()
		_, err := fmt.Fprint(cmd.Stdout, s.reply(m[1]))
		return err
	}
	if _, err := fmt.Fprint(cmd.Stdout, s.header(m[1])); err != nil {
		return fmt.Errorf("%w: scriptedSandbox: %w", sandbox.ErrTransport, err)
	}
	<-ctx.Done()
	if s.stopped != nil {
		return s.stopped(ctx.Err())
	}
	return fmt.Errorf("%w: scriptedSandbox: %w", sandbox.ErrTransport, ctx.Err())
}

func (s *scriptedSandbox) ControlTimeout() time.Duration { return s.d }

func (s *scriptedSandbox) signalSteps() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.steps...)
}

func gone(tag string) string { return "airlock-process-v1-" + tag + " gone\n" }

// TestProcessHostileHeader: a header that is not exactly the wrapper's is
// ErrProtocol, and what started is stopped by its tag alone (no pid, group
// or session taken from the hostile header).
func TestProcessHostileHeader(t *testing.T) {
	other := strings.Repeat("ab", 16)
	for name, header := range map[string]func(tag string) string{
		"OtherTag":    func(string) string { return "airlock-process-v1 " + other + " 4242 4242 4242\n" },
		"PidOne":      func(tag string) string { return "airlock-process-v1 " + tag + " 1 1 1\n" },
		"PidZero":     func(tag string) string { return "airlock-process-v1 " + tag + " 0 0 0\n" },
		"PidNegative": func(tag string) string { return "airlock-process-v1 " + tag + " -1 -1 -1\n" },
		"PidHuge":     func(tag string) string { return "airlock-process-v1 " + tag + " 99999999999 1 1\n" },
		"PidSign":     func(tag string) string { return "airlock-process-v1 " + tag + " +42 42 42\n" },
		"PidZeros":    func(tag string) string { return "airlock-process-v1 " + tag + " 0042 42 42\n" },
		"GroupWord":   func(tag string) string { return "airlock-process-v1 " + tag + " 42 $(reboot) 42\n" },
		"ExtraField":  func(tag string) string { return "airlock-process-v1 " + tag + " 42 42 42 42\n" },
		"Missing":     func(tag string) string { return "airlock-process-v1 " + tag + " 42\n" },
		"OldVersion":  func(tag string) string { return "airlock-process-v0 " + tag + " 42 42 42\n" },
		"BannerFirst": func(tag string) string { return "Welcome to the sandbox\nairlock-process-v1 " + tag + " 42 42 42\n" },
		"Binary":      func(string) string { return "\x00\xff\xfe\n" },
		"CRLF":        func(tag string) string { return "airlock-process-v1 " + tag + " 42 42 42\r\n" },
		// The leader leads its group (setsid: and its session) and reports
		// "-" for what it does not lead: anything else aims elsewhere.
		"Mismatch":      func(tag string) string { return "airlock-process-v1 " + tag + " 100 200 300\n" },
		"MismatchNS":    func(tag string) string { return "airlock-process-v1 " + tag + " 100 200 300 pid:[4026531836]\n" },
		"OtherGroup":    func(tag string) string { return "airlock-process-v1 " + tag + " 42 7 -\n" },
		"OtherSession":  func(tag string) string { return "airlock-process-v1 " + tag + " 42 42 7\n" },
		"SessionAlone":  func(tag string) string { return "airlock-process-v1 " + tag + " 42 - 42\n" },
		"NamespaceWord": func(tag string) string { return "airlock-process-v1 " + tag + " 42 42 42 $(reboot)\n" },
		"Endless":       func(string) string { return strings.Repeat("a", 1<<20) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sb := &scriptedSandbox{header: header, reply: gone, d: time.Second}
			began := time.Now()
			p, err := sandbox.Start(t.Context(), sb, sandbox.Command{Script: "agent"})
			require.ErrorIs(t, err, sandbox.ErrProtocol)
			assert.Nil(t, p)
			assert.NotErrorIs(t, err, sandbox.ErrTransport, "what started was stopped: only the protocol failed")
			assert.ErrorContains(t, err, "header")
			assert.Less(t, time.Since(began), 5*time.Second)
			steps := sb.signalSteps()
			require.NotEmpty(t, steps, "what started was stopped")
			assert.Contains(t, steps[0], " __p=0 __g=-1 __s=-1 ", "only the tag is used")
		})
	}
}

// TestProcessHeaderLate: no header within the control deadline is
// ErrTransport.
func TestProcessHeaderLate(t *testing.T) {
	sb := &scriptedSandbox{header: func(string) string { return "airlock-process-v1 " }, reply: gone, d: 500 * time.Millisecond}
	_, err := sandbox.Start(t.Context(), sb, sandbox.Command{Script: "agent"})
	require.ErrorIs(t, err, sandbox.ErrTransport)
	assert.ErrorContains(t, err, "did not report it within the 500ms control deadline")
}

// TestProcessHostileReply: a signal step whose reply is not the script's
// makes the end unverified with ErrProtocol; one that keeps reporting
// processes after KILL, or has no /proc, with ErrTransport. The good
// header's pid, group and session reach the signal scripts.
func TestProcessHostileReply(t *testing.T) {
	other := strings.Repeat("cd", 16)
	for name, c := range map[string]struct {
		reply func(tag string) string
		is    error
		want  string
	}{
		"Junk":     {func(string) string { return "gone\n" }, sandbox.ErrProtocol, "is not one"},
		"OtherTag": {func(string) string { return "airlock-process-v1-" + other + " gone\n" }, sandbox.ErrProtocol, "is not one"},
		"TwoLines": {func(tag string) string { return gone(tag) + gone(tag) }, sandbox.ErrProtocol, "is not one"},
		"LeftZero": {func(tag string) string { return "airlock-process-v1-" + tag + " left 0\n" }, sandbox.ErrProtocol, "is not \"gone\""},
		"Huge":     {func(tag string) string { return strings.Repeat("x", 1<<20) }, sandbox.ErrProtocol, "is not one"},
		"Left":     {func(tag string) string { return "airlock-process-v1-" + tag + " left 3\n" }, sandbox.ErrTransport, "3 processes were still running after KILL"},
		"NoProc":   {func(tag string) string { return "airlock-process-v1-" + tag + " noproc\n" }, sandbox.ErrTransport, "the sandbox has no /proc"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sb := &scriptedSandbox{
				header: func(tag string) string { return "airlock-process-v1 " + tag + " 4242 4242 4242\nhello" },
				reply:  c.reply, d: time.Second,
			}
			p, err := sandbox.Start(t.Context(), sb, sandbox.Command{Script: "agent"})
			require.NoError(t, err)
			assert.Equal(t, 4242, p.PID())
			exit, err := p.Stop(t.Context())
			require.ErrorIs(t, err, c.is)
			assert.ErrorContains(t, err, c.want)
			assert.ErrorContains(t, err, "process 4242 (leading session and group 4242")
			assert.False(t, exit.Verified)
			assert.False(t, exit.Exited, "the run failed: no status")
			steps := sb.signalSteps()
			require.Len(t, steps, 2, "TERM, then KILL")
			assert.Contains(t, steps[0], " __k=TERM __p=4242 __g=4242 __s=4242 ")
			assert.Contains(t, steps[1], " __k=KILL __p=4242 __g=4242 __s=4242 ")
		})
	}
}

// TestProcessOtherNamespace: a signal step that runs in another PID
// namespace than the process ("otherns": each exec a sandbox of its own)
// signals nothing, so Stop ends the process by cancelling Start's run after
// the grace, without a KILL step, and reports what the Runner said: a
// verified *StopError is a verified end (Exited, Status -1); anything else
// is not verified, with ErrTransport and the reason. The header's PID
// namespace reaches the steps.
func TestProcessOtherNamespace(t *testing.T) {
	otherns := func(tag string) string { return "airlock-process-v1-" + tag + " otherns\n" }
	for name, c := range map[string]struct {
		stopped func(error) error
		exit    sandbox.Exit
		want    string
	}{
		"RunnerVerified": {func(err error) error { return &sandbox.StopError{Verified: true, Err: err} }, sandbox.Exit{Status: -1, Exited: true, Verified: true}, ""},
		"RunnerUnverified": {func(err error) error {
			return &sandbox.StopError{Err: err, Detail: "the kill exec ran in another PID namespace"}
		},
			sandbox.Exit{Status: -1}, "the Runner's cancellation did not confirm its end: sandbox command stopped (context canceled); its termination is not verified: the kill exec ran in another PID namespace"},
		"RunnerPlainError": {nil, sandbox.Exit{Status: -1}, "the Runner's cancellation did not confirm its end"},
		"EndsAtCancel": {func(error) error { return &sandbox.ExitError{Status: -1, Signal: "KILL"} },
			sandbox.Exit{Status: -1, Signal: "KILL", Exited: true}, "its run ended on its own at its cancellation"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sb := &scriptedSandbox{
				header: func(tag string) string { return "airlock-process-v1 " + tag + " 4242 4242 4242 pid:[4026532101]\n" },
				reply:  otherns, d: 2 * time.Second, stopped: c.stopped,
			}
			p, err := sandbox.Start(t.Context(), sb, sandbox.Command{Script: "agent"})
			require.NoError(t, err)
			began := time.Now()
			exit, err := p.Stop(t.Context())
			took := time.Since(began)
			assert.Equal(t, c.exit, exit)
			if c.want == "" {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, sandbox.ErrTransport)
				assert.ErrorContains(t, err, c.want)
				assert.ErrorContains(t, err, "process 4242 (leading session and group 4242")
				assert.ErrorContains(t, err, "the stop steps run in another PID namespace than the process")
			}
			assert.GreaterOrEqual(t, took, time.Second, "the grace (half the 2s control deadline) comes first")
			assert.Less(t, took, 3*time.Second, "then the cancellation, not another control deadline")
			steps := sb.signalSteps()
			require.Len(t, steps, 1, "TERM only: a KILL step could not reach it either")
			assert.Contains(t, steps[0], " __k=TERM __p=4242 __g=4242 __s=4242 __ns='pid:[4026532101]' ")
		})
	}
}
