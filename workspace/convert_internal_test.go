package workspace

import (
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/gitexec"
)

// TestConverts: which attributes and settings make git convert a blob on
// checkout. Where git decides by content (text=auto), converts says yes.
func TestConverts(t *testing.T) {
	none := func(kv ...string) map[string]string {
		a := map[string]string{}
		for _, k := range convAttrs {
			a[k] = "unspecified"
		}
		for i := 0; i+1 < len(kv); i += 2 {
			a[kv[i]] = kv[i+1]
		}
		return a
	}
	for _, c := range []struct {
		a             map[string]string
		autocrlf, eol string
		want          bool
	}{
		{none(), "", "", false},
		{none(), "false", "crlf", false}, // core.eol acts on text files only
		{none(), "true", "", true},
		{none(), "input", "crlf", false},
		{none(), "yes", "", true},
		{none(), "no", "crlf", false},
		{none(), "odd", "", true},
		{none("text", "set"), "", "", false},
		{none("text", "set"), "", "crlf", true},
		{none("text", "auto"), "", "crlf", true},
		{none("text", "auto"), "", "lf", false},
		{none("text", "unset"), "true", "crlf", false},
		{none("text", "unset", "eol", "crlf"), "", "", false},
		{none("eol", "crlf"), "", "", true},
		{none("eol", "lf"), "true", "crlf", false},
		{none("crlf", "set"), "", "crlf", true},
		{none("crlf", "unset"), "true", "", false},
		{none("crlf", "input"), "true", "crlf", false},
		{none("filter", "lfs"), "", "", true},
		{none("filter", "unset"), "", "", false},
		{none("ident", "set"), "", "", true},
		{none("ident", "unset"), "", "", false},
		{none("working-tree-encoding", "UTF-16"), "", "", true},
		{none("text", "unset", "filter", "lfs"), "", "", true},
	} {
		assert.Equal(t, c.want, converts(c.a, c.autocrlf, c.eol), "%v autocrlf=%q eol=%q", c.a, c.autocrlf, c.eol)
	}
}

// TestConvertsAgainstGit: convertedOnCheckout never leaves out a path
// git converts, for every eol setting of .gitattributes and of the
// configuration, on a text blob (which text=auto converts) and a binary
// one (which it leaves alone).
func TestConvertsAgainstGit(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	dir := t.TempDir()
	g := &gitexec.Git{Dir: dir}
	_, err := g.Output(t.Context(), "init", "-q")
	require.NoError(t, err)
	bodies := []string{"a\nb\n", "a\x00\nb\n"}
	var blobs []string
	for _, body := range bodies {
		var out strings.Builder
		require.NoError(t, g.Run(t.Context(), gitexec.Cmd{Args: []string{"hash-object", "-w", "--stdin"}, Stdin: strings.NewReader(body), Stdout: &out}))
		blobs = append(blobs, strings.TrimSpace(out.String()))
	}
	attrs := []string{"", "text", "-text", "text=auto", "text eol=crlf", "text eol=lf", "eol=crlf", "eol=lf", "text=auto eol=crlf",
		"crlf", "-crlf", "crlf=input", "-text eol=crlf", "binary"}
	cfgs := [][2]string{{"", ""}, {"true", ""}, {"input", ""}, {"false", "crlf"}, {"", "crlf"}, {"true", "lf"}, {"", "native"}, {"yes", ""}}
	converted := 0
	for _, attr := range attrs {
		require.NoError(t, os.WriteFile(filepath.Join(dir, ".gitattributes"), []byte("f "+attr+"\n"), 0o644))
		for _, cfg := range cfgs {
			for k, v := range map[string]string{"core.autocrlf": cfg[0], "core.eol": cfg[1]} {
				args := []string{"config", k, v}
				if v == "" {
					args = []string{"config", "--unset-all", k}
				}
				if _, err := g.Output(t.Context(), args...); err != nil {
					require.Equal(t, 5, gitexec.Status(err), "%v: %v", args, err) // 5: nothing to unset
				}
			}
			conv, err := convertedOnCheckout(t.Context(), g, []string{"f"})
			require.NoError(t, err)
			for i, b := range blobs {
				out, err := g.Output(t.Context(), "cat-file", "--filters", "--path=f", b)
				require.NoError(t, err)
				if string(out) != bodies[i] {
					converted++
					assert.True(t, conv["f"], "git converts %q with attributes %q, autocrlf=%q, eol=%q", bodies[i], attr, cfg[0], cfg[1])
				}
			}
		}
	}
	assert.Greater(t, converted, 20, "the cases convert")
}

// TestCleanIDsNames: every name a file can have reaches git hash-object
// as that name (quoteC), in any order and number: each id is the one git
// gives the file named alone on its command line.
func TestCleanIDsNames(t *testing.T) {
	dir := t.TempDir()
	g := &gitexec.Git{Dir: dir}
	_, err := g.Output(t.Context(), "init", "-q")
	require.NoError(t, err)
	alphabet := []byte("ab\"\\\n\t\x01\x7f \xc3\xbc\x80-'$*?")
	rng := rand.New(rand.NewPCG(1, 2))
	seen := map[string]bool{}
	var paths []string
	for len(paths) < 60 {
		var b strings.Builder
		for n := 1 + rng.IntN(6); n > 0; n-- {
			b.WriteByte(alphabet[rng.IntN(len(alphabet))])
		}
		p := b.String()
		if p == "." || seen[p] {
			continue
		}
		seen[p] = true
		if rng.IntN(4) == 0 {
			p = "sub/" + p
		}
		require.NoError(t, os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, p), []byte("content of "+p), 0o644))
		paths = append(paths, p)
	}
	paths = append(paths, "\"leading quote", "trailing quote\"")
	for _, p := range paths[len(paths)-2:] {
		require.NoError(t, os.WriteFile(filepath.Join(dir, p), []byte("content of "+p), 0o644))
	}
	ids := cleanIDs(t.Context(), g, paths, slog.New(slog.DiscardHandler))
	require.Len(t, ids, len(paths))
	for _, p := range paths {
		want, err := g.Line(t.Context(), "hash-object", "--", p)
		require.NoError(t, err)
		assert.Equal(t, want, ids[p], "%q", p)
	}
}
