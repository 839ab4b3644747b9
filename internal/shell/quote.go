package shell

import "strings"

// Quote quotes s as one POSIX sh word.
func Quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'" }

// Truncate shortens s, sandbox output quoted in an error, to at most n
// bytes and marks the cut with "…".
func Truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
