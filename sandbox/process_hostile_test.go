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
		"Endless":     func(string) string { return strings.Repeat("a", 1<<20) },
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
