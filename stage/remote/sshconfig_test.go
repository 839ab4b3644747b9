package remote_test

import (
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage/remote"
)

// sshEnv is a home directory with one key, ~/.ssh/id_ed25519, and the
// options that make LoadSSHConfig read only what a test writes.
type sshEnv struct {
	home string
	key  ssh.PublicKey
}

func newSSHEnv(t *testing.T) *sshEnv {
	home := t.TempDir()
	return &sshEnv{home: home, key: writeKey(t, filepath.Join(home, ".ssh", "id_ed25519"), newKey(t), "", false)}
}

// load runs LoadSSHConfig on the user file text (and system file text,
// when not ""), with e's home and no agent unless opts name one.
func (e *sshEnv) load(t *testing.T, alias, userText, systemText string, opts ...remote.SSHConfigOption) (string, remote.Config, error) {
	t.Helper()
	dir := t.TempDir()
	user := writeFile(t, filepath.Join(dir, "config"), userText)
	system := ""
	if systemText != "" {
		system = writeFile(t, filepath.Join(dir, "ssh_config"), systemText)
	}
	base := []remote.SSHConfigOption{remote.WithSSHConfigFiles(user, system), remote.WithSSHHome(e.home), remote.WithSSHAgent("")}
	return remote.LoadSSHConfig(alias, append(base, opts...)...)
}

func currentUser(t *testing.T) string {
	u, err := user.Current()
	require.NoError(t, err)
	return u.Username
}

// TestLoadSSHConfigHosts: HostName, Port, User, ConnectTimeout and
// ServerAliveInterval per alias, the user's file winning over the
// system's and a specific block over a later Host *, and an alias no block
// names used as the host name.
func TestLoadSSHConfigHosts(t *testing.T) {
	e := newSSHEnv(t)
	userText := `Host web
  HostName %h.example.com
  Port 2222
  User deploy
  ConnectTimeout 7
  ServerAliveInterval 1m30s
Host quiet
  ServerAliveInterval 0
  ConnectTimeout none
Host *.corp
  User corpuser
Host six
  HostName 2001:db8::7
`
	systemText := "Host *\n  User sysuser\n  Port 2200\n  ConnectTimeout 4\n"
	for _, tc := range []struct {
		alias, addr, user string
		dial, keepAlive   time.Duration
	}{
		{"web", "web.example.com:2222", "deploy", 7 * time.Second, 90 * time.Second},
		{"quiet", "quiet:2200", "sysuser", 0, -1}, // the user file's "none" is obtained first
		{"db.corp", "db.corp:2200", "corpuser", 4 * time.Second, 0},
		{"nowhere.example", "nowhere.example:2200", "sysuser", 4 * time.Second, 0},
		{"six", "[2001:db8::7]:2200", "sysuser", 4 * time.Second, 0},
	} {
		t.Run(tc.alias, func(t *testing.T) {
			addr, cfg, err := e.load(t, tc.alias, userText, systemText)
			require.NoError(t, err)
			assert.Equal(t, tc.addr, addr)
			assert.Equal(t, tc.user, cfg.User)
			assert.Equal(t, tc.dial, cfg.DialTimeout, "ConnectTimeout")
			assert.Equal(t, tc.keepAlive, cfg.KeepAlive, "ServerAliveInterval")
			assert.NotNil(t, cfg.HostKeyCallback)
			assert.Len(t, cfg.Auth, 1)
			assert.Nil(t, cfg.Jumps)
		})
	}
	t.Run("NoSystemFile", func(t *testing.T) {
		addr, cfg, err := e.load(t, "nowhere.example", userText, "")
		require.NoError(t, err)
		assert.Equal(t, "nowhere.example:22", addr, "an alias no block names is the host name, port 22")
		assert.Equal(t, currentUser(t), cfg.User)
		assert.Zero(t, cfg.DialTimeout)
		assert.Zero(t, cfg.KeepAlive, "unset keeps the Host's default keepalive")
	})
}

// TestLoadSSHConfigDefaultFiles: without WithSSHConfigFiles, ~/.ssh/config
// (under WithSSHHome) is read, ahead of /etc/ssh/ssh_config (this
// machine's, when it has one: the home file pins what this test checks).
func TestLoadSSHConfigDefaultFiles(t *testing.T) {
	e := newSSHEnv(t)
	writeFile(t, filepath.Join(e.home, ".ssh", "config"), "Host home-alias\n  HostName from-home.example\n  Port 2201\n  User homeuser\n"+
		"Host *\n  StrictHostKeyChecking yes\n  IdentityFile ~/.ssh/id_ed25519\n")
	addr, cfg, err := remote.LoadSSHConfig("home-alias", remote.WithSSHHome(e.home), remote.WithSSHAgent(""))
	require.NoError(t, err)
	assert.Equal(t, "from-home.example:2201", addr)
	assert.Equal(t, "homeuser", cfg.User)
}

// TestLoadSSHConfigInclude: an Include (absolute path, with a glob) is
// read where it stands.
func TestLoadSSHConfigInclude(t *testing.T) {
	e := newSSHEnv(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "conf.d", "10-inc.conf"), "Host inc\n  HostName included.example\n  Port 2022\n")
	writeFile(t, filepath.Join(dir, "conf.d", "20-other.conf"), "Host inc\n  Port 9999\n  User second\n")
	addr, cfg, err := e.load(t, "inc", "Include "+filepath.Join(dir, "conf.d", "*.conf")+"\nHost *\n  User last\n", "")
	require.NoError(t, err)
	assert.Equal(t, "included.example:2022", addr, "the first file of the glob that sets Port wins")
	assert.Equal(t, "second", cfg.User, "Include stands before Host *")
}

// TestLoadSSHConfigErrors: what LoadSSHConfig refuses, each with the
// reason and the fix.
func TestLoadSSHConfigErrors(t *testing.T) {
	e := newSSHEnv(t)
	home := e.home
	for _, tc := range []struct {
		name, config, alias, want string
	}{
		{"StrictNo", "Host h\n  StrictHostKeyChecking no\n", "h",
			`remote: ssh config for host "h": StrictHostKeyChecking no would trust any host key, so a machine in the middle could read and change everything sent; remove that line for this host, or set it to yes (trust the keys known_hosts lists) or accept-new (remember a new host's key, refuse a changed one)`},
		{"StrictOff", "Host *\n  StrictHostKeyChecking off\n", "h", `remote: ssh config for host "h": StrictHostKeyChecking off would trust any host key`},
		{"StrictUnknown", "StrictHostKeyChecking maybe\n", "h", `remote: ssh config for host "h": StrictHostKeyChecking "maybe": want yes, ask or accept-new`},
		{"AcceptNewNoFile", "StrictHostKeyChecking accept-new\nUserKnownHostsFile none\n", "h",
			`remote: ssh config for host "h": StrictHostKeyChecking accept-new needs a UserKnownHostsFile to remember a new host's key in, and UserKnownHostsFile is none; name a file, or set StrictHostKeyChecking yes`},
		{"AcceptNewDevNull", "StrictHostKeyChecking accept-new\nUserKnownHostsFile /dev/null\n", "h",
			`remote: ssh config for host "h": StrictHostKeyChecking accept-new needs a regular file to remember a new host's key in; UserKnownHostsFile /dev/null is a device, so every host would look new on every connection; name a file, or set StrictHostKeyChecking yes`},
		{"Port", "Port 99999\n", "h", `remote: ssh config for host "h": Port "99999" is not a port number`},
		{"ConnectTimeout", "ConnectTimeout soon\n", "h", `remote: ssh config for host "h": ConnectTimeout "soon": want seconds, or a time such as 1m30s`},
		{"ServerAliveInterval", "ServerAliveInterval 5x\n", "h", `remote: ssh config for host "h": ServerAliveInterval "5x": want seconds, or a time such as 1m30s`},
		{"IdentitiesOnly", "IdentitiesOnly maybe\n", "h", `remote: ssh config for host "h": IdentitiesOnly "maybe": want yes or no`},
		{"ProxyCommand", "Host h\n  ProxyCommand nc %h %p\n", "h",
			`remote: ssh config for host "h": ProxyCommand is not supported; reach the host through ProxyJump (ProxyCommand ssh -W %h:%p bastion is ProxyJump bastion)`},
		{"ProxyJumpLoop", "Host a\n  ProxyJump b\nHost b\n  ProxyJump a\n", "a", "more than 8 nested jump hosts; does a jump host jump through itself?"},
		{"ProxyJumpNoHost", "ProxyJump deploy@\n", "h", `remote: ssh config for host "h": ProxyJump deploy@: "": want [user@]host[:port]`},
		{"ProxyJumpURLPath", "ProxyJump ssh://j/path\n", "h", `remote: ssh config for host "h": ProxyJump ssh://j/path: "ssh://j/path": want ssh://[user@]host[:port]`},
		{"UnknownToken", "IdentityFile ~/.ssh/%C\n", "h",
			`remote: ssh config for host "h": IdentityFile "` + home + `/.ssh/%C": unsupported %-token at byte ` + strconv.Itoa(len(home)+6) + ` (supported here: %d %h %i %k %L %l %n %p %r %u %%)`},
		{"EnvVariable", "IdentityFile ${HOME}/key\n", "h", `remote: ssh config for host "h": IdentityFile "${HOME}/key": environment variables are not expanded; write the path out`},
		{"OtherHome", "IdentityFile ~root/key\n", "h", `remote: ssh config for host "h": IdentityFile "~root/key": ~user is not supported; write the path out`},
		{"IdentityAgentEnv", "IdentityAgent $MY_AGENT\n", "h", `remote: ssh config for host "h": IdentityAgent $MY_AGENT: only SSH_AUTH_SOCK is read from the environment; write the socket's path`},
		{"MatchExec", "Match exec \"true\"\n  User x\n", "h", "ssh_config: Match Exec is not supported (Host, Match Host, Match all and Include are understood; name other files with WithSSHConfigFiles)"},
		{"AliasWithUser", "", "me@h", `remote: LoadSSHConfig: "me@h": pass the host alias alone; the user comes from the configuration's User line (or set Config.User afterwards)`},
		{"EmptyAlias", "", "", `remote: LoadSSHConfig: "" is not a host alias`},
		{"SpaceInAlias", "", "a b", `remote: LoadSSHConfig: "a b" is not a host alias`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := e.load(t, tc.alias, tc.config, "")
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			if strings.HasPrefix(tc.want, "remote: ") {
				assert.True(t, strings.HasPrefix(err.Error(), tc.want), "%v", err)
			}
		})
	}
	t.Run("MissingNamedFile", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "config")
		_, _, err := remote.LoadSSHConfig("h", remote.WithSSHConfigFiles(missing, ""), remote.WithSSHHome(home))
		assert.ErrorIs(t, err, os.ErrNotExist)
		assert.EqualError(t, err, "remote: reading ssh config: open "+missing+": no such file or directory")
	})
	t.Run("RelativeHome", func(t *testing.T) {
		_, _, err := remote.LoadSSHConfig("h", remote.WithSSHHome("home"))
		assert.EqualError(t, err, `remote: WithSSHHome("home"): the home directory must be an absolute path`)
	})
}

// TestLoadSSHConfigIdentityFileTokens: ~ and every path token expand as
// ssh expands them; the files looked for are named when none is usable.
func TestLoadSSHConfigIdentityFileTokens(t *testing.T) {
	e := newSSHEnv(t)
	local, err := os.Hostname()
	require.NoError(t, err)
	short, _, _ := strings.Cut(local, ".")
	config := "Host web\n  HostName web.example\n  Port 2222\n  User deploy\n  HostKeyAlias webkey\n" +
		"  IdentityFile ~/keys/%h_%p_%r_%n_%k_%%\n  IdentityFile %d/%u/%i/%l/%L\n  IdentityFile none\n"
	_, _, err = e.load(t, "web", config, "")
	want := fmt.Sprintf(`remote: ssh config for host "web": no key to log in with: no usable IdentityFile (looked for %s/keys/web.example_2222_deploy_web_webkey_%%, %s/%s/%d/%s/%s), and no agent (SSH_AUTH_SOCK is unset, or IdentityAgent none); add an IdentityFile line or load a key into ssh-agent (ssh-add)`,
		e.home, e.home, currentUser(t), os.Getuid(), local, short)
	assert.EqualError(t, err, want, "IdentityFile lines replace the default ~/.ssh/id_ed25519, which would have been usable")
}

// TestLoadSSHConfigUnusableKeyFile: an IdentityFile that is not a key, and
// one encrypted with no public key to offer, are errors naming the file.
func TestLoadSSHConfigUnusableKeyFile(t *testing.T) {
	e := newSSHEnv(t)
	garbage := writeFile(t, filepath.Join(t.TempDir(), "garbage"), "not a key\n")
	_, _, err := e.load(t, "h", "IdentityFile "+garbage+"\n", "")
	assert.EqualError(t, err, `remote: ssh config for host "h": identity file `+garbage+`: ssh: no key found, and its public key is unknown (open `+garbage+`.pub: no such file or directory); add the key to ssh-agent (ssh-add `+garbage+`)`)

	// An unreadable default key (not named by IdentityFile) is skipped, as
	// ssh skips it; the other default key is used.
	writeFile(t, filepath.Join(e.home, ".ssh", "id_rsa"), "not a key either\n")
	_, cfg, err := e.load(t, "h", "", "")
	require.NoError(t, err)
	assert.Len(t, cfg.Auth, 1)
}

// TestLoadSSHConfigProxyJump: each hop is resolved through the same
// configuration (its HostName, User, Port, timeouts and known_hosts), the
// entry's user and port win, the first hop's own ProxyJump comes first,
// and a later hop's own ProxyJump is not used (as ssh -J a,b runs
// ssh -J a b, which overrides b's ProxyJump but not a's).
func TestLoadSSHConfigProxyJump(t *testing.T) {
	e := newSSHEnv(t)
	config := `Host t
  ProxyJump j1,deploy@j2:2200
Host u
  ProxyJump ssh://me@j2:2022
Host v6
  ProxyJump [2001:db8::1],[2001:db8::2]:2200,ops@2001:db8::3
Host n
  ProxyJump none
Host j1
  HostName bastion1.example
  User u1
  ProxyJump j0
Host j0
  HostName outer.example
  ServerAliveInterval 9
Host j2
  HostName bastion2.example
  User u2
  ConnectTimeout 3
  ProxyJump j3
Host *
  User everyone
`
	type hop struct {
		addr, user string
		dial       time.Duration
	}
	hops := func(cfg remote.Config) []hop {
		var out []hop
		for _, j := range cfg.Jumps {
			assert.NotNil(t, j.Config.HostKeyCallback, j.Addr)
			assert.Len(t, j.Config.Auth, 1, j.Addr)
			assert.Nil(t, j.Config.Jumps, "hops are flat")
			out = append(out, hop{j.Addr, j.Config.User, j.Config.DialTimeout})
		}
		return out
	}
	addr, cfg, err := e.load(t, "t", config, "")
	require.NoError(t, err)
	assert.Equal(t, "t:22", addr)
	assert.Equal(t, "everyone", cfg.User)
	assert.Equal(t, []hop{{"outer.example:22", "everyone", 0}, {"bastion1.example:22", "u1", 0}, {"bastion2.example:2200", "deploy", 3 * time.Second}}, hops(cfg))
	assert.Equal(t, []time.Duration{9 * time.Second, 0, 0}, []time.Duration{cfg.Jumps[0].Config.KeepAlive, cfg.Jumps[1].Config.KeepAlive, cfg.Jumps[2].Config.KeepAlive},
		"each hop's own ServerAliveInterval")

	// j2 as the first (only) hop: its own ProxyJump j3 comes before it.
	_, cfg, err = e.load(t, "u", config, "")
	require.NoError(t, err)
	assert.Equal(t, []hop{{"j3:22", "everyone", 0}, {"bastion2.example:2022", "me", 3 * time.Second}}, hops(cfg))

	_, cfg, err = e.load(t, "v6", config, "")
	require.NoError(t, err)
	assert.Equal(t, []hop{{"[2001:db8::1]:22", "everyone", 0}, {"[2001:db8::2]:2200", "everyone", 0}, {"[2001:db8::3]:22", "ops", 0}}, hops(cfg))

	_, cfg, err = e.load(t, "n", config, "")
	require.NoError(t, err)
	assert.Nil(t, cfg.Jumps)

	_, _, err = e.load(t, "t", config+"Host j2\n  StrictHostKeyChecking no\n", "")
	assert.ErrorContains(t, err, `remote: ssh config for host "j2": StrictHostKeyChecking no would trust any host key`, "a hop's configuration is checked as the target's")
}

// checkKey runs cb as Dial would for a server at addr presenting key.
func checkKey(cb ssh.HostKeyCallback, addr string, key ssh.PublicKey) error {
	return cb(addr, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 22}, key)
}

// TestLoadSSHConfigHostKeys: yes, ask and the default trust exactly what
// the known_hosts files list; accept-new remembers a new host's key in the
// first UserKnownHostsFile (hashed under HashKnownHosts) and still refuses
// a changed key; every refusal is a *HostKeyError that says what to do.
func TestLoadSSHConfigHostKeys(t *testing.T) {
	e := newSSHEnv(t)
	const addr = "127.0.0.1:2222"
	serverKey, otherKey := signerOf(t).PublicKey(), signerOf(t).PublicKey()
	dir := t.TempDir()
	known := writeFile(t, filepath.Join(dir, "known_hosts"), knownhosts.Line([]string{addr}, serverKey)+"\n")
	global := writeFile(t, filepath.Join(dir, "global"), knownhosts.Line([]string{"global.example"}, serverKey)+"\n")
	files := "UserKnownHostsFile " + known + " " + filepath.Join(dir, "missing") + "\nGlobalKnownHostsFile \"" + global + "\"\n"

	for _, mode := range []string{"", "StrictHostKeyChecking yes\n", "StrictHostKeyChecking ask\n"} {
		_, cfg, err := e.load(t, "h", mode+files, "")
		require.NoError(t, err)
		assert.NoError(t, checkKey(cfg.HostKeyCallback, addr, serverKey), "listed")
		assert.NoError(t, checkKey(cfg.HostKeyCallback, "global.example:22", serverKey), "listed in the global file")
		err = checkKey(cfg.HostKeyCallback, addr, otherKey)
		var he *remote.HostKeyError
		require.ErrorAs(t, err, &he)
		assert.ErrorIs(t, err, remote.ErrHostKeyMismatch)
		assert.Equal(t, []string{known + ":1"}, he.Known)
		err = checkKey(cfg.HostKeyCallback, "10.0.0.9:22", serverKey)
		assert.EqualError(t, err, "remote: 10.0.0.9:22: host is not in known_hosts: the server presented ssh-ed25519 key "+ssh.FingerprintSHA256(serverKey)+
			"; check that fingerprint out of band (ssh-keygen -lf on the server's host key), then add the host's line to "+known+", "+filepath.Join(dir, "missing")+" (for example from ssh-keyscan)")
	}

	t.Run("HostKeyAlias", func(t *testing.T) {
		_, cfg, err := e.load(t, "h", "HostKeyAlias global.example\n"+files, "")
		require.NoError(t, err)
		assert.NoError(t, checkKey(cfg.HostKeyCallback, "10.0.0.9:22", serverKey), "looked up as global.example")
		assert.ErrorIs(t, checkKey(cfg.HostKeyCallback, "10.0.0.9:22", otherKey), remote.ErrHostKeyMismatch)
	})

	for _, hashed := range []bool{false, true} {
		t.Run(fmt.Sprintf("AcceptNew/hashed=%t", hashed), func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "new", "known_hosts") // neither exists yet
			config := "StrictHostKeyChecking accept-new\nUserKnownHostsFile " + file + "\nGlobalKnownHostsFile " + global + "\n"
			if hashed {
				config += "HashKnownHosts yes\n"
			}
			_, cfg, err := e.load(t, "h", config, "")
			require.NoError(t, err)
			require.NoError(t, checkKey(cfg.HostKeyCallback, addr, serverKey), "a new host is remembered")
			b, err := os.ReadFile(file)
			require.NoError(t, err)
			line := string(b)
			if hashed {
				assert.Regexp(t, `^\|1\|[^ ]+ ssh-ed25519 [^ ]+\n$`, line)
				assert.NotContains(t, line, "127.0.0.1")
			} else {
				assert.Equal(t, knownhosts.Line([]string{addr}, serverKey)+"\n", line)
			}
			fi, err := os.Stat(filepath.Dir(file))
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())

			assert.NoError(t, checkKey(cfg.HostKeyCallback, addr, serverKey), "and trusted next time")
			err = checkKey(cfg.HostKeyCallback, addr, otherKey)
			var he *remote.HostKeyError
			require.ErrorAs(t, err, &he, "a changed key is refused")
			assert.ErrorIs(t, err, remote.ErrHostKeyMismatch)
			assert.Equal(t, []string{file + ":1"}, he.Known)
			after, err := os.ReadFile(file)
			require.NoError(t, err)
			assert.Equal(t, line, string(after), "a refused key is not written")
			assert.NoError(t, checkKey(cfg.HostKeyCallback, "global.example:22", serverKey), "known in the global file: nothing to write")
			after, err = os.ReadFile(file)
			require.NoError(t, err)
			assert.Equal(t, line, string(after))
		})
	}

	t.Run("AcceptNewRevoked", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "known_hosts")
		revoked := writeFile(t, filepath.Join(t.TempDir(), "revoked"), "@revoked * "+string(ssh.MarshalAuthorizedKey(serverKey)))
		_, cfg, err := e.load(t, "h", "StrictHostKeyChecking accept-new\nUserKnownHostsFile "+file+"\nGlobalKnownHostsFile "+revoked+"\n", "")
		require.NoError(t, err)
		err = checkKey(cfg.HostKeyCallback, addr, serverKey)
		var he *remote.HostKeyError
		require.ErrorAs(t, err, &he, "a revoked key is never remembered")
		assert.Contains(t, err.Error(), "that key is marked @revoked in "+revoked+":1")
		assert.NoFileExists(t, file)
	})
	t.Run("AcceptNewNoTrailingNewline", func(t *testing.T) {
		file := writeFile(t, filepath.Join(t.TempDir(), "known_hosts"), "# mine")
		_, cfg, err := e.load(t, "h", "StrictHostKeyChecking accept-new\nUserKnownHostsFile "+file+"\n", "")
		require.NoError(t, err)
		require.NoError(t, checkKey(cfg.HostKeyCallback, addr, serverKey))
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		assert.Equal(t, "# mine\n"+knownhosts.Line([]string{addr}, serverKey)+"\n", string(b))
	})
	t.Run("AcceptNewCannotWrite", func(t *testing.T) {
		// A dangling link whose target's directory does not exist: even
		// root cannot create the file.
		file := filepath.Join(t.TempDir(), "known_hosts")
		require.NoError(t, os.Symlink(filepath.Join(t.TempDir(), "missing", "known_hosts"), file))
		_, cfg, err := e.load(t, "h", "StrictHostKeyChecking accept-new\nUserKnownHostsFile "+file+"\n", "")
		require.NoError(t, err)
		err = checkKey(cfg.HostKeyCallback, addr, serverKey)
		assert.ErrorIs(t, err, remote.ErrUnknownHost)
		assert.EqualError(t, err, "remote: "+addr+": host is not in known_hosts: the server presented ssh-ed25519 key "+ssh.FingerprintSHA256(serverKey)+
			"; StrictHostKeyChecking accept-new could not remember it: open "+file+": no such file or directory")
	})
}

// signerOf returns a signer of a fresh key.
func signerOf(t *testing.T) ssh.Signer {
	s, err := ssh.NewSignerFromKey(newKey(t))
	require.NoError(t, err)
	return s
}

// TestLoadSSHConfigOffersKeys pins which keys are offered, in which order,
// against a server that records them: identity files the agent holds
// first (signed by the agent), the agent's other keys unless IdentitiesOnly
// yes, then the other identity files, IdentityFile lines adding up across
// the files; a key only an agent can sign with is offered and fails only
// when the server takes it.
func TestLoadSSHConfigOffersKeys(t *testing.T) {
	e := newSSHEnv(t)
	dir := t.TempDir()
	privA, privB, privC, privD, privE := newKey(t), newKey(t), newKey(t), newKey(t), newKey(t)
	a := writeKey(t, filepath.Join(dir, "a"), privA, "", false)
	b := writeKey(t, filepath.Join(dir, "b"), privB, "", false)
	c, err := ssh.NewPublicKey(privC.Public()) // the agent-only key
	require.NoError(t, err)
	d := writeKey(t, filepath.Join(dir, "d"), privD, "", true)
	require.NoError(t, os.Remove(filepath.Join(dir, "d"))) // only d.pub is left
	enc := filepath.Join(dir, "e")
	eKey := writeKey(t, enc, privE, "secret", false)
	fp := ssh.FingerprintSHA256
	agentSock := serveAgent(t, privA, privC, privD)

	dialOffered := func(t *testing.T, srv *fakeServer, config, system string, opts ...remote.SSHConfigOption) ([]string, error) {
		t.Helper()
		known := writeFile(t, filepath.Join(t.TempDir(), "known_hosts"), knownhosts.Line([]string{srv.addr}, srv.hostKey)+"\n")
		host, port, err := net.SplitHostPort(srv.addr)
		require.NoError(t, err)
		head := fmt.Sprintf("Host srv\n  HostName %s\n  Port %s\n  UserKnownHostsFile %s\n", host, port, known)
		addr, cfg, err := e.load(t, "srv", head+config, system, opts...)
		require.NoError(t, err)
		h, err := remote.Dial(t.Context(), addr, cfg)
		if err == nil {
			require.NoError(t, h.Close())
		}
		return srv.Offered(), err
	}
	withAgent := remote.WithSSHAgent(agentSock)
	files := "  IdentityFile " + filepath.Join(dir, "b") + "\n  IdentityFile " + filepath.Join(dir, "a") + "\n"

	t.Run("AgentAndFiles", func(t *testing.T) {
		srv := startFakeServer(t)
		got, err := dialOffered(t, srv, files, "Host *\n  IdentityFile "+enc+"\n", withAgent)
		assert.ErrorContains(t, err, "unable to authenticate")
		assert.Equal(t, []string{fp(a), fp(c), fp(d), fp(b), fp(eKey)}, got,
			"a (file held by the agent), the agent's other keys, then b and the system file's e")
	})
	t.Run("IdentitiesOnly", func(t *testing.T) {
		srv := startFakeServer(t)
		got, err := dialOffered(t, srv, files+"  IdentitiesOnly yes\n", "", withAgent)
		assert.ErrorContains(t, err, "unable to authenticate")
		assert.Equal(t, []string{fp(a), fp(b)}, got, "no agent key the files do not name")
	})
	t.Run("AgentSignsForPubOnly", func(t *testing.T) {
		srv := startFakeServer(t, d)
		got, err := dialOffered(t, srv, "  IdentityFile "+filepath.Join(dir, "d")+"\n  IdentitiesOnly yes\n", "", withAgent)
		require.NoError(t, err, "the agent signs with the key d.pub names")
		assert.Equal(t, []string{fp(d)}, got)
	})
	t.Run("PubOnlyWithoutAgent", func(t *testing.T) {
		srv := startFakeServer(t, d)
		_, _, err := e.load(t, "srv", "IdentityFile "+filepath.Join(dir, "d")+"\n", "")
		assert.ErrorContains(t, err, "no key to log in with: no usable IdentityFile (looked for "+filepath.Join(dir, "d")+")")
		assert.Empty(t, srv.Offered())
	})
	t.Run("DefaultFiles", func(t *testing.T) {
		srv := startFakeServer(t, e.key)
		got, err := dialOffered(t, srv, "", "")
		require.NoError(t, err)
		assert.Equal(t, []string{fp(e.key)}, got, "~/.ssh/id_ed25519 without an IdentityFile line")
	})
	t.Run("EncryptedKeyTaken", func(t *testing.T) {
		srv := startFakeServer(t, eKey)
		got, err := dialOffered(t, srv, "  IdentityFile "+enc+"\n", "")
		require.ErrorIs(t, err, remote.ErrEncryptedKey)
		assert.NotErrorIs(t, err, sandbox.ErrTransport, "retrying will not help")
		assert.EqualError(t, err, `remote: logging in to `+srv.addr+` as "`+currentUser(t)+`": ssh: handshake failed: the server accepts the key of identity file `+enc+
			`, but the private key is encrypted and there is no passphrase prompt: add it to ssh-agent (ssh-add `+enc+`) and make sure SSH_AUTH_SOCK (or IdentityAgent) reaches that agent`)
		assert.Equal(t, []string{fp(eKey)}, got)
	})
	t.Run("EncryptedKeyNotTaken", func(t *testing.T) {
		srv := startFakeServer(t, b)
		got, err := dialOffered(t, srv, "  IdentityFile "+enc+"\n"+files, "")
		require.NoError(t, err, "the encrypted key is offered, refused, and the next one logs in")
		assert.Equal(t, []string{fp(eKey), fp(b)}, got)
	})
	t.Run("EncryptedKeyInAgent", func(t *testing.T) {
		srv := startFakeServer(t, eKey)
		got, err := dialOffered(t, srv, "  IdentityFile "+enc+"\n  IdentitiesOnly yes\n", "", remote.WithSSHAgent(serveAgent(t, privE)))
		require.NoError(t, err, "the agent signs for the encrypted file")
		assert.Equal(t, []string{fp(eKey)}, got)
	})
	t.Run("IdentityAgent", func(t *testing.T) {
		srv := startFakeServer(t, c)
		got, err := dialOffered(t, srv, "  IdentityAgent "+agentSock+"\n  IdentityFile none\n", "")
		require.NoError(t, err, "IdentityAgent names the agent")
		assert.Equal(t, []string{fp(a), fp(c)}, got)
		_, _, err = e.load(t, "srv", "IdentityAgent none\nIdentityFile none\n", "", withAgent)
		assert.ErrorContains(t, err, "no key to log in with", "IdentityAgent none: no agent")
	})
	t.Run("UnreachableAgent", func(t *testing.T) {
		gone := filepath.Join(t.TempDir(), "gone.sock")
		_, _, err := e.load(t, "srv", "IdentityFile none\n", "", remote.WithSSHAgent(gone))
		assert.EqualError(t, err, `remote: ssh config for host "srv": no key to log in with: IdentityFile none, and the agent: reaching ssh-agent: dial unix `+gone+`: connect: no such file or directory; add an IdentityFile line or load a key into ssh-agent (ssh-add)`)
	})
}

// TestDialChecksJumps: every hop needs its own HostKeyCallback, and hops
// are listed flat; both are refused before anything is dialled.
func TestDialChecksJumps(t *testing.T) {
	cb := ssh.FixedHostKey(signerOf(t).PublicKey())
	_, err := remote.Dial(t.Context(), "127.0.0.1:1", remote.Config{HostKeyCallback: cb, Jumps: []remote.Jump{{Addr: "bastion:22"}}})
	assert.ErrorIs(t, err, remote.ErrNoHostKeyCallback)
	assert.True(t, strings.HasPrefix(err.Error(), "remote: Config.Jumps[0] (bastion:22): remote: Config.HostKeyCallback is nil"), err.Error())

	nested := remote.Jump{Addr: "inner:22", Config: remote.Config{HostKeyCallback: cb}}
	_, err = remote.Dial(t.Context(), "127.0.0.1:1", remote.Config{HostKeyCallback: cb,
		Jumps: []remote.Jump{{Addr: "bastion:22", Config: remote.Config{HostKeyCallback: cb, Jumps: []remote.Jump{nested}}}}})
	assert.EqualError(t, err, "remote: Config.Jumps[0] (bastion:22) has Jumps of its own; list every hop, first hop first, in the outer Config.Jumps")
}
