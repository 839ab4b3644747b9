package tree

import (
	"hash"
	"sync/atomic"
)

// hashed, when set, counts the content bytes the package hashes (see
// CountHashed).
var hashed atomic.Pointer[atomic.Int64]

// CountHashed makes the package add to c the number of file content bytes
// it passes through SHA-256 (not the metadata a fingerprint hashes, nor a
// manifest's own digest), until the returned function is called. For
// tests that pin how often each byte is hashed; one counter at a time.
func CountHashed(c *atomic.Int64) (restore func()) {
	hashed.Store(c)
	return func() { hashed.Store(nil) }
}

// hashWrite writes b, file content, to h.
func hashWrite(h hash.Hash, b []byte) {
	h.Write(b)
	if c := hashed.Load(); c != nil {
		c.Add(int64(len(b)))
	}
}

// opened, when set, counts the regular files the package opens to read
// (see CountOpened).
var opened atomic.Pointer[atomic.Int64]

// CountOpened makes the package add to c one for each source file a Walk
// or Copy opens to read, until the returned function is called. For tests
// that pin which files are read; one counter at a time.
func CountOpened(c *atomic.Int64) (restore func()) {
	opened.Store(c)
	return func() { opened.Store(nil) }
}
