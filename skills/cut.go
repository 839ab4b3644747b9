package skills

import (
	"strings"
	"unicode"
)

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
	CutCharacter = "character" // no space in the part that fits: after the last character that fits
)

// Cut reports a description that was longer than [MaxDescription] in
// prompt form and was shortened, in default mode, to fit the prompt. (In
// strict mode such a skill is dropped instead.)
//
// The description is cut at the last sentence boundary that fits; when
// there is none, at the last clause boundary; then at the last word
// boundary; only a text with no space in the part that fits is cut between
// two characters. A sentence boundary wins over a later clause boundary on
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
// on character boundaries, so the result is valid UTF-8 when s is.
func cutDescription(s string, limit int) (string, *Cut) {
	r := []rune(s)
	if len(r) <= limit {
		return s, nil
	}
	room := limit - 1 // the marker is one character
	best := [4]int{}  // the end of the kept text at each kind of boundary; 0: none
	for i := 0; i < len(r) && i < room; i++ {
		if end := sentenceEnd(r, i); end > 0 && end <= room {
			best[0] = end
		}
		if clauseStart(r, i) && i > 0 {
			best[1] = i
		}
		if r[i] == ' ' && i > 0 {
			best[2] = i
		}
	}
	kinds := [...]string{CutSentence, CutClause, CutWord, CutCharacter}
	best[3] = room
	for k, end := range best {
		if end == 0 {
			continue
		}
		kept := strings.TrimRight(string(r[:end]), " ")
		n := len([]rune(kept))
		if n == 0 {
			continue
		}
		return kept + CutMarker, &Cut{Original: len(r), Kept: n, At: kinds[k]}
	}
	return CutMarker, &Cut{Original: len(r), At: CutCharacter} // limit 1: only the marker fits
}

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
