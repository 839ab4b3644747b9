package remotetest

import (
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"
)

// serveSession answers one session channel's requests until the channel is
// closed, by the client, by the end of the connection, or by the server once
// the command or SFTP server is done. A channel closed under a running command
// kills its process group.
func (s *Server) serveSession(ch ssh.Channel, reqs <-chan *ssh.Request) {
	var (
		proc    *process
		started bool // exec, subsystem or a hung exec: one per channel
	)
	defer func() {
		if proc != nil {
			proc.kill()
		}
		_ = ch.Close() // already closed when the peer or the connection closed it
	}()
	for req := range reqs {
		switch req.Type {
		case "exec":
			s.execs.Add(1)
			var msg struct{ Command string }
			if started || ssh.Unmarshal(req.Payload, &msg) != nil {
				reply(req, false)
				continue
			}
			started = true
			if s.hangs(msg.Command) {
				continue // never answered; released when reqs closes
			}
			p, err := startProcess(s.dir, msg.Command)
			if err != nil {
				reply(req, false)
				continue
			}
			proc = p
			reply(req, true)
			s.wg.Go(func() { s.runProcess(ch, p) })
		case "signal":
			var msg struct{ Signal string }
			sig, ok := syscall.Signal(0), false
			if ssh.Unmarshal(req.Payload, &msg) == nil {
				sig, ok = signalByName(msg.Signal)
			}
			if ok && proc != nil {
				proc.signal(sig)
			}
			reply(req, ok && proc != nil)
		case "subsystem":
			var msg struct{ Name string }
			if started || ssh.Unmarshal(req.Payload, &msg) != nil || msg.Name != "sftp" {
				reply(req, false)
				continue
			}
			if s.opts.hangSFTP {
				started = true
				reply(req, true)
				s.wg.Go(func() { _, _ = io.Copy(io.Discard, ch) }) // ends when the channel does
				continue
			}
			srv, err := sftp.NewServer(ch, sftp.WithServerWorkingDirectory(s.dir))
			if err != nil {
				reply(req, false)
				continue
			}
			started = true
			reply(req, true)
			s.wg.Go(func() {
				_ = srv.Serve() // ends when the channel does; errors are the client's to see
				_ = ch.Close()
			})
		default:
			// "env" (never applied, as real servers drop it), "pty-req",
			// "shell" and anything unknown.
			reply(req, false)
		}
	}
}

func reply(req *ssh.Request, ok bool) {
	if req.WantReply {
		_ = req.Reply(ok, nil) // fails only when the channel is gone
	}
}

func (s *Server) hangs(command string) bool {
	for _, m := range s.opts.hang {
		if strings.Contains(command, m) {
			return true
		}
	}
	return false
}

// A process is one running command: /bin/sh -c COMMAND leading its own
// process group. The group id stays reserved while the leader is unreaped,
// so signalling -pid is safe exactly until reaped is set.
type process struct {
	cmd    *exec.Cmd
	stdin  *os.File // write end of the command's stdin
	stdout *os.File // read end of the command's stdout
	stderr *os.File // read end of the command's stderr

	mu     sync.Mutex
	reaped bool
}

func startProcess(dir, command string) (*process, error) {
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			_ = f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	inR, inW, err := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	outR, outW, err := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	errR, errW, err := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	cmd := exec.Command("/bin/sh", "-c", command)
	cmd.Dir = dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		closeAll()
		return nil, err
	}
	// The child holds its own copies now.
	_ = inR.Close()
	_ = outW.Close()
	_ = errW.Close()
	return &process{cmd: cmd, stdin: inW, stdout: outR, stderr: errR}, nil
}

// signal sends sig to the process group unless the leader has been reaped.
func (p *process) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.reaped {
		_ = unix.Kill(-p.cmd.Process.Pid, sig) // ESRCH: the group is already gone
	}
}

// kill SIGKILLs the process group and closes the server's pipe ends, which
// unblocks the copies even when a process outside the group keeps the pipes
// open.
func (p *process) kill() {
	p.signal(syscall.SIGKILL)
	_ = p.stdin.Close()
	_ = p.stdout.Close()
	_ = p.stderr.Close()
}

// runProcess forwards the command's output to the channel, waits for it to
// exit, reports how it exited and closes the channel.
func (s *Server) runProcess(ch ssh.Channel, p *process) {
	s.wg.Go(func() {
		_, _ = io.Copy(p.stdin, ch) // until the client's EOF or the command stops reading
		_ = p.stdin.Close()
	})
	var out sync.WaitGroup
	out.Go(func() {
		_, _ = io.Copy(ch, p.stdout)
		_ = p.stdout.Close()
	})
	out.Go(func() {
		_, _ = io.Copy(ch.Stderr(), p.stderr)
		_ = p.stderr.Close()
	})
	out.Wait()

	// Wait for the leader to exit without reaping it, so that a concurrent
	// signal still addresses this group, then reap it under the lock.
	waitExited(p.cmd.Process.Pid)
	p.mu.Lock()
	_ = p.cmd.Wait() // the status is in ProcessState
	p.reaped = true
	p.mu.Unlock()

	_ = ch.CloseWrite()
	ws, _ := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		msg := struct {
			Signal     string
			CoreDumped bool
			Error      string
			Lang       string
		}{Signal: signalName(ws.Signal()), CoreDumped: ws.CoreDump()}
		_, _ = ch.SendRequest("exit-signal", false, ssh.Marshal(&msg))
	} else {
		msg := struct{ Status uint32 }{uint32(ws.ExitStatus())}
		_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(&msg))
	}
	_ = ch.Close()
}
