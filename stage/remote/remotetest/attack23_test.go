package remotetest_test

// Attack tests written from go doc only: Server.Dial's contract with its
// testing.TB.

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage/remote"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
)

// a23TB is a testing.TB that records failures and cleanups instead of
// acting on them; FailNow ends the calling goroutine as testing's does.
type a23TB struct {
	testing.TB // the real test, for everything not overridden
	mu         sync.Mutex
	failed     bool
	cleanups   []func()
}

func (tb *a23TB) Helper() {}
func (tb *a23TB) Fail() {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.failed = true
}
func (tb *a23TB) FailNow() { tb.Fail(); runtime.Goexit() }
func (tb *a23TB) Errorf(format string, args ...any) {
	tb.Fail()
	tb.TB.Logf("fake tb: "+format, args...)
}
func (tb *a23TB) Error(args ...any)                 { tb.Fail(); tb.TB.Log(args...) }
func (tb *a23TB) Fatalf(format string, args ...any) { tb.Errorf(format, args...); runtime.Goexit() }
func (tb *a23TB) Fatal(args ...any)                 { tb.Error(args...); runtime.Goexit() }
func (tb *a23TB) Failed() bool {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return tb.failed
}
func (tb *a23TB) Cleanup(f func()) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.cleanups = append(tb.cleanups, f)
}

// runCleanups runs the recorded cleanups, last first, as testing does.
func (tb *a23TB) runCleanups() {
	tb.mu.Lock()
	cs := tb.cleanups
	tb.cleanups = nil
	tb.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
}

// dial runs srv.Dial(tb) in a goroutine (FailNow ends it) and returns the
// Host, nil when Dial failed tb, failing t if it does not return within 5 s.
func dial(t *testing.T, srv *remotetest.Server, tb *a23TB) *remote.Host {
	t.Helper()
	done := make(chan *remote.Host, 1)
	go func() {
		var h *remote.Host
		defer func() { done <- h }()
		h = srv.Dial(tb)
	}()
	select {
	case h := <-done:
		return h
	case <-time.After(5 * time.Second):
		t.Fatal("Server.Dial did not return within 5 s")
		return nil
	}
}

// TestAttack23DialClosesAtCleanup: the Host Dial returns works, and is
// closed by the TB's cleanup; a Host the test already closed does not
// fail the TB at cleanup (Close is idempotent).
func TestAttack23DialClosesAtCleanup(t *testing.T) {
	srv := remotetest.NewServer(t)
	tb := &a23TB{TB: t}
	h := dial(t, srv, tb)
	require.NotNil(t, h)
	require.False(t, tb.Failed())
	require.NoError(t, h.Run(t.Context(), sandbox.Command{Script: "true"}))
	tb.runCleanups()
	assert.False(t, tb.Failed(), "a clean Close failed the TB")
	err := h.Run(t.Context(), sandbox.Command{Script: "true"})
	assert.Error(t, err, "the Host still runs commands after the TB's cleanup")

	tb2 := &a23TB{TB: t}
	h2 := dial(t, srv, tb2)
	require.NotNil(t, h2)
	require.NoError(t, h2.Close())
	tb2.runCleanups()
	assert.False(t, tb2.Failed(), "closing the Host before the cleanup failed the TB")
}

// TestAttack23DialToClosedServer: Dial to a server that is gone fails the
// TB (FailNow), promptly, and registers nothing that fails later.
func TestAttack23DialToClosedServer(t *testing.T) {
	srv, err := remotetest.Start()
	require.NoError(t, err)
	require.NoError(t, srv.Close())
	tb := &a23TB{TB: t}
	start := time.Now()
	h := dial(t, srv, tb)
	assert.Nil(t, h)
	assert.True(t, tb.Failed(), "Dial to a closed server did not fail the TB")
	assert.Less(t, time.Since(start), 3*time.Second)
	tb.runCleanups()
}

// TestAttack23DialAfterServerClosedHostFails: once the server closes, the
// Host from Dial fails every call with a transport error, and the TB's
// cleanup (Close of a dead connection) does not fail the test.
func TestAttack23DialAfterServerClosedHostFails(t *testing.T) {
	srv, err := remotetest.Start()
	require.NoError(t, err)
	tb := &a23TB{TB: t}
	h := dial(t, srv, tb)
	require.NotNil(t, h)
	require.NoError(t, srv.Close())
	err = h.Run(t.Context(), sandbox.Command{Script: "true"})
	require.Error(t, err)
	assert.ErrorIs(t, err, sandbox.ErrTransport)
	tb.runCleanups()
	assert.False(t, tb.Failed(), "closing a Host whose server is gone failed the TB")
}
