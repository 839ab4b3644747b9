package remotetest

import (
	"io"
	"net"
	"sync"
	"time"
)

// dropConn closes its connection once left bytes have been read from it.
// Only the SSH transport's single reader calls Read.
type dropConn struct {
	net.Conn
	left int64
}

func (c *dropConn) Read(p []byte) (int, error) {
	if c.left <= 0 {
		_ = c.Conn.Close()
		return 0, net.ErrClosed
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.Conn.Read(p)
	c.left -= int64(n)
	if c.left <= 0 {
		_ = c.Conn.Close() // the fault: cut the TCP connection here
	}
	return n, err
}

// delayConn is a delay line in both directions: every chunk read from or
// written to the connection becomes available delay later, in order. Writes
// return at once (up to a bounded backlog) and reads of data that arrived
// long enough ago do not wait, so throughput is not limited by the delay.
type delayConn struct {
	net.Conn // the connection underneath; Read, Write and Close are overridden
	delay    time.Duration

	in     chan chunk // read from the connection, in arrival order
	inErr  error      // the read error; set before in is closed
	cur    chunk      // the chunk Read is consuming; only Read uses it
	readMu sync.Mutex

	out    chan chunk // written by the SSH transport, in order
	errMu  sync.Mutex
	outErr error // the first write error

	closeOnce sync.Once
	done      chan struct{}
}

type chunk struct {
	b   []byte
	due time.Time
}

// delayBacklog bounds the chunks held in each direction. A chunk is what one
// Read or Write carried, at most about one SSH packet (32 KiB of payload), so
// the backlog holds several channels' flow-control windows (2 MiB each) and
// the line does not throttle throughput below window/delay.
const delayBacklog = 1024

func newDelayConn(c net.Conn, delay time.Duration, wg *sync.WaitGroup) *delayConn {
	d := &delayConn{
		Conn:  c,
		delay: delay,
		in:    make(chan chunk, delayBacklog),
		out:   make(chan chunk, delayBacklog),
		done:  make(chan struct{}),
	}
	wg.Go(d.readLoop)
	wg.Go(d.writeLoop)
	return d
}

func (d *delayConn) readLoop() {
	defer close(d.in)
	buf := make([]byte, 32<<10)
	for {
		n, err := d.Conn.Read(buf)
		if n > 0 {
			b := buf[:n]
			if n == len(buf) {
				buf = make([]byte, len(buf)) // hand the full buffer over
			} else {
				b = append([]byte(nil), b...)
			}
			select {
			case d.in <- chunk{b: b, due: time.Now().Add(d.delay)}:
			case <-d.done:
				d.inErr = net.ErrClosed
				return
			}
		}
		if err != nil {
			d.inErr = err
			return
		}
	}
}

func (d *delayConn) writeLoop() {
	for {
		select {
		case c := <-d.out:
			if !d.wait(c.due) {
				return
			}
			if _, err := d.Conn.Write(c.b); err != nil {
				d.errMu.Lock()
				d.outErr = err
				d.errMu.Unlock()
				_ = d.Close() // a half-written stream is useless
				return
			}
		case <-d.done:
			return
		}
	}
}

// wait sleeps until due; false means the connection was closed meanwhile.
func (d *delayConn) wait(due time.Time) bool {
	wait := time.Until(due)
	if wait <= 0 {
		return true
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-d.done:
		return false
	}
}

func (d *delayConn) Read(p []byte) (int, error) {
	d.readMu.Lock()
	defer d.readMu.Unlock()
	if len(p) == 0 {
		return 0, nil
	}
	if len(d.cur.b) == 0 {
		select {
		case c, ok := <-d.in:
			if !ok {
				if d.inErr == nil {
					return 0, io.EOF
				}
				return 0, d.inErr
			}
			d.cur = c
		case <-d.done:
			return 0, net.ErrClosed
		}
	}
	if !d.wait(d.cur.due) {
		return 0, net.ErrClosed
	}
	n := copy(p, d.cur.b)
	d.cur.b = d.cur.b[n:]
	return n, nil
}

func (d *delayConn) Write(p []byte) (int, error) {
	d.errMu.Lock()
	err := d.outErr
	d.errMu.Unlock()
	if err != nil {
		return 0, err
	}
	c := chunk{b: append([]byte(nil), p...), due: time.Now().Add(d.delay)}
	select {
	case d.out <- c:
		return len(p), nil
	case <-d.done:
		return 0, net.ErrClosed
	}
}

func (d *delayConn) Close() error {
	err := net.ErrClosed
	d.closeOnce.Do(func() {
		close(d.done)
		err = d.Conn.Close()
	})
	return err
}
