package shell

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// tarWriter writes a tar archive as archive/tar's Writer does, byte for
// byte, for the headers the host's streams use (TestTarWriterMatches), at
// a fraction of its cost per member: a regular file or directory whose
// name fits the header's name field in ASCII, with no owner, link or
// device (nor the deprecated Xattrs, which this package never sets), is
// formatted here (the USTAR layout archive/tar picks for it);
// any other header goes through archive/tar (a long or non-ASCII name, a
// size past 8 GiB: PAX or a USTAR prefix), into a buffer that is then
// written as it is. Writes after the header are the member's content,
// exactly Size bytes; the next header, or Close, pads it to a block.
type tarWriter struct {
	w      io.Writer
	remain int64 // content of the current member still to write
	pad    int64 // zero bytes after it
	blk    [tarBlock]byte
	slow   bytes.Buffer
	err    error
}

const tarBlock = 512

// errTarWriteTooLong is archive/tar's ErrWriteTooLong in this writer's
// words.
var errTarWriteTooLong = errors.New("archive/tar: write too long")

func newTarWriter(w io.Writer) *tarWriter { return &tarWriter{w: w} }

// WriteHeader ends the current member (its content must be whole) and
// writes h.
func (t *tarWriter) WriteHeader(h *tar.Header) error {
	if err := t.flush(); err != nil {
		return err
	}
	size := h.Size
	switch h.Typeflag { // the types archive/tar gives no content
	case tar.TypeLink, tar.TypeSymlink, tar.TypeChar, tar.TypeBlock, tar.TypeDir, tar.TypeFifo:
		size = 0
	case 0: // the old regular-file flag, a directory when the name ends in "/"
		if strings.HasSuffix(h.Name, "/") {
			size = 0
		}
	}
	if t.format(h) {
		_, t.err = t.w.Write(t.blk[:])
	} else {
		t.slow.Reset()
		if err := tar.NewWriter(&t.slow).WriteHeader(h); err != nil {
			return err // a header archive/tar refuses: nothing written
		}
		_, t.err = t.w.Write(t.slow.Bytes())
	}
	t.remain, t.pad = size, -size&(tarBlock-1)
	return t.err
}

// Write writes content of the current member.
func (t *tarWriter) Write(p []byte) (int, error) {
	if t.err != nil {
		return 0, t.err
	}
	over := int64(len(p)) > t.remain
	if over {
		p = p[:t.remain]
	}
	n, err := t.w.Write(p)
	t.remain -= int64(n)
	switch {
	case err != nil:
		t.err = err
	case over:
		err = errTarWriteTooLong // what fits is written, as archive/tar does
	}
	return n, err
}

// Close ends the current member and writes the archive's end: two zero
// blocks.
func (t *tarWriter) Close() error {
	if err := t.flush(); err != nil {
		return err
	}
	clear(t.blk[:])
	for range 2 {
		if _, t.err = t.w.Write(t.blk[:]); t.err != nil {
			return t.err
		}
	}
	return nil
}

// flush pads the current member's content, which must be whole.
func (t *tarWriter) flush() error {
	if t.err != nil {
		return t.err
	}
	if t.remain > 0 {
		t.err = fmt.Errorf("archive/tar: missed writing %d bytes", t.remain)
		return t.err
	}
	if t.pad > 0 {
		clear(t.blk[:t.pad])
		_, t.err = t.w.Write(t.blk[:t.pad])
		t.pad = 0
	}
	return t.err
}

// format writes h into t.blk as archive/tar would write it and reports
// whether it could: false for any header it does not take.
func (t *tarWriter) format(h *tar.Header) bool {
	mtime := h.ModTime
	if mtime.IsZero() {
		mtime = time.Unix(0, 0)
	}
	sec := mtime.Round(time.Second).Unix()
	const octal11 = 1<<33 - 1 // the largest value of 11 octal digits
	switch {
	case h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeDir,
		h.Linkname != "", h.Uid != 0, h.Gid != 0, h.Uname != "", h.Gname != "",
		h.Devmajor != 0, h.Devminor != 0, h.Format != tar.FormatUnknown,
		len(h.PAXRecords) > 0, !h.AccessTime.IsZero(), !h.ChangeTime.IsZero(),
		h.Typeflag == tar.TypeDir && h.Size != 0,
		h.Mode < 0, h.Mode > 0o7777777, h.Size < 0, h.Size > octal11, sec < 0, sec > octal11,
		len(h.Name) == 0, len(h.Name) > 100,
		h.Typeflag == tar.TypeReg && h.Name[len(h.Name)-1] == '/': // archive/tar refuses it
		return false
	}
	for i := 0; i < len(h.Name); i++ {
		if c := h.Name[i]; c == 0 || c >= 0x80 {
			return false
		}
	}
	b := &t.blk
	clear(b[:])
	copy(b[0:100], h.Name)
	octal(b[100:108], h.Mode)
	octal(b[108:116], 0)
	octal(b[116:124], 0)
	octal(b[124:136], h.Size)
	octal(b[136:148], sec)
	b[156] = h.Typeflag
	copy(b[257:263], "ustar\x00")
	copy(b[263:265], "00")
	octal(b[329:337], 0)
	octal(b[337:345], 0)
	sum := int64(0)
	for i, c := range b {
		if i >= 148 && i < 156 {
			c = ' '
		}
		sum += int64(c)
	}
	octal(b[148:155], sum)
	b[155] = ' '
	return true
}

// octal writes x in f as zero-padded octal digits and a NUL, as
// archive/tar formats a numeric field that fits.
func octal(f []byte, x int64) {
	var d [24]byte
	s := strconv.AppendInt(d[:0], x, 8)
	n := len(f) - 1 - len(s)
	for i := range n {
		f[i] = '0'
	}
	copy(f[n:], s)
	f[len(f)-1] = 0
}
