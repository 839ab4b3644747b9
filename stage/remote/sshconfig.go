package remote

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/kevinburke/ssh_config"
)

// SSHConfigOption configures LoadSSHConfig.
type SSHConfigOption func(*sshOptions) error

type sshOptions struct {
	files     []string // the user's file, then the system's; "" skips one
	filesSet  bool
	home      string
	agentSock string
	agentSet  bool
}

// WithSSHConfigFiles names the configuration files to read, in place of
// ~/.ssh/config and /etc/ssh/ssh_config: user first, then system, as ssh
// reads them ("first obtained value wins"; IdentityFile lines add up). An
// empty name skips that file (ssh -F FILE is WithSSHConfigFiles(FILE, "")).
// A named file must exist; the default files may be missing.
func WithSSHConfigFiles(user, system string) SSHConfigOption {
	return func(o *sshOptions) error {
		o.files, o.filesSet = []string{user, system}, true
		return nil
	}
}

// WithSSHHome sets the home directory that ~ and %d stand for and under
// which the default files live (~/.ssh/config, ~/.ssh/known_hosts,
// ~/.ssh/id_*). Default: os.UserHomeDir ($HOME). dir must be absolute.
func WithSSHHome(dir string) SSHConfigOption {
	return func(o *sshOptions) error {
		if !filepath.IsAbs(dir) {
			return fmt.Errorf("remote: WithSSHHome(%q): the home directory must be an absolute path", dir)
		}
		o.home = dir
		return nil
	}
}

// WithSSHAgent sets the ssh-agent socket used in place of $SSH_AUTH_SOCK
// (an IdentityAgent line in the configuration still wins, as in ssh); ""
// uses no agent. Default: the value of $SSH_AUTH_SOCK.
func WithSSHAgent(socket string) SSHConfigOption {
	return func(o *sshOptions) error {
		o.agentSock, o.agentSet = socket, true
		return nil
	}
}

// LoadSSHConfig builds the address and the Config to Dial the host that
// alias names in the user's OpenSSH configuration, the way `ssh alias`
// would connect: by default ~/.ssh/config, then /etc/ssh/ssh_config (parsed
// with github.com/kevinburke/ssh_config; Host, Match Host — matched
// against the alias, as Host is —, Match all and Include are understood).
// addr is "HostName:Port".
//
// What it reads, per host (the target and each ProxyJump hop):
//   - HostName (default: alias itself; %h and %% expanded), Port (default
//     22), User (default: the current user).
//   - IdentityFile, every line (default ~/.ssh/id_rsa, id_ecdsa,
//     id_ecdsa_sk, id_ed25519, id_ed25519_sk; "none": no file), with ~ and
//     the tokens %d %h %i %k %L %l %n %p %r %u %%; a missing file is skipped
//     as ssh skips it. IdentitiesOnly, and the agent: $SSH_AUTH_SOCK
//     (WithSSHAgent) or IdentityAgent (a path, SSH_AUTH_SOCK or none). The
//     keys are offered in ssh's order: identity files the agent holds (the
//     agent signs), the agent's other keys unless IdentitiesOnly is yes,
//     then the other identity files. A key this process cannot sign with —
//     encrypted (there is no passphrase prompt), or of a type x/crypto
//     cannot load — is still offered by its public key (from the file or
//     FILE.pub), and only if the server would take it does Dial fail, with
//     an error that names the file and says to add it to ssh-agent
//     (ErrEncryptedKey for an encrypted one); a file with neither a
//     readable public key nor an agent copy is an error here.
//   - StrictHostKeyChecking: yes, and ask (there is no prompt: ask is yes,
//     as under ssh -o BatchMode=yes; it is also ssh's default), trust
//     exactly the keys UserKnownHostsFile and GlobalKnownHostsFile list
//     (defaults ~/.ssh/known_hosts ~/.ssh/known_hosts2 and
//     /etc/ssh/ssh_known_hosts /etc/ssh/ssh_known_hosts2; missing files are
//     skipped; "none": no file). accept-new also appends an unknown host's
//     key to the first UserKnownHostsFile (hashed under HashKnownHosts
//     yes) and trusts it; a known host that presents another key is still
//     refused. It decides under an exclusive flock(2) on that file, after
//     reading the files again: of several Configs, or processes using this
//     package (ssh itself takes no lock), meeting one new host at once, the
//     first remembers its key and the others are checked against it. A name known_hosts would read as a pattern or
//     other syntax (*, ?, !, a comma, white space, #, brackets outside
//     [host]:port, a leading @ or |) is never written: refused unless
//     HashKnownHosts is yes (a hashed name is a literal). no and off are
//     refused: they would trust any key. A refused key is a
//     *HostKeyError, at Dial. HostKeyAlias names the host in known_hosts.
//   - ProxyJump: one or more comma-separated hops ([user@]host[:port] or
//     ssh://[user@]host[:port]), dialled in order into Config.Jumps; each
//     hop is resolved through the same configuration (its own HostName,
//     keys, known_hosts and StrictHostKeyChecking; the first hop's own
//     ProxyJump comes before it, as in ssh). "none": a direct connection.
//     ProxyCommand is refused: use ProxyJump.
//   - ConnectTimeout becomes Config.DialTimeout; ServerAliveInterval
//     becomes Config.KeepAlive (0 turns keepalives off, as in ssh; unset
//     keeps the Host's default). ServerAliveCountMax is not used: a Host
//     gives up after one unanswered keepalive.
//
// Not supported: Match criteria other than Host and all (a parse error),
// ProxyCommand, CertificateFile, environment variables in paths
// (${VAR}: an error), CanonicalizeHostname. A relative Include is resolved
// by the parser under the real user's ~/.ssh (under /etc/ssh in a file
// included from there), not under WithSSHHome.
//
// Every file it reads — a configuration file, an Include target, an
// identity file and its .pub, a known_hosts file — must be a regular file
// (or a link to one; /dev/null reads as empty): a named pipe, device,
// socket or directory is an error naming it, never a wait for a writer (a
// default identity file is skipped instead, as a missing one is). The
// parser opens Include targets, and x/crypto's knownhosts the known_hosts
// files, by name after that check: only someone who can replace files in
// those directories can swap a FIFO in between.
//
// LoadSSHConfig is the package's one reader of the environment: the home
// directory, $SSH_AUTH_SOCK, the current user and the host name, each
// where the configuration asks for it; WithSSHHome and WithSSHAgent
// replace the first two. The agent's key list is read once, here; the
// agent signs during each Dial. The returned Config may be changed before
// Dial (a Logger, a ControlTimeout).
func LoadSSHConfig(alias string, opts ...SSHConfigOption) (addr string, cfg Config, err error) {
	if alias == "" || strings.ContainsFunc(alias, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		return "", Config{}, fmt.Errorf("remote: LoadSSHConfig: %q is not a host alias", alias)
	}
	if strings.Contains(alias, "@") {
		return "", Config{}, fmt.Errorf("remote: LoadSSHConfig: %q: pass the host alias alone; the user comes from the configuration's User line (or set Config.User afterwards)", alias)
	}
	l, err := newSSHLoader(opts)
	if err != nil {
		return "", Config{}, err
	}
	return l.resolve(jumpSpec{host: alias}, 0, true)
}

// sshLoader resolves hosts against the parsed configuration files.
type sshLoader struct {
	files    []sshConfigFile
	home     string
	agentEnv string // $SSH_AUTH_SOCK, or WithSSHAgent's socket
	local    localInfo
	agents   map[string]*agentKeys // by socket path
	includes includeChecker        // the files Include lines reach, checked before the parser reads them
}

type sshConfigFile struct {
	path string
	cfg  *ssh_config.Config
}

// localInfo is this machine's side of the tokens.
type localInfo struct {
	user, uid, hostname string
}

func newSSHLoader(opts []SSHConfigOption) (*sshLoader, error) {
	var o sshOptions
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	l := &sshLoader{home: o.home, agentEnv: o.agentSock, agents: map[string]*agentKeys{}}
	if !o.agentSet {
		l.agentEnv = os.Getenv("SSH_AUTH_SOCK")
	}
	if l.home == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("remote: LoadSSHConfig: no home directory (%w); pass WithSSHHome", err)
		}
		l.home = home
	}
	l.local.uid = strconv.Itoa(os.Getuid())
	l.includes = includeChecker{home: os.Getenv("HOME"), seen: map[string]int{}} // the parser's home: $HOME when the user is unknown
	if u, err := user.Current(); err == nil {
		l.local.user, l.includes.home = u.Username, u.HomeDir
	}
	l.local.hostname, _ = os.Hostname() // only %l and %L need it; "" then
	files, named := o.files, o.filesSet
	if !named {
		files = []string{filepath.Join(l.home, ".ssh", "config"), "/etc/ssh/ssh_config"}
	}
	for _, f := range files {
		if f == "" {
			continue
		}
		if err := l.parse(f, named); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// parse reads one configuration file; a default one may be missing. The
// file and those its Include lines reach must be regular files.
func (l *sshLoader) parse(file string, named bool) error {
	b, err := readRegular(file)
	if errors.Is(err, fs.ErrNotExist) && !named {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remote: reading ssh config: %w", err)
	}
	if err := l.includes.check(file, b, false, 0); err != nil { // DecodeBytes parses it as a user file
		return fmt.Errorf("remote: ssh config %w", err)
	}
	cfg, err := ssh_config.DecodeBytes(b)
	if err != nil {
		return fmt.Errorf("remote: ssh config %s: %w (Host, Match Host, Match all and Include are understood; name other files with WithSSHConfigFiles)", file, err)
	}
	l.files = append(l.files, sshConfigFile{path: file, cfg: cfg})
	return nil
}

// jumpSpec is a host to resolve: an alias, with the user and port a
// ProxyJump entry gives, which win over the configuration's.
type jumpSpec struct {
	host, user, port string
}

// maxJumpDepth bounds nested ProxyJump lookups (a host that jumps through
// itself, directly or not).
const maxJumpDepth = 8

// resolve builds the address and Config of one host; ownJumps says
// whether its own ProxyJump applies (the target and a chain's first hop).
func (l *sshLoader) resolve(spec jumpSpec, depth int, ownJumps bool) (string, Config, error) {
	h, err := l.host(spec)
	if err != nil {
		return "", Config{}, err
	}
	cfg := Config{User: h.user}
	if cfg.HostKeyCallback, err = h.hostKeys(); err != nil {
		return "", Config{}, err
	}
	if cfg.Auth, err = h.auth(); err != nil {
		return "", Config{}, err
	}
	if cfg.DialTimeout, cfg.KeepAlive, err = h.timeouts(); err != nil {
		return "", Config{}, err
	}
	if ownJumps {
		if cfg.Jumps, err = h.jumps(depth); err != nil {
			return "", Config{}, err
		}
	}
	return net.JoinHostPort(h.hostName, h.port), cfg, nil
}

// sshHost is one host being resolved: its alias, the values that the
// tokens stand for, and the loader to look its keywords up in.
type sshHost struct {
	l                    *sshLoader
	alias                string
	hostName, port, user string
	hostKeyAlias         string
}

// host looks up the HostName, Port and User of spec.
func (l *sshLoader) host(spec jumpSpec) (*sshHost, error) {
	h := &sshHost{l: l, alias: spec.host}
	var err error
	if h.hostName, err = h.get("HostName"); err != nil {
		return nil, err
	}
	if h.hostName == "" {
		h.hostName = h.alias
	} else if h.hostName, err = h.expand("HostName", h.hostName, "h%"); err != nil {
		return nil, err
	}
	if h.port = spec.port; h.port == "" {
		if h.port, err = h.get("Port"); err != nil {
			return nil, err
		}
	}
	if h.port == "" {
		h.port = "22"
	}
	if n, err := strconv.ParseUint(h.port, 10, 16); err != nil || n == 0 {
		return nil, h.errorf("Port %q is not a port number", h.port)
	}
	if h.user = spec.user; h.user == "" {
		if h.user, err = h.get("User"); err != nil {
			return nil, err
		}
	}
	if h.user == "" {
		if h.user = l.local.user; h.user == "" {
			return nil, h.errorf("no User line, and the current user is unknown; add a User line for it")
		}
	}
	if h.hostKeyAlias, err = h.get("HostKeyAlias"); err != nil {
		return nil, err
	}
	return h, nil
}

// errorf returns an error about h's configuration.
func (h *sshHost) errorf(format string, args ...any) error {
	return fmt.Errorf("remote: ssh config for host %q: "+format, append([]any{h.alias}, args...)...)
}

// get returns the first value of key for h's alias: the user's file
// first, then the system's; "" when none sets it.
func (h *sshHost) get(key string) (string, error) {
	for _, f := range h.l.files {
		v, err := f.cfg.Get(h.alias, key)
		if err != nil {
			return "", h.errorf("%s: %s: %w", f.path, key, err)
		}
		if v != "" {
			return v, nil
		}
	}
	return "", nil
}

// getAll returns every value of key for h's alias, across the files.
func (h *sshHost) getAll(key string) ([]string, error) {
	var all []string
	for _, f := range h.l.files {
		vs, err := f.cfg.GetAll(h.alias, key)
		if err != nil {
			return nil, h.errorf("%s: %s: %w", f.path, key, err)
		}
		all = append(all, vs...)
	}
	return all, nil
}

// yesNo reads a yes/no keyword; def when it is not set.
func (h *sshHost) yesNo(key string, def bool) (bool, error) {
	v, err := h.get(key)
	switch strings.ToLower(v) {
	case "":
		return def, err
	case "yes", "true":
		return true, nil
	case "no", "false":
		return false, nil
	}
	return false, h.errorf("%s %q: want yes or no", key, v)
}

// timeouts maps ConnectTimeout and ServerAliveInterval.
func (h *sshHost) timeouts() (dial, keepAlive time.Duration, err error) {
	v, err := h.get("ConnectTimeout")
	if err != nil {
		return 0, 0, err
	}
	if v != "" && !strings.EqualFold(v, "none") {
		if dial, err = sshDuration(v); err != nil {
			return 0, 0, h.errorf("ConnectTimeout %q: %w", v, err)
		}
	}
	if v, err = h.get("ServerAliveInterval"); err != nil || v == "" {
		return dial, 0, err
	}
	if keepAlive, err = sshDuration(v); err != nil {
		return 0, 0, h.errorf("ServerAliveInterval %q: %w", v, err)
	}
	if keepAlive == 0 {
		keepAlive = -1 // ssh's 0: no keepalives
	}
	return dial, keepAlive, nil
}

// sshDuration parses an OpenSSH time value: seconds, or numbers each
// followed by s, m, h, d or w ("90", "1m30s", "2h").
func sshDuration(s string) (time.Duration, error) {
	units := map[byte]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour, 'w': 7 * 24 * time.Hour}
	var total time.Duration
	for rest := strings.ToLower(s); rest != ""; {
		i := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
		if i < 0 {
			i = len(rest)
		}
		n, err := strconv.ParseUint(rest[:i], 10, 31)
		if err != nil {
			return 0, errors.New("want seconds, or a time such as 1m30s")
		}
		unit, rest2 := time.Second, rest[i:]
		if rest2 != "" {
			var ok bool
			if unit, ok = units[rest2[0]]; !ok {
				return 0, errors.New("want seconds, or a time such as 1m30s")
			}
			rest2 = rest2[1:]
		}
		total += time.Duration(n) * unit
		rest = rest2
	}
	return total, nil
}

// jumps resolves h's ProxyJump into the hops to dial, first hop first.
func (h *sshHost) jumps(depth int) ([]Jump, error) {
	v, err := h.get("ProxyJump")
	if err != nil {
		return nil, err
	}
	if v == "" || strings.EqualFold(v, "none") {
		pc, err := h.get("ProxyCommand")
		if err != nil {
			return nil, err
		}
		if pc != "" && !strings.EqualFold(pc, "none") {
			return nil, h.errorf("ProxyCommand is not supported; reach the host through ProxyJump (ProxyCommand ssh -W %%h:%%p bastion is ProxyJump bastion)")
		}
		return nil, nil
	}
	if depth >= maxJumpDepth {
		return nil, h.errorf("ProxyJump %s: more than %d nested jump hosts; does a jump host jump through itself?", v, maxJumpDepth)
	}
	specs, err := parseProxyJump(v)
	if err != nil {
		return nil, h.errorf("ProxyJump %s: %w", v, err)
	}
	var out []Jump
	for i, sp := range specs {
		addr, cfg, err := h.l.resolve(sp, depth+1, i == 0)
		if err != nil {
			return nil, err // it names the jump host's alias
		}
		out = append(out, cfg.Jumps...)
		cfg.Jumps = nil
		out = append(out, Jump{Addr: addr, Config: cfg})
	}
	return out, nil
}

// parseProxyJump splits a ProxyJump value into its hops.
func parseProxyJump(v string) ([]jumpSpec, error) {
	var specs []jumpSpec
	for _, hop := range strings.Split(v, ",") {
		hop = strings.TrimSpace(hop)
		var sp jumpSpec
		if strings.HasPrefix(hop, "ssh://") {
			u, err := url.Parse(hop)
			if err != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
				return nil, fmt.Errorf("%q: want ssh://[user@]host[:port]", hop)
			}
			sp = jumpSpec{host: u.Hostname(), user: u.User.Username(), port: u.Port()}
		} else {
			if i := strings.LastIndex(hop, "@"); i >= 0 {
				sp.user, hop = hop[:i], hop[i+1:]
			}
			sp.host = strings.TrimSuffix(strings.TrimPrefix(hop, "["), "]") // [::1]
			if host, port, err := net.SplitHostPort(hop); err == nil {
				sp.host, sp.port = host, port
			}
		}
		if sp.host == "" || strings.ContainsAny(sp.host, "/@ \t[]") {
			return nil, fmt.Errorf("%q: want [user@]host[:port]", hop)
		}
		specs = append(specs, sp)
	}
	return specs, nil
}

// pathTokens are the tokens a path keyword may use.
const pathTokens = "dhikLlnpru%"

// expandPath expands ~ and the path tokens of one path value of key.
func (h *sshHost) expandPath(key, v string) (string, error) {
	if v == "~" || strings.HasPrefix(v, "~/") {
		v = h.l.home + v[1:]
	} else if strings.HasPrefix(v, "~") {
		return "", h.errorf("%s %q: ~user is not supported; write the path out", key, v)
	}
	if strings.Contains(v, "${") {
		return "", h.errorf("%s %q: environment variables are not expanded; write the path out", key, v)
	}
	return h.expand(key, v, pathTokens)
}

// expand replaces the %-tokens of v that allowed lists.
func (h *sshHost) expand(key, v, allowed string) (string, error) {
	if !strings.Contains(v, "%") {
		return v, nil
	}
	k := h.hostKeyAlias
	if k == "" {
		k = h.hostName
	}
	short, _, _ := strings.Cut(h.l.local.hostname, ".")
	values := map[byte]string{'%': "%", 'd': h.l.home, 'h': h.hostName, 'i': h.l.local.uid, 'k': k,
		'L': short, 'l': h.l.local.hostname, 'n': h.alias, 'p': h.port, 'r': h.user, 'u': h.l.local.user}
	if strings.Contains(key, "HostName") {
		values['h'] = h.alias
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] != '%' {
			b.WriteByte(v[i])
			continue
		}
		if i+1 == len(v) || !strings.ContainsRune(allowed, rune(v[i+1])) {
			return "", h.errorf("%s %q: unsupported %%-token at byte %d (supported here: %%%s)", key, v, i, strings.Join(strings.Split(allowed, ""), " %"))
		}
		i++
		b.WriteString(values[v[i]])
	}
	return b.String(), nil
}

// splitArgs splits a value that lists several paths (UserKnownHostsFile),
// honouring double quotes as ssh does.
func splitArgs(v string) []string {
	var out []string
	var cur strings.Builder
	inQuote, have := false, false
	for _, r := range v {
		switch {
		case r == '"':
			inQuote, have = !inQuote, true
		case unicode.IsSpace(r) && !inQuote:
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	if have {
		out = append(out, cur.String())
	}
	return out
}
