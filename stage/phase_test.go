package stage_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
)

// errCut is what phaseFake returns for a connection that dropped.
var errCut = errors.New("connection reset by peer")

// phaseFake is a sandbox that exists only in the protocol: it answers each
// of a Publish's commands (matched by their scripts) as a sandbox that
// obeys it would, except in the phase at, where it misbehaves as fault
// says: "cancel" (the caller cancels there), "cut" (the connection drops),
// "hang" (the Runner never returns, ignoring its context) or "hostile" (a
// garbled, oversized or out-of-order reply).
type phaseFake struct {
	at, fault string
	cancel    context.CancelFunc
	release   chan struct{}
	carrying  chan struct{} // closed once the Publish is in its carry phase
	mu        sync.Mutex
	ran       []string
}

func (f *phaseFake) Run(ctx context.Context, cmd sandbox.Command) error {
	var name string
	switch {
	case isProbe(cmd):
		name = "probe"
	case isSetup(cmd):
		name = "send"
	case isPublish(cmd):
		name = "publish"
	case isCleanup(cmd):
		name = "cleanup"
	default:
		return fmt.Errorf("phaseFake: unexpected command %.80q", cmd.Script)
	}
	f.mu.Lock()
	f.ran = append(f.ran, name)
	f.mu.Unlock()
	switch name {
	case "probe":
		_, err := io.WriteString(cmd.Stdout, "airlock-probe 100\n")
		return err
	case "send":
		return f.send(ctx, cmd)
	}
	return f.rename(ctx, cmd, name)
}

func (f *phaseFake) commands() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.ran...)
}

// hit misbehaves when the send command reaches phase p and the fault is
// there; handled says it did.
func (f *phaseFake) hit(ctx context.Context, p string, hostile func() error) (handled bool, err error) {
	if f.at != p {
		return false, nil
	}
	switch f.fault {
	case "cancel":
		if p == "carry" {
			<-f.carrying // cancel in the carry phase, not in a race with the ready line
		}
		f.cancel()
		<-ctx.Done()
		return true, ctx.Err()
	case "cut":
		return true, errCut
	case "hang":
		<-f.release
		return true, nil
	}
	return true, hostile()
}

// send is the send command: ready, carried, then the stream on stdin.
func (f *phaseFake) send(ctx context.Context, cmd sandbox.Command) error {
	out := cmd.Stdout
	if ok, err := f.hit(ctx, "setup", func() error {
		_, err := io.WriteString(out, "airlock-carried\nairlock-ready\n") // out of order
		return errors.Join(err, &sandbox.ExitError{Status: 1})
	}); ok {
		return err
	}
	if _, err := io.WriteString(out, "airlock-ready\n"); err != nil {
		return err
	}
	if ok, err := f.hit(ctx, "carry", func() error {
		line := strings.Repeat("0", 64) + "  a\n"
		for range 1000 { // more hash lines than files carried
			if _, err := io.WriteString(out, line); err != nil {
				return err
			}
		}
		return &sandbox.ExitError{Status: 1}
	}); ok {
		return err
	}
	if _, err := io.WriteString(out, "airlock-carried\n"); err != nil {
		return err
	}
	if f.at == "stream" {
		return f.stream(ctx, cmd)
	}
	if _, err := io.Copy(io.Discard, cmd.Stdin); err != nil {
		return err
	}
	if f.at == "cleanup" {
		return &sandbox.ExitError{Status: 2} // a failed transfer, so that a cleanup runs
	}
	return nil
}

// stream misbehaves while taking the stream.
func (f *phaseFake) stream(ctx context.Context, cmd sandbox.Command) error {
	var head [100]byte
	if _, err := io.ReadFull(cmd.Stdin, head[:]); err != nil {
		return err
	}
	switch f.fault {
	case "cancel":
		f.cancel()
		<-ctx.Done()
		return ctx.Err()
	case "cut":
		return errCut
	}
	if _, err := io.Copy(io.Discard, cmd.Stdin); err != nil {
		return err
	}
	if f.fault == "hang" { // it has all of the stream, then never returns
		<-f.release
		return nil
	}
	for range 100 { // output after the carry
		if _, err := io.WriteString(cmd.Stdout, "more\n"); err != nil {
			return err
		}
	}
	return nil
}

// rename is the publish or the cleanup command.
func (f *phaseFake) rename(ctx context.Context, cmd sandbox.Command, p string) error {
	if f.at == p {
		switch f.fault {
		case "cancel": // the caller's cancellation does not cut it
			f.cancel()
		case "cut":
			return errCut
		case "hang":
			<-f.release
			return nil
		case "hostile":
			// A garbled line, then a flood on both streams (4 MiB each);
			// the publish then exits 0, which is all that decides it (a
			// sandbox's mv may be noisy), the cleanup fails.
			chunk := strings.Repeat("e", 64<<10)
			if _, err := io.WriteString(cmd.Stdout, "airlock-publishedX\n"); err != nil {
				return err
			}
			for range 64 {
				if _, err := io.WriteString(cmd.Stderr, chunk); err != nil {
					return err
				}
				if _, err := io.WriteString(cmd.Stdout, chunk); err != nil {
					return err
				}
			}
			if p == "publish" {
				return nil
			}
			return &sandbox.ExitError{Status: 1}
		}
	}
	_, err := io.WriteString(cmd.Stdout, "airlock-published\n")
	return err
}

// TestBridgePhases drives a Publish through each phase's command with each
// fault and checks the transitions it takes, the error it ends with and
// that a hanging Runner is given up on in time.
func TestBridgePhases(t *testing.T) {
	const control = time.Second
	ok := []string{"setup>carry", "carry>stream", "stream>publish", "publish>done"}
	cases := []struct {
		at, fault string
		path      []string // the transitions, "from>to"
		is, not   []error  // errors.Is must hold, must not hold
		contains  string
		caller    time.Duration // the caller's deadline (data phases hang until it)
	}{
		{at: "none", path: ok},

		{at: "setup", fault: "cancel", path: []string{"setup>cleanup", "cleanup>done"}, is: []error{context.Canceled}, contains: "creating temporary directory"},
		{at: "setup", fault: "cut", path: []string{"setup>done"}, is: []error{sandbox.ErrTransport, errCut}, not: []error{sandbox.ErrProtocol}},
		{at: "setup", fault: "hang", path: []string{"setup>done"}, is: []error{sandbox.ErrTransport}, contains: "control deadline"},
		{at: "setup", fault: "hostile", path: []string{"setup>done"}, is: []error{sandbox.ErrProtocol}, not: []error{sandbox.ErrTransport}, contains: "unexpected output before the temporary directory was made"},

		{at: "carry", fault: "cancel", path: []string{"setup>carry", "carry>cleanup", "cleanup>done"}, is: []error{context.Canceled}},
		{at: "carry", fault: "cut", path: []string{"setup>carry", "carry>cleanup", "cleanup>done"}, is: []error{sandbox.ErrTransport, errCut}},
		// The carry is data: only the caller's deadline bounds it.
		{at: "carry", fault: "hang", path: []string{"setup>carry", "carry>done"}, is: []error{sandbox.ErrTransport, context.DeadlineExceeded}, contains: "left behind", caller: 2 * time.Second},
		{at: "carry", fault: "hostile", path: []string{"setup>carry", "carry>cleanup", "cleanup>done"}, is: []error{sandbox.ErrProtocol}, not: []error{sandbox.ErrTransport}, contains: "more hash lines than files carried"},

		{at: "stream", fault: "cancel", path: []string{"setup>carry", "carry>stream", "stream>cleanup", "cleanup>done"}, is: []error{context.Canceled}},
		{at: "stream", fault: "cut", path: []string{"setup>carry", "carry>stream", "stream>cleanup", "cleanup>done"}, is: []error{sandbox.ErrTransport, errCut}},
		// The command has all of the stream: the control deadline bounds its end.
		{at: "stream", fault: "hang", path: []string{"setup>carry", "carry>stream", "stream>done"}, is: []error{sandbox.ErrTransport}, not: []error{context.DeadlineExceeded}, contains: "left behind"},
		{at: "stream", fault: "hostile", path: []string{"setup>carry", "carry>stream", "stream>cleanup", "cleanup>done"}, is: []error{sandbox.ErrProtocol}, not: []error{sandbox.ErrTransport, context.Canceled}, contains: "output after the carry"},

		// The caller's cancellation does not cut the publish.
		{at: "publish", fault: "cancel", path: ok},
		{at: "publish", fault: "cut", path: ok, is: []error{sandbox.ErrTransport, errCut}},
		{at: "publish", fault: "hang", path: ok, is: []error{sandbox.ErrTransport}, contains: "control deadline"},
		{at: "publish", fault: "hostile", path: ok},

		{at: "cleanup", fault: "", path: []string{"setup>carry", "carry>stream", "stream>cleanup", "cleanup>done"}, is: []error{&sandbox.ExitError{Status: 2}}},
		{at: "cleanup", fault: "cancel", path: []string{"setup>carry", "carry>stream", "stream>cleanup", "cleanup>done"}, is: []error{&sandbox.ExitError{Status: 2}}, not: []error{sandbox.ErrTransport}},
		{at: "cleanup", fault: "cut", path: []string{"setup>carry", "carry>stream", "stream>cleanup", "cleanup>done"}, is: []error{&sandbox.ExitError{Status: 2}, sandbox.ErrTransport, errCut}, contains: "removing temporary directory"},
		{at: "cleanup", fault: "hang", path: []string{"setup>carry", "carry>stream", "stream>cleanup", "cleanup>done"}, is: []error{&sandbox.ExitError{Status: 2}, sandbox.ErrTransport}, contains: "control deadline"},
		{at: "cleanup", fault: "hostile", path: []string{"setup>carry", "carry>stream", "stream>cleanup", "cleanup>done"}, is: []error{&sandbox.ExitError{Status: 1}}, not: []error{sandbox.ErrTransport}, contains: "removing temporary directory"},
	}
	for _, c := range cases {
		t.Run(c.at+"/"+c.fault, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if c.caller > 0 {
				ctx, cancel = context.WithTimeout(ctx, c.caller)
				defer cancel()
			}
			f := &phaseFake{at: c.at, fault: c.fault, cancel: cancel, release: make(chan struct{}), carrying: make(chan struct{})}
			t.Cleanup(func() { close(f.release) })
			b := stage.NewBridge(f, stage.WithControlTimeout(control))
			var (
				mu   sync.Mutex
				path []string
				last error
			)
			stage.SetPhaseHook(b, func(from, to string, err error) {
				mu.Lock()
				defer mu.Unlock()
				path = append(path, from+">"+to)
				last = err
				if to == "carry" {
					close(f.carrying)
				}
			})
			src := t.TempDir()
			build(t, src, "f=some content", "d/g=more")
			start := time.Now()
			_, serr := stage.Stage(ctx, b, "/rt", []stage.Asset{{Name: "a", Source: src}})
			elapsed := time.Since(start)
			mu.Lock()
			defer mu.Unlock()
			assert.Equal(t, c.path, path, "commands: %v", f.commands())
			if len(c.is) == 0 {
				require.NoError(t, last)
			} else {
				require.Error(t, last)
				require.ErrorIs(t, serr, last, "Stage returns the publish's error")
			}
			for _, e := range c.is {
				var ee *sandbox.ExitError
				if errors.As(e, &ee) {
					assert.True(t, hasExit(last, ee.Status), "exit status %d in %v", ee.Status, last)
					continue
				}
				assert.ErrorIs(t, last, e)
			}
			for _, e := range c.not {
				assert.False(t, errors.Is(last, e), "not %v: %v", e, last)
			}
			if c.contains != "" {
				assert.ErrorContains(t, last, c.contains)
			}
			assert.Less(t, len(fmt.Sprint(last)), 16<<10, "what the sandbox says is bounded in the error")
			// A hang is given up on: the control deadline (or the caller's),
			// the grace after it, and the cleanup's deadline at most.
			assert.Less(t, elapsed, c.caller+4*control+2*time.Second)
			if c.fault == "hang" && c.at != "carry" {
				assert.GreaterOrEqual(t, elapsed, control, "the control deadline is what ended it")
			}
		})
	}
}

// hasExit reports whether err's tree holds an *ExitError with status.
func hasExit(err error, status int) bool {
	if ee, ok := err.(*sandbox.ExitError); ok && ee.Status == status {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return hasExit(u.Unwrap(), status)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if hasExit(e, status) {
				return true
			}
		}
	}
	return false
}

// TestPhaseNames: every phase has its name.
func TestPhaseNames(t *testing.T) {
	var got []string
	for i := range 7 {
		got = append(got, stage.PhaseName(i))
	}
	assert.Equal(t, []string{"setup", "carry", "stream", "publish", "cleanup", "done", "phase(6)"}, got)
	assert.Equal(t, "phase(-1)", stage.PhaseName(-1))
}
