package shell

import (
	"archive/tar"
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tarMember is one member of an archive both writers write.
type tarMember struct {
	h    tar.Header
	body []byte
}

// bothWrite writes ms through archive/tar's Writer and through tarWriter
// and returns both archives and errors.
func bothWrite(ms []tarMember) (want, got []byte, wantErr, gotErr error) {
	var a, b bytes.Buffer
	ta, tb := tar.NewWriter(&a), newTarWriter(&b)
	write := func(w interface {
		WriteHeader(*tar.Header) error
		io.Writer
		Close() error
	}) error {
		for _, m := range ms {
			h := m.h
			if err := w.WriteHeader(&h); err != nil {
				return err
			}
			if _, err := w.Write(m.body); err != nil {
				return err
			}
		}
		return w.Close()
	}
	wantErr, gotErr = write(ta), write(tb)
	return a.Bytes(), b.Bytes(), wantErr, gotErr
}

// TestTarWriterMatches: tarWriter writes what archive/tar writes, byte for
// byte, for the headers this package writes and for the ones it hands on
// (long, split and non-ASCII names, sizes past 8 GiB, times before 1970 or
// with nanoseconds), and fails where archive/tar fails: content longer or
// shorter than the header's size.
func TestTarWriterMatches(t *testing.T) {
	mt := time.Unix(1_800_000_000, 0)
	reg := func(name string, mode int64, body string) tarMember {
		return tarMember{tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(body)), ModTime: mt}, []byte(body)}
	}
	dir := func(name string, mode int64) tarMember {
		return tarMember{h: tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode, ModTime: mt}}
	}
	long := strings.Repeat("d/", 60) + "f"
	for _, tc := range []struct {
		name string
		ms   []tarMember
	}{
		{"empty archive", nil},
		{"the stream's layout", []tarMember{dir("new/", 0o755), dir("new/tree/", 0o755), dir("new/tree/a/", 0o700), reg("new/tree/a/f", 0o644, "content"),
			reg("new/tree/x", 0o600, strings.Repeat("y", 513)), reg("new/manifest.json", 0o644, "{}"), dir("old/", 0o700), reg("complete", 0o600, "")}},
		{"a block exactly", []tarMember{reg("f", 0o644, strings.Repeat("z", 512)), reg("g", 0o755, strings.Repeat("z", 1024))}},
		{"name of 100 bytes", []tarMember{reg(strings.Repeat("n", 100), 0o644, "a")}},
		{"name of 101 bytes, split", []tarMember{reg(strings.Repeat("n", 50)+"/"+strings.Repeat("m", 50), 0o644, "a")}},
		{"long name, PAX", []tarMember{reg(long, 0o644, "a"), reg("after", 0o644, "b")}},
		{"non-ASCII name", []tarMember{reg("été/ü", 0o644, "a"), dir("ñ/", 0o755)}},
		{"name with a newline and spaces", []tarMember{reg("a b\nc", 0o644, "a")}},
		{"setuid bits", []tarMember{reg("s", 0o4755, "a")}},
		{"time before 1970", []tarMember{{tar.Header{Typeflag: tar.TypeReg, Name: "old", Mode: 0o644, Size: 1, ModTime: time.Unix(-5, 0)}, []byte("a")}}},
		{"time with nanoseconds", []tarMember{{tar.Header{Typeflag: tar.TypeReg, Name: "ns", Mode: 0o644, Size: 1, ModTime: time.Unix(1e9, 6e8)}, []byte("a")}}},
		{"zero time", []tarMember{{tar.Header{Typeflag: tar.TypeReg, Name: "zero", Mode: 0o644, Size: 1}, []byte("a")}}},
		{"content too long", []tarMember{{tar.Header{Typeflag: tar.TypeReg, Name: "f", Mode: 0o644, Size: 1, ModTime: mt}, []byte("ab")}}},
		{"content too short", []tarMember{{tar.Header{Typeflag: tar.TypeReg, Name: "f", Mode: 0o644, Size: 3, ModTime: mt}, []byte("ab")}, reg("g", 0o644, "")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, got, wantErr, gotErr := bothWrite(tc.ms)
			if wantErr != nil {
				require.Error(t, gotErr, "archive/tar failed: %v", wantErr)
				assert.Equal(t, wantErr.Error(), gotErr.Error())
				return
			}
			require.NoError(t, gotErr)
			assert.Equal(t, want, got)
		})
	}
	// A size past 8 GiB is archive/tar's to format (its content is not
	// written here: only the header is compared).
	var a, b bytes.Buffer
	h := tar.Header{Typeflag: tar.TypeReg, Name: "huge", Mode: 0o644, Size: 1 << 34, ModTime: mt}
	h2 := h
	require.NoError(t, tar.NewWriter(&a).WriteHeader(&h))
	require.NoError(t, newTarWriter(&b).WriteHeader(&h2))
	assert.Equal(t, a.Bytes(), b.Bytes())
}

// FuzzTarWriterMatches: for any two members (a name, a mode, a time, a
// size of content, file or directory), tarWriter's archive is archive/
// tar's, byte for byte, or both fail with the same error.
func FuzzTarWriterMatches(f *testing.F) {
	f.Add("a/b.md", uint32(0o644), int64(1_800_000_000), uint16(3), false, "d/", uint32(0o755), true)
	f.Add(strings.Repeat("x", 100), uint32(0o7777777), int64(0), uint16(512), false, "é", uint32(0), false)
	f.Add(strings.Repeat("y/", 70), uint32(0o10000000), int64(-1), uint16(0), true, "a\x00b", uint32(0o600), false)
	f.Fuzz(func(t *testing.T, n1 string, m1 uint32, sec int64, size uint16, dir1 bool, n2 string, m2 uint32, dir2 bool) {
		member := func(name string, mode uint32, dir bool, size int) tarMember {
			if dir {
				return tarMember{h: tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: int64(mode), ModTime: time.Unix(sec, 0)}}
			}
			return tarMember{tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: int64(mode), Size: int64(size), ModTime: time.Unix(sec, 0)}, bytes.Repeat([]byte{'c'}, size)}
		}
		ms := []tarMember{member(n1, m1, dir1, int(size)), member(n2, m2, dir2, int(size)%700)}
		// Other types go through archive/tar; the content that follows
		// them is what archive/tar gives them (none for a link or FIFO).
		if m2%5 == 0 {
			types := []byte{tar.TypeSymlink, tar.TypeFifo, tar.TypeLink, 0, tar.TypeChar}
			ms[1].h.Typeflag = types[int(m1)%len(types)]
			if ms[1].h.Typeflag == tar.TypeSymlink || ms[1].h.Typeflag == tar.TypeLink {
				ms[1].h.Linkname = n1
			}
			if ms[1].h.Typeflag != 0 {
				ms[1].body = nil
			}
		}
		want, got, wantErr, gotErr := bothWrite(ms)
		if wantErr != nil {
			if gotErr == nil || wantErr.Error() != gotErr.Error() {
				t.Fatalf("archive/tar: %v; tarWriter: %v", wantErr, gotErr)
			}
			return
		}
		if gotErr != nil {
			t.Fatalf("tarWriter failed where archive/tar did not: %v", gotErr)
		}
		if !bytes.Equal(want, got) {
			t.Fatalf("archives differ for %q (mode %o, time %d) and %q", n1, m1, sec, n2)
		}
	})
}
