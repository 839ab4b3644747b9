//go:build !linux

package tree

// allocChunk returns an empty block of capacity size for a Listing.
func allocChunk(size int) []byte { return make([]byte, 0, size) }

func (c *chunkSet) free() { c.c = nil }
