package shell

import (
	"archive/tar"
	"bufio"
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// tarBoth writes the same members with tarWriter and with archive/tar's
// Writer and returns the two archives.
func tarBoth(t testing.TB, hs []*tar.Header) (mine, theirs []byte, err error) {
	var a, b bytes.Buffer
	bw := bufio.NewWriter(&a)
	tw, ref := &tarWriter{w: bw}, tar.NewWriter(&b)
	for _, h := range hs {
		content := bytes.Repeat([]byte{'x'}, int(max(0, min(h.Size, 4096))))
		if h.Typeflag != tar.TypeReg {
			content = nil
		}
		refErr := ref.WriteHeader(h)
		if err := tw.WriteHeader(h); (err == nil) != (refErr == nil) {
			t.Fatalf("%+v: tarWriter %v, archive/tar %v", h, err, refErr)
		} else if err != nil {
			return nil, nil, err
		}
		if int64(len(content)) != max(h.Size, 0) && h.Typeflag == tar.TypeReg {
			return nil, nil, nil // too large to write out here: the header alone was compared below
		}
		if _, err := tw.Write(content); err != nil {
			t.Fatal(err)
		}
		if _, err := ref.Write(content); err != nil {
			t.Fatal(err)
		}
	}
	require.NoError(t, tw.Close())
	require.NoError(t, bw.Flush())
	require.NoError(t, ref.Close())
	return a.Bytes(), b.Bytes(), nil
}

// tarWriter's own USTAR headers, and the archive/tar ones it falls back to,
// are byte for byte what archive/tar writes: names short and long, ASCII or
// not, with control bytes; sizes around the block; modes; mtimes whole,
// fractional, negative and past the octal field; directories.
func TestTarWriterMatchesArchiveTar(t *testing.T) {
	mtime := time.Unix(1764700000, 0)
	var hs []*tar.Header
	for _, name := range []string{"a", "new/tree/pages/dir001/page-012.md", strings.Repeat("n", 100), strings.Repeat("n", 101),
		strings.Repeat("d/", 60) + "f", "é.txt", "tab\there", "nul\x00", "del\x7f", "sp ace/\"q'\\"} {
		for _, size := range []int64{0, 1, 511, 512, 513, 4096} {
			hs = append(hs, &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: size, ModTime: mtime})
		}
		hs = append(hs, &tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: 0o755 | 0o700, ModTime: mtime})
	}
	for _, m := range []time.Time{time.Unix(0, 0), time.Unix(1, 500_000_000), time.Unix(-5, 0), time.Unix(0o77777777777, 0), time.Unix(0o100000000000, 0)} {
		hs = append(hs, &tar.Header{Typeflag: tar.TypeReg, Name: "m", Mode: 0o600, Size: 3, ModTime: m})
	}
	for _, mode := range []int64{0, 0o7777, 0o7777777, 0o10000000} {
		hs = append(hs, &tar.Header{Typeflag: tar.TypeReg, Name: "mode", Mode: mode, Size: 1, ModTime: mtime})
	}
	hs = append(hs, &tar.Header{Typeflag: tar.TypeReg, Name: "big", Mode: 0o644, Size: 0o100000000000, ModTime: mtime})
	for _, h := range hs {
		mine, theirs, err := tarBoth(t, []*tar.Header{h})
		if err == nil && mine != nil {
			require.Equal(t, theirs, mine, "%q size %d mode %o mtime %v", h.Name, h.Size, h.Mode, h.ModTime)
		}
		var blk [tarBlock]byte
		if ustarHeader(&blk, h) {
			var b bytes.Buffer
			require.NoError(t, tar.NewWriter(&b).WriteHeader(h))
			require.Equal(t, b.Bytes(), blk[:], "header of %q", h.Name)
		}
	}
	mine, theirs, err := tarBoth(t, hs[:20])
	require.NoError(t, err)
	require.Equal(t, theirs, mine, "a stream of 20 members")
}

// A member's content must be its header's size, as with archive/tar.
func TestTarWriterContentSize(t *testing.T) {
	var a bytes.Buffer
	tw := &tarWriter{w: bufio.NewWriter(&a)}
	require.NoError(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "a", Size: 2, ModTime: time.Unix(1, 0)}))
	_, err := tw.Write([]byte("abc"))
	require.ErrorIs(t, err, errTarContent)
	_, err = tw.Write([]byte("a"))
	require.NoError(t, err)
	require.ErrorIs(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "b", ModTime: time.Unix(1, 0)}), errTarContent)
	require.ErrorIs(t, tw.Close(), errTarContent)
}

func FuzzTarWriter(f *testing.F) {
	f.Add("new/tree/a.md", int64(0o644), int64(3), int64(1764700000), int64(0), false)
	f.Add("d", int64(0o755), int64(0), int64(0), int64(1), true)
	f.Fuzz(func(t *testing.T, name string, mode, size, sec, nsec int64, dir bool) {
		h := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: size % 5000, ModTime: time.Unix(sec, nsec)}
		if dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		mine, theirs, err := tarBoth(t, []*tar.Header{h})
		if err == nil && mine != nil && !bytes.Equal(mine, theirs) {
			t.Fatalf("%+v: tarWriter and archive/tar differ", h)
		}
	})
}
