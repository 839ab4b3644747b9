package remote

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// rawTCP returns conn's raw connection when it is TCP, else nil.
func rawTCP(conn net.Conn) syscall.RawConn {
	tc, ok := conn.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// quickAck has the kernel acknowledge what was read from rc now instead
// of up to 40 ms later (TCP_QUICKACK; Linux delays an ACK it cannot carry
// on data of its own). An OpenSSH server holds a small reply (its Nagle
// algorithm) until its last small packet is acknowledged, and the one
// before a first channel's confirmation, its host key notice
// (hostkeys-00@openssh.com), asks for no answer: without this, the first
// session of every connection waited for the delayed ACK (42 ms here, the
// cost of an SFTP start). A failure changes nothing but the ACK's timing.
func quickAck(rc syscall.RawConn) {
	_ = rc.Control(func(fd uintptr) {
		_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_QUICKACK, 1)
	})
}
