package remote

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/airlockdev/airlock/internal/shell"
	"github.com/airlockdev/airlock/internal/tree"
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
// At least one file is required; a file that cannot be read is an error,
// and so is one that is not a regular file (a named pipe, a device;
// /dev/null is read as empty).
func KnownHosts(files ...string) (ssh.HostKeyCallback, error) {
	if len(files) == 0 {
		return nil, errors.New("remote: KnownHosts needs at least one known_hosts file")
	}
	for _, f := range files {
		if err := checkRegular(f); errors.Is(err, errNotRegular) {
			return nil, fmt.Errorf("remote: reading known_hosts: %w", err)
		}
	}
	cb, err := knownhosts.New(files...)
	if err != nil {
		return nil, fmt.Errorf("remote: reading known_hosts: %w", err)
	}
	list := strings.Join(files, ", ")
	return func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		if err := cb(hostname, remote, key); err != nil {
			return knownHostsError(hostname, key, err, list)
		}
		return nil
	}, nil
}

// knownHostsError turns the error of a knownhosts callback into a
// *HostKeyError that says how to trust the key; list names the files read.
func knownHostsError(hostname string, key ssh.PublicKey, err error, list string) *HostKeyError {
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

// hostKeys builds h's HostKeyCallback from StrictHostKeyChecking and the
// known_hosts files.
func (h *sshHost) hostKeys() (ssh.HostKeyCallback, error) {
	mode, err := h.get("StrictHostKeyChecking")
	if err != nil {
		return nil, err
	}
	accept := false
	switch strings.ToLower(mode) {
	case "", "yes", "true", "ask":
	case "accept-new":
		accept = true
	case "no", "off", "false":
		return nil, h.errorf("StrictHostKeyChecking %s would trust any host key, so a machine in the middle could read and change everything sent; remove that line for this host, or set it to yes (trust the keys known_hosts lists) or accept-new (remember a new host's key, refuse a changed one)", mode)
	default:
		return nil, h.errorf("StrictHostKeyChecking %q: want yes, ask or accept-new", mode)
	}
	userFiles, err := h.knownHostsFiles("UserKnownHostsFile", "~/.ssh/known_hosts ~/.ssh/known_hosts2")
	if err != nil {
		return nil, err
	}
	globalFiles, err := h.knownHostsFiles("GlobalKnownHostsFile", "/etc/ssh/ssh_known_hosts /etc/ssh/ssh_known_hosts2")
	if err != nil {
		return nil, err
	}
	k := &knownHostsCheck{files: append(userFiles, globalFiles...), name: h.hostKeyAlias, advise: strings.Join(userFiles, ", ")}
	if len(userFiles) == 0 {
		k.advise = strings.Join(globalFiles, ", ")
	}
	if accept {
		if k.hash, err = h.yesNo("HashKnownHosts", false); err != nil {
			return nil, err
		}
		if k.write, err = h.acceptNewFile(userFiles); err != nil {
			return nil, err
		}
		if err := h.acceptNewName(k.write, k.hash); err != nil {
			return nil, err
		}
	}
	if _, err := k.db(); err != nil { // a broken file fails here, not at Dial
		return nil, h.errorf("%w", err)
	}
	return k.check, nil
}

// knownHostsFiles returns the expanded files of key (def when unset; none
// when "none").
func (h *sshHost) knownHostsFiles(key, def string) ([]string, error) {
	v, err := h.get(key)
	if err != nil {
		return nil, err
	}
	if v == "" {
		v = def
	}
	if strings.EqualFold(v, "none") {
		return nil, nil
	}
	var files []string
	for _, f := range splitArgs(v) {
		p, err := h.expandPath(key, f)
		if err != nil {
			return nil, err
		}
		files = append(files, p)
	}
	return files, nil
}

// acceptNewFile returns the file accept-new appends to: the first user
// known_hosts file, which must be a regular file or not exist yet.
func (h *sshHost) acceptNewFile(userFiles []string) (string, error) {
	if len(userFiles) == 0 {
		return "", h.errorf("StrictHostKeyChecking accept-new needs a UserKnownHostsFile to remember a new host's key in, and UserKnownHostsFile is none; name a file, or set StrictHostKeyChecking yes")
	}
	f := userFiles[0]
	fi, err := os.Stat(f)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return f, nil
	case err != nil:
		return "", h.errorf("StrictHostKeyChecking accept-new: %w", err)
	case !fi.Mode().IsRegular():
		return "", h.errorf("StrictHostKeyChecking accept-new needs a regular file to remember a new host's key in; UserKnownHostsFile %s is a %s, so every host would look new on every connection; name a file, or set StrictHostKeyChecking yes", f, tree.Kind(fi.Mode()))
	}
	return f, nil
}

// acceptNewName refuses a HostKeyAlias (or HostName, without one) that
// accept-new would write to file verbatim and known_hosts would read as a
// pattern or other syntax: "*" or "evil,*" would make the key it remembers
// trusted for other hosts. Hashed (HashKnownHosts), any name is a literal.
func (h *sshHost) acceptNewName(file string, hash bool) error {
	what, name := "HostKeyAlias", h.hostKeyAlias
	if name == "" {
		what, name = "HostName", h.hostName
	}
	if why := knownHostsNameProblem(name); why != "" && !hash {
		return h.errorf("StrictHostKeyChecking accept-new would write %s %q to %s as it is, and it %s; give it a plain host name, set HashKnownHosts yes (a hashed name is a literal), or set StrictHostKeyChecking yes and add the host's line yourself", what, name, file, why)
	}
	return nil
}

// knownHostsCheck checks host keys against known_hosts files read at each
// check (so a key accept-new appended is trusted on the next Dial); a file
// that does not exist is skipped, as ssh skips it.
type knownHostsCheck struct {
	files  []string // user files first
	name   string   // HostKeyAlias: the name to look up instead of the dialled host
	write  string   // accept-new: an unknown host's key is appended here; "" refuses it
	hash   bool     // write the host name hashed (HashKnownHosts)
	advise string   // the files a user adds a line to, for the error's advice
	mu     sync.Mutex
}

// db reads the files that exist.
func (k *knownHostsCheck) db() (ssh.HostKeyCallback, error) {
	var present []string
	for _, f := range k.files {
		err := checkRegular(f)
		switch {
		case err == nil:
			present = append(present, f)
		case errors.Is(err, errNotRegular):
			return nil, fmt.Errorf("known_hosts: %w; name regular files in UserKnownHostsFile and GlobalKnownHostsFile", err)
		case !errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("known_hosts: %w", err)
		}
	}
	cb, err := knownhosts.New(present...)
	if err != nil {
		return nil, fmt.Errorf("reading known_hosts: %w", err)
	}
	return cb, nil
}

// check is the HostKeyCallback.
func (k *knownHostsCheck) check(hostname string, remote net.Addr, key ssh.PublicKey) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	cb, err := k.db()
	if err != nil {
		return fmt.Errorf("remote: %s: %w", hostname, err)
	}
	lookup := hostname
	if k.name != "" {
		lookup = net.JoinHostPort(k.name, "22")
	}
	err = cb(lookup, remote, key)
	if err == nil {
		return nil
	}
	he := knownHostsError(hostname, key, err, k.advise)
	if k.write == "" || !errors.Is(he.Err, ErrUnknownHost) {
		return he
	}
	return k.accept(hostname, lookup, remote, key, he)
}
