package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"github.com/airlockdev/airlock/internal/shell"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
)

// Defaults of Config.
const (
	DefaultDialTimeout = 10 * time.Second // Config.DialTimeout when zero
	DefaultKeepAlive   = 15 * time.Second // interval of keep-alive requests when Config.KeepAlive is zero
)

// stopGrace is how long a cancelled command gets between SIGTERM and the
// closing of its session (which makes the server kill it).
const stopGrace = 250 * time.Millisecond

// Host is one SSH connection to a sandbox. It is a sandbox.Runner (exec
// sessions, each script run by the server's /bin/sh) and a stage.Target (the
// shell protocol of stage.Bridge over that runner, with SFTP where it saves
// round trips) — a stage.Sandbox — so Stage, workspace and deliverable all
// reach the sandbox through it.
//
// Guarantees: the host key is verified by Config.HostKeyCallback (there is
// no insecure default); Command.Env values travel on the session's stdin,
// never in the exec request, an SSH env request or any argv; every control
// operation runs under the control deadline even when the server never
// answers; a cancelled command is signalled (TERM), then its session is
// closed; a dead peer is found by keepalives and every call then fails with
// sandbox.ErrTransport. Everything stage.Bridge promises about publishes holds.
//
// Non-guarantees: the sandbox owns its file system (see stage.Bridge); a
// command whose session is closed is stopped only as far as the server stops
// it (OpenSSH and remotetest kill it).
type Host struct {
	c      *ssh.Client
	jumps  []*ssh.Client // the hops c goes through (Config.Jumps), first hop first
	cfg    Config
	log    *slog.Logger
	bridge *stage.Bridge
	// controlTimeout is the effective control deadline (as the Bridge's).
	controlTimeout time.Duration

	sftpMu  sync.Mutex
	sftpCli *sftp.Client

	// kaTimer sends the next keepalive (nil: keepalives off); kaMu orders
	// its re-arming and its h.wg.Add against Close.
	kaMu    sync.Mutex
	kaTimer *time.Timer
	// conn is the connection's observer: the bytes read from it, and
	// whether a read failed (nil: unknown, for a client NewHost adopted).
	conn *countingConn

	closeOnce sync.Once
	closed    chan struct{}
	closeErr  error
	wg        sync.WaitGroup
}

var (
	_ sandbox.Runner = (*Host)(nil)
	_ stage.Target   = (*Host)(nil)
	_ stage.Sandbox  = (*Host)(nil)
)

// Dial connects to addr ("host:port"; port 22 when absent), verifies the
// server's key with cfg.HostKeyCallback and authenticates with cfg.Auth.
// With cfg.Jumps it first logs in to each hop in order, each through the
// one before, and reaches addr through the last; every hop's key is
// verified by its own callback, and Close closes the whole chain. ctx
// bounds the whole dial; each hop's DialTimeout (and cfg.DialTimeout, for
// the target) bounds its own connect and handshake.
//
// A refused host key — the target's or a hop's — is returned as the
// *HostKeyError itself, whose Host names the server that presented it.
func Dial(ctx context.Context, addr string, cfg Config) (*Host, error) {
	if err := checkJumps(cfg); err != nil {
		return nil, err
	}
	var chain []*ssh.Client
	closeChain := func() {
		for i := len(chain) - 1; i >= 0; i-- {
			chain[i].Close()
		}
	}
	var via *ssh.Client
	viaAddr := ""
	for _, j := range cfg.Jumps {
		c, _, err := dialHop(ctx, via, viaAddr, j.Addr, j.Config)
		if err != nil {
			closeChain()
			return nil, err
		}
		chain = append(chain, c)
		via, viaAddr = c, withPort(j.Addr)
	}
	c, conn, err := dialHop(ctx, via, viaAddr, addr, cfg)
	if err != nil {
		closeChain()
		return nil, err
	}
	h, err := newHost(c, cfg, conn)
	if err != nil {
		c.Close()
		closeChain()
		return nil, err
	}
	h.jumps = chain
	return h, nil
}

// checkJumps refuses a Config whose HostKeyCallback, or any hop's, is nil,
// and a hop with hops of its own.
func checkJumps(cfg Config) error {
	if cfg.HostKeyCallback == nil {
		return ErrNoHostKeyCallback
	}
	for i, j := range cfg.Jumps {
		switch {
		case j.Config.HostKeyCallback == nil:
			return fmt.Errorf("remote: Config.Jumps[%d] (%s): %w", i, j.Addr, ErrNoHostKeyCallback)
		case len(j.Config.Jumps) > 0:
			return fmt.Errorf("remote: Config.Jumps[%d] (%s) has Jumps of its own; list every hop, first hop first, in the outer Config.Jumps", i, j.Addr)
		}
	}
	return nil
}

// withPort returns addr with port 22 when it names none.
func withPort(addr string) string {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return net.JoinHostPort(addr, "22")
	}
	return addr
}

// dialHop connects to addr — from this machine, or through via (reached
// at viaAddr) — and logs in with cfg, under cfg.DialTimeout. It returns
// the client and the count of bytes read from its connection.
func dialHop(ctx context.Context, via *ssh.Client, viaAddr, addr string, cfg Config) (*ssh.Client, *countingConn, error) {
	addr = withPort(addr)
	timeout := cfg.DialTimeout
	if timeout <= 0 {
		timeout = DefaultDialTimeout
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	raw, err := dialConn(dctx, via, viaAddr, addr)
	if err != nil {
		return nil, nil, err
	}
	conn := &countingConn{Conn: raw, raw: rawTCP(raw)}
	// The handshake honours ctx and the timeout through the connection's
	// deadline (a channel through a hop has none) and, on cancellation, by
	// closing the connection.
	if dl, ok := dctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(dctx, func() { conn.Close() })
	cc, chans, reqs, err := ssh.NewClientConn(conn, addr, &ssh.ClientConfig{
		User:            cfg.User,
		Auth:            cfg.Auth,
		HostKeyCallback: cfg.HostKeyCallback,
		Timeout:         timeout,
	})
	if !stop() || err != nil {
		conn.Close()
		var he *HostKeyError
		switch {
		case errors.As(err, &he):
			return nil, nil, he
		case err == nil || dctx.Err() != nil:
			return nil, nil, fmt.Errorf("%w: remote: SSH handshake with %s: %w", sandbox.ErrTransport, addr, context.Cause(dctx))
		case errors.As(err, new(*keyFileError)):
			return nil, nil, fmt.Errorf("remote: logging in to %s as %q: %w", addr, cfg.User, err)
		case strings.Contains(err.Error(), "unable to authenticate"):
			return nil, nil, fmt.Errorf("remote: %s refused authentication as user %q: %w; check Config.User and Config.Auth (the key must be in the server's authorized_keys)", addr, cfg.User, err)
		}
		return nil, nil, fmt.Errorf("%w: remote: SSH handshake with %s: %w", sandbox.ErrTransport, addr, err)
	}
	_ = conn.SetDeadline(time.Time{})
	return ssh.NewClient(cc, chans, reqs), conn, nil
}

// countingConn counts the bytes read from its connection (the keepalive's
// sign that the peer is alive while the reply to a keepalive waits behind
// the data the peer has yet to read), and notes a read that failed: the
// connection dropped (or was closed). It is noted before the SSH client
// learns of it, so before any session ends because of it (see Run).
//
// A read that leaves the socket empty (fewer bytes than asked: the peer
// has paused) has the kernel acknowledge them at once, where it can
// (quickAck): a server that waits for that ACK before its next small
// reply then does not wait for the delayed one. That reaches a TCP
// connection Dial made: through Config.Jumps only the first hop's (the
// target's first session still waits for the last hop's kernel), and not
// a client NewHost adopted.
type countingConn struct {
	net.Conn
	raw    syscall.RawConn // the TCP socket (nil: not TCP, or not Linux)
	read   atomic.Uint64
	failed atomic.Bool
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.raw != nil && n > 0 && n < len(p) {
		quickAck(c.raw)
	}
	c.read.Add(uint64(n))
	if err != nil {
		c.failed.Store(true)
	}
	return n, err
}

// dropped reports whether a read of the connection failed (false when it
// is not known: a client NewHost adopted).
func (h *Host) dropped() bool { return h.conn != nil && h.conn.failed.Load() }

// dialConn opens the connection a handshake runs over: TCP from this
// machine, or a direct-tcpip channel through via.
func dialConn(ctx context.Context, via *ssh.Client, viaAddr, addr string) (net.Conn, error) {
	if via == nil {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("%w: remote: dialing %s: %w", sandbox.ErrTransport, addr, err)
		}
		return conn, nil
	}
	conn, err := via.DialContext(ctx, "tcp", addr)
	if err == nil {
		return conn, nil
	}
	if oe, ok := errors.AsType[*ssh.OpenChannelError](err); ok && oe.Reason == ssh.Prohibited {
		return nil, fmt.Errorf("remote: jump host %s refused to connect to %s: %w; it must allow TCP forwarding (AllowTcpForwarding in its sshd_config)", viaAddr, addr, err)
	}
	return nil, fmt.Errorf("%w: remote: dialing %s through jump host %s: %w", sandbox.ErrTransport, addr, viaAddr, err)
}

// NewHost adopts c, a connected client (its host key verified by whoever
// dialled it): Close closes it. cfg's Auth, HostKeyCallback and Jumps are
// not used; its KeepAlive, ControlTimeout and Logger are.
func NewHost(c *ssh.Client, cfg Config) (*Host, error) {
	return newHost(c, cfg, nil)
}

// newHost is NewHost with the observer of c's connection (nil: unknown,
// as for a client NewHost adopts).
func newHost(c *ssh.Client, cfg Config, conn *countingConn) (*Host, error) {
	if c == nil {
		return nil, errors.New("remote: NewHost: nil *ssh.Client")
	}
	h := &Host{c: c, cfg: cfg, log: cfg.Logger, closed: make(chan struct{}), conn: conn}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.controlTimeout = cfg.ControlTimeout
	if h.controlTimeout <= 0 || h.controlTimeout > sandbox.MaxControlTimeout {
		h.controlTimeout = sandbox.MaxControlTimeout
	}
	h.bridge = stage.NewBridge(h) // its control deadline is h's (sandbox.ControlTimeouter)
	every := cfg.KeepAlive
	if every == 0 {
		every = DefaultKeepAlive
	}
	if every > 0 {
		h.kaMu.Lock()
		h.kaTimer = time.AfterFunc(every, func() { h.keepAlive(every) })
		h.kaMu.Unlock()
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		err := c.Wait()
		h.log.Debug("remote: connection ended", "addr", c.RemoteAddr().String(), "err", err)
	}()
	return h, nil
}

// keepAlive sends a keepalive request every interval; a peer that does not
// answer one within the next interval (or 5 s, whichever is longer) and
// sends nothing else in that time either is dead: the connection is
// closed, and every call fails with ErrTransport. (The reply can wait
// behind the data the peer has yet to read — up to a channel window per
// session — so a peer that is slow but sending, window adjustments
// included, is alive, as OpenSSH's ServerAliveInterval counts it.) It runs
// on a timer (time.AfterFunc, re-armed after each reply), so an idle Host
// holds no goroutine for it between requests.
func (h *Host) keepAlive(every time.Duration) {
	h.kaMu.Lock()
	select {
	case <-h.closed:
		h.kaMu.Unlock()
		return
	default:
	}
	// Under kaMu, which Close takes after closing h.closed and before
	// h.wg.Wait: no Add can follow the Wait.
	h.wg.Add(1)
	h.kaMu.Unlock()
	defer h.wg.Done()
	if !h.keepAliveOnce(every) {
		return
	}
	h.kaMu.Lock()
	select {
	case <-h.closed:
	default:
		h.kaTimer.Reset(every)
	}
	h.kaMu.Unlock()
}

// keepAliveOnce sends one keepalive request and waits for its reply; it
// reports whether the connection is alive (and the Host open).
func (h *Host) keepAliveOnce(every time.Duration) bool {
	reply := make(chan error, 1)
	go func() {
		_, _, err := h.c.SendRequest("keepalive@openssh.com", true, nil)
		reply <- err
	}()
	within := max(every, 5*time.Second)
	wait := time.NewTimer(within)
	defer wait.Stop()
	seen := h.readBytes()
	for {
		select {
		case err := <-reply:
			if err != nil {
				h.log.Warn("remote: keepalive failed; the connection is gone", "err", err)
				return false
			}
			return true
		case <-wait.C:
			if now := h.readBytes(); h.conn != nil && now != seen {
				seen = now // the peer sent something: alive; keep waiting
				wait.Reset(within)
				continue
			}
			h.log.Warn("remote: no keepalive reply; closing the connection", "addr", h.c.RemoteAddr().String())
			h.c.Close()
			<-reply
			return false
		case <-h.closed:
			<-reply
			return false
		}
	}
}

// readBytes returns how many bytes were read from the connection so far
// (0 when unknown).
func (h *Host) readBytes() uint64 {
	if h.conn == nil {
		return 0
	}
	return h.conn.read.Load()
}

// Client returns the underlying SSH client (for port forwarding, say). The
// Host still owns it.
func (h *Host) Client() *ssh.Client { return h.c }

// Close closes the connection and the SFTP client. Calls after the first
// return the first one's result.
func (h *Host) Close() error {
	h.closeOnce.Do(func() {
		close(h.closed)
		h.kaMu.Lock()
		if h.kaTimer != nil {
			h.kaTimer.Stop()
		}
		h.kaMu.Unlock()
		// The connection goes first: an SFTP handshake the server never
		// answers holds sftpMu until its channel ends.
		if err := h.c.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			h.closeErr = err
		}
		for i := len(h.jumps) - 1; i >= 0; i-- {
			if err := h.jumps[i].Close(); err != nil && !errors.Is(err, net.ErrClosed) {
				h.closeErr = errors.Join(h.closeErr, err)
			}
		}
		h.sftpMu.Lock()
		if h.sftpCli != nil {
			_ = h.sftpCli.Close()
		}
		h.sftpMu.Unlock()
		h.wg.Wait()
	})
	return h.closeErr
}

// Run implements sandbox.Runner: cmd.Script runs under the server's /bin/sh
// in cmd.Dir (the login directory when ""). The script travels in the exec
// request; cmd.Env travels on stdin ahead of cmd.Stdin, read by a short
// prelude that exports it, so no value appears in any argv or SSH env
// request; delivery is linear in the environment's size. cmd.Env must pass
// sandbox.CheckEnv (shell names, no NUL, each variable within
// sandbox.MaxEnvEntryBytes and all within sandbox.MaxEnvBytes) and no name may
// start with __airlock_ (the prelude's own); a bad one is an error before
// anything is sent. A read of cmd.Stdin that fails is never shown to the
// command as its input's end: the command is stopped as a cancelled one
// is, and Run returns an error wrapping sandbox.ErrTransport.
func (h *Host) Run(ctx context.Context, cmd sandbox.Command) error {
	if err := h.checkRun(ctx, cmd); err != nil {
		return err
	}
	script, stdin := runScript(cmd)
	sess, err := h.newSession(ctx)
	if err != nil {
		return err
	}
	defer sess.Close()
	out, outT := shell.TrackWriter(cmd.Stdout)
	errw, errT := shell.TrackWriter(cmd.Stderr)
	stderr := &shell.HeaderWriter{W: errw}
	sess.Stdout, sess.Stderr = out, stderr
	var in io.WriteCloser
	if stdin != nil {
		if in, err = sess.StdinPipe(); err != nil {
			return fmt.Errorf("%w: remote: %w", sandbox.ErrTransport, err)
		}
	}
	done, started, failed := startSession(sess, script, in, stdin)
	// What the login shell wrote without the wrapper's header (it never
	// ran) reaches cmd.Stderr at the end; a failed write shows in errT.
	defer func() { _ = stderr.End() }()
	select {
	case err := <-done:
		_ = stderr.End() // the session's output is all in: before the checks of the writers
		select {
		case serr := <-failed:
			return fmt.Errorf("%w: remote: %w", sandbox.ErrTransport, serr)
		default:
		}
		if err != nil && !errors.Is(err, sandbox.ErrTransport) && shell.HostFault(err, outT.Err(), errT.Err()) {
			return fmt.Errorf("remote: %w", err) // the caller's writer failed (a full disk, a limit): the host's, not the transport's
		}
		if h.dropped() {
			// OpenSSH sends a command's exit status as soon as it exits,
			// before the output still in its pipes: a connection that
			// dropped then ends the session as if whole, with the output
			// cut short. The command ran; what it wrote did not all come.
			return fmt.Errorf("%w: remote: the connection dropped as the command ended (exit: %v); its output may be incomplete", sandbox.ErrTransport, runResult(err, stderr, cmd.Dir))
		}
		return runResult(err, stderr, cmd.Dir)
	case <-ctx.Done():
	case serr := <-failed:
		return fmt.Errorf("%w: remote: %w", sandbox.ErrTransport, h.stopRun(serr, sess, stderr, done, started))
	case <-h.closed:
		sess.Close()
		<-done
		return fmt.Errorf("%w: remote: the connection was closed while the command ran", sandbox.ErrTransport)
	}
	return h.stopRun(ctx.Err(), sess, stderr, done, started)
}

// checkRun refuses what Run must not start: a bad Command.Env, an ended
// ctx, a closed Host.
func (h *Host) checkRun(ctx context.Context, cmd sandbox.Command) error {
	if err := sandbox.CheckEnv(cmd.Env); err != nil {
		return fmt.Errorf("remote: %w", err)
	}
	if err := shell.CheckEnvNames(cmd.Env); err != nil {
		return fmt.Errorf("remote: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case <-h.closed:
		return fmt.Errorf("%w: remote: the connection is closed", sandbox.ErrTransport)
	default:
	}
	return nil
}

// runScript returns the script Run execs for cmd and the session's stdin
// (nil: none).
func runScript(cmd sandbox.Command) (string, io.Reader) {
	var script strings.Builder
	stdin := cmd.Stdin
	if len(cmd.Env) > 0 {
		// The shared prelude (internal/shell): the environment on stdin,
		// ahead of cmd.Stdin.
		script.WriteString(shell.EnvReader("exit 125"))
		env := strings.NewReader(shell.EnvLines(cmd.Env) + shell.EnvEnd + "\n")
		if stdin == nil {
			stdin = env
		} else {
			stdin = io.MultiReader(env, stdin)
		}
	}
	// The first line on stderr tells the host the supervisor's pid (to stop
	// the command on a server that ignores signal requests, as OpenSSH
	// does) or that Command.Dir is missing; the Host strips it. The script
	// runs as a child of a supervisor shell whose TERM trap stops its
	// process group (OpenSSH signals only the session's first process and
	// kills nothing when the session closes).
	script.WriteString(shell.HeaderScript(cmd.Dir))
	script.WriteString(shell.Supervise(cmd.Script))
	return script.String(), stdin
}

// startSession execs script in sess and copies stdin to in (when not nil).
// The exec request and the wait both run in a goroutine, so that a server
// that never answers cannot hold the caller past its context: done receives
// the session's end; started is closed once the exec request succeeded.
func startSession(sess *ssh.Session, script string, in io.WriteCloser, stdin io.Reader) (done <-chan error, started <-chan struct{}, failed <-chan error) {
	d := make(chan error, 1)
	s := make(chan struct{})
	f := make(chan error, 1)
	go func() {
		if err := sess.Start(shell.SessionCommand(script)); err != nil {
			d <- fmt.Errorf("%w: remote: starting the command: %w", sandbox.ErrTransport, err)
			return
		}
		close(s)
		if in != nil {
			// Not waited for: a stdin that never ends must not hold Run
			// once the command has exited.
			go func() {
				buf := stdinBufs.Get().(*[]byte)
				src := &shell.ReadTracker{R: stdin}
				_, err := io.CopyBuffer(in, src, *buf)
				stdinBufs.Put(buf)
				if err != nil && src.Err != nil {
					// Never an end the command could take for the
					// input's: Run stops it.
					f <- fmt.Errorf("reading Command.Stdin failed: %w; the sandbox was not shown its end", src.Err)
					return
				}
				in.Close()
			}()
		}
		d <- sess.Wait()
	}()
	return d, s, f
}

// stdinChunk is what one read of a command's stdin takes at most: a
// stream through a pipe (a stage's tar stream) then costs one read for up
// to 256 KiB where io.Copy's 32 KiB took eight (the channel still sends
// it in packets of the size the server allows).
const stdinChunk = 256 << 10

// stdinBufs holds the stdin copies' buffers between commands.
var stdinBufs = sync.Pool{New: func() any { b := make([]byte, stdinChunk); return &b }}

// runResult maps the end of a session that ran to its end onto the
// Runner's errors: the missing Command.Dir that the header reported, an
// exit status, or a transport failure (exitErr).
func runResult(err error, stderr *shell.HeaderWriter, dir string) error {
	var ee *ssh.ExitError
	if _, noDir := stderr.State(); noDir && errors.As(err, &ee) && ee.ExitStatus() == 125 {
		return &fs.PathError{Op: "chdir", Path: dir, Err: fmt.Errorf("the working directory is missing or not a directory in the sandbox: %w", fs.ErrNotExist)}
	}
	return exitErr(err)
}

// stopRun stops a command whose ctx ended (cause is ctx.Err()): SIGTERM
// through the session, then, on a server that ignores signals (OpenSSH),
// the supervisor killed from a second session, then the session closed;
// a session the server keeps open is abandoned (it ends with the
// connection). It returns the error of a stopped command.
func (h *Host) stopRun(cause error, sess *ssh.Session, stderr *shell.HeaderWriter, done <-chan error, started <-chan struct{}) error {
	stopped := fmt.Errorf("remote command stopped: %w", cause)
	ended := func(within time.Duration) bool {
		t := time.NewTimer(within)
		defer t.Stop()
		select {
		case <-done:
			return true
		case <-t.C:
			return false
		}
	}
	select {
	case <-started:
		_ = sess.Signal(ssh.SIGTERM)
		if ended(stopGrace) {
			return stopped
		}
		// The server ignored the signal (OpenSSH does): stop the
		// supervisor from a second session.
		if pid, _ := stderr.State(); pid > 0 {
			h.kill(pid)
			if ended(stopGrace) {
				return stopped
			}
		}
	default:
	}
	sess.Close()
	if !ended(time.Second) {
		// The server keeps the session open: abandon it; it ends with the
		// connection.
		h.log.Warn("remote: a cancelled command's session did not close; abandoning it")
	}
	return stopped
}

// newSession opens a session, waiting no longer than ctx and the Host's
// life: opening one is a round trip to the server, which a stalled
// connection never answers. A session that opens after the wait was
// given up is closed at once.
func (h *Host) newSession(ctx context.Context) (*ssh.Session, error) {
	type opened struct {
		s   *ssh.Session
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		s, err := h.c.NewSession()
		ch <- opened{s, err}
	}()
	var why error
	select {
	case o := <-ch:
		if o.err != nil {
			return nil, fmt.Errorf("%w: remote: opening a session: %w", sandbox.ErrTransport, o.err)
		}
		return o.s, nil
	case <-ctx.Done():
		why = ctx.Err()
	case <-h.closed:
		why = errors.New("the connection was closed")
	}
	go func() {
		if o := <-ch; o.s != nil {
			o.s.Close()
		}
	}()
	return nil, fmt.Errorf("%w: remote: opening a session: the server did not answer: %w", sandbox.ErrTransport, why)
}

// kill stops the supervisor pid (whose TERM trap kills its process group)
// through a new session: the way to stop a command on a server that
// ignores signal requests.
func (h *Host) kill(pid int) {
	if pid <= 1 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := h.newSession(ctx)
	if err != nil {
		return
	}
	defer s.Close()
	done := make(chan error, 1)
	go func() {
		done <- s.Run(shell.StopSupervisorScript(pid))
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
	}
}

// exitErr maps a session's result onto stage's errors.
func exitErr(err error) error {
	if err == nil {
		return nil
	}
	var ee *ssh.ExitError
	if errors.As(err, &ee) {
		if sig := ee.Signal(); sig != "" {
			return &sandbox.ExitError{Status: -1, Signal: sig}
		}
		return &sandbox.ExitError{Status: ee.ExitStatus()}
	}
	if errors.Is(err, sandbox.ErrTransport) {
		return err
	}
	var em *ssh.ExitMissingError
	if errors.As(err, &em) {
		return fmt.Errorf("%w: remote: the command ended without an exit status (the connection dropped?)", sandbox.ErrTransport)
	}
	return fmt.Errorf("%w: remote: %w", sandbox.ErrTransport, err)
}

var _ sandbox.ControlTimeouter = (*Host)(nil)

// ControlTimeout implements sandbox.ControlTimeouter: the effective control
// deadline, min(Config.ControlTimeout, sandbox.MaxControlTimeout). Every
// package that runs control steps through the Host (stage.Bridge,
// workspace, deliverable) honours it.
func (h *Host) ControlTimeout() time.Duration { return h.controlTimeout }

// Control runs cmd as a control operation: under the control deadline (see
// stage.Bridge.Control).
func (h *Host) Control(ctx context.Context, cmd sandbox.Command) error {
	return h.bridge.Control(ctx, cmd)
}

// Probe implements stage.Target.
func (h *Host) Probe(ctx context.Context, root string, names []string) ([][]byte, error) {
	return h.bridge.Probe(ctx, root, names)
}

// Publish implements stage.Target.
func (h *Host) Publish(ctx context.Context, root, name string, src *stage.Tree) error {
	return h.bridge.Publish(ctx, root, name, src)
}

// Fetch implements stage.Target. See fetch.go.
func (h *Host) Fetch(ctx context.Context, root, name string, fn func(e stage.Entry, r io.Reader) error) error {
	return h.fetch(ctx, root, name, fn)
}

// SFTP returns the connection's SFTP client, started on first use
// (concurrent writes on). The Host owns it.
func (h *Host) SFTP() (*sftp.Client, error) {
	h.sftpMu.Lock()
	defer h.sftpMu.Unlock()
	select {
	case <-h.closed:
		return nil, fmt.Errorf("%w: remote: the connection is closed", sandbox.ErrTransport)
	default:
	}
	if h.sftpCli != nil {
		return h.sftpCli, nil
	}
	c, err := h.newSFTP(context.Background())
	if err != nil {
		return nil, err
	}
	h.sftpCli = c
	return c, nil
}

var _ stage.GuardedPruner = (*Host)(nil)

// Assets implements stage.Pruner.
func (h *Host) Assets(ctx context.Context, root string) ([]string, error) {
	return h.bridge.Assets(ctx, root)
}

// Remove implements stage.Pruner.
func (h *Host) Remove(ctx context.Context, root string, names []string) error {
	return h.bridge.Remove(ctx, root, names)
}

// RemoveGuarded implements stage.GuardedPruner.
func (h *Host) RemoveGuarded(ctx context.Context, root string, names, sources []string) error {
	return h.bridge.RemoveGuarded(ctx, root, names, sources)
}

var _ sandbox.FileReader = (*Host)(nil)

// ReadFile implements sandbox.FileReader over SFTP. SFTP has no O_NOFOLLOW:
// the last component is checked with Lstat and the opened file's size and
// type are checked again, so a link swapped in between can only make the
// host read another file of the sandbox (which the caller treats as
// untrusted content anyway).
//
// The SFTP calls take no context: ReadFile returns when ctx ends, leaving
// a call the server never answers (the SFTP handshake included) to end
// when the connection closes.
func (h *Host) ReadFile(ctx context.Context, p string, max int64) ([]byte, error) {
	return sftpCall(ctx, h, "reading "+p, func(c *sftp.Client) ([]byte, error) { return readFile(c, p, max) })
}

var _ sandbox.FileStater = (*Host)(nil)

// Lstat implements sandbox.FileStater over SFTP. As ReadFile, it returns
// when ctx ends, leaving a call the server never answers to end when the
// connection closes.
func (h *Host) Lstat(ctx context.Context, p string) (fs.FileInfo, error) {
	return sftpCall(ctx, h, "lstat "+p, func(c *sftp.Client) (fs.FileInfo, error) {
		fi, err := c.Lstat(p)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("%w: remote: lstat %s: %w", sandbox.ErrTransport, p, err)
		}
		return fi, err
	})
}

// sftpCall runs fn on h's SFTP client (started on first use) in a
// goroutine of its own and returns its result, or, once ctx ends, an
// error saying op was cut: SFTP calls take no context, so a call the
// server never answers ends when the connection closes.
func sftpCall[T any](ctx context.Context, h *Host, op string, fn func(*sftp.Client) (T, error)) (T, error) {
	done := make(chan struct{})
	var (
		v   T
		err error
	)
	go func() {
		defer close(done)
		var c *sftp.Client
		if c, err = h.SFTP(); err == nil {
			v, err = fn(c)
		}
	}()
	select {
	case <-done:
		return v, err
	case <-ctx.Done():
		var zero T
		return zero, fmt.Errorf("remote: %s: %w", op, ctx.Err())
	}
}

// readAllSized reads r to its end, at most limit+1 bytes, into a buffer
// sized for the size bytes an lstat gave: the first read asks for the
// whole file at once, which the SFTP client splits into requests that
// travel together (a buffer grown step by step, as io.ReadAll's, asks for
// a few kilobytes at a time, one round trip each, at first). A file that
// grew meanwhile is read on.
func readAllSized(r io.Reader, size, limit int64) ([]byte, error) {
	b := make([]byte, 0, min(max(size, 0), limit)+1)
	for {
		if len(b) == cap(b) {
			if int64(len(b)) > limit {
				return b, nil
			}
			b = slices.Grow(b, int(min(int64(len(b)), limit+1-int64(len(b)))))
		}
		end := min(int64(cap(b)), limit+1)
		n, err := r.Read(b[len(b):end])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if int64(len(b)) > limit {
			return b, nil
		}
	}
}

func readFile(c *sftp.Client, p string, max int64) ([]byte, error) {
	fi, err := c.Lstat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: remote: lstat %s: %w", sandbox.ErrTransport, p, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: p, Err: fs.ErrNotExist}
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%w: %s holds %d bytes, more than %d", stage.ErrLimit, p, fi.Size(), max)
	}
	f, err := c.Open(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: remote: open %s: %w", sandbox.ErrTransport, p, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: p, Err: fs.ErrNotExist}
	}
	b, err := readAllSized(f, st.Size(), max)
	if err != nil {
		return nil, fmt.Errorf("%w: remote: reading %s: %w", sandbox.ErrTransport, p, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%w: %s holds more than %d bytes", stage.ErrLimit, p, max)
	}
	return b, nil
}
