package workspace

import (
	"bytes"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestExcludedAgreesWithGit: excluded (the host's side of Spec.Exclude,
// both rounds) matches exactly the paths git's glob pathspecs ":(glob)p"
// and ":(glob)p/**" (the sandbox's side of a git round) match, for
// patterns with *, **, ?, classes and escapes, at the top and at depth (an
// outside attack: a plain round read "**/*.env" as path.Match does and
// sent the top-level .env).
func TestExcludedAgreesWithGit(t *testing.T) {
	paths := []string{".env", "a.env", "svc/db.env", "svc/deep/x.env", "sub/secret/k", "secret/k", "secret",
		"abc/x", "abc", "abcd/x", "a/b", "a/x/b", "a/x/y/b", "b", "x[1]", "x1", "x!", "xa", "y?z", "yaz", "dir/**lit", "dir/f",
		"é.txt", "e.txt", "ée.txt", "A.env", "Z9.env", "]a.env", "a-b.txt", "a.b.txt", "x*", "-", "[", "ü/é/x"}
	pats := []string{"**/*.env", "*.env", ".env", "secret", "**/secret", "secret/**", "abc/**", "a/**/b", "**", "**/**/b",
		"x[!a]", "x[1]", "x\\[1]", "y\\?z", "y?z", "dir/\\*\\*lit", "*/*", "***/b", "svc/*/x.env", "[!.]*",
		"??.txt", "?.txt", "[é].txt", "[[:upper:]].env", "[[:upper:]][[:digit:]].env", "[]a].env", "[!]]*", "a[-]b.txt",
		"[[:alpha:]]*", "[a-c]*", "x\\*", "[[:punct:]]", "[\\]]*", "ü/*/x", "[[:space:]x]*", "[[:]a].env"}
	repo := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		var out bytes.Buffer
		cmd.Stdout = &out
		require.NoError(t, cmd.Run(), "git %v", args)
		return out.String()
	}
	run("init", "-q")
	for _, p := range paths {
		if slices.ContainsFunc(paths, func(q string) bool { return strings.HasPrefix(q, p+"/") }) {
			continue // a directory here
		}
		require.NoError(t, os.MkdirAll(filepath.Join(repo, filepath.Dir(p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(repo, p), []byte(p), 0o644))
	}
	run("add", "-A")
	files := strings.Split(strings.TrimSuffix(run("ls-files", "-z"), "\x00"), "\x00")
	// And random patterns over the same alphabet, each checked by git.
	rng := rand.New(rand.NewPCG(47, uint64(len(paths))))
	parts := []string{"a", "b", "x", "*", "?", "**", "[ab]", "[!a]", ".env", "secret", "svc", "1", "é", "[é]", "??",
		"[[:upper:]]", "[]a]", "[-]", "[a-z]", "\\*", ".txt", "[!]]"}
	for range 150 {
		var comps []string
		for range 1 + rng.IntN(3) {
			c := ""
			for range 1 + rng.IntN(2) {
				c += parts[rng.IntN(len(parts))]
			}
			comps = append(comps, c)
		}
		if p := strings.Join(comps, "/"); badExclude(p) == "" {
			pats = append(pats, p)
		}
	}
	for _, pat := range pats {
		want := strings.Split(strings.TrimSuffix(run(append([]string{"ls-files", "-z", "--"}, globAndBelow(":(glob)", pat)...)...), "\x00"), "\x00")
		if want[0] == "" {
			want = nil
		}
		var got []string
		for _, f := range files {
			if excluded([]string{pat}, f) {
				got = append(got, f)
			}
		}
		assert.Equal(t, want, got, "pattern %q", pat)
	}
}

// TestMatchGlob pins the rules the git comparison cannot show: a trailing
// ** is what is below a directory, never the directory itself.
func TestMatchGlob(t *testing.T) {
	for _, c := range []struct {
		pat, name string
		want      bool
	}{
		{"abc/**", "abc", false}, {"abc/**", "abc/x", true}, {"abc/**", "abc/x/y", true},
		{"**/x", "x", true}, {"**/x", "a/b/x", true}, {"**/x", "a/xx", false},
		{"a/**/b", "a/b", true}, {"a/**/b", "a/x/y/b", true}, {"a/**/b", "b", false},
		{"*.env", "svc/db.env", false}, {"**/*.env", ".env", true},
		{"x[!a]", "xb", true}, {"x[!a]", "xa", false}, {"x[!a]", "x!", true},
	} {
		assert.Equal(t, c.want, matchGlob(c.pat, c.name), "matchGlob(%q, %q)", c.pat, c.name)
	}
}

func TestIsOutRef(t *testing.T) {
	id, tok := "0123456789abcdef01234567", "abcdefghijkl"
	for ref, want := range map[string]bool{
		"refs/airlock/out/" + id + "/123-" + tok + "/snap":   true,
		"refs/airlock/out/" + id + "/-" + tok + "/snap":      false,
		"refs/airlock/out/" + id + "/12x-" + tok + "/snap":   false,
		"refs/airlock/out/" + id + "/123-other/snap":         false,
		"refs/airlock/out/" + id + "/snap":                   false,
		"refs/airlock/out/other/123-" + tok + "/snap":        false,
		"refs/heads/123-" + tok + "/snap":                    false,
		"refs/airlock/out/" + id + "/1/2-" + tok + "/snap":   false,
		"refs/airlock/out/" + id + "/123-" + tok + "/snap/x": false,
	} {
		assert.Equal(t, want, isOutRef(ref, id, tok), ref)
	}
}

// TestBadExclude: the patterns git would read otherwise than the host can
// (not a clean path, a malformed class) are refused before anything runs.
func TestBadExclude(t *testing.T) {
	for _, p := range []string{"", "dir/", "./x", "/x", "a//b", "a/../b", "..", ".", "[abc", "x\\", "[[:nope:]]", "a**", "x\n"} {
		assert.NotEmpty(t, badExclude(p), "%q", p)
	}
	for _, p := range []string{"x", "**/*.env", "[]a].env", "a[-]b.txt", "[[:upper:]].env", "\\*", "a/**", "[[:]a]"} {
		assert.Empty(t, badExclude(p), "%q", p)
	}
}

// FuzzMatchComponent: properties of the byte-wise glob of one component.
// A name with every byte escaped is a pattern that matches that name and
// no other; * matches every name; ? matches exactly the names of one byte;
// a pattern and a name that are equal match; and a malformed pattern
// matches nothing.
func FuzzMatchComponent(f *testing.F) {
	for _, s := range [][2]string{{"*.env", "a.env"}, {"[]a]", "]"}, {"[[:upper:]]x", "Ax"}, {"??", "é"}, {"[!a-c]*", "d"}, {"x\\*", "x*"}, {"[abc", "a"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pat, name string) {
		if strings.Contains(name, "/") || strings.Contains(pat, "/") {
			return
		}
		if !wellFormed(pat) && matchComponent(pat, name) {
			t.Fatalf("malformed %q matched %q", pat, name)
		}
		var esc strings.Builder
		for i := 0; i < len(name); i++ {
			esc.WriteByte('\\')
			esc.WriteByte(name[i])
		}
		if !matchComponent(esc.String(), name) || !wellFormed(esc.String()) {
			t.Fatalf("the escaped %q does not match %q", esc.String(), name)
		}
		if ok := matchComponent(esc.String(), pat); ok != (pat == name) {
			t.Fatalf("the escaped %q against %q: %v", esc.String(), pat, ok)
		}
		if !matchComponent("*", name) {
			t.Fatalf("* does not match %q", name)
		}
		if ok := matchComponent("?", name); ok != (len(name) == 1) {
			t.Fatalf("? against %q (%d bytes): %v", name, len(name), ok)
		}
		if !strings.ContainsAny(pat, "*?[\\") {
			if ok := matchComponent(pat, name); ok != (pat == name) {
				t.Fatalf("the literal %q against %q: %v", pat, name, ok)
			}
		}
	})
}
