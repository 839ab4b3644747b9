package shell_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/shell"
	"github.com/airlockdev/airlock/sandbox"
)

// TestQuoteWord: a word of safe characters stays bare, anything else is
// quoted, and under sh every word arrives as itself.
func TestQuoteWord(t *testing.T) {
	for w, bare := range map[string]bool{
		"a/b-c_d.e+f,g@h%i:j": true, "A9": true, "": false, "-rf": false, "a b": false, "it's": false,
		"$(id)": false, "`id`": false, "*": false, "a\nb": false, "a;b": false, "~x": false, "é": false,
	} {
		got := shell.QuoteWord(w)
		assert.Equal(t, bare, got == w, "%q → %q", w, got)
		if !bare {
			assert.Equal(t, shell.Quote(w), got)
		}
		out, err := exec.Command("sh", "-c", "printf '%s|' "+got).Output()
		require.NoError(t, err)
		assert.Equal(t, w+"|", string(out))
	}
}

// TestPlanCarry: files whose names the hash tools would print escaped or
// that tar would take for options are left out; one line per mode and
// batch, modes sorted, each line under MaxCarryArgs; Size counts the
// lines.
func TestPlanCarry(t *testing.T) {
	files := []shell.CarryFile{
		{Path: "b", Mode: 0o755, SHA256: "1"}, {Path: "a b", Mode: 0o644, SHA256: "2"},
		{Path: "-x", Mode: 0o644}, {Path: `back\slash`, Mode: 0o644}, {Path: "new\nline", Mode: 0o644}, {Path: "cr\r", Mode: 0o644},
	}
	long := strings.Repeat("n", 200)
	for i := range 1000 {
		files = append(files, shell.CarryFile{Path: fmt.Sprintf("%s-%04d", long, i), Mode: 0o600, SHA256: "3"})
	}
	p := shell.PlanCarry(files)
	assert.Equal(t, 1002, len(p.Want))
	for _, bad := range []string{"-x", `back\slash`, "new\nline", "cr\r"} {
		assert.NotContains(t, p.Want, bad)
	}
	script := shell.CarryScript(&p, "/t", "/d")
	var lines []string
	size := 0
	for l := range strings.SplitSeq(script, "\n") {
		if strings.HasPrefix(l, "C ") {
			lines = append(lines, l)
			size += len(l) + 1
			assert.LessOrEqual(t, len(l), shell.MaxCarryArgs)
		}
	}
	require.Greater(t, len(lines), 3, "1000 names of 200 bytes need more than one 0600 line")
	assert.Equal(t, "C 600 ", lines[0][:6])
	assert.Equal(t, "C 644 'a b'", lines[len(lines)-2])
	assert.Equal(t, "C 755 b", lines[len(lines)-1])
	assert.Equal(t, p.Size, size)
}

// TestParseAssetList: NUL-terminated names, empty ones dropped, in order.
func TestParseAssetList(t *testing.T) {
	assert.Empty(t, shell.ParseAssetList(nil))
	assert.Equal(t, []string{"a", "b c", "d\ne"}, shell.ParseAssetList([]byte("a\x00\x00b c\x00d\ne\x00")))
	assert.Equal(t, []string{"tail"}, shell.ParseAssetList([]byte("tail")), "a cut last name is kept: the caller checks names")
}

// TestOutputTooLargeIsProtocol: a bounded buffer that refuses a write
// reports a protocol break (not retryable, never a transport failure),
// and keeps refusing.
func TestOutputTooLargeIsProtocol(t *testing.T) {
	b := &shell.LimitedBuffer{Max: 4}
	_, err := b.Write([]byte("12345"))
	require.ErrorIs(t, err, shell.ErrOutputTooLarge)
	assert.ErrorIs(t, err, sandbox.ErrProtocol)
	assert.False(t, errors.Is(err, sandbox.ErrTransport))
	assert.False(t, sandbox.Retryable(err))
	assert.ErrorContains(t, err, "more than 4 bytes")
	n, err := b.Write([]byte("1234"))
	require.NoError(t, err, "a write within the bound")
	assert.Equal(t, 4, n)
	_, err = b.Write([]byte("5"))
	require.ErrorIs(t, err, shell.ErrOutputTooLarge)
	assert.Equal(t, "1234", b.String())
	wrapped := &fs.PathError{Op: "write", Path: "stdout", Err: err}
	assert.False(t, sandbox.Retryable(wrapped), "wrapped, still the sandbox's break")
}
