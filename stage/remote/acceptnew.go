package remote

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// knownHostsLockWait bounds the wait for another process's lock on the
// known_hosts file accept-new appends to (it holds it for one read and one
// append). A variable for tests.
var knownHostsLockWait = 10 * time.Second

// accept remembers key for a host that no known_hosts file lists
// (StrictHostKeyChecking accept-new). It holds an exclusive flock(2) on
// the file it appends to while it reads the files again and decides, so
// that of several Configs or processes meeting one new host at once only
// the first remembers its key; the others are checked against that key. he
// is the unknown-host error to return when the key cannot be remembered.
func (k *knownHostsCheck) accept(hostname, lookup string, remote net.Addr, key ssh.PublicKey, he *HostKeyError) error {
	line, err := knownHostsLine(lookup, key, k.hash)
	if err != nil {
		he.how = fmt.Sprintf("StrictHostKeyChecking accept-new will not remember it: %v", err)
		return he
	}
	f, err := lockKnownHosts(k.write)
	if err != nil {
		he.how = fmt.Sprintf("StrictHostKeyChecking accept-new could not remember it: %v", err)
		return he
	}
	remember, verdict := k.recheck(hostname, lookup, remote, key)
	if !remember {
		f.Close() // nothing written: this only releases the lock
		return verdict
	}
	err = appendLine(f, line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		he.how = fmt.Sprintf("StrictHostKeyChecking accept-new could not remember it: %v", err)
		return he
	}
	return nil
}

// recheck reads the known_hosts files again under the lock. remember is
// true when the host is still unknown; otherwise verdict is the check of
// key against what another Config or process remembered meanwhile: nil
// when it remembered this very key, a *HostKeyError (ErrHostKeyMismatch)
// when another.
func (k *knownHostsCheck) recheck(hostname, lookup string, remote net.Addr, key ssh.PublicKey) (remember bool, verdict error) {
	cb, err := k.db()
	if err != nil {
		return false, fmt.Errorf("remote: %s: %w", hostname, err)
	}
	if err := cb(lookup, remote, key); err != nil {
		he := knownHostsError(hostname, key, err, k.advise)
		if errors.Is(he.Err, ErrUnknownHost) {
			return true, nil
		}
		return false, he
	}
	return false, nil
}

// knownHostsLine returns the known_hosts line that remembers key for
// lookup (host:port), the name hashed when hash is set. A name known_hosts
// would read as a pattern or as other syntax is refused unless hashed (a
// hashed name is a literal), and a line that would not read back as this
// one name and key is never returned.
func knownHostsLine(lookup string, key ssh.PublicKey, hash bool) (string, error) {
	host, _, err := net.SplitHostPort(lookup)
	if err != nil {
		host = lookup
	}
	name := knownhosts.Normalize(lookup)
	if hash {
		name = knownhosts.HashHostname(name)
	} else if why := knownHostsNameProblem(host); why != "" {
		return "", fmt.Errorf("the host name %q %s; set HashKnownHosts yes (a hashed name is a literal) or add the host's line yourself", host, why)
	}
	line := knownhosts.Line([]string{name}, key)
	marker, hosts, pub, _, rest, err := ssh.ParseKnownHosts([]byte(line))
	if err != nil || marker != "" || len(hosts) != 1 || hosts[0] != name || !bytes.Equal(pub.Marshal(), key.Marshal()) || len(bytes.TrimSpace(rest)) != 0 {
		return "", fmt.Errorf("the known_hosts line for host name %q would not read back as written (%q)", host, line)
	}
	return line + "\n", nil
}

// knownHostsNameProblem says why name, written verbatim as the host of a
// known_hosts line, would be read as something other than that one host
// name (a pattern that widens the trust in the key, a marker, a comment, or
// a broken line); "" when it would not.
func knownHostsNameProblem(name string) string {
	switch {
	case name == "":
		return "is empty"
	case !utf8.ValidString(name):
		return "is not valid UTF-8"
	case name[0] == '@':
		return "starts with @, which known_hosts reads as a marker (@cert-authority, @revoked)"
	case name[0] == '|':
		return "starts with |, which known_hosts reads as a hashed name"
	}
	for _, r := range name {
		switch {
		case r == '*' || r == '?':
			return fmt.Sprintf("holds the wild card %q, so the key would be trusted for every host name it matches", r)
		case r == '!':
			return "holds !, which known_hosts reads as a negated pattern"
		case r == ',':
			return "holds a comma, which known_hosts reads as a list of patterns (the key would be trusted for each)"
		case r == '[' || r == ']':
			return fmt.Sprintf("holds %q, which known_hosts keeps for the [host]:port form", r)
		case r == '#':
			return "holds #, which starts a comment in known_hosts"
		case unicode.IsSpace(r) || unicode.IsControl(r):
			return fmt.Sprintf("holds the white space or control character %q, which would break the known_hosts line", r)
		}
	}
	return ""
}

// lockKnownHosts opens file for appending (creating it, and its directory,
// for this user only) and takes an exclusive flock(2) on it. The lock is
// the file's, so it excludes other Configs and processes that use this
// function; it is released when the returned file is closed.
func lockKnownHosts(file string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(knownHostsLockWait)
	for {
		f, err := os.OpenFile(file, os.O_RDWR|os.O_APPEND|os.O_CREATE|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0o600)
		if err != nil {
			return nil, err
		}
		same, err := flockNamed(f, file, deadline)
		if same {
			return f, nil
		}
		f.Close()
		if err != nil {
			return nil, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s: it was replaced again and again while accept-new waited to lock it", file)
		}
	}
}

// flockNamed takes the lock on f, waiting until deadline at most, and
// reports whether f is still the regular file that file names (it may have
// been replaced, by ssh-keygen -R for one, while this waited).
func flockNamed(f *os.File, file string, deadline time.Time) (bool, error) {
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	if !fi.Mode().IsRegular() {
		return false, notRegular("open", file, fi.Mode())
	}
	for delay := time.Millisecond; ; delay = min(2*delay, 20*time.Millisecond) {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			return false, fmt.Errorf("locking %s: %w", file, err)
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("locking %s: another process has held its lock for %s; is an ssh client stuck?", file, knownHostsLockWait)
		}
		time.Sleep(delay)
	}
	now, err := os.Stat(file)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil // removed meanwhile: open (create) it again
	}
	if err != nil {
		return false, err
	}
	return os.SameFile(fi, now), nil
}

// appendLine appends line to f, after a newline when the file's last line
// has none. A write that fails part way (a full disk) is undone: the file
// is cut back to its size before, so it never holds half a line that
// would make every later read of it fail.
func appendLine(f *os.File, line string) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if err := writeLine(f, fi.Size(), line); err != nil {
		if terr := f.Truncate(fi.Size()); terr != nil {
			return fmt.Errorf("%w; cutting the file back to its %d bytes before also failed, so remove its last, partial line by hand: %w", err, fi.Size(), terr)
		}
		return err
	}
	return nil
}

// writeLine appends line to f, whose size is size, after a newline when
// its last byte is none.
func writeLine(f *os.File, size int64, line string) error {
	if size > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, size-1); err != nil {
			return err
		}
		if last[0] != '\n' {
			line = "\n" + line
		}
	}
	_, err := f.WriteString(line)
	return err
}
