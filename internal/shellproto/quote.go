package shellproto

import "strings"

// Quote quotes s as one POSIX sh word.
func Quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'" }
