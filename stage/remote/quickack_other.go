//go:build !linux

package remote

import (
	"net"
	"syscall"
)

// rawTCP returns nil: only Linux has TCP_QUICKACK (see quickack_linux.go).
func rawTCP(net.Conn) syscall.RawConn { return nil }

// quickAck does nothing here.
func quickAck(syscall.RawConn) {}
