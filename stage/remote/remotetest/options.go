package remotetest

import (
	"errors"
	"fmt"
	"time"
)

// An Option configures a Server started by Start or NewServer.
type Option func(*options) error

type options struct {
	dir         string        // "" means a fresh temporary directory
	latency     time.Duration // round-trip delay; 0 means none
	hang        []string      // exec commands containing any of these never answer
	hangSFTP    bool          // the sftp subsystem is accepted and never answers
	dropAfter   int64         // 0 means never
	noForward   bool          // refuse remote forwarding requests
	hangForward bool          // never answer remote forwarding requests
}

// WithDir makes commands run in dir (made absolute), and makes relative SFTP
// paths resolve there. The directory must exist; Close leaves it in place.
// Default: a fresh temporary directory, removed by Close.
func WithDir(dir string) Option {
	return func(o *options) error {
		if dir == "" {
			return errors.New("remotetest: WithDir: empty directory name")
		}
		o.dir = dir
		return nil
	}
}

// WithLatency adds d to every round trip: the bytes of each direction are
// delayed by d/2, in order, through a delay line, so a connection's
// throughput is not limited by the latency. Default: no added latency.
func WithLatency(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return fmt.Errorf("remotetest: WithLatency(%v): negative latency", d)
		}
		o.latency = d
		return nil
	}
}

// WithHang makes every exec request whose command contains match go
// unanswered: no reply to the request, no output, no exit status, until the
// client closes the channel or the connection, or the server is closed. The
// request still counts in Execs. WithHang may be given more than once.
// Default: every exec request is answered.
func WithHang(match string) Option {
	return func(o *options) error {
		if match == "" {
			return errors.New("remotetest: WithHang: empty match would hang every command")
		}
		o.hang = append(o.hang, match)
		return nil
	}
}

// WithDropAfter makes the server close each connection's TCP socket once it
// has read n bytes from the client (raw bytes, counted per connection, so a
// new connection works again). Default: connections are never dropped.
func WithDropAfter(n int64) Option {
	return func(o *options) error {
		if n <= 0 {
			return fmt.Errorf("remotetest: WithDropAfter(%d): n must be positive", n)
		}
		o.dropAfter = n
		return nil
	}
}

// WithHangSFTP makes the server accept every "sftp" subsystem request and
// then never answer on it: the client's SFTP handshake and every request
// after it wait forever, as with a server whose SFTP process is stuck. The
// channel's input is read and dropped until the client closes it or the
// connection ends. Default: the subsystem is served by pkg/sftp.
func WithHangSFTP() Option {
	return func(o *options) error {
		o.hangSFTP = true
		return nil
	}
}

// WithoutForwarding makes the server refuse every remote forwarding
// request ("tcpip-forward", "streamlocal-forward@openssh.com"), as OpenSSH
// does with DisableForwarding. Default: both are served (see Server).
func WithoutForwarding() Option {
	return func(o *options) error {
		o.noForward = true
		return nil
	}
}

// WithHangForward makes the server leave every remote forwarding request
// unanswered, as a stuck server would; the client's request waits until it
// gives up or the connection ends. Default: they are answered.
func WithHangForward() Option {
	return func(o *options) error {
		o.hangForward = true
		return nil
	}
}
