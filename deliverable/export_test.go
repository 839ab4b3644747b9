package deliverable

import (
	"hash"
	"sync/atomic"
)

// countingHash adds the bytes written to it to n.
type countingHash struct {
	hash.Hash
	n *atomic.Int64
}

func (c countingHash) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	return c.Hash.Write(p)
}

// CountHashed makes every Content created until restore is called add the
// bytes it hashes to n. Tests using it must not run in parallel.
func CountHashed(n *atomic.Int64) (restore func()) {
	old := newHash
	newHash = func() hash.Hash { return countingHash{Hash: old(), n: n} }
	return func() { newHash = old }
}

// SetMaxFileReaderBytes lowers the size above which a remote file is streamed
// by its command instead of read through a sandbox.FileReader, until restore is
// called. Tests using it must not run in parallel.
func SetMaxFileReaderBytes(n int64) (restore func()) {
	old := maxFileReaderBytes
	maxFileReaderBytes = n
	return func() { maxFileReaderBytes = old }
}
