package faultnet

import (
	"errors"
	"fmt"
	"net"
	"sync"
)

// Dir selects the direction(s) of a connection whose bytes a Fault counts.
type Dir int

const (
	Up   Dir = 1 << iota // client to target
	Down                 // target to client
	// Both counts the bytes of both directions together; it is what the
	// zero Dir means.
	Both = Up | Down
)

// String returns "up", "down" or "both".
func (d Dir) String() string {
	switch d {
	case Up:
		return "up"
	case Down:
		return "down"
	case Both, 0:
		return "both"
	}
	return fmt.Sprintf("Dir(%d)", int(d))
}

// Mode is what a Fault does to its connection.
type Mode int

const (
	// Cut closes both sides of the connection.
	Cut Mode = iota + 1
	// Stall forwards nothing more in either direction and keeps both
	// sides open until the Proxy is closed.
	Stall
)

// String returns "cut" or "stall".
func (m Mode) String() string {
	switch m {
	case Cut:
		return "cut"
	case Stall:
		return "stall"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Fault is what happens to a connection after After bytes have been
// forwarded in direction Dir (zero: Both). After 0 faults the connection
// as soon as it is accepted, before any byte.
type Fault struct {
	After int64
	Dir   Dir
	Mode  Mode
}

// String describes f, for test names: "cut@1234/both".
func (f Fault) String() string { return fmt.Sprintf("%s@%d/%s", f.Mode, f.After, f.dir()) }

func (f Fault) dir() Dir {
	if f.Dir == 0 {
		return Both
	}
	return f.Dir
}

// Counts are bytes forwarded, per direction.
type Counts struct {
	Up, Down int64
}

// Total returns Up + Down.
func (c Counts) Total() int64 { return c.Up + c.Down }

// Of returns the bytes counted in direction d (Both: the total).
func (c Counts) Of(d Dir) int64 {
	switch d {
	case Up:
		return c.Up
	case Down:
		return c.Down
	}
	return c.Total()
}

// Sub returns c - o.
func (c Counts) Sub(o Counts) Counts { return Counts{Up: c.Up - o.Up, Down: c.Down - o.Down} }

// Proxy forwards the connections it accepts to its target. Its methods are
// safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string
	done   chan struct{} // closed by Close: releases stalls
	wg     sync.WaitGroup

	mu      sync.Mutex
	armed   *Fault
	conns   map[*pair]struct{}
	total   Counts
	tripped int
	accepts int
	closed  bool
}

// Listen starts a proxy on 127.0.0.1 (a free port) that forwards to target
// ("host:port"). The target is dialled once per accepted connection; a
// connection whose target cannot be dialled is closed.
func Listen(target string) (*Proxy, error) {
	if _, _, err := net.SplitHostPort(target); err != nil {
		return nil, fmt.Errorf("faultnet: target %q is not host:port: %w", target, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultnet: listening on 127.0.0.1: %w", err)
	}
	p := &Proxy{ln: ln, target: target, done: make(chan struct{}), conns: make(map[*pair]struct{})}
	p.wg.Go(p.accept)
	return p, nil
}

// Addr returns the address to dial: "127.0.0.1:PORT".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Arm makes f apply to every connection accepted from now on (each counts
// its own bytes from zero), until Disarm or another Arm. Connections
// accepted before keep what they had.
func (p *Proxy) Arm(f Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = &f
}

// Disarm makes connections accepted from now on clean.
func (p *Proxy) Disarm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = nil
}

// Bytes returns the bytes forwarded over all connections since Listen.
func (p *Proxy) Bytes() Counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.total
}

// Tripped returns how many connections have met their fault.
func (p *Proxy) Tripped() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tripped
}

// Accepted returns how many connections the proxy has accepted.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepts
}

// Close stops listening, closes every connection (stalled ones included)
// and waits for the proxy's goroutines to end. Calls after the first
// return nil.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.done)
	conns := make([]*pair, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	err := p.ln.Close()
	for _, c := range conns {
		c.close()
	}
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			return
		}
		p.accepts++
		pr := &pair{p: p, client: c}
		if p.armed != nil {
			f := *p.armed
			pr.fault = &f
		}
		p.conns[pr] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go pr.run()
	}
}

// pair is one proxied connection: the client's side and the target's.
type pair struct {
	p      *Proxy
	client net.Conn
	server net.Conn // set by run before the pumps start
	fault  *Fault   // nil: clean

	// Guarded by p.mu.
	counted Counts
	faulted bool

	closeOnce sync.Once
}

func (c *pair) run() {
	defer c.p.wg.Done()
	defer c.forget()
	var d net.Dialer
	server, err := d.Dial("tcp", c.p.target)
	if err != nil {
		c.client.Close()
		return
	}
	c.p.mu.Lock()
	if c.p.closed { // Close did not see the target's side: close it here
		c.p.mu.Unlock()
		server.Close()
		c.client.Close()
		return
	}
	c.server = server
	c.p.mu.Unlock()
	if c.fault != nil && c.fault.After <= 0 {
		c.p.mu.Lock()
		c.trip()
		c.p.mu.Unlock()
		c.afterFault()
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { c.pump(Up, c.client, server) })
	wg.Go(func() { c.pump(Down, server, c.client) })
	wg.Wait()
}

func (c *pair) forget() {
	c.p.mu.Lock()
	delete(c.p.conns, c)
	c.p.mu.Unlock()
}

// close closes both sides (once).
func (c *pair) close() {
	c.closeOnce.Do(func() {
		c.client.Close()
		c.p.mu.Lock()
		s := c.server
		c.p.mu.Unlock()
		if s != nil {
			s.Close()
		}
	})
}

// trip marks the fault met; c.p.mu is held.
func (c *pair) trip() {
	if !c.faulted {
		c.faulted = true
		c.p.tripped++
	}
}

// afterFault does what the fault's mode says, returning once the
// connection is closed.
func (c *pair) afterFault() {
	if c.fault.Mode == Stall {
		<-c.p.done
	}
	c.close()
}

// reserve returns how many of n bytes read in direction d may be forwarded
// and counts them; faulted reports that the fault is met (before or by
// these bytes).
func (c *pair) reserve(d Dir, n int) (allowed int, faulted bool) {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	if c.faulted {
		return 0, true
	}
	allowed = n
	if f := c.fault; f != nil && f.dir()&d != 0 {
		left := f.After - c.counted.Of(f.dir())
		if int64(allowed) >= left {
			allowed = int(left)
			faulted = true
		}
	}
	if d == Up {
		c.counted.Up += int64(allowed)
		c.p.total.Up += int64(allowed)
	} else {
		c.counted.Down += int64(allowed)
		c.p.total.Down += int64(allowed)
	}
	if faulted {
		c.trip()
	}
	return allowed, faulted
}

// pump forwards from src to dst in direction d until either side ends or
// the fault is met. The first pump to end closes both sides, except under
// a stall, which holds them open until the proxy closes.
func (c *pair) pump(d Dir, src, dst net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			allowed, faulted := c.reserve(d, n)
			if allowed > 0 {
				if _, werr := dst.Write(buf[:allowed]); werr != nil {
					c.close()
					return
				}
			}
			if faulted {
				c.afterFault()
				return
			}
		}
		if rerr != nil {
			c.p.mu.Lock()
			faulted := c.faulted
			c.p.mu.Unlock()
			if faulted { // the other pump met the fault
				c.afterFault()
				return
			}
			c.close()
			return
		}
	}
}
