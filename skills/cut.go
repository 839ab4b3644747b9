package skills

import "unicode"

// MaxDescription is the longest description, in characters (Unicode code
// points), that the Agent Skills spec allows and that a prompt line holds.
const MaxDescription = 1024

// CutMarker ends a description that was cut to fit [MaxDescription].
const CutMarker = "…"

// The boundaries a description is cut at, best first; see [Cut].
const (
	CutSentence  = "sentence"  // after ". ", "! ", "? " (not before a lowercase letter), "。", "！" or "？"
	CutClause    = "clause"    // before "; ", ": ", ", ", " — ", " – ", "；", "：", "，" or "、"
	CutWord      = "word"      // before a space
	CutCharacter = "character" // no space in the part that fits: after the last user-perceived character that fits
)

// Cut reports a description that was longer than [MaxDescription] in
// prompt form and was shortened, in default mode, to fit the prompt. (In
// strict mode such a skill is dropped instead.)
//
// The description is cut at the last sentence boundary that fits; when
// there is none, at the last clause boundary; then at the last word
// boundary; only a text with no space in the part that fits is cut between
// two user-perceived characters. No cut splits one: a base letter and its
// combining marks, a ZWJ emoji sequence, an emoji and its skin-tone
// modifier or variation selector, a tag sequence and a flag (a pair of
// regional indicators) stay whole or go whole. A sentence boundary wins over a later clause boundary on
// purpose: dropping whole sentences leaves every instruction the agent is
// told whole, where a clause cut can turn "do X, unless Y" into "do X". The
// kept text is followed by [CutMarker], so the agent knows there is more,
// and the full text stays in the SKILL.md the prompt names.
type Cut struct {
	Original int    // characters of the description in prompt form, before the cut
	Kept     int    // characters kept, the marker not counted: Kept+1 <= MaxDescription
	At       string // the boundary cut at: CutSentence, CutClause, CutWord or CutCharacter
}

// cutDescription returns s unchanged when it has at most limit characters,
// else the longest prefix ending at the best boundary (see Cut) followed by
// CutMarker, limit characters at most in all, and what was cut. Cuts fall
// between user-perceived characters (see clusterBreak), so the result is
// valid UTF-8 when s is and ends with no half character.
func cutDescription(s string, limit int) (string, *Cut) {
	r := []rune(s)
	if len(r) <= limit {
		return s, nil
	}
	room := limit - 1 // the marker is one character
	best := [4]int{}  // the end of the kept text at each kind of boundary; 0: none
	for i := 0; i < len(r) && i < room; i++ {
		if end := sentenceEnd(r, i); end > 0 && end <= room && clusterBreak(r, end) {
			best[0] = end
		}
		if clauseStart(r, i) && i > 0 && clusterBreak(r, i) {
			best[1] = i
		}
		if r[i] == ' ' && i > 0 && clusterBreak(r, i) {
			best[2] = i
		}
	}
	kinds := [...]string{CutSentence, CutClause, CutWord, CutCharacter}
	best[3] = room
	for k, end := range best {
		if end = keptEnd(r, end); end == 0 {
			continue
		}
		return string(r[:end]) + CutMarker, &Cut{Original: len(r), Kept: end, At: kinds[k]}
	}
	return CutMarker, &Cut{Original: len(r), At: CutCharacter} // limit 1: only the marker fits
}

// keptEnd returns the end of the text kept when r is cut at end: trailing
// spaces dropped, then backed up to the start of the user-perceived
// character that end falls inside, if any. 0: nothing is kept.
func keptEnd(r []rune, end int) int {
	for end > 0 && (r[end-1] == ' ' || !clusterBreak(r, end)) {
		end--
	}
	return end
}

// clusterBreak reports whether r may be cut before r[i] without splitting
// a user-perceived character. It is a conservative subset of the Unicode
// grapheme cluster rules (UAX #29) that needs no tables beyond package
// unicode: a cut never falls before a combining mark (Mn, Me, Mc), a zero
// width joiner (U+200D) or the character after one, a variation selector
// (U+FE00–U+FE0F), an emoji modifier (U+1F3FB–U+1F3FF), a tag character
// (U+E0020–U+E007F), or the second regional indicator of a pair, pairs
// counted from the start of their run.
func clusterBreak(r []rune, i int) bool {
	if i <= 0 || i >= len(r) {
		return true
	}
	c := r[i]
	switch {
	case unicode.In(c, unicode.Mn, unicode.Me, unicode.Mc),
		c == zwj, r[i-1] == zwj,
		c >= 0xFE00 && c <= 0xFE0F,
		c >= 0x1F3FB && c <= 0x1F3FF,
		c >= 0xE0020 && c <= 0xE007F:
		return false
	case regionalIndicator(c) && regionalIndicator(r[i-1]):
		run := 0
		for j := i - 1; j >= 0 && regionalIndicator(r[j]); j-- {
			run++
		}
		return run%2 == 0
	}
	return true
}

const zwj = '\u200d'

func regionalIndicator(c rune) bool { return c >= 0x1F1E6 && c <= 0x1F1FF }

// sentenceEnd returns the end (exclusive) of a sentence whose final
// punctuation is r[i], or 0. ". " before a lowercase letter ("e.g. the")
// does not end a sentence.
func sentenceEnd(r []rune, i int) int {
	switch r[i] {
	case '。', '！', '？':
		return i + 1
	case '.', '!', '?':
		if i+1 < len(r) && r[i+1] == ' ' && (i+2 >= len(r) || !unicode.IsLower(r[i+2])) {
			return i + 1
		}
	}
	return 0
}

// clauseStart reports whether a clause separator starts at r[i].
func clauseStart(r []rune, i int) bool {
	switch r[i] {
	case '；', '：', '，', '、':
		return true
	case ';', ':', ',':
		return i+1 < len(r) && r[i+1] == ' '
	case ' ':
		return i+2 < len(r) && (r[i+1] == '—' || r[i+1] == '–') && r[i+2] == ' '
	}
	return false
}
