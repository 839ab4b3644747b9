package deliverable

import (
	"strings"
)

const (
	citationScheme = "deliverable:"
	citationPrefix = "/api/attachments/"
	citationSuffix = "/content"
)

// ParseCitation returns the attachment id cited by ref, in lowercase, and true
// when ref is "deliverable:<id>" or "/api/attachments/<id>/content". Surrounding
// whitespace and a trailing "?…" or "#…" are ignored; the scheme and the id are
// case-insensitive; the id must be a UUID. Any other ref returns false.
func ParseCitation(ref string) (attachmentID string, ok bool) {
	id, _, ok := parseCitation(ref)
	return id, ok
}

// parseCitation also reports whether ref has the shape of a citation (its
// scheme or path prefix) even when the id in it is not a UUID.
func parseCitation(ref string) (id string, shaped, ok bool) {
	s := strings.TrimSpace(ref)
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		s = s[:i]
	}
	var body string
	switch {
	case len(s) >= len(citationScheme) && strings.EqualFold(s[:len(citationScheme)], citationScheme):
		body = s[len(citationScheme):]
	case strings.HasPrefix(s, citationPrefix):
		rest, found := strings.CutSuffix(s[len(citationPrefix):], citationSuffix)
		if !found {
			return "", true, false
		}
		body = rest
	default:
		return "", false, false
	}
	id, ok = parseUUID(body)
	return id, true, ok
}

// parseUUID accepts the 8-4-4-4-12 hexadecimal form in either case and returns
// it in lowercase.
func parseUUID(s string) (string, bool) {
	if len(s) != 36 {
		return "", false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return "", false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
				return "", false
			}
		}
	}
	return strings.ToLower(s), true
}

// looksLikeLocalFile reports whether a ref that is not a citation names a
// workspace file: "./x", "../x", "/x", "~/x", "file:x", "C:\x", a dotfile
// (".env"), or a single token that DetectRequests would read as a file name:
// a known extension (detectExts), not a framework or site name
// (detectNotFiles), with an optional ":line" suffix, such as "x.pdf",
// "out/x.csv" or "x.md:12". URLs, bare domains ("example.com", "go.dev",
// "docs.rs"), framework names ("node.js"), other schemes ("work_product:…")
// and prose are not local files.
func looksLikeLocalFile(ref string) bool {
	s := strings.TrimSpace(ref)
	if s == "" {
		return false
	}
	if len(s) >= 5 && strings.EqualFold(s[:5], "file:") {
		return true
	}
	for _, p := range []string{"./", "../", "/", "~", `.\`, `..\`, `\`} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	if len(s) >= 3 && (s[0]|0x20 >= 'a' && s[0]|0x20 <= 'z') && s[1] == ':' && (s[2] == '\\' || s[2] == '/') {
		return true
	}
	if strings.ContainsFunc(s, func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' }) {
		return false // prose
	}
	if i := strings.IndexByte(s, '#'); i >= 0 {
		s = s[:i]
	}
	s = stripLineSuffix(s)
	if strings.Contains(s, ":") {
		return false // a URL or another kind of reference
	}
	if base := s[strings.LastIndexAny(s, `/\`)+1:]; strings.LastIndexByte(base, '.') == 0 {
		return isExtension(base[1:]) // a dotfile: ".env", ".gitignore"
	}
	return detectIsFile(s)
}

// stripLineSuffix removes a ":line" or ":line:column" suffix.
func stripLineSuffix(s string) string {
	for range 2 {
		i := strings.LastIndexByte(s, ':')
		if i <= 0 || i == len(s)-1 || strings.Trim(s[i+1:], "0123456789") != "" {
			return s
		}
		s = s[:i]
	}
	return s
}

// isExtension accepts 1 to 10 ASCII letters and digits, not all digits: the
// name of a dotfile.
func isExtension(ext string) bool {
	if len(ext) == 0 || len(ext) > 10 {
		return false
	}
	letter := false
	for i := 0; i < len(ext); i++ {
		c := ext[i] | 0x20
		switch {
		case c >= 'a' && c <= 'z':
			letter = true
		case ext[i] >= '0' && ext[i] <= '9':
		default:
			return false
		}
	}
	return letter
}
