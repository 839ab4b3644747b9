package workspace

import "strings"

// matchGlob reports whether the slash path name matches the Spec.Exclude
// pattern pat as git's glob pathspec magic (the sandbox's side of a git
// round) reads it: anchored at the top of the work tree; a pattern that
// is the path, byte for byte, matches it; otherwise component by
// component (matchComponent), where a whole component ** matches any
// number of components ("**/x" x at any depth, "a/**/b" b at any depth
// below a) and a trailing "/**" everything below.
func matchGlob(pat, name string) bool {
	if pat == name {
		return true // as git, which takes a pattern that names a path as it is
	}
	ps := strings.Split(pat, "/")
	for i, c := range ps {
		if len(c) > 2 && strings.Trim(c, "*") == "" {
			ps[i] = "**" // a whole component of stars is **, as in git
		}
	}
	return matchComponents(ps, strings.Split(name, "/"))
}

func matchComponents(ps, ns []string) bool {
	for len(ps) > 0 && ps[0] != "**" {
		if len(ns) == 0 {
			return false
		}
		if !matchComponent(ps[0], ns[0]) {
			return false
		}
		ps, ns = ps[1:], ns[1:]
	}
	if len(ps) == 0 {
		return len(ns) == 0
	}
	for len(ps) > 1 && ps[1] == "**" {
		ps = ps[1:]
	}
	if len(ps) == 1 {
		return len(ns) > 0 // a trailing ** is what is below, not the directory
	}
	for i := range len(ns) + 1 {
		if matchComponents(ps[1:], ns[i:]) {
			return true
		}
	}
	return false
}

// matchComponent matches one path component's bytes against one glob
// component as git's wildmatch does (bytes, not characters: ? is one
// byte): * any bytes, ? one byte, \x the byte x, [...] one byte of a set:
// [!...] and [^...] its complement, a ] first in it literal, a-z a range,
// \x an escaped byte, [:alpha:] and the other POSIX classes (ASCII). A
// pattern that is not well formed (wellFormed) matches nothing, as in git:
// a match has to get past the part that is not.
func matchComponent(pat, name string) bool {
	px, nx := 0, 0
	star, starN := -1, 0 // the last * seen, and where its match ends now
	for px < len(pat) || nx < len(name) {
		if px < len(pat) && nx < len(name) {
			switch c := pat[px]; c {
			case '*':
				star, starN = px, nx
				px++
				continue
			case '?':
				px, nx = px+1, nx+1
				continue
			case '[':
				if end, in, ok := matchClass(pat, px, name[nx]); ok && in {
					px, nx = end, nx+1
					continue
				}
			case '\\':
				if px+1 < len(pat) && pat[px+1] == name[nx] {
					px, nx = px+2, nx+1
					continue
				}
			default:
				if c == name[nx] {
					px, nx = px+1, nx+1
					continue
				}
			}
		} else if px < len(pat) && pat[px] == '*' {
			px++ // a * at the end of the name matches nothing more
			continue
		}
		if star >= 0 && starN < len(name) {
			starN++
			px, nx = star+1, starN
			continue
		}
		return false
	}
	return true
}

// wellFormed reports whether a glob component is one git matches with:
// every [ class closed, every [:class:] known, no \ at its end.
func wellFormed(pat string) bool {
	for px := 0; px < len(pat); px++ {
		switch pat[px] {
		case '\\':
			if px+1 == len(pat) {
				return false
			}
			px++
		case '[':
			end, _, ok := matchClass(pat, px, 0)
			if !ok {
				return false
			}
			px = end - 1
		}
	}
	return true
}

// matchClass reads the class that opens at pat[px] ('[') and reports
// where the pattern goes on after it, whether b is in it, and whether the
// class is well formed.
func matchClass(pat string, px int, b byte) (end int, in, ok bool) {
	p := px + 1
	negated := p < len(pat) && (pat[p] == '!' || pat[p] == '^')
	if negated {
		p++
	}
	matched, first := false, true
	var prev byte
	havePrev := false
	for ; p < len(pat) && (first || pat[p] != ']'); p++ {
		first = false
		c := pat[p]
		switch {
		case c == '\\':
			if p+1 == len(pat) {
				return 0, false, false
			}
			p++
			c = pat[p]
			matched = matched || b == c
			prev, havePrev = c, true
		case c == '-' && havePrev && p+1 < len(pat) && pat[p+1] != ']':
			p++
			hi := pat[p]
			if hi == '\\' {
				if p+1 == len(pat) {
					return 0, false, false
				}
				p++
				hi = pat[p]
			}
			matched = matched || (b >= prev && b <= hi)
			havePrev = false
		case c == '[' && p+1 < len(pat) && pat[p+1] == ':':
			close := strings.Index(pat[p+2:], "]")
			if close < 0 {
				return 0, false, false
			}
			name := pat[p+2 : p+2+close]
			if !strings.HasSuffix(name, ":") {
				// not a [:class:]: a literal [
				matched = matched || b == '['
				prev, havePrev = '[', true
				continue
			}
			is, known := posixClass(strings.TrimSuffix(name, ":"), b)
			if !known {
				return 0, false, false
			}
			matched = matched || is
			p += 2 + close
			havePrev = false
		default:
			matched = matched || b == c
			prev, havePrev = c, true
		}
	}
	if p >= len(pat) {
		return 0, false, false // no closing ]
	}
	return p + 1, matched != negated, true
}

// posixClass reports whether b is in the POSIX class name (ASCII, as in
// the C locale git's wildmatch uses), and whether the class is known.
func posixClass(name string, b byte) (in, known bool) {
	upper, lower, digit := b >= 'A' && b <= 'Z', b >= 'a' && b <= 'z', b >= '0' && b <= '9'
	alpha := upper || lower
	switch name {
	case "alnum":
		return alpha || digit, true
	case "alpha":
		return alpha, true
	case "blank":
		return b == ' ' || b == '\t', true
	case "cntrl":
		return b < 0x20 || b == 0x7f, true
	case "digit":
		return digit, true
	case "graph":
		return b > 0x20 && b < 0x7f, true
	case "lower":
		return lower, true
	case "print":
		return b >= 0x20 && b < 0x7f, true
	case "punct":
		return b > 0x20 && b < 0x7f && !alpha && !digit, true
	case "space":
		return b == ' ' || (b >= '\t' && b <= '\r'), true
	case "upper":
		return upper, true
	case "xdigit":
		return digit || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F'), true
	}
	return false, false
}
