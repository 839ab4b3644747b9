package stage

import (
	"cmp"
	"slices"
	"strings"
)

// Rewrite returns text with every host Source path of r replaced by the
// asset's in-sandbox Path, on path boundaries only: with Source /h/skills
// and Path /s/skills, "/h/skills/x" becomes "/s/skills/x" and "/h/skills"
// at the end of a sentence is rewritten, while "/h/skills-old",
// "/h/skills.bak" and "/x/h/skills" are left alone. The longest Source wins
// where several match. A Source match must start the path: the byte before
// it may not be a slash or a path-name byte (letters, digits, non-ASCII and
// - _ . ~ + @ %), and the byte after it must be the end of text, a slash, a
// byte that is not a path-name byte, or a dot that ends the word.
func (r *Runtime) Rewrite(text string) string {
	if r == nil {
		return text
	}
	type pair struct{ from, to string }
	var pairs []pair
	for _, a := range r.Assets {
		if len(a.Source) > 1 && a.Path != "" {
			pairs = append(pairs, pair{a.Source, a.Path})
		}
	}
	slices.SortStableFunc(pairs, func(x, y pair) int { return cmp.Compare(len(y.from), len(x.from)) })
	if len(pairs) == 0 {
		return text
	}
	var b strings.Builder
	last := 0
	for i := 0; i < len(text); {
		if text[i] == '/' && (i == 0 || !pathByte(text[i-1]) && text[i-1] != '/') {
			matched := false
			for _, p := range pairs {
				end := i + len(p.from)
				if strings.HasPrefix(text[i:], p.from) && boundaryAt(text, end) {
					b.WriteString(text[last:i])
					b.WriteString(p.to)
					i, last, matched = end, end, true
					break
				}
			}
			if matched {
				continue
			}
		}
		i++
	}
	if last == 0 {
		return text
	}
	b.WriteString(text[last:])
	return b.String()
}

// boundaryAt reports whether a path may end just before text[j].
func boundaryAt(text string, j int) bool {
	if j >= len(text) {
		return true
	}
	c := text[j]
	if c == '.' {
		return j+1 >= len(text) || !pathByte(text[j+1]) && text[j+1] != '/'
	}
	return c == '/' || !pathByte(c)
}

// pathByte reports whether c can continue a path name.
func pathByte(c byte) bool {
	switch {
	case c >= 0x80, 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-_.~+@%", c) >= 0
}
