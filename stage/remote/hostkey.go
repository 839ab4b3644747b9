package remote

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/airlockdev/airlock/internal/shell"
)

// Host key errors. Dial wraps them (through x/crypto/ssh's handshake
// error), so errors.Is finds them.
var (
	// ErrNoHostKeyCallback reports a Config without HostKeyCallback. There
	// is no insecure default: pass KnownHosts(...) or FixedHostKey(...).
	ErrNoHostKeyCallback = errors.New("remote: Config.HostKeyCallback is nil; pass remote.KnownHosts(file) or remote.FixedHostKey(line) — there is no insecure default")
	// ErrUnknownHost reports a server whose name no known_hosts line lists.
	ErrUnknownHost = errors.New("host is not in known_hosts")
	// ErrHostKeyMismatch reports a server that presented a key other than
	// the one trusted for it: a re-keyed host or a machine in the middle.
	ErrHostKeyMismatch = errors.New("host key mismatch")
)

// HostKeyError reports a server key that the callback refused. Its message
// names the host, the presented key's type and SHA256 fingerprint, and how
// to trust it.
type HostKeyError struct {
	Host        string        // as dialled, host:port
	Key         ssh.PublicKey // the key the server presented
	Fingerprint string        // ssh.FingerprintSHA256(Key): "SHA256:…"
	Known       []string      // where the trusted keys for Host are ("file:line"), on a mismatch
	Err         error         // ErrUnknownHost, ErrHostKeyMismatch, or the knownhosts error
	how         string
}

// Error implements error: the host, the cause, the presented key's type and
// fingerprint, and how to trust it.
func (e *HostKeyError) Error() string {
	return fmt.Sprintf("remote: %s: %v: the server presented %s key %s; %s", e.Host, e.Err, e.Key.Type(), e.Fingerprint, e.how)
}

// Unwrap returns Err.
func (e *HostKeyError) Unwrap() error { return e.Err }

// KnownHosts returns a HostKeyCallback that trusts exactly the keys that the
// OpenSSH known_hosts files list for the host (hashed names, markers and
// non-standard ports as OpenSSH writes them). An unknown host fails with
// ErrUnknownHost, a host with another key with ErrHostKeyMismatch, each in a
// *HostKeyError that names the host and the presented key's fingerprint.
// At least one file is required; a file that cannot be read is an error.
func KnownHosts(files ...string) (ssh.HostKeyCallback, error) {
	if len(files) == 0 {
		return nil, errors.New("remote: KnownHosts needs at least one known_hosts file")
	}
	cb, err := knownhosts.New(files...)
	if err != nil {
		return nil, fmt.Errorf("remote: reading known_hosts: %w", err)
	}
	list := strings.Join(files, ", ")
	return func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		err := cb(hostname, remote, key)
		if err == nil {
			return nil
		}
		he := &HostKeyError{Host: hostname, Key: key, Fingerprint: ssh.FingerprintSHA256(key), Err: err}
		var ke *knownhosts.KeyError
		var re *knownhosts.RevokedError
		switch {
		case errors.As(err, &ke) && len(ke.Want) == 0:
			he.Err = ErrUnknownHost
			he.how = fmt.Sprintf("check that fingerprint out of band (ssh-keygen -lf on the server's host key), then add the host's line to %s (for example from ssh-keyscan)", list)
		case errors.As(err, &ke):
			he.Err = ErrHostKeyMismatch
			for _, k := range ke.Want {
				he.Known = append(he.Known, fmt.Sprintf("%s:%d", k.Filename, k.Line))
			}
			he.how = fmt.Sprintf("known_hosts trusts another key for it (%s); if the host was re-keyed, check the new fingerprint out of band and replace that line", strings.Join(he.Known, ", "))
		case errors.As(err, &re):
			he.how = fmt.Sprintf("that key is marked @revoked in %s:%d; it will not be trusted", re.Revoked.Filename, re.Revoked.Line)
		default:
			he.how = "check the known_hosts files " + list
		}
		return he
	}, nil
}

// FixedHostKey returns a HostKeyCallback that trusts exactly one key, given
// as an authorized_keys or known_hosts-style public key line
// ("ssh-ed25519 AAAA… comment"; the host name part of a known_hosts line is
// not accepted). Any other key fails with ErrHostKeyMismatch.
func FixedHostKey(authorizedKeyLine string) (ssh.HostKeyCallback, error) {
	want, _, _, _, err := ssh.ParseAuthorizedKey([]byte(authorizedKeyLine))
	if err != nil {
		return nil, fmt.Errorf("remote: FixedHostKey: %q is not a public key line (want \"ssh-ed25519 AAAA…\"): %w", shell.Truncate(authorizedKeyLine, 40), err)
	}
	wantFP := ssh.FingerprintSHA256(want)
	wantBytes := string(want.Marshal())
	return func(hostname string, _ net.Addr, key ssh.PublicKey) error {
		if string(key.Marshal()) == wantBytes {
			return nil
		}
		return &HostKeyError{Host: hostname, Key: key, Fingerprint: ssh.FingerprintSHA256(key), Err: ErrHostKeyMismatch,
			how: fmt.Sprintf("the only trusted key is %s %s; if the host was re-keyed, check the new fingerprint out of band and pass its key line", want.Type(), wantFP)}
	}, nil
}
