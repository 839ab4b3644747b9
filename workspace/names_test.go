package workspace

import "testing"

// TestReserved: every spelling of .git that a file system may read as the
// repository directory, and of the runtime directory at the top, is
// reserved; names that only look alike are not.
func TestReserved(t *testing.T) {
	for p, want := range map[string]bool{
		".git":                    true,
		".git/config":             true,
		"a/.git":                  true,
		"a/.GIT/hooks/x":          true,
		"a/.Git./hooks":           true, // NTFS drops trailing dots
		"a/.git /hooks":           true, // and spaces
		".git::$INDEX_ALLOCATION": true, // an NTFS stream
		"GIT~1/hooks":             true, // the 8.3 short name
		".g\u200cit/hooks":        true, // HFS+ ignores U+200C
		"\ufeff.git":              true,
		"a/.gi\u206at/x":          true,
		".airlock":                true,
		".AIRLOCK./x":             true,
		".air\u200dlock/skills":   true,
		`.git\config`:             true, // NTFS reads a backslash as a separator
		`x\.git\config`:           true,
		`GIT~1\config`:            true,
		`.git.\config`:            true,
		".git \\hooks\\x":         true,
		`.airlock\x`:              true,
		"AIRLOC~1":                true, // the runtime directory's 8.3 short name
		`airloc~1\skills`:         true,
		`a\b`:                     false, // a backslash alone is a name's byte on Linux
		`.gitx\config`:            false,
		"a/.airlock":              false, // the runtime directory is the top one only
		".gitignore":              false,
		".github/workflows":       false,
		"git":                     false,
		"a/git~2":                 false,
		"x.git":                   false,
		".gi":                     false,
	} {
		if got := reserved(p); got != want {
			t.Errorf("reserved(%q) = %v, want %v", p, got, want)
		}
	}
}
