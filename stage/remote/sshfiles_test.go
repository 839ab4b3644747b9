package remote_test

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/airlockdev/airlock/stage/remote"
)

// TestLoadSSHConfigSpecialFiles: wherever LoadSSHConfig reads a file — the
// configuration, an Include target however it is written, an identity
// file or its .pub, a known_hosts file — a named pipe or a device is an
// error naming it, returned at once: a FIFO no one writes does not block
// it, /dev/zero is not read forever.
func TestLoadSSHConfigSpecialFiles(t *testing.T) {
	e := newSSHEnv(t)
	type load func(t *testing.T, special string) (config string, err error)
	// user loads the alias h with text (SPECIAL replaced) as the user file.
	user := func(text string) load {
		return func(t *testing.T, special string) (string, error) {
			config := writeFile(t, filepath.Join(t.TempDir(), "config"), strings.ReplaceAll(text, "SPECIAL", special))
			_, _, err := attack23Load(t, 2*time.Second, "h", remote.WithSSHConfigFiles(config, ""), remote.WithSSHHome(e.home), remote.WithSSHAgent(""))
			return config, err
		}
	}
	// included loads a user file that includes a regular file of dir
	// whose own Include names dir/*: the special file sits in dir.
	included := func(t *testing.T, special string) (string, error) {
		dir := filepath.Dir(special)
		writeFile(t, filepath.Join(dir, "a.conf"), "Host other\n  Include "+filepath.Join(dir, "*")+"\n")
		return user("Include "+filepath.Join(dir, "a.conf")+"\n")(t, special)
	}
	cases := map[string]struct {
		load load
		want string // the error, SPECIAL and CONFIG replaced; "" to check only that it names the file
	}{
		"UserConfig": {load: func(t *testing.T, special string) (string, error) {
			_, _, err := attack23Load(t, 2*time.Second, "h", remote.WithSSHConfigFiles(special, ""), remote.WithSSHHome(e.home), remote.WithSSHAgent(""))
			return "", err
		}, want: "remote: reading ssh config: open SPECIAL: is a KIND, not a regular file"},
		"SystemConfig": {load: func(t *testing.T, special string) (string, error) {
			config := writeFile(t, filepath.Join(t.TempDir(), "config"), "")
			_, _, err := attack23Load(t, 2*time.Second, "h", remote.WithSSHConfigFiles(config, special), remote.WithSSHHome(e.home), remote.WithSSHAgent(""))
			return "", err
		}, want: "remote: reading ssh config: open SPECIAL: is a KIND, not a regular file"},
		"Include": {load: user("Include SPECIAL\n"),
			want: "remote: ssh config CONFIG: Include SPECIAL: open SPECIAL: is a KIND, not a regular file; an Include must name regular files"},
		"IncludeInHostBlock": {load: user("Host h\n  HostName h.example\nHost other\n  # comment\n\tinclude=SPECIAL # why\n")},
		"IncludeSecondArgument": {load: func(t *testing.T, special string) (string, error) {
			return user("Include "+writeFile(t, filepath.Join(t.TempDir(), "first"), "")+" SPECIAL\n")(t, special)
		}},
		"IncludeTab":         {load: user("INCLUDE\tSPECIAL\r\n")},
		"IncludeNestedGlob":  {load: included},
		"IdentityFile":       {load: user("IdentityFile SPECIAL\n"), want: `remote: ssh config for host "h": identity file: open SPECIAL: is a KIND, not a regular file`},
		"UserKnownHosts":     {load: user("UserKnownHostsFile SPECIAL\nGlobalKnownHostsFile none\n"), want: `remote: ssh config for host "h": known_hosts: open SPECIAL: is a KIND, not a regular file; name regular files in UserKnownHostsFile and GlobalKnownHostsFile`},
		"GlobalKnownHosts":   {load: user("UserKnownHostsFile none\nGlobalKnownHostsFile SPECIAL\n")},
		"AcceptNewKnownHost": {load: user("StrictHostKeyChecking accept-new\nUserKnownHostsFile SPECIAL\n")},
	}
	for name, c := range cases {
		t.Run(name+"/FIFO", func(t *testing.T) {
			fifo := attack23FIFO(t, filepath.Join(t.TempDir(), "special"))
			config, err := c.load(t, fifo)
			require.Error(t, err)
			assert.Contains(t, err.Error(), fifo)
			if c.want != "" {
				assert.EqualError(t, err, strings.NewReplacer("SPECIAL", fifo, "CONFIG", config, "KIND", "FIFO").Replace(c.want))
			}
		})
		if name == "IncludeNestedGlob" {
			continue // a glob cannot reach /dev/zero from a directory of the test's
		}
		t.Run(name+"/DevZero", func(t *testing.T) {
			config, err := c.load(t, "/dev/zero")
			require.Error(t, err)
			assert.Contains(t, err.Error(), "/dev/zero")
			assert.Contains(t, err.Error(), "is a device")
			if c.want != "" {
				assert.EqualError(t, err, strings.NewReplacer("SPECIAL", "/dev/zero", "CONFIG", config, "KIND", "device").Replace(c.want))
			}
		})
	}
}

// TestLoadSSHConfigIdentityPubFIFO: an identity file with no private key
// whose FILE.pub is a FIFO is an error naming the .pub, at once.
func TestLoadSSHConfigIdentityPubFIFO(t *testing.T) {
	e := newSSHEnv(t)
	key := filepath.Join(t.TempDir(), "key")
	attack23FIFO(t, key+".pub")
	_, _, err := attack23Load(t, 2*time.Second, "h", attack23Opts(t, e.home, "IdentityFile "+key+"\n")...)
	require.EqualError(t, err, `remote: ssh config for host "h": open `+key+`.pub: is a FIFO, not a regular file`)
}

// TestLoadSSHConfigDevNull: /dev/null, and a link to it, still read as an
// empty file, as ssh reads them (ssh -F /dev/null; UserKnownHostsFile
// /dev/null trusts nothing of its own).
func TestLoadSSHConfigDevNull(t *testing.T) {
	e := newSSHEnv(t)
	addr, _, err := attack23Load(t, 2*time.Second, "h", remote.WithSSHConfigFiles(os.DevNull, ""), remote.WithSSHHome(e.home), remote.WithSSHAgent(""))
	require.NoError(t, err)
	assert.Equal(t, "h:22", addr)
	link := filepath.Join(t.TempDir(), "known_hosts")
	require.NoError(t, os.Symlink(os.DevNull, link))
	_, cfg, err := attack23Load(t, 2*time.Second, "h", attack23Opts(t, e.home, "Include "+os.DevNull+"\nUserKnownHostsFile "+link+"\nGlobalKnownHostsFile none\n")...)
	require.NoError(t, err)
	assert.ErrorIs(t, checkKey(cfg.HostKeyCallback, "h:22", signerOf(t).PublicKey()), remote.ErrUnknownHost)
}

// lockFile takes an exclusive flock(2) on path, as another process would,
// until the returned function runs.
func lockFile(t *testing.T, path string) (unlock func()) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	require.NoError(t, err)
	require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX))
	done := false
	unlock = func() {
		if !done {
			done = true
			require.NoError(t, f.Close())
		}
	}
	t.Cleanup(unlock)
	return unlock
}

// TestLoadSSHConfigAcceptNewUnderLock: accept-new decides under the lock
// on the known_hosts file: while another holds it, the callback waits;
// what the other wrote meanwhile is what the key is checked against (a
// different key is a mismatch, the same key is trusted and not written
// twice); a lock never released ends the wait with an error.
func TestLoadSSHConfigAcceptNewUnderLock(t *testing.T) {
	e := newSSHEnv(t)
	const host = "new.example:22"
	key, other := signerOf(t).PublicKey(), signerOf(t).PublicKey()
	for name, c := range map[string]struct {
		written  ssh.PublicKey // what the lock's holder writes for host
		mismatch bool
	}{"OtherKey": {written: other, mismatch: true}, "SameKey": {written: key}} {
		t.Run(name, func(t *testing.T) {
			known := writeFile(t, filepath.Join(t.TempDir(), "known_hosts"), "")
			_, cfg, err := attack23Load(t, 2*time.Second, "h", attack23Opts(t, e.home, "StrictHostKeyChecking accept-new\nUserKnownHostsFile "+known+"\nGlobalKnownHostsFile none\n")...)
			require.NoError(t, err)
			unlock := lockFile(t, known)
			done := make(chan error, 1)
			go func() { done <- checkKey(cfg.HostKeyCallback, host, key) }()
			select {
			case err := <-done:
				t.Fatalf("the callback decided while another held the lock: %v", err)
			case <-time.After(200 * time.Millisecond):
			}
			line := knownhosts.Line([]string{"new.example"}, c.written) + "\n"
			require.NoError(t, os.WriteFile(known, []byte(line), 0o600))
			unlock()
			err = <-done
			if c.mismatch {
				var he *remote.HostKeyError
				require.ErrorAs(t, err, &he)
				assert.ErrorIs(t, err, remote.ErrHostKeyMismatch)
				assert.Equal(t, []string{known + ":1"}, he.Known)
			} else {
				require.NoError(t, err)
			}
			b, err := os.ReadFile(known)
			require.NoError(t, err)
			assert.Equal(t, line, string(b), "nothing is appended")
		})
	}
	t.Run("NeverReleased", func(t *testing.T) {
		defer remote.SetKnownHostsLockWait(100 * time.Millisecond)()
		known := writeFile(t, filepath.Join(t.TempDir(), "known_hosts"), "")
		_, cfg, err := attack23Load(t, 2*time.Second, "h", attack23Opts(t, e.home, "StrictHostKeyChecking accept-new\nUserKnownHostsFile "+known+"\nGlobalKnownHostsFile none\n")...)
		require.NoError(t, err)
		lockFile(t, known)
		err = checkKey(cfg.HostKeyCallback, host, key)
		assert.ErrorIs(t, err, remote.ErrUnknownHost)
		assert.ErrorContains(t, err, "StrictHostKeyChecking accept-new could not remember it: locking "+known+": another process has held its lock for 100ms")
		b, err := os.ReadFile(known)
		require.NoError(t, err)
		assert.Empty(t, b)
	})
}

// TestLoadSSHConfigAcceptNewNames: accept-new never writes a name that
// known_hosts would read as a pattern, a marker, a comment or a broken
// line, whether it comes from HostKeyAlias, HostName or the dialled
// address; hashed (HashKnownHosts yes) any name is a literal and is
// remembered for that name only.
func TestLoadSSHConfigAcceptNewNames(t *testing.T) {
	e := newSSHEnv(t)
	// Each name refused, and why. A '#' cannot reach HostKeyAlias (it
	// starts a comment in ssh_config); knownhosts itself refuses to look up
	// a name with a bracket or a colon outside the [host]:port form.
	bad := []struct{ name, why string }{
		{"*", `holds the wild card '*'`},
		{"?x", `holds the wild card '?'`},
		{"a.example,*", "holds a comma"},
		{"!x", "holds !"},
		{"@revoked", "starts with @"},
		{"|1|abc", "starts with |"},
		{"[h]:2222", `holds '['`},
		{"h]", `holds ']'`},
		{"h#x", "holds #"},
		{"a\tb", `holds the white space or control character '\t'`},
		{"a b", `holds the white space or control character ' '`},
		{"a\x7fb", `holds the white space or control character '\x7f'`},
	}
	dir := t.TempDir() // t.Run's names may hold '#', which TempDir keeps
	acceptNew := func(t *testing.T, known, hostLines, extra string) (remote.Config, error) {
		t.Helper()
		_, cfg, err := attack23Load(t, 2*time.Second, "h", attack23Opts(t, e.home, "Host h\n"+hostLines+"  StrictHostKeyChecking accept-new\n  UserKnownHostsFile "+known+"\n  GlobalKnownHostsFile none\n"+extra)...)
		return cfg, err
	}
	for i, c := range bad {
		known := func(what string) string { return filepath.Join(dir, what, strconv.Itoa(i), "known_hosts") }
		if !strings.Contains(c.name, "#") {
			t.Run("HostKeyAlias/"+strconv.Quote(c.name), func(t *testing.T) {
				_, err := acceptNew(t, known("alias"), "  HostKeyAlias \""+c.name+"\"\n", "")
				require.Error(t, err)
				assert.ErrorContains(t, err, `remote: ssh config for host "h": StrictHostKeyChecking accept-new would write HostKeyAlias `+strconv.Quote(c.name)+" to "+known("alias")+" as it is, and it "+c.why)
				assert.NoFileExists(t, known("alias"))
			})
		}
		t.Run("Dialled/"+strconv.Quote(c.name), func(t *testing.T) {
			cfg, err := acceptNew(t, known("dialled"), "", "")
			require.NoError(t, err)
			err = checkKey(cfg.HostKeyCallback, net.JoinHostPort(c.name, "22"), signerOf(t).PublicKey())
			require.Error(t, err)
			if !strings.ContainsAny(c.name, "[]:") {
				assert.ErrorIs(t, err, remote.ErrUnknownHost)
				assert.ErrorContains(t, err, "StrictHostKeyChecking accept-new will not remember it: the host name "+strconv.Quote(c.name)+" "+c.why)
			}
			assert.NoFileExists(t, known("dialled"))
		})
		if strings.ContainsAny(c.name, "#[]:") {
			continue // see bad
		}
		t.Run("Hashed/"+strconv.Quote(c.name), func(t *testing.T) {
			cfg, err := acceptNew(t, known("hashed"), "  HostKeyAlias \""+c.name+"\"\n", "  HashKnownHosts yes\n")
			require.NoError(t, err)
			key := signerOf(t).PublicKey()
			require.NoError(t, checkKey(cfg.HostKeyCallback, "h:22", key))
			b, err := os.ReadFile(known("hashed"))
			require.NoError(t, err)
			assert.True(t, strings.HasPrefix(string(b), "|1|") && strings.Count(string(b), "\n") == 1, "%q", b)
			cb, err := knownhosts.New(known("hashed"))
			require.NoError(t, err, "known_hosts parses")
			assert.ErrorContains(t, checkKey(cb, "other.example:22", key), "knownhosts: key is unknown", "trusted for another host")
			assert.NoError(t, checkKey(cfg.HostKeyCallback, "h:22", key), "remembered")
		})
	}
	t.Run("HostName", func(t *testing.T) {
		_, err := acceptNew(t, filepath.Join(dir, "hostname"), "  HostName *.example\n", "")
		assert.EqualError(t, err, `remote: ssh config for host "h": StrictHostKeyChecking accept-new would write HostName "*.example" to `+filepath.Join(dir, "hostname")+
			" as it is, and it holds the wild card '*', so the key would be trusted for every host name it matches; give it a plain host name, set HashKnownHosts yes (a hashed name is a literal), or set StrictHostKeyChecking yes and add the host's line yourself")
	})
	t.Run("Plain", func(t *testing.T) {
		for i, addr := range []string{"plain.example:22", "10.1.2.3:2222", "[::1]:22", "[fe80::1]:2200", "under_score-1:22"} {
			known := filepath.Join(dir, "plain", strconv.Itoa(i), "known_hosts")
			cfg, err := acceptNew(t, known, "", "")
			require.NoError(t, err)
			key := signerOf(t).PublicKey()
			require.NoError(t, checkKey(cfg.HostKeyCallback, addr, key), addr)
			b, err := os.ReadFile(known)
			require.NoError(t, err)
			assert.Equal(t, knownhosts.Line([]string{knownhosts.Normalize(addr)}, key)+"\n", string(b))
			cb, err := knownhosts.New(known)
			require.NoError(t, err)
			assert.NoError(t, checkKey(cb, addr, key), addr)
		}
	})
}
