package digest

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestEncode(t *testing.T) {
	assert.NotEqual(t, Encode("t", "a", "bc"), Encode("t", "ab", "c"))
	assert.NotEqual(t, Encode("t", "a,", "b"), Encode("t", "a", ",b"))
	assert.NotEqual(t, Encode("t1", "x"), Encode("t", "1x"))
	assert.Equal(t, []byte("1:t,1:a,0:,"), Encode("t", "a", ""))
	// Raw bytes, not text: names that differ only in invalid UTF-8 differ.
	assert.NotEqual(t, Encode("t", "f\xff"), Encode("t", "f\xfe"))
	assert.Equal(t, []byte("1:t,2:f\xff,"), Encode("t", "f\xff"))
}

func TestAppendField(t *testing.T) {
	b := AppendField(nil, "tag")
	b = AppendField(b, []byte("a\xffb"))
	b = AppendUint64(b, 0x0102030405060708)
	b = AppendUint64(b, math.MaxUint64)
	assert.Equal(t, Encode("tag", "a\xffb", "\x01\x02\x03\x04\x05\x06\x07\x08", strings.Repeat("\xff", 8)), b)
}

func TestOf(t *testing.T) {
	assert.Equal(t, "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", Of(nil))
	assert.Equal(t, Hex([]byte("x")), Of([]byte("x"))[len(Prefix):])
	assert.Equal(t, Hex(Encode("t", "a")), Fields("t", "a"))
}

// FuzzEncodeInjective: two field lists encode alike only when they are
// the same list.
func FuzzEncodeInjective(f *testing.F) {
	f.Add("a", "bc", "ab", "c")
	f.Add("f\xff", "", "f\xfe", "")
	f.Add("1:", "x", "", "1:x")
	f.Fuzz(func(t *testing.T, a1, a2, b1, b2 string) {
		same := a1 == b1 && a2 == b2
		if got := bytes.Equal(Encode("t", a1, a2), Encode("t", b1, b2)); got != same {
			t.Fatalf("Encode(%q, %q) vs Encode(%q, %q): equal=%v, lists equal=%v", a1, a2, b1, b2, got, same)
		}
	})
}
