package reqdetect

import (
	"slices"
	"strings"
	"sync/atomic"
	"unicode"
	"unicode/utf8"
)

// Tokens

type tokKind uint8

const (
	tokWord  tokKind = iota + 1 // letters, inner apostrophes and hyphens
	tokFile                     // a file name or path with a known extension
	tokPunct                    // one punctuation rune
	tokOther                    // numbers, URLs, paths without an extension, mixed tokens
)

type token struct {
	text string // verbatim from the objective
	low  string // lower-cased, curly apostrophes folded to '
	kind tokKind
	pos  int // byte offset of text in the objective
}

// is reports whether t is a word equal to one of words.
func (t token) is(words ...string) bool {
	step()
	return t.kind == tokWord && slices.Contains(words, t.low)
}

func (t token) punct(marks ...string) bool {
	step()
	return t.kind == tokPunct && slices.Contains(marks, t.low)
}

// Work counting.
var (
	counting atomic.Bool
	steps    atomic.Int64
)

func step() {
	if counting.Load() {
		steps.Add(1)
	}
}

// anyIn reports whether ok holds for some k from lo to hi, both included.
func anyIn(lo, hi int, ok func(k int) bool) bool {
	for k := lo; k <= hi; k++ {
		if ok(k) {
			return true
		}
	}
	return false
}

func punctTok(s string) token { return token{text: s, low: s, kind: tokPunct} }

// isRunRune reports whether r belongs to a word or path run.
func isRunRune(r rune) bool {
	return r != utf8.RuneError && (unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) ||
		strings.ContainsRune(runMarks, r))
}

// tokenizeAt appends the tokens of s, which starts at byte offset base of the objective, to toks, and records each
// token's offset.
func tokenizeAt(toks []token, s string, base int) []token {
	from := len(toks)
	toks = appendTokens(toks, s)
	at := 0
	for i := from; i < len(toks); i++ {
		if k := strings.Index(s[at:], toks[i].text); k >= 0 {
			at += k
		}
		toks[i].pos = base + at
		at += len(toks[i].text)
	}
	return toks
}

// appendTokens appends the tokens of the line s to toks. Every token's text is a substring of s.
func appendTokens(toks []token, s string) []token {
	toks = slices.Grow(toks, len(s)/4)
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		switch {
		case unicode.IsSpace(r):
			i += w
		case strings.ContainsRune(nameQuotes, r):
			if n, ok := quotedFile(s[i:], r, w); ok {
				inner := s[i+w : i+n]
				closeW := len(closingQuote(r))
				toks = append(toks, punctTok(s[i:i+w]), token{text: inner, low: strings.ToLower(inner), kind: tokFile},
					punctTok(s[i+n:i+n+closeW]))
				i += n + closeW
				continue
			}
			toks = append(toks, punctTok(s[i:i+w]))
			i += w
		case isRunRune(r):
			j := len(s) - len(strings.TrimLeftFunc(s[i:], isRunRune))
			pieces := []string{s[i:j]}
			if strings.ContainsFunc(s[i:j], func(r rune) bool { return r >= cjkFirst }) { // the run may hold CJK text
				prev, _ := utf8.DecodeLastRuneInString(s[:i])
				pieces = cjkPieces(s[i:j], i == 0 || unicode.IsSpace(prev) || strings.ContainsRune(nameOpeners, prev))
			}
			for _, piece := range pieces {
				toks = splitRun(toks, piece)
			}
			i = j
		default:
			toks = append(toks, punctTok(s[i:i+w]))
			i += w
		}
	}
	return toks
}

// cjkFirst is below every rune of the CJK scripts (Hangul Jamo starts at U+1100): isCJK.
const cjkFirst = 0x1100

// isCJK reports whether r is written in a script with no spaces between words.
func isCJK(r rune) bool {
	return r >= cjkFirst && (unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul) || r == 'ー')
}

// cjkPieces cuts a run that mixes CJK text with a file name written against it, with no space into
// the CJK text and the name (rule 9). After a blank or an opening quote (open), a name may start in CJK
// when each Latin part joins on a name mark ("販促レポート_2025Q2.xlsx", "日報.xlsx").
func cjkPieces(run string, open bool) []string {
	var segs []string
	start, prev := 0, false
	for k, r := range run {
		c := isCJK(r)
		if k > 0 && c != prev {
			segs = append(segs, run[start:k])
			start = k
		}
		prev = c
	}
	segs = append(segs, run[start:])
	if len(segs) == 1 {
		return segs
	}
	// Pieces are contiguous: cur is the start of the piece being grown.
	var pieces []string
	cur, at, first := 0, 0, 0
	r0, _ := utf8.DecodeRuneInString(run)
	for k, end := 1, len(segs[0]); open && isCJK(r0) && k < len(segs); k++ {
		r, _ := utf8.DecodeRuneInString(segs[k])
		if end += len(segs[k]); !isCJK(r) && !strings.ContainsRune("_-.", r) {
			break
		} else if !isCJK(r) && IsFile("x"+strings.TrimRight(segs[k], runTrailers)) && IsFile(strings.TrimRight(run[:end], runTrailers)) {
			cur, at, first = end, end, k+1
			break
		}
	}
	if cur > 0 {
		pieces = append(pieces, run[:cur])
	}
	for _, seg := range segs[first:] {
		r, _ := utf8.DecodeRuneInString(seg)
		if !isCJK(r) && IsFile(strings.TrimRight(seg, runTrailers)) {
			if at > cur {
				pieces = append(pieces, run[cur:at])
			}
			pieces = append(pieces, seg)
			cur = at + len(seg)
		}
		at += len(seg)
	}
	if at > cur {
		pieces = append(pieces, run[cur:at])
	}
	return pieces
}

func closingQuote(open rune) string {
	if open == '“' {
		return "”"
	}
	return string(open)
}

// quotedFile reports whether s starts with a quoted file name that contains blanks.
func quotedFile(s string, open rune, w int) (n int, ok bool) {
	end := strings.Index(s[w:min(len(s), w+256)], closingQuote(open)) // within 256 bytes
	if end <= 0 {
		return 0, false
	}
	inner := s[w : w+end]
	if !strings.Contains(inner, " ") || strings.TrimSpace(inner) != inner ||
		strings.ContainsAny(inner, "\"`“”\t\r\n") || !IsFile(inner) {
		return 0, false
	}
	return w + end, true
}

// splitRun classifies one run of word and path characters: the apostrophes before it and the trailers after it are
// punctuation.
func splitRun(toks []token, run string) []token {
	body := strings.TrimLeft(run, apostrophes)
	toks = appendPuncts(toks, run[:len(run)-len(body)])
	core := strings.TrimRight(body, runTrailers)
	if core != "" {
		low := strings.ToLower(core)
		if strings.Contains(low, "://") || strings.HasPrefix(low, "mailto:") {
			toks = append(toks, token{text: core, low: low, kind: tokOther})
		} else {
			toks = splitColons(toks, core)
		}
	}
	return appendPuncts(toks, body[len(core):])
}

// appendPuncts appends a punctuation token for each rune of s.
func appendPuncts(toks []token, s string) []token {
	for s != "" {
		_, w := utf8.DecodeRuneInString(s)
		toks, s = append(toks, punctTok(s[:w])), s[w:]
	}
	return toks
}

// splitColons splits s at colons and classifies each piece. A leading drive letter is not split.
func splitColons(toks []token, s string) []token {
	from := 0
	if len(s) > 2 && s[1] == ':' && (s[2] == '\\' || s[2] == '/') &&
		(s[0]|0x20 >= 'a' && s[0]|0x20 <= 'z') {
		from = 2
	}
	for {
		i := strings.IndexByte(s[from:], ':')
		if i < 0 {
			if s != "" {
				toks = append(toks, classify(s))
			}
			return toks
		}
		i += from
		if i > 0 {
			toks = append(toks, classify(s[:i]))
		}
		toks = append(toks, punctTok(s[i:i+1]))
		s, from = s[i+1:], 0
	}
}

func classify(s string) token {
	low := strings.ToLower(strings.ReplaceAll(s, "’", "'"))
	if IsFile(s) {
		return token{text: s, low: low, kind: tokFile}
	}
	letter := func(r rune) bool { return unicode.IsLetter(r) || unicode.IsMark(r) }
	other := func(r rune) bool { return !letter(r) && !strings.ContainsRune(wordMarks, r) }
	if strings.ContainsFunc(s, letter) && !strings.ContainsFunc(s, other) {
		return token{text: s, low: low, kind: tokWord} // letters, and marks that stand inside a word
	}
	return token{text: s, low: low, kind: tokOther}
}

// IsFile reports whether s names a file.
func IsFile(s string) bool {
	base := s[strings.LastIndexAny(s, pathSeparators)+1:]
	dot := strings.LastIndexByte(base, '.')
	if dot <= 0 || dot == len(base)-1 {
		return false
	}
	return fileExts[strings.ToLower(base[dot+1:])] && strings.Trim(base[:dot], nameMarks) != "" && !notFiles[strings.ToLower(s)]
}

// Stage 1 and 2: lines, blocks, paragraphs, sentences

// unit is one sentence of prose or of a Deliverables item.
type unit struct {
	src       string // the whole objective, which the tokens' offsets index
	ticks     int    // backticks in src before the first token
	toks      []token
	item      bool        // inside a Deliverables block, or a list a request introduces (listed)
	listed    bool        // a bullet under a line ending in ":" that asks for files ("Create these:")
	lead      *unit       // the unit of the line ending in ":" right above this bullet, or nil
	block     int         // which paragraph, bullet or Deliverables item the unit belongs to (readUnits numbers them)
	listAsks  bool        // as a list lead, the unit asks for the files below it (requestsList)
	question  bool        // a question ("Who wrote report.pdf?"), not a request
	cls       []verbClass // verb class of each token used as a verb
	neg       []bool      // token lies in a negated phrase or noun phrase
	inl       []bool      // token is covered by an inline marker
	asked     []bool      // token is a verb of an embedded question ("tell me whether exporting …")
	inPlace   bool        // says "in place": verbless files are edited, not delivered
	inputs    bool        // under a heading or label for inputs, context or references (rule 10)
	foreign   bool        // written in another language than English (isForeign; set by readForeign)
	phrases   []*phrase
	qualifier int  // token index of a "not a deliverable" qualifier, or -1
	denial    bool // carries a denied-write marker
	bare      bool // names no file and requests nothing (set before pronouns resolve)
	last      int  // last phrase that names a file or requests one, or -1 (likewise)
}

func splitSentences(toks []token, item bool) []*unit {
	var units []*unit
	add := func(ts []token, asked bool) {
		if slices.ContainsFunc(ts, func(t token) bool { return t.kind == tokWord || t.kind == tokFile }) {
			u := &unit{toks: ts, item: item}
			u.question = asked && (ts[0].is(questionWords...) || leadQuestion(ts)) && !politeAsk(ts)
			units = append(units, u)
		}
	}
	start := 0
	for i, t := range toks {
		if !t.punct(sentenceEnds...) || t.low == "." && i > 0 && abbrevs[toks[i-1].low] {
			continue // no sentence end, or the period of an abbreviation
		}
		add(toks[start:i], t.low == "?")
		start = i + 1
	}
	add(toks[start:], false)
	return units
}

// leadQuestion reports whether a question opens its main clause with a wh-word after a leading phrase and a comma.
func leadQuestion(toks []token) bool {
	for i := 1; i+1 < len(toks) && i < leadSpan; i++ {
		if toks[i].punct(",") {
			return toks[i+1].is(whWords...)
		}
	}
	return false
}

// politeAsk reports whether a question is a request phrased politely.
func politeAsk(toks []token) bool {
	if !toks[0].is(politeOpeners...) {
		return false
	}
	for i := 1; i+1 < len(toks) && i < 8; i++ {
		t, n := toks[i], toks[i+1]
		if t.is(politeAbility...) && n.is("to") ||
			t.is("you") && n.is("mind") && i+2 < len(toks) && strings.HasSuffix(toks[i+2].low, "ing") {
			return true
		}
	}
	return false
}
