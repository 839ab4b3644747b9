package remote

import (
	"log/slog"
	"time"

	"golang.org/x/crypto/ssh"
)

// Config configures a Host. Its zero value is not usable: HostKeyCallback is
// required, and at least one Auth method is needed by any real server.
// LoadSSHConfig builds one from the user's OpenSSH configuration.
type Config struct {
	User            string              // the user to log in as on the server
	Auth            []ssh.AuthMethod    // authentication methods, tried in order
	HostKeyCallback ssh.HostKeyCallback // required: Dial fails without it; never defaulted to insecure
	DialTimeout     time.Duration       // default 10 s
	KeepAlive       time.Duration       // default 15 s; 0 keeps the default, <0 turns it off
	ControlTimeout  time.Duration       // control operations: min(this, sandbox.MaxControlTimeout)
	Logger          *slog.Logger        // nil: discard

	// Jumps are the SSH servers Dial goes through to reach the target, in
	// order, as OpenSSH's ProxyJump: the first is dialled from this
	// machine, each next hop and then the target through the hop before
	// it (a direct-tcpip channel). Each hop's host key is verified by its
	// own Config.HostKeyCallback, which is required as the target's is.
	// nil: a direct connection.
	Jumps []Jump
}

// Jump is one hop of Config.Jumps.
type Jump struct {
	// Addr is "host:port" (port 22 when absent), as the hop before this
	// one — or this machine, for the first hop — reaches it.
	Addr string
	// Config logs in to the hop: its User, Auth, HostKeyCallback and
	// DialTimeout are used. Its Jumps must be empty (list every hop, first
	// hop first, in the outer Config.Jumps); its KeepAlive, ControlTimeout
	// and Logger are not used: the target's keepalives cross every hop, so
	// a dead hop is found as a dead target.
	Config Config
}
