package shell

import (
	"archive/tar"
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// tarWriter writes a tar stream byte for byte as archive/tar's Writer does
// for the headers the stage writes, but formats the common header itself: a
// regular file or directory with a short printable ASCII name, whole-second
// mtime and small mode and size. archive/tar's checks and formatting were a
// fifth of the host's CPU in a stream of 38,000 small files. Any other
// header is formatted by archive/tar (TestTarWriterMatchesArchiveTar holds
// the two to the same bytes).
type tarWriter struct {
	w    *bufio.Writer
	left int64 // content bytes the current member still takes
	pad  int   // zero bytes that end the current member's content
	blk  [tarBlock]byte
}

const tarBlock = 512

var errTarContent = errors.New("tar: the member's content is not the size its header says")

// WriteHeader ends the current member (its content must be complete) and
// writes h.
func (t *tarWriter) WriteHeader(h *tar.Header) error {
	if err := t.endMember(); err != nil {
		return err
	}
	if ustarHeader(&t.blk, h) {
		if _, err := t.w.Write(t.blk[:]); err != nil {
			return err
		}
	} else {
		var b bytes.Buffer
		if err := tar.NewWriter(&b).WriteHeader(h); err != nil {
			return err
		}
		if _, err := t.w.Write(b.Bytes()); err != nil {
			return err
		}
	}
	if h.Typeflag == tar.TypeReg {
		t.left, t.pad = h.Size, int(-h.Size&(tarBlock-1))
	}
	return nil
}

// Write writes content of the current member, no more than its header's size.
func (t *tarWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > t.left {
		return 0, fmt.Errorf("%w: %d bytes more", errTarContent, int64(len(p))-t.left)
	}
	n, err := t.w.Write(p)
	t.left -= int64(n)
	return n, err
}

// Close ends the current member and writes the archive's end (two zero
// blocks); it does not flush w.
func (t *tarWriter) Close() error {
	if err := t.endMember(); err != nil {
		return err
	}
	_, err := t.w.Write(make([]byte, 2*tarBlock))
	return err
}

// endMember pads the current member's content to a whole block.
func (t *tarWriter) endMember() error {
	if t.left != 0 {
		return fmt.Errorf("%w: %d bytes missing", errTarContent, t.left)
	}
	var zero [tarBlock]byte
	_, err := t.w.Write(zero[:t.pad])
	t.pad = 0
	return err
}

// ustarHeader formats h into blk as archive/tar writes it in the USTAR
// format, and reports whether it did: only for a regular file or a
// directory with a printable ASCII name of at most 100 bytes, no link,
// owner or device fields, a mode, size and whole-second mtime that fit the
// octal fields. archive/tar chooses USTAR for exactly such a header.
func ustarHeader(blk *[tarBlock]byte, h *tar.Header) bool {
	if h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeDir || len(h.Name) > 100 || h.Linkname != "" ||
		h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" || h.Devmajor != 0 || h.Devminor != 0 ||
		h.Format != tar.FormatUnknown || len(h.PAXRecords) != 0 || !h.AccessTime.IsZero() || !h.ChangeTime.IsZero() ||
		h.Mode < 0 || h.Mode > 0o7777777 || h.Size < 0 || h.Size > 0o77777777777 || h.Typeflag == tar.TypeDir && h.Size != 0 {
		return false
	}
	mtime := h.ModTime.Unix()
	if h.ModTime.Nanosecond() != 0 || mtime < 0 || mtime > 0o77777777777 {
		return false
	}
	for i := range len(h.Name) {
		if c := h.Name[i]; c < 0x20 || c > 0x7e {
			return false
		}
	}
	*blk = [tarBlock]byte{}
	copy(blk[0:100], h.Name)
	octal(blk[100:108], h.Mode)
	octal(blk[108:116], 0) // uid
	octal(blk[116:124], 0) // gid
	octal(blk[124:136], h.Size)
	octal(blk[136:148], mtime)
	blk[156] = h.Typeflag
	copy(blk[257:265], "ustar\x0000")
	octal(blk[329:337], 0) // devmajor
	octal(blk[337:345], 0) // devminor
	sum := int64(8 * ' ')  // the checksum field counts as blanks
	for i, c := range blk {
		if i < 148 || i >= 156 {
			sum += int64(c)
		}
	}
	octal(blk[148:155], sum)
	blk[155] = ' '
	return true
}

// octal writes v in field as zero-padded octal digits and a NUL.
func octal(field []byte, v int64) {
	s := strconv.FormatInt(v, 8)
	n := len(field) - 1
	for i := range n {
		field[i] = '0'
	}
	copy(field[n-len(s):n], s)
	field[n] = 0
}
