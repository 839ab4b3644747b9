package digest

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestEncode(t *testing.T) {
	assert.NotEqual(t, Encode("t", "a", "bc"), Encode("t", "ab", "c"))
	assert.NotEqual(t, Encode("t", "a,", "b"), Encode("t", "a", ",b"))
	assert.NotEqual(t, Encode("t1", "x"), Encode("t", "1x"))
	assert.Equal(t, []byte("1:t,1:a,0:,"), Encode("t", "a", ""))
}

func TestOf(t *testing.T) {
	assert.Equal(t, "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", Of(nil))
	assert.Equal(t, Hex([]byte("x")), Of([]byte("x"))[len(Prefix):])
	assert.Equal(t, Hex(Encode("t", "a")), Fields("t", "a"))
}
