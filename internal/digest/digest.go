package digest

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
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
func Encode(tag string, fields ...string) []byte {
	var sb strings.Builder
	put := func(s string) {
		sb.WriteString(strconv.Itoa(len(s)))
		sb.WriteByte(':')
		sb.WriteString(s)
		sb.WriteByte(',')
	}
	put(tag)
	for _, s := range fields {
		put(s)
	}
	return []byte(sb.String())
}

// Fields returns the lowercase hex SHA-256 of Encode(tag, fields...).
func Fields(tag string, fields ...string) string { return Hex(Encode(tag, fields...)) }
