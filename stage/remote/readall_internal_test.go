package remote

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chunkReader serves data in reads of at most chunk bytes and records the
// size of every buffer it is given.
type chunkReader struct {
	data  []byte
	chunk int
	asked []int // the size of each buffer given
	ends  []int // the offset each buffer given ends at
	off   int
	err   error // returned once data is exhausted, instead of io.EOF
}

func (r *chunkReader) Read(p []byte) (int, error) {
	r.asked = append(r.asked, len(p))
	r.ends = append(r.ends, r.off+len(p))
	if len(r.data) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), r.chunk)], r.data)
	r.data = r.data[n:]
	r.off += n
	return n, nil
}

// TestReadAllSized: the first read asks for the whole file the lstat gave
// (plus one byte, to see growth), which an SFTP client splits into
// requests that travel together; a file larger or smaller than its lstat
// is read whole; no more than limit+1 bytes are ever asked for.
func TestReadAllSized(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 10_000) // 100,000 bytes
	for _, c := range []struct {
		name        string
		size, limit int64
		chunk       int
		want        int // bytes returned
	}{
		{"exact", 100_000, 1 << 20, 1 << 20, 100_000},
		{"in small reads", 100_000, 1 << 20, 4096, 100_000},
		{"grew since the lstat", 1_000, 1 << 20, 1 << 20, 100_000},
		{"shrank since the lstat", 500_000, 1 << 20, 1 << 20, 100_000},
		{"over the limit", 100_000, 50_000, 1 << 20, 50_001},
		{"grew over the limit", 1_000, 50_000, 7_000, 50_001},
		{"unknown size", -1, 1 << 20, 1 << 20, 100_000},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &chunkReader{data: data, chunk: c.chunk}
			got, err := readAllSized(r, c.size, c.limit)
			require.NoError(t, err)
			assert.Equal(t, data[:c.want], got)
			require.NotEmpty(t, r.asked)
			assert.Equal(t, int(min(max(c.size, 0), c.limit))+1, r.asked[0], "the first read asks for the whole file")
			for _, end := range r.ends {
				assert.LessOrEqual(t, end, int(c.limit)+1, "a read asks past limit+1 bytes")
			}
		})
	}
	// A read error is returned, with what was read before it.
	boom := errors.New("connection lost")
	r := &chunkReader{data: data[:10], chunk: 4, err: boom}
	got, err := readAllSized(r, 100, 1<<20)
	assert.ErrorIs(t, err, boom)
	assert.Equal(t, data[:10], got)
}
