package remote

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// ErrEncryptedKey reports an identity file whose private key is encrypted
// and that no ssh-agent holds: LoadSSHConfig's Config has no way to ask for
// the passphrase. Dial returns it, naming the file, when the server would
// have accepted that key.
var ErrEncryptedKey = errors.New("the private key is encrypted and there is no passphrase prompt")

// errNoPrivateKey is the reason of an identity that only FILE.pub has.
var errNoPrivateKey = errors.New("only its public key (FILE.pub) exists")

// Agent deadlines: listing the keys, and one signature (an agent may ask
// its user to confirm).
const (
	agentListTimeout = 10 * time.Second
	agentSignTimeout = 30 * time.Second
)

// defaultIdentityFiles are ssh's, under ~/.ssh, when no IdentityFile is set.
var defaultIdentityFiles = []string{"id_rsa", "id_ecdsa", "id_ecdsa_sk", "id_ed25519", "id_ed25519_sk"}

// identity is one IdentityFile.
type identity struct {
	file   string
	pub    ssh.PublicKey
	signer ssh.Signer // nil when this process cannot sign with the file's key
	why    error      // why not: ErrEncryptedKey, a parse error, or the private key is missing
}

// auth builds h's one public-key AuthMethod.
func (h *sshHost) auth() ([]ssh.AuthMethod, error) {
	only, err := h.yesNo("IdentitiesOnly", false)
	if err != nil {
		return nil, err
	}
	ids, looked, err := h.identities()
	if err != nil {
		return nil, err
	}
	ag, err := h.agent()
	if err != nil {
		return nil, err
	}
	signers := offer(ids, ag, only)
	if len(signers) == 0 {
		agentSays := "no agent (SSH_AUTH_SOCK is unset, or IdentityAgent none)"
		switch {
		case ag.err != nil:
			agentSays = "the agent: " + ag.err.Error()
		case ag.sock != "" && only:
			agentSays = "the agent at " + ag.sock + " holds none of those keys (IdentitiesOnly yes)"
		case ag.sock != "":
			agentSays = "the agent at " + ag.sock + " holds no key"
		}
		filesSay := "IdentityFile none"
		if len(looked) > 0 {
			filesSay = "no usable IdentityFile (looked for " + strings.Join(looked, ", ") + ")"
		}
		return nil, h.errorf("no key to log in with: %s, and %s; add an IdentityFile line or load a key into ssh-agent (ssh-add)", filesSay, agentSays)
	}
	return []ssh.AuthMethod{ssh.PublicKeys(signers...)}, nil
}

// identities loads h's IdentityFile lines (ssh's defaults when none);
// looked lists the files tried.
func (h *sshHost) identities() (ids []identity, looked []string, err error) {
	files, err := h.getAll("IdentityFile")
	if err != nil {
		return nil, nil, err
	}
	explicit := len(files) > 0
	if !explicit {
		for _, f := range defaultIdentityFiles {
			files = append(files, filepath.Join("~", ".ssh", f))
		}
	}
	for _, f := range files {
		if strings.EqualFold(f, "none") {
			continue
		}
		p, err := h.expandPath("IdentityFile", f)
		if err != nil {
			return nil, nil, err
		}
		looked = append(looked, p)
		id, ok, err := loadIdentity(p)
		if err != nil && explicit {
			return nil, nil, h.errorf("%w", err)
		}
		if ok && err == nil {
			ids = append(ids, id)
		}
	}
	return ids, looked, nil
}

// loadIdentity reads a private key file. ok is false when neither it nor
// FILE.pub exists. A key this process cannot sign with keeps its public
// key (from the file, or FILE.pub) and the reason; without a public key it
// is an error.
func loadIdentity(file string) (id identity, ok bool, err error) {
	id.file = file
	b, err := readRegular(file)
	if errors.Is(err, fs.ErrNotExist) {
		id.why = errNoPrivateKey
		if id.pub, err = readPublicKey(file + ".pub"); errors.Is(err, fs.ErrNotExist) {
			return id, false, nil
		}
		return id, err == nil, err
	}
	if err != nil {
		return id, false, fmt.Errorf("identity file: %w", err)
	}
	if id.signer, err = ssh.ParsePrivateKey(b); err == nil {
		id.pub = id.signer.PublicKey()
		return id, true, nil
	}
	id.why = err
	if pm, encrypted := errors.AsType[*ssh.PassphraseMissingError](err); encrypted {
		id.why, id.pub = ErrEncryptedKey, pm.PublicKey
	}
	if id.pub == nil {
		pub, perr := readPublicKey(file + ".pub")
		if perr != nil {
			return id, false, fmt.Errorf("identity file %s: %w, and its public key is unknown (%w); add the key to ssh-agent (ssh-add %s)", file, id.why, perr, file)
		}
		id.pub = pub
	}
	return id, true, nil
}

// readPublicKey reads an authorized_keys-style public key file.
func readPublicKey(file string) (ssh.PublicKey, error) {
	b, err := readRegular(file)
	if err != nil {
		return nil, err
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return pub, nil
}

// offer orders the signers as ssh does: identity files the agent holds
// (the agent signs), the agent's other keys unless only, then the other
// identity files; each key once.
func offer(ids []identity, ag *agentKeys, only bool) []ssh.Signer {
	held := map[string]ssh.PublicKey{}
	for _, k := range ag.keys {
		held[string(k.Marshal())] = k
	}
	used := map[string]bool{}
	var first, rest []ssh.Signer
	for _, id := range ids {
		blob := string(id.pub.Marshal())
		switch {
		case used[blob]:
		case held[blob] != nil:
			first = append(first, &agentSigner{sock: ag.sock, pub: held[blob]})
		case id.signer != nil:
			rest = append(rest, id.signer)
		case errors.Is(id.why, errNoPrivateKey):
			continue // only FILE.pub, and no agent holds the key
		default:
			rest = append(rest, &keyFileSigner{file: id.file, pub: id.pub, why: id.why})
		}
		used[blob] = true
	}
	if !only {
		for _, k := range ag.keys {
			if !used[string(k.Marshal())] {
				first = append(first, &agentSigner{sock: ag.sock, pub: k})
				used[string(k.Marshal())] = true
			}
		}
	}
	return append(first, rest...)
}

// agentKeys is what an agent holds, listed once per socket.
type agentKeys struct {
	sock string          // "" when no agent is used
	keys []ssh.PublicKey // the agent's keys (certificates included)
	err  error           // why the agent could not be listed
}

// agent lists the keys of h's agent: IdentityAgent, else $SSH_AUTH_SOCK
// (or WithSSHAgent). An agent that cannot be reached is no agent, as in
// ssh; auth reports why when no key is left.
func (h *sshHost) agent() (*agentKeys, error) {
	v, err := h.get("IdentityAgent")
	if err != nil {
		return nil, err
	}
	sock := h.l.agentEnv
	switch {
	case v == "" || v == "SSH_AUTH_SOCK" || v == "$SSH_AUTH_SOCK" || v == "${SSH_AUTH_SOCK}":
	case strings.EqualFold(v, "none"):
		sock = ""
	case strings.HasPrefix(v, "$"):
		return nil, h.errorf("IdentityAgent %s: only SSH_AUTH_SOCK is read from the environment; write the socket's path", v)
	default:
		if sock, err = h.expandPath("IdentityAgent", v); err != nil {
			return nil, err
		}
	}
	if ag, ok := h.l.agents[sock]; ok {
		return ag, nil
	}
	ag := &agentKeys{sock: sock}
	if sock != "" {
		ag.keys, ag.err = listAgent(sock)
		if ag.err != nil {
			ag.sock = ""
		}
	}
	h.l.agents[sock] = ag
	return ag, nil
}

// listAgent returns the public keys the agent at sock holds.
func listAgent(sock string) ([]ssh.PublicKey, error) {
	conn, err := net.DialTimeout("unix", sock, agentListTimeout)
	if err != nil {
		return nil, fmt.Errorf("reaching ssh-agent: %w", err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(agentListTimeout)); err != nil {
		return nil, err
	}
	listed, err := agent.NewClient(conn).List()
	if err != nil {
		return nil, fmt.Errorf("listing the keys of ssh-agent %s: %w", sock, err)
	}
	var keys []ssh.PublicKey
	for _, k := range listed {
		if pub, err := ssh.ParsePublicKey(k.Blob); err == nil {
			keys = append(keys, pub)
		}
	}
	return keys, nil
}

// agentSigner signs with a key the agent holds, over a connection of its
// own for each signature (so a Config holds no open agent connection).
type agentSigner struct {
	sock string
	pub  ssh.PublicKey
}

var _ ssh.AlgorithmSigner = (*agentSigner)(nil)

func (s *agentSigner) PublicKey() ssh.PublicKey { return s.pub }

func (s *agentSigner) Sign(rand io.Reader, data []byte) (*ssh.Signature, error) {
	return s.SignWithAlgorithm(rand, data, "")
}

func (s *agentSigner) SignWithAlgorithm(_ io.Reader, data []byte, algorithm string) (*ssh.Signature, error) {
	var flags agent.SignatureFlags
	switch algorithm {
	case ssh.KeyAlgoRSASHA256:
		flags = agent.SignatureFlagRsaSha256
	case ssh.KeyAlgoRSASHA512:
		flags = agent.SignatureFlagRsaSha512
	}
	conn, err := net.DialTimeout("unix", s.sock, agentListTimeout)
	if err != nil {
		return nil, fmt.Errorf("remote: reaching ssh-agent to sign: %w", err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(agentSignTimeout)); err != nil {
		return nil, err
	}
	sig, err := agent.NewClient(conn).SignWithFlags(s.pub, data, flags)
	if err != nil {
		return nil, fmt.Errorf("remote: ssh-agent %s: signing with %s %s: %w", s.sock, s.pub.Type(), ssh.FingerprintSHA256(s.pub), err)
	}
	return sig, nil
}

// keyFileSigner offers the public key of an identity file this process
// cannot sign with; the server taking it is when the error is reported,
// as ssh asks for a passphrase only then.
type keyFileSigner struct {
	file string
	pub  ssh.PublicKey
	why  error
}

var _ ssh.AlgorithmSigner = (*keyFileSigner)(nil)

func (s *keyFileSigner) PublicKey() ssh.PublicKey { return s.pub }

func (s *keyFileSigner) Sign(rand io.Reader, data []byte) (*ssh.Signature, error) {
	return s.SignWithAlgorithm(rand, data, "")
}

func (s *keyFileSigner) SignWithAlgorithm(io.Reader, []byte, string) (*ssh.Signature, error) {
	return nil, &keyFileError{file: s.file, err: s.why}
}

// keyFileError is the error of a keyFileSigner: the server would take the
// key, and only an agent can sign with it.
type keyFileError struct {
	file string
	err  error
}

func (e *keyFileError) Error() string {
	return fmt.Sprintf("the server accepts the key of identity file %s, but %v: add it to ssh-agent (ssh-add %s) and make sure SSH_AUTH_SOCK (or IdentityAgent) reaches that agent", e.file, e.err, e.file)
}

func (e *keyFileError) Unwrap() error { return e.err }
