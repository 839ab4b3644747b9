package remote

import (
	"log/slog"
	"time"

	"golang.org/x/crypto/ssh"
)

// Config configures a Host. Its zero value is not usable: HostKeyCallback is
// required, and at least one Auth method is needed by any real server.
type Config struct {
	User            string              // the user to log in as on the server
	Auth            []ssh.AuthMethod    // authentication methods, tried in order
	HostKeyCallback ssh.HostKeyCallback // required: Dial fails without it; never defaulted to insecure
	DialTimeout     time.Duration       // default 10 s
	KeepAlive       time.Duration       // default 15 s; 0 keeps the default, <0 turns it off
	ControlTimeout  time.Duration       // control operations: min(this, sandbox.MaxControlTimeout)
	Logger          *slog.Logger        // nil: discard
}
