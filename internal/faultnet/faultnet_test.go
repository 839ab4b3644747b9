package faultnet_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/faultnet"
)

// target is a TCP server that runs handle for every connection and
// remembers what each connection received until its client went away.
type target struct {
	ln       net.Listener
	wg       sync.WaitGroup
	mu       sync.Mutex
	received [][]byte
	open     map[net.Conn]struct{}
}

func newTarget(t *testing.T, handle func(c net.Conn, got *bytes.Buffer)) *target {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	tg := &target{ln: ln, open: make(map[net.Conn]struct{})}
	tg.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tg.mu.Lock()
			tg.open[c] = struct{}{}
			tg.mu.Unlock()
			tg.wg.Go(func() {
				defer c.Close()
				var got bytes.Buffer
				handle(c, &got)
				tg.mu.Lock()
				tg.received = append(tg.received, got.Bytes())
				delete(tg.open, c)
				tg.mu.Unlock()
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		// A connection the proxy never closed (a test that failed before
		// its proxy's Close) would hold Wait forever: close what is left.
		tg.mu.Lock()
		for c := range tg.open {
			c.Close()
		}
		tg.mu.Unlock()
		tg.wg.Wait()
	})
	return tg
}

func (tg *target) addr() string { return tg.ln.Addr().String() }

// got returns what the connections received, once n of them have ended.
func (tg *target) got(t *testing.T, n int) [][]byte {
	t.Helper()
	require.Eventually(t, func() bool {
		tg.mu.Lock()
		defer tg.mu.Unlock()
		return len(tg.received) >= n
	}, 5*time.Second, time.Millisecond, "the target's connections did not end")
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return tg.received
}

// sink reads everything until EOF or error.
func sink(c net.Conn, got *bytes.Buffer) { _, _ = io.Copy(got, c) }

// echo writes back what it reads.
func echo(c net.Conn, got *bytes.Buffer) { _, _ = io.Copy(io.MultiWriter(c, got), c) }

// source sends n bytes, then reads until the client goes.
func source(n int) func(c net.Conn, got *bytes.Buffer) {
	return func(c net.Conn, got *bytes.Buffer) {
		_, _ = c.Write(pattern(n))
		_, _ = io.Copy(got, c)
	}
}

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

func listen(t *testing.T, target string) *faultnet.Proxy {
	t.Helper()
	p, err := faultnet.Listen(target)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	return p
}

func dial(t *testing.T, p *faultnet.Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// readAll reads c until EOF or an error other than a timeout; a timeout
// (the connection stayed open) is reported as open.
func readAll(t *testing.T, c net.Conn, wait time.Duration) (got []byte, open bool) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(wait)))
	var buf bytes.Buffer
	_, err := io.Copy(&buf, c)
	return buf.Bytes(), errors.Is(err, os.ErrDeadlineExceeded)
}

func TestCleanForwardingAndBytes(t *testing.T) {
	tg := newTarget(t, echo)
	p := listen(t, tg.addr())
	c := dial(t, p)
	msg := pattern(100_000)
	go func() { _, _ = c.Write(msg) }()
	got := make([]byte, len(msg))
	_, err := io.ReadFull(c, got)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(msg, got), "echoed bytes differ")
	require.NoError(t, c.(*net.TCPConn).CloseWrite())
	assert.Equal(t, [][]byte{msg}, tg.got(t, 1))
	assert.Equal(t, faultnet.Counts{Up: 100_000, Down: 100_000}, p.Bytes())
	assert.Equal(t, int64(200_000), p.Bytes().Total())
	assert.Equal(t, 0, p.Tripped())
	assert.Equal(t, 1, p.Accepted())
}

func TestCutAfterUp(t *testing.T) {
	for _, n := range []int64{1, 4095, 4096, 32 << 10, 32<<10 + 1, 99_999} {
		t.Run(faultnet.Fault{After: n, Dir: faultnet.Up, Mode: faultnet.Cut}.String(), func(t *testing.T) {
			tg := newTarget(t, sink)
			p := listen(t, tg.addr())
			p.Arm(faultnet.Fault{After: n, Dir: faultnet.Up, Mode: faultnet.Cut})
			c := dial(t, p)
			go func() { _, _ = c.Write(pattern(200_000)) }()
			_, open := readAll(t, c, 5*time.Second)
			assert.False(t, open, "the cut closes the client's side")
			got := tg.got(t, 1)
			assert.Equal(t, pattern(int(n)), got[0], "the target gets exactly the first %d bytes", n)
			assert.Equal(t, faultnet.Counts{Up: n}, p.Bytes())
			assert.Equal(t, 1, p.Tripped())
		})
	}
}

func TestCutAfterDown(t *testing.T) {
	const n = 12_345
	tg := newTarget(t, source(100_000))
	p := listen(t, tg.addr())
	p.Arm(faultnet.Fault{After: n, Dir: faultnet.Down, Mode: faultnet.Cut})
	c := dial(t, p)
	got, open := readAll(t, c, 5*time.Second)
	assert.False(t, open)
	assert.Equal(t, pattern(n), got)
	tg.got(t, 1) // the target's side was closed too
	assert.Equal(t, faultnet.Counts{Down: n}, p.Bytes())
}

// TestCutCountsBoth: with Dir Both the two directions share one budget.
func TestCutCountsBoth(t *testing.T) {
	tg := newTarget(t, echo)
	p := listen(t, tg.addr())
	p.Arm(faultnet.Fault{After: 150, Mode: faultnet.Cut}) // zero Dir: Both
	c := dial(t, p)
	_, err := c.Write(pattern(100))
	require.NoError(t, err)
	got, open := readAll(t, c, 5*time.Second)
	assert.False(t, open)
	assert.Equal(t, pattern(50), got, "100 up leaves 50 of the echo")
	assert.Equal(t, faultnet.Counts{Up: 100, Down: 50}, p.Bytes())
	assert.Equal(t, 1, p.Tripped())
}

// TestUncountedDirectionFlows: a fault on Up lets Down flow until it trips.
func TestUncountedDirectionFlows(t *testing.T) {
	tg := newTarget(t, source(50_000))
	p := listen(t, tg.addr())
	p.Arm(faultnet.Fault{After: 10, Dir: faultnet.Up, Mode: faultnet.Cut})
	c := dial(t, p)
	got := make([]byte, 50_000)
	_, err := io.ReadFull(c, got)
	require.NoError(t, err)
	assert.Equal(t, pattern(50_000), got)
	assert.Equal(t, 0, p.Tripped())
	_, err = c.Write(pattern(20))
	require.NoError(t, err)
	_, open := readAll(t, c, 5*time.Second)
	assert.False(t, open)
	assert.Equal(t, [][]byte{pattern(10)}, tg.got(t, 1))
	assert.Equal(t, faultnet.Counts{Up: 10, Down: 50_000}, p.Bytes())
}

func TestAfterZero(t *testing.T) {
	t.Run("cut", func(t *testing.T) {
		tg := newTarget(t, source(1000))
		p := listen(t, tg.addr())
		p.Arm(faultnet.Fault{After: 0, Mode: faultnet.Cut})
		got, open := readAll(t, dial(t, p), 5*time.Second)
		assert.False(t, open)
		assert.Empty(t, got)
		assert.Equal(t, faultnet.Counts{}, p.Bytes())
		assert.Equal(t, 1, p.Tripped())
	})
	t.Run("stall", func(t *testing.T) {
		tg := newTarget(t, source(1000))
		p := listen(t, tg.addr())
		p.Arm(faultnet.Fault{After: 0, Mode: faultnet.Stall})
		got, open := readAll(t, dial(t, p), 200*time.Millisecond)
		assert.True(t, open)
		assert.Empty(t, got)
		require.Eventually(t, func() bool { return p.Tripped() == 1 }, 5*time.Second, time.Millisecond)
	})
}

// TestStall: the connection forwards exactly After bytes and then nothing
// in either direction, staying open; Close releases it.
func TestStall(t *testing.T) {
	tg := newTarget(t, echo)
	p, err := faultnet.Listen(tg.addr())
	require.NoError(t, err)
	// A failure before the explicit Close below must still release the
	// stalled connection, or the target's cleanup would wait forever.
	t.Cleanup(func() { assert.NoError(t, p.Close()) })
	p.Arm(faultnet.Fault{After: 1000, Dir: faultnet.Both, Mode: faultnet.Stall})
	c := dial(t, p)
	roundTrip(t, c, 500) // 500 up, 500 down: the budget is spent
	require.Eventually(t, func() bool { return p.Tripped() == 1 }, 5*time.Second, time.Millisecond)
	_, err = c.Write(pattern(5000))
	require.NoError(t, err)
	got, open := readAll(t, c, 300*time.Millisecond)
	assert.True(t, open, "a stalled connection stays open")
	assert.Empty(t, got, "nothing passes after the stall")
	// Nothing passes any more, even written later.
	_, err = c.Write(pattern(10))
	require.NoError(t, err)
	more, open := readAll(t, c, 200*time.Millisecond)
	assert.True(t, open)
	assert.Empty(t, more)
	assert.Equal(t, faultnet.Counts{Up: 500, Down: 500}, p.Bytes())
	assert.Equal(t, 1, p.Tripped())

	require.NoError(t, p.Close())
	_, open = readAll(t, c, 5*time.Second)
	assert.False(t, open, "Close releases the stalled connection")
	assert.Equal(t, [][]byte{pattern(500)}, tg.got(t, 1))
	require.NoError(t, p.Close(), "a second Close")
}

// TestArmAffectsNewConnections: a connection accepted before Arm stays
// clean; one after is faulted; after Disarm clean again.
func TestArmAffectsNewConnections(t *testing.T) {
	tg := newTarget(t, echo)
	p := listen(t, tg.addr())
	before := dial(t, p)
	roundTrip(t, before, 10) // accepted and forwarding
	p.Arm(faultnet.Fault{After: 10, Mode: faultnet.Cut, Dir: faultnet.Up})
	armed := dial(t, p)
	roundTrip(t, before, 1000)
	_, err := armed.Write(pattern(20))
	require.NoError(t, err)
	got, open := readAll(t, armed, 5*time.Second)
	assert.False(t, open)
	assert.Empty(t, got, "the cut comes before the echo")
	p.Disarm()
	after := dial(t, p)
	roundTrip(t, after, 1000)
	after.Close()
	assert.Equal(t, 1, p.Tripped())
	assert.Equal(t, 3, p.Accepted())
	before.Close()
	assert.Contains(t, tg.got(t, 3), pattern(10), "the armed connection's target got its 10 bytes")
}

func roundTrip(t *testing.T, c net.Conn, n int) {
	t.Helper()
	_, err := c.Write(pattern(n))
	require.NoError(t, err)
	got := make([]byte, n)
	_, err = io.ReadFull(c, got)
	require.NoError(t, err)
	require.Equal(t, pattern(n), got)
}

// TestUnreachableTarget: a connection whose target refuses is closed.
func TestUnreachableTarget(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	p := listen(t, addr)
	_, open := readAll(t, dial(t, p), 5*time.Second)
	assert.False(t, open)
}

func TestListenBadTarget(t *testing.T) {
	_, err := faultnet.Listen("no-port")
	require.ErrorContains(t, err, `target "no-port" is not host:port`)
}

// TestCloseLeavesNoGoroutine: Close with clean, cut and stalled connections
// open ends every goroutine the proxy started.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	tg := newTarget(t, echo)
	base := settledGoroutines()
	p, err := faultnet.Listen(tg.addr())
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, p.Close()) }) // releases the stalls if an assertion fails first
	var conns []net.Conn
	for i, f := range []*faultnet.Fault{nil, {After: 5, Mode: faultnet.Cut}, {After: 5, Mode: faultnet.Stall}, {After: 0, Mode: faultnet.Stall}} {
		if f == nil {
			p.Disarm()
		} else {
			p.Arm(*f)
		}
		c, err := net.Dial("tcp", p.Addr())
		require.NoError(t, err)
		conns = append(conns, c)
		// Dial returns once the kernel has the connection, which can be
		// before the proxy accepted it and read the armed fault: wait, so
		// the next Arm cannot reach this connection.
		require.Eventually(t, func() bool { return p.Accepted() == i+1 }, 5*time.Second, time.Millisecond)
		_, err = c.Write(pattern(100))
		require.NoError(t, err, "connection %d", i)
	}
	require.Eventually(t, func() bool { return p.Accepted() == 4 && p.Tripped() == 3 }, 5*time.Second, time.Millisecond)
	require.NoError(t, p.Close())
	for _, c := range conns {
		c.Close()
	}
	assert.Eventually(t, func() bool { return runtime.NumGoroutine() <= base+2 }, 5*time.Second, 10*time.Millisecond,
		"goroutines: %d before, %d after", base, runtime.NumGoroutine())
}

// settledGoroutines returns the goroutine count once it stops falling.
func settledGoroutines() int {
	n := runtime.NumGoroutine()
	for range 50 {
		time.Sleep(10 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m >= n {
			return m
		}
		n = m
	}
	return n
}

func TestStrings(t *testing.T) {
	assert.Equal(t, "cut@7/both", faultnet.Fault{After: 7, Mode: faultnet.Cut}.String())
	assert.Equal(t, "stall@0/up", faultnet.Fault{Dir: faultnet.Up, Mode: faultnet.Stall}.String())
	assert.Equal(t, "down", faultnet.Down.String())
	assert.Equal(t, "Dir(8)", faultnet.Dir(8).String())
	assert.Equal(t, "Mode(0)", faultnet.Mode(0).String())
	c := faultnet.Counts{Up: 3, Down: 4}
	assert.Equal(t, int64(7), c.Of(faultnet.Both))
	assert.Equal(t, int64(3), c.Of(faultnet.Up))
	assert.Equal(t, int64(4), c.Of(faultnet.Down))
	assert.Equal(t, faultnet.Counts{Up: 2, Down: 4}, c.Sub(faultnet.Counts{Up: 1}))
}
