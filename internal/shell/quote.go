package shell

import "strings"

// Quote quotes s as one POSIX sh word.
func Quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'" }

// QuoteWord quotes s as one POSIX sh word like Quote, but leaves a word of
// only safe characters (letters, digits and ._/-+,@%:, not starting with
// '-') bare: a carry names thousands of files, and its script may be
// quoted again by a Runner (remote.Host quotes it twice), which multiplies
// every quote.
func QuoteWord(s string) string {
	if s == "" || s[0] == '-' {
		return Quote(s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("._/-+,@%:", c) >= 0) {
			return Quote(s)
		}
	}
	return s
}

// Truncate shortens s, sandbox output quoted in an error, to at most n
// bytes and marks the cut with "…".
func Truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
