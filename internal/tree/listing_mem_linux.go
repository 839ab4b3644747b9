package tree

import "golang.org/x/sys/unix"

// allocChunk returns an empty block of capacity size for a Listing: a
// full-size block mapped outside the Go heap, a smaller one (a small
// walk's) from the heap.
func allocChunk(size int) []byte {
	if size == chunkBytes {
		if b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS); err == nil {
			return b[:0]
		}
	}
	return make([]byte, 0, size)
}

// free unmaps the mapped blocks (unix.Munmap refuses, harmlessly, a block
// that came from the heap).
func (c *chunkSet) free() {
	for _, b := range c.c {
		if cap(b) == chunkBytes {
			_ = unix.Munmap(b[:cap(b)])
		}
	}
	c.c = nil
}
