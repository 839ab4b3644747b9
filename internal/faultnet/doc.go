// Package faultnet is a fault-injecting TCP proxy for tests: it listens on
// a loopback port, forwards every connection to a target address, and can
// cut or stall a connection once a chosen number of bytes has crossed it.
//
// A fault sweep runs an operation once through a clean [Proxy] to learn how
// many bytes it moves ([Proxy.Bytes]), then again and again with the proxy
// armed ([Proxy.Arm]) to fail after every interesting byte count:
//
//	p, err := faultnet.Listen(target)
//	// ... dial p.Addr(), run the operation, read p.Bytes() ...
//	p.Arm(faultnet.Fault{After: n, Dir: faultnet.Both, Mode: faultnet.Cut})
//	// ... dial p.Addr() again: this connection is cut after n bytes ...
//
// Guarantees: a connection forwards exactly [Fault].After bytes in the
// counted direction(s) before its fault takes effect, never more (bytes
// that travel the other way are not limited but stop with the fault); a
// cut closes both sides at once; a stall forwards nothing more in either
// direction and keeps both sides open (reading at most one more buffer
// from each) until [Proxy.Close]; Close returns only when every goroutine of the proxy has
// ended. Bytes counts what was forwarded, not what was read.
//
// Non-guarantees: the byte counts are the proxy's view of the TCP streams;
// the peers' kernel buffers may hold bytes the proxy forwarded but the
// application never read. Timing (latency, bandwidth) is not simulated.
package faultnet
