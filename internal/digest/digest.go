package digest

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strconv"
)

// Prefix starts every digest string.
const Prefix = "sha256:"

// Of returns "sha256:" + the lowercase hex SHA-256 of b.
func Of(b []byte) string { return Prefix + Hex(b) }

// Hex returns the lowercase hex SHA-256 of b.
func Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Encode writes tag and fields unambiguously: every string as its decimal
// byte length, ':', the bytes and ','. ("a","bc") and ("ab","c") differ.
// The strings are taken as raw bytes (they need not be UTF-8), so the
// encoding is injective: distinct (tag, fields) never share an encoding.
func Encode(tag string, fields ...string) []byte {
	n := len(tag) + 8
	for _, s := range fields {
		n += len(s) + 8
	}
	b := AppendField(make([]byte, 0, n), tag)
	for _, s := range fields {
		b = AppendField(b, s)
	}
	return b
}

// AppendField appends one field of Encode's format to dst: the decimal
// byte length of s, ':', the bytes of s and ','. A sequence of fields is
// self-delimiting, so a stream of them (fed to a hash, say) is as
// unambiguous as Encode.
func AppendField[S string | []byte](dst []byte, s S) []byte {
	dst = strconv.AppendInt(dst, int64(len(s)), 10)
	dst = append(dst, ':')
	dst = append(dst, s...)
	return append(dst, ',')
}

// AppendUint64 appends v as one field (see AppendField) holding its eight
// big-endian bytes: "8:", the bytes, ','. Fixed width and no formatting,
// for hot loops that hash many numbers.
func AppendUint64(dst []byte, v uint64) []byte {
	dst = append(dst, '8', ':')
	dst = binary.BigEndian.AppendUint64(dst, v)
	return append(dst, ',')
}

// Fields returns the lowercase hex SHA-256 of Encode(tag, fields...).
func Fields(tag string, fields ...string) string { return Hex(Encode(tag, fields...)) }
