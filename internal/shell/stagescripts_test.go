package shell_test

import (
	"errors"
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

// TestPlanCarry: files whose names the hash tools would print escaped are
// left out (a name starting with "-" is not: the carry names it ./NAME);
// the others are one "MODE SIZE PATH" line each between the carry's
// here-document markers, in order; Size counts the lines.
func TestPlanCarry(t *testing.T) {
	files := []shell.CarryFile{
		{Path: "b", Mode: 0o755, Size: 1, SHA256: "1"}, {Path: "a b", Mode: 0o644, Size: 22, SHA256: "2"},
		{Path: "-x", Mode: 0o644, Size: 1 << 40, SHA256: "4"}, {Path: `back\slash`, Mode: 0o644}, {Path: "new\nline", Mode: 0o644}, {Path: "cr\r", Mode: 0o644},
		{Path: "it's", Mode: 0o600, SHA256: "3"},
	}
	p := shell.PlanCarry(files)
	p.Manifest = "0f"
	assert.Equal(t, map[string]string{"b": "1", "a b": "2", "-x": "4", "it's": "3"}, p.Want)
	script := shell.CarryScript(&p, "/t", "/r/d")
	_, plan, ok := strings.Cut(script, "K '/r/"+shell.StampsName("d")+"' '/r/"+shell.ManifestName("d")+"' '0f' <<'airlock-carry-end'\n")
	require.True(t, ok, "%s", script)
	plan, _, ok = strings.Cut(plan, "\nairlock-carry-end\n")
	require.True(t, ok, "%s", script)
	assert.Equal(t, "600 0 it's\n644 22 a b\n644 1099511627776 -x\n755 1 b", plan, "by mode, in order within one")
	assert.Equal(t, len(plan)+1, p.Size)
}

// TestParseAssetList: NUL-terminated names, empty ones dropped, in order.
func TestParseAssetList(t *testing.T) {
	assert.Empty(t, shell.ParseAssetList(nil))
	assert.Equal(t, []string{"a", "b c", "d\ne"}, shell.ParseAssetList([]byte("a\x00\x00b c\x00d\ne\x00")))
	assert.Equal(t, []string{"tail"}, shell.ParseAssetList([]byte("tail")), "a cut last name is kept: the caller checks names")
	for reply, want := range map[string]bool{
		"": false, shell.LeftoversLine + "\n": true, "a\x00" + shell.LeftoversLine + "\n": true,
		"a" + shell.LeftoversLine + "\n": false, shell.LeftoversLine: false, shell.LeftoversLine + "\n\x00": false,
	} {
		assert.Equal(t, want, shell.AssetListLeftovers([]byte(reply)), "%q", reply)
	}
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
