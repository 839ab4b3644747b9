package stage

import (
	"cmp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Rewrite returns text with every host Source path of r replaced by the
// asset's in-sandbox Path, on path boundaries only: with Source /h/skills
// and Path /s/skills, "/h/skills/x" becomes "/s/skills/x" and "/h/skills"
// at the end of a sentence is rewritten, while "/h/skills-old",
// "/h/skills.bak" and "/x/h/skills" are left alone. The longest Source wins
// where several match.
//
// A Source match must start the path (or follow "file://" that starts
// one: "file:///h/skills/x" becomes "file:///s/skills/x"): the character
// before it may not be a slash or a path-name character (ASCII letters, digits and - _ . ~ + @ %,
// and any non-ASCII character but a space, an opening bracket or quote, or
// a symbol such as an arrow: "…/h/skills" is left alone, "“/h/skills”" is
// rewritten). What follows the match must be the end of text, a slash, or a
// character that is not a path-name character; non-ASCII letters, digits
// and combining marks continue the path ("/h/skillsé"), other non-ASCII
// characters ("…", "”", "→") end it. A run of dots ends the path when the
// end of text or such a non-path character follows it ("/h/skills." and
// "/h/skills..." are rewritten, "/h/skills../x" and "/h/skills..x" are not).
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
		if text[i] == '/' && startsAt(text, i) {
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

// startsAt reports whether a path may start at text[i].
func startsAt(text string, i int) bool {
	if i == 0 {
		return true
	}
	if i >= len(fileURL) && strings.EqualFold(text[i-len(fileURL):i], fileURL) {
		return startsAt(text, i-len(fileURL))
	}
	c := text[i-1]
	if c < utf8.RuneSelf {
		return c != '/' && !pathByte(c)
	}
	r, n := utf8.DecodeLastRuneInString(text[:i])
	if r == utf8.RuneError && n <= 1 {
		return false // not UTF-8: treat it as part of a name
	}
	return unicode.IsSpace(r) || unicode.In(r, unicode.Ps, unicode.Pi, unicode.Sm, unicode.So)
}

// fileURL starts a file URL, whose path follows it.
const fileURL = "file://"

// boundaryAt reports whether a path may end just before text[j].
func boundaryAt(text string, j int) bool {
	if j < len(text) && text[j] == '.' {
		// A run of dots ends a sentence (or an ellipsis), unless a name or
		// a slash follows it.
		k := j
		for k < len(text) && text[k] == '.' {
			k++
		}
		return k >= len(text) || text[k] != '/' && !continuesPath(text, k)
	}
	return j >= len(text) || text[j] == '/' || !continuesPath(text, j)
}

// continuesPath reports whether the character at text[j] can continue a
// path name: an ASCII path-name byte, or a non-ASCII letter, digit or
// combining mark (a byte sequence that is not UTF-8 counts as one too).
func continuesPath(text string, j int) bool {
	c := text[j]
	if c < utf8.RuneSelf {
		return pathByte(c)
	}
	r, n := utf8.DecodeRuneInString(text[j:])
	if r == utf8.RuneError && n <= 1 {
		return true
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r)
}

// pathByte reports whether the byte c can continue a path name (any
// non-ASCII byte counts; continuesPath looks at the whole character).
func pathByte(c byte) bool {
	switch {
	case c >= utf8.RuneSelf, 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-_.~+@%", c) >= 0
}
