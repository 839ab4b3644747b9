package remote_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/airlockdev/airlock/internal/sshdtest"
	"github.com/airlockdev/airlock/stage/remote"
)

// attack23Load runs LoadSSHConfig in a goroutine and fails the test when
// it does not return within limit (a hang). The goroutine is left to the
// caller's cleanup (a FIFO it blocks on is unblocked there).
func attack23Load(t *testing.T, limit time.Duration, alias string, opts ...remote.SSHConfigOption) (string, remote.Config, error) {
	t.Helper()
	type res struct {
		addr string
		cfg  remote.Config
		err  error
	}
	done := make(chan res, 1)
	go func() {
		addr, cfg, err := remote.LoadSSHConfig(alias, opts...)
		done <- res{addr, cfg, err}
	}()
	select {
	case r := <-done:
		return r.addr, r.cfg, r.err
	case <-time.After(limit):
		t.Fatalf("LoadSSHConfig(%q) did not return within %s", alias, limit)
		return "", remote.Config{}, nil
	}
}

// attack23FIFO makes a FIFO and, at cleanup, opens it for writing and
// closes it, so a reader blocked in open(2) or read(2) gets EOF.
func attack23FIFO(t *testing.T, path string) string {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, syscall.Mkfifo(path, 0o600))
	t.Cleanup(func() {
		for range 50 { // a reader may still be on its way to open(2)
			f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
			if err == nil {
				f.Close()
			}
			time.Sleep(2 * time.Millisecond)
		}
	})
	return path
}

// attack23Opts are the options that make LoadSSHConfig read only the test's
// files: user config, home, no agent.
func attack23Opts(t *testing.T, home, config string) []remote.SSHConfigOption {
	t.Helper()
	return []remote.SSHConfigOption{remote.WithSSHConfigFiles(writeFile(t, filepath.Join(t.TempDir(), "config"), config), ""),
		remote.WithSSHHome(home), remote.WithSSHAgent("")}
}

// TestAttack23IncludeLoops: a file that includes itself, two files that
// include each other, and an Include "bomb" (every file of a directory
// includes every file of it) end in an error or a result, quickly; never a
// hang, a crash or an exponential walk.
func TestAttack23IncludeLoops(t *testing.T) {
	e := newSSHEnv(t)
	t.Run("Self", func(t *testing.T) {
		dir := t.TempDir()
		self := filepath.Join(dir, "config")
		writeFile(t, self, "Include "+self+"\nHost h\n  HostName self.example\n")
		_, _, err := attack23Load(t, 3*time.Second, "h", remote.WithSSHConfigFiles(self, ""), remote.WithSSHHome(e.home), remote.WithSSHAgent(""))
		require.Error(t, err, "a self-including file is a loop")
		assert.Contains(t, err.Error(), "depth", "the error names the cause: %v", err)
	})
	t.Run("Mutual", func(t *testing.T) {
		dir := t.TempDir()
		a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		writeFile(t, a, "Include "+b+"\n")
		writeFile(t, b, "Include "+a+"\n")
		_, _, err := attack23Load(t, 3*time.Second, "h", attack23Opts(t, e.home, "Include "+a+"\n")...)
		require.Error(t, err)
	})
	t.Run("Bomb", func(t *testing.T) {
		dir := t.TempDir()
		const fanout = 12 // 12^5 ≈ 250,000 reads at depth 5 if nothing stops it
		for i := range fanout {
			writeFile(t, filepath.Join(dir, fmt.Sprintf("f%02d.conf", i)), "Include "+filepath.Join(dir, "*.conf")+"\n")
		}
		start := time.Now()
		_, _, err := attack23Load(t, 5*time.Second, "h", attack23Opts(t, e.home, "Include "+filepath.Join(dir, "*.conf")+"\n")...)
		require.Error(t, err, "a recursive glob is a loop")
		assert.Less(t, time.Since(start), 2*time.Second, "an Include loop costs %s before it is refused", time.Since(start))
	})
}

// TestAttack23SpecialFiles: a FIFO (or a directory) where a key, a
// known_hosts file, an Include or the configuration itself is expected.
// LoadSSHConfig returns (an error naming the file, or a Config that does
// not trust anything it could not read) and does not block forever in
// open(2) on a FIFO no one writes.
func TestAttack23SpecialFiles(t *testing.T) {
	e := newSSHEnv(t)
	t.Run("IdentityFileFIFO", func(t *testing.T) {
		fifo := attack23FIFO(t, filepath.Join(t.TempDir(), "key"))
		_, _, err := attack23Load(t, time.Second, "h", attack23Opts(t, e.home, "IdentityFile "+fifo+"\n")...)
		require.Error(t, err, "the only identity file is not a key")
		assert.Contains(t, err.Error(), fifo)
	})
	t.Run("KnownHostsFIFO", func(t *testing.T) {
		fifo := attack23FIFO(t, filepath.Join(t.TempDir(), "known_hosts"))
		_, cfg, err := attack23Load(t, time.Second, "h", attack23Opts(t, e.home, "UserKnownHostsFile "+fifo+"\nGlobalKnownHostsFile none\n")...)
		if err == nil {
			assert.Error(t, checkKey(cfg.HostKeyCallback, "h:22", signerOf(t).PublicKey()))
		} else {
			assert.Contains(t, err.Error(), fifo)
		}
	})
	t.Run("IncludeFIFO", func(t *testing.T) {
		fifo := attack23FIFO(t, filepath.Join(t.TempDir(), "inc"))
		_, _, err := attack23Load(t, time.Second, "h", attack23Opts(t, e.home, "Include "+fifo+"\n")...)
		if err != nil {
			assert.Contains(t, err.Error(), fifo)
		}
	})
	t.Run("ConfigFIFO", func(t *testing.T) {
		fifo := attack23FIFO(t, filepath.Join(t.TempDir(), "config"))
		_, _, err := attack23Load(t, time.Second, "h", remote.WithSSHConfigFiles(fifo, ""), remote.WithSSHHome(e.home), remote.WithSSHAgent(""))
		if err != nil {
			assert.Contains(t, err.Error(), fifo)
		}
	})
	t.Run("IdentityFileDirectory", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "keydir")
		require.NoError(t, os.Mkdir(dir, 0o700))
		_, _, err := attack23Load(t, time.Second, "h", attack23Opts(t, e.home, "IdentityFile "+dir+"\n")...)
		require.Error(t, err, "the only identity file is a directory")
		assert.Contains(t, err.Error(), dir)
	})
	t.Run("KnownHostsDirectory", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "known_hosts")
		require.NoError(t, os.Mkdir(dir, 0o700))
		_, cfg, err := attack23Load(t, time.Second, "h", attack23Opts(t, e.home, "UserKnownHostsFile "+dir+"\nGlobalKnownHostsFile none\n")...)
		if err != nil {
			assert.Contains(t, err.Error(), dir)
			return
		}
		assert.Error(t, checkKey(cfg.HostKeyCallback, "h:22", signerOf(t).PublicKey()), "nothing is known")
	})
}

// TestAttack23StrictHostKeyCheckingSpellings: every spelling OpenSSH reads
// as "off" (no, off, false, in any case; the Key=Value form) is refused or
// at least never yields a callback that trusts an unknown key.
func TestAttack23StrictHostKeyCheckingSpellings(t *testing.T) {
	e := newSSHEnv(t)
	known := writeFile(t, filepath.Join(t.TempDir(), "known_hosts"), "")
	for _, line := range []string{"StrictHostKeyChecking no", "StrictHostKeyChecking NO", "StrictHostKeyChecking Off",
		"StrictHostKeyChecking false", "StrictHostKeyChecking FALSE", "StrictHostKeyChecking=no", "StrictHostKeyChecking = off",
		"StrictHostKeyChecking \"no\"", "stricthostkeychecking no", "StrictHostKeyChecking no # comment"} {
		t.Run(line, func(t *testing.T) {
			_, cfg, err := attack23Load(t, 3*time.Second, "h", attack23Opts(t, e.home, "Host h\n  "+line+"\n  UserKnownHostsFile "+known+"\n  GlobalKnownHostsFile none\n")...)
			if err != nil {
				return // refused: fine
			}
			require.NotNil(t, cfg.HostKeyCallback)
			assert.Error(t, checkKey(cfg.HostKeyCallback, "h:22", signerOf(t).PublicKey()), "%q gave a callback that trusts an unknown key", line)
		})
	}
}

// TestAttack23PortsOutOfRange: a port OpenSSH refuses (0, negative, over
// 65535, not a number) is refused, in Port and in a ProxyJump hop.
func TestAttack23PortsOutOfRange(t *testing.T) {
	e := newSSHEnv(t)
	for _, config := range []string{"Port 0\n", "Port -1\n", "Port 65536\n", "Port 22x\n", "Port 0x16\n", "Port +22\n",
		"ProxyJump j:0\n", "ProxyJump j:65536\n", "ProxyJump j:-1\n", "ProxyJump ssh://j:0\n", "ProxyJump j:\n", "ProxyJump j:ssh\n"} {
		t.Run(strings.TrimSpace(config), func(t *testing.T) {
			addr, cfg, err := attack23Load(t, 3*time.Second, "h", attack23Opts(t, e.home, config)...)
			var hops []string
			for _, j := range cfg.Jumps {
				hops = append(hops, j.Addr)
			}
			assert.Error(t, err, "accepted: addr %q, jumps %q", addr, hops)
		})
	}
}

// TestAttack23HostKeyAliasCannotWidenTrust: under accept-new, the name
// written to known_hosts for a new host is HostKeyAlias; an alias holding
// a pattern list or wild cards ("evil,*", "*") must not make the key it
// remembers trusted for every other host, and an alias with a space must
// not leave a known_hosts file that no longer parses.
func TestAttack23HostKeyAliasCannotWidenTrust(t *testing.T) {
	e := newSSHEnv(t)
	key := signerOf(t).PublicKey()
	for _, alias := range []string{`"evil.example,*"`, `"*"`, `"?*"`, `"a b"`, `"@cert-authority"`, `"!x,*"`} {
		t.Run(alias, func(t *testing.T) {
			known := filepath.Join(t.TempDir(), "known_hosts")
			config := "Host h\n  HostKeyAlias " + alias + "\n  StrictHostKeyChecking accept-new\n  UserKnownHostsFile " + known + "\n  GlobalKnownHostsFile none\n"
			_, cfg, err := attack23Load(t, 3*time.Second, "h", attack23Opts(t, e.home, config)...)
			if err != nil {
				return // the alias is refused: fine
			}
			first := checkKey(cfg.HostKeyCallback, "h:22", key)
			b, rerr := os.ReadFile(known)
			if rerr == nil {
				t.Logf("known_hosts after accept-new: %q (callback: %v)", b, first)
			}
			// Another host, with no relation to h, presents the same key.
			_, other, err := attack23Load(t, 3*time.Second, "other", attack23Opts(t, e.home, "StrictHostKeyChecking yes\nUserKnownHostsFile "+known+"\nGlobalKnownHostsFile none\n")...)
			if first == nil {
				require.NoError(t, err, "the known_hosts file accept-new wrote no longer loads")
			}
			if err == nil {
				assert.Error(t, checkKey(other.HostKeyCallback, "other.example:22", key), "the key remembered for alias %s is now trusted for other.example", alias)
				assert.Error(t, checkKey(other.HostKeyCallback, "10.1.2.3:2222", key), "the key remembered for alias %s is now trusted for 10.1.2.3:2222", alias)
			}
		})
	}
}

// TestAttack23AcceptNewRace: two dials to one new host race under
// accept-new, each presented with another key (a machine in the middle
// answers one of them). At most one key may end up trusted for the host.
func TestAttack23AcceptNewRace(t *testing.T) {
	e := newSSHEnv(t)
	for round := range 5 {
		known := filepath.Join(t.TempDir(), "known_hosts")
		config := "StrictHostKeyChecking accept-new\nUserKnownHostsFile " + known + "\nGlobalKnownHostsFile none\n"
		const n = 8
		var cfgs [n]remote.Config
		for i := range n { // separate loads, as separate processes would have
			_, cfg, err := attack23Load(t, 3*time.Second, "h", attack23Opts(t, e.home, config)...)
			require.NoError(t, err)
			cfgs[i] = cfg
		}
		keys := make([]ssh.PublicKey, n)
		for i := range keys {
			keys[i] = signerOf(t).PublicKey()
		}
		var wg sync.WaitGroup
		errs := make([]error, n)
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				errs[i] = checkKey(cfgs[i].HostKeyCallback, "race.example:22", keys[i])
			})
		}
		close(start)
		wg.Wait()
		accepted := 0
		for _, err := range errs {
			if err == nil {
				accepted++
			}
		}
		b, err := os.ReadFile(known)
		require.NoError(t, err)
		lines := strings.Count(string(b), "\n")
		require.LessOrEqual(t, accepted, 1, "round %d: %d different keys accepted for one new host; known_hosts now lists %d lines:\n%s", round, accepted, lines, b)
		require.Equal(t, 1, lines, "round %d: known_hosts:\n%s", round, b)
	}
}

// TestAttack23AcceptNewRaceOneConfig: the same race through one Config
// (parallel Dials of one process to a new host): at most one key trusted.
func TestAttack23AcceptNewRaceOneConfig(t *testing.T) {
	e := newSSHEnv(t)
	for round := range 10 {
		known := filepath.Join(t.TempDir(), "known_hosts")
		_, cfg, err := attack23Load(t, 3*time.Second, "h", attack23Opts(t, e.home, "StrictHostKeyChecking accept-new\nUserKnownHostsFile "+known+"\nGlobalKnownHostsFile none\n")...)
		require.NoError(t, err)
		const n = 8
		keys := make([]ssh.PublicKey, n)
		for i := range keys {
			keys[i] = signerOf(t).PublicKey()
		}
		var wg sync.WaitGroup
		errs := make([]error, n)
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				errs[i] = checkKey(cfg.HostKeyCallback, "race.example:22", keys[i])
			})
		}
		close(start)
		wg.Wait()
		accepted := 0
		for _, err := range errs {
			if err == nil {
				accepted++
			}
		}
		b, err := os.ReadFile(known)
		require.NoError(t, err)
		require.LessOrEqual(t, accepted, 1, "round %d: %d different keys accepted for one new host through one Config; known_hosts:\n%s", round, accepted, b)
	}
}

// TestAttack23AcceptNewConcurrentHostsAllRemembered: many new hosts
// accepted at once through one Config (parallel Dials) each get one whole
// line; the file stays parseable and lists every one of them.
func TestAttack23AcceptNewConcurrentHostsAllRemembered(t *testing.T) {
	e := newSSHEnv(t)
	known := filepath.Join(t.TempDir(), "known_hosts")
	_, cfg, err := attack23Load(t, 3*time.Second, "h", attack23Opts(t, e.home, "StrictHostKeyChecking accept-new\nUserKnownHostsFile "+known+"\nGlobalKnownHostsFile none\n")...)
	require.NoError(t, err)
	const n = 32
	keys := make([]ssh.PublicKey, n)
	for i := range keys {
		keys[i] = signerOf(t).PublicKey()
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { errs[i] = checkKey(cfg.HostKeyCallback, fmt.Sprintf("host%02d.example:22", i), keys[i]) })
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "host %d", i)
	}
	cb, err := knownhosts.New(known)
	require.NoError(t, err, "known_hosts no longer parses")
	for i := range n {
		assert.NoError(t, checkKey(cb, fmt.Sprintf("host%02d.example:22", i), keys[i]), "host %d was not remembered", i)
	}
}

// TestAttack23KnownHostsLinkedToPasswd: UserKnownHostsFile is a symbolic
// link to a file that is not a known_hosts file (a stand-in for
// /etc/passwd). Under yes nothing in it is trusted; under accept-new the
// linked-to file must not be appended to.
func TestAttack23KnownHostsLinkedToPasswd(t *testing.T) {
	e := newSSHEnv(t)
	const passwd = "root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
	for _, mode := range []string{"yes", "accept-new"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			target := writeFile(t, filepath.Join(dir, "etc", "passwd"), passwd)
			link := filepath.Join(dir, "known_hosts")
			require.NoError(t, os.Symlink(target, link))
			_, cfg, err := attack23Load(t, 3*time.Second, "h", attack23Opts(t, e.home, "StrictHostKeyChecking "+mode+"\nUserKnownHostsFile "+link+"\nGlobalKnownHostsFile none\n")...)
			if err == nil {
				cbErr := checkKey(cfg.HostKeyCallback, "h:22", signerOf(t).PublicKey())
				if mode == "yes" {
					assert.Error(t, cbErr)
				}
			}
			b, rerr := os.ReadFile(target)
			require.NoError(t, rerr)
			assert.Equal(t, passwd, string(b), "the file the link names was written to")
		})
	}
}

// TestAttack23AcceptNewCannotWrite: a UserKnownHostsFile accept-new cannot
// write (its parent is a regular file, or it is a directory) fails the
// callback with ErrUnknownHost naming the file; nothing is trusted.
func TestAttack23AcceptNewCannotWrite(t *testing.T) {
	e := newSSHEnv(t)
	dir := t.TempDir()
	notDir := writeFile(t, filepath.Join(dir, "file"), "x")
	isDir := filepath.Join(dir, "known_hosts.d")
	require.NoError(t, os.Mkdir(isDir, 0o700))
	for name, file := range map[string]string{"ParentIsFile": filepath.Join(notDir, "known_hosts"), "IsDirectory": isDir} {
		t.Run(name, func(t *testing.T) {
			_, cfg, err := attack23Load(t, 3*time.Second, "h", attack23Opts(t, e.home, "StrictHostKeyChecking accept-new\nUserKnownHostsFile "+file+"\nGlobalKnownHostsFile none\n")...)
			if err != nil {
				assert.Contains(t, err.Error(), file)
				return
			}
			key := signerOf(t).PublicKey()
			err = checkKey(cfg.HostKeyCallback, "h:22", key)
			require.Error(t, err)
			assert.ErrorIs(t, err, remote.ErrUnknownHost)
			assert.Contains(t, err.Error(), file)
			assert.Error(t, checkKey(cfg.HostKeyCallback, "h:22", key), "and it is not trusted the second time either")
		})
	}
}

// TestAttack23HostileHostNames: a HostName or ProxyJump hop with shell
// metacharacters or a leading '-' is only ever a name to dial: nothing is
// run, and the dial fails.
func TestAttack23HostileHostNames(t *testing.T) {
	e := newSSHEnv(t)
	marker := filepath.Join(t.TempDir(), "pwned")
	for _, config := range []string{
		"Host h\n  HostName \"-oProxyCommand=touch " + marker + "\"\n",
		"Host h\n  HostName \"$(touch " + marker + ")\"\n",
		"Host h\n  HostName `touch " + marker + "`;x\n",
		"Host h\n  ProxyJump -oProxyCommand=touch" + marker + "\n",
	} {
		t.Run(config, func(t *testing.T) {
			addr, cfg, err := attack23Load(t, 3*time.Second, "h", attack23Opts(t, e.home, config+"  ConnectTimeout 1\n  UserKnownHostsFile none\n  GlobalKnownHostsFile none\n")...)
			if err != nil {
				return
			}
			for i := range cfg.Jumps {
				cfg.Jumps[i].Config.DialTimeout = time.Second
			}
			h, err := remote.Dial(t.Context(), addr, cfg)
			if err == nil {
				require.NoError(t, h.Close())
			}
			assert.Error(t, err, "dialled %q", addr)
			assert.NoFileExists(t, marker)
		})
	}
}

// TestAttack23DuplicateIdentityFiles: ssh reads each IdentityFile once,
// however many lines name it. A key the server refuses, named on seven
// lines before the key it accepts, must not use up the server's
// MaxAuthTries (6) so that the good key is never offered.
func TestAttack23DuplicateIdentityFiles(t *testing.T) {
	srv := sshdtest.Start(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad")
	writeKey(t, bad, newKey(t), "", true)
	known := writeFile(t, filepath.Join(dir, "known_hosts"), knownLine(srv.Addr(), srv.HostKey()))
	config := sshdBlock(srv, "sandbox")
	config = strings.Replace(config, "  IdentityFile "+srv.KeyFile()+"\n", strings.Repeat("  IdentityFile "+bad+"\n", 7)+"  IdentityFile "+srv.KeyFile()+"\n", 1)
	config += "  User " + srv.User() + "\n  IdentitiesOnly yes\n  UserKnownHostsFile " + known + "\n  GlobalKnownHostsFile none\n"
	addr, cfg, err := attack23Load(t, 3*time.Second, "sandbox", remote.WithSSHConfigFiles(writeFile(t, filepath.Join(dir, "config"), config), ""),
		remote.WithSSHHome(dir), remote.WithSSHAgent(""))
	require.NoError(t, err)
	assert.NoError(t, dialAndEcho(t, addr, cfg), "ssh -F would log in: it offers bad once. sshd log:\n%s", srv.Log())
}

// TestAttack23ManyIdentityFiles: thousands of IdentityFile lines (missing
// files, then one key) load (hugeConfigGuard) and offer the one key.
func TestAttack23ManyIdentityFiles(t *testing.T) {
	e := newSSHEnv(t)
	var b strings.Builder
	dir := t.TempDir()
	for i := range 5000 {
		fmt.Fprintf(&b, "IdentityFile %s/missing-%d\n", dir, i)
	}
	key := filepath.Join(dir, "key")
	writeKey(t, key, newKey(t), "", false)
	b.WriteString("IdentityFile " + key + "\n")
	start := time.Now()
	_, cfg, err := attack23Load(t, hugeConfigGuard, "h", attack23Opts(t, e.home, b.String())...)
	require.NoError(t, err)
	assert.Len(t, cfg.Auth, 1)
	t.Logf("5,001 IdentityFile lines loaded in %s", time.Since(start))
}

// hugeConfigGuard bounds the load of a huge configuration: a guard
// against a hang or a blow-up, not a measure. The loads take 0.5 s here,
// 2.5 s under the race detector, and went past 5 s once in CI with other
// packages' tests beside them.
const hugeConfigGuard = 30 * time.Second

// TestAttack23HugeConfig: a configuration of 20,000 Host blocks loads,
// without a hang or a blow-up (hugeConfigGuard).
func TestAttack23HugeConfig(t *testing.T) {
	e := newSSHEnv(t)
	var b strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&b, "Host h%d\n  HostName h%d.example\n  Port %d\n", i, i, 1+i%60000)
	}
	b.WriteString("Host target\n  HostName target.example\n")
	start := time.Now()
	addr, _, err := attack23Load(t, hugeConfigGuard, "target", attack23Opts(t, e.home, b.String())...)
	require.NoError(t, err)
	assert.Equal(t, "target.example:22", addr)
	t.Logf("a %d-byte configuration loaded in %s", b.Len(), time.Since(start))
}

// TestAttack23ProxyJumpSelf: a host that jumps through itself, directly or
// through its own HostName, is a loop: an error, not a hang or a chain of
// thousands of hops.
func TestAttack23ProxyJumpSelf(t *testing.T) {
	e := newSSHEnv(t)
	for _, config := range []string{"Host a\n  ProxyJump a\n", "Host a\n  ProxyJump %h\n", "Host *\n  ProxyJump j\n", "Host a\n  ProxyJump a,a,a\n"} {
		t.Run(config, func(t *testing.T) {
			_, cfg, err := attack23Load(t, 3*time.Second, "a", attack23Opts(t, e.home, config)...)
			if err == nil {
				assert.LessOrEqual(t, len(cfg.Jumps), 8, "a loop became %d hops", len(cfg.Jumps))
				for _, j := range cfg.Jumps {
					assert.NotEqual(t, "a:22", j.Addr, "a jumps through itself: %v", hopAddrs(cfg))
				}
			}
		})
	}
}

func hopAddrs(cfg remote.Config) []string {
	var out []string
	for _, j := range cfg.Jumps {
		out = append(out, j.Addr)
	}
	return out
}

// TestAttack23TokenEdges: a lone '%' at the end, "%%h" (a literal "%h"),
// a HostName made of tokens, and a ~ alone: each is an error naming the
// token, or expands as ssh expands it.
func TestAttack23TokenEdges(t *testing.T) {
	e := newSSHEnv(t)
	dir := t.TempDir()
	lit := filepath.Join(dir, "%h")
	writeKey(t, lit, newKey(t), "", false)
	_, cfg, err := attack23Load(t, 3*time.Second, "h", attack23Opts(t, e.home, "IdentityFile "+filepath.Join(dir, "%%h")+"\n")...)
	require.NoError(t, err, "%%%%h is the literal file %s", lit)
	assert.Len(t, cfg.Auth, 1)

	_, _, err = attack23Load(t, 3*time.Second, "h", attack23Opts(t, e.home, "IdentityFile "+filepath.Join(dir, "key%")+"\n")...)
	require.Error(t, err, "a lone %% at the end")
	assert.Contains(t, err.Error(), "%")

	addr, _, err := attack23Load(t, 3*time.Second, "h", attack23Opts(t, e.home, "HostName %h.%h.%%\n")...)
	if err == nil {
		assert.Equal(t, "h.h.%:22", addr)
	}
	addr, _, err = attack23Load(t, 3*time.Second, "h", attack23Opts(t, e.home, "HostName %p\n")...)
	t.Logf("HostName %%p: addr %q, err %v", addr, err)
}
