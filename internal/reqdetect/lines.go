package reqdetect

import (
	"runtime"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// srcLine is one line of the objective without its line ending, and the byte offset where it starts.
type srcLine struct {
	text string
	pos  int
}

// splitLines cuts text at "\n", dropping a "\r" before it.
func splitLines(text string) []srcLine {
	var lines []srcLine
	pos := 0
	for line := range strings.SplitSeq(text, "\n") {
		lines = append(lines, srcLine{text: strings.TrimSuffix(line, "\r"), pos: pos})
		pos += len(line) + 1
	}
	return lines
}

// suffixAt returns the offset in the objective of s, a suffix of l's text
// (after trailing space is trimmed when trimmed is set).
func (l srcLine) suffixAt(s string, trimmed bool) int {
	t := l.text
	if trimmed {
		t = strings.TrimRightFunc(t, unicode.IsSpace)
	}
	return l.pos + len(t) - len(s)
}

// readUnits cuts text into units and analyzes each as soon as it is read, on GOMAXPROCS goroutines: the analysis of a
// unit reads that unit alone.
func readUnits(text string) []*unit {
	lines := splitLines(text)
	var units []*unit
	read := make(chan *unit, 256)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for u := range read {
				analyze(u)
			}
		})
	}
	ticks, tickAt := 0, 0 // the backticks before offset tickAt: units come in text order
	add := func(u *unit) {
		if p := u.toks[0].pos; p >= tickAt {
			ticks, tickAt = ticks+strings.Count(text[tickAt:p], "`"), p
		}
		u.src, u.ticks, units = text, ticks, append(units, u)
		read <- u
	}
	var para []token
	// lead is the last unit of a line ending in ":" while the bullets below
	// it last; paraLead is the lead of the paragraph being read.
	var lead, paraLead *unit
	block := 0 // numbers paragraphs, bullets and items: the sentences of one share it
	// inputs is set under a heading or label for inputs (rule 10): by a heading until the next heading
	// or Deliverables label, by a label line while its bullets last.
	inputs, byHeading := false, false
	flush := func() {
		got := splitSentences(para, false)
		block++
		for _, u := range got {
			u.lead, u.block, u.inputs = paraLead, block, inputs
			add(u)
		}
		para = nil
	}
	for i := 0; i < len(lines); i++ {
		line := lines[i].text
		if rest, ok := labelLine(line); ok {
			flush()
			inputs = false
			var items []*unit
			items, i = readBlock(lines, i, rest, block)
			if len(items) > 0 {
				block = items[len(items)-1].block
			}
			for _, u := range items {
				add(u)
			}
			continue
		}
		trimmed := strings.TrimSpace(line)
		if trimmed == "" {
			flush()
			continue
		}
		body, bullet := stripBullet(line)
		heading := false
		if !bullet {
			body, heading = stripHeading(line)
		}
		if bullet || heading {
			flush()
		}
		switch {
		case heading:
			inputs, byHeading = inputLabel(body), true
		case !bullet && inputLabel(line):
			flush()
			inputs, byHeading = true, false
		case !bullet && !byHeading && len(para) == 0:
			inputs = false
		}
		switch {
		case bullet:
			paraLead = lead
		case heading || len(para) == 0:
			lead, paraLead = nil, nil
		}
		para = tokenizeAt(para, body, lines[i].suffixAt(body, false))
		if heading || strings.HasSuffix(strings.TrimRight(trimmed, emphasisMarks), ":") { // "**What I need back:**"
			n := len(units)
			flush()
			if !heading && len(units) > n {
				lead = units[len(units)-1]
			}
		}
	}
	flush()
	close(read)
	wg.Wait()
	return units
}

// cutLabel reports whether s starts with label, case folded, a run of blanks in s matching each
// space of label ("Zu  liefern:"), and returns the rest of s.
func cutLabel(s, label string) (string, bool) {
	for {
		word, more, spaced := strings.Cut(label, " ")
		if len(s) < len(word) || !strings.EqualFold(s[:len(word)], word) {
			return "", false
		}
		s = s[len(word):]
		if !spaced {
			return s, true
		}
		rest := strings.TrimLeft(s, blanks)
		if len(rest) == len(s) {
			return "", false
		}
		s, label = rest, more
	}
}

// inputLabel reports whether line is a heading or label for inputs, context or references (at most 64 bytes before a colon).
func inputLabel(line string) bool {
	s := strings.TrimLeft(strings.TrimSpace(line), "#")
	s = strings.Trim(strings.TrimSpace(s), emphasisMarks+blanks)
	for _, colon := range []string{":", wideColon} {
		s, _, _ = strings.Cut(s, colon) // the text before the colon, or all of it
	}
	s = strings.Trim(s, emphasisMarks+blanks)
	return len(s) <= 64 && slices.Contains(inputLabels, strings.ToLower(strings.Join(strings.Fields(s), " ")))
}

var inputHeading = rule{"input-heading", "input: listed under a heading or label for inputs, context or references (rule 10)"}

// listedInputs makes the files of a unit under an input heading or label
// that no verb made outputs inputs the text presents (rule 10).
func listedInputs(u *unit) {
	// A statement there ("Ops asks for the report as a file") asks for nothing; an imperative, polite or labelled line may.
	asks := u.verbAt(0) || u.toks[0].is(politeWords...) || slices.ContainsFunc(u.toks[:min(3, len(u.toks))], func(t token) bool { return t.punct(":") })
	for _, p := range u.phrases {
		p.signal = p.signal && (asks || p.delivered)
		for _, m := range p.mentions {
			label := m.verb >= 0 && m.verb+1 < m.tok && u.toks[m.verb+1].punct(":") // "Draft: `x.docx`", "Old output: `y.csv`"
			if m.role == roleNone || m.role == roleOutput && (m.verb < 0 || label) && !m.delivery {
				m.role, m.existing = roleInput, true
				m.decide(u, inputHeading, "", m.tok, m.tok)
			}
		}
	}
}

// readBlock collects the items of the Deliverables block whose label is lines[i]; rest is the label line's text after
// the colon, block the last block number before it. It returns the items and the index of the last line it consumed.
func readBlock(lines []srcLine, i int, rest string, block int) ([]*unit, int) {
	var items [][]token
	if strings.TrimSpace(rest) != "" {
		items = append(items, tokenizeAt(nil, rest, lines[i].suffixAt(rest, true)))
	}
	plain := len(items) == 0 // plain lines may follow a bare label directly
	blank := false
	last := i
	for j := i + 1; j < len(lines); j++ {
		line := lines[j].text
		if strings.TrimSpace(line) == "" {
			blank = true
			continue
		}
		if _, ok := labelLine(line); ok {
			break
		}
		if body, ok := stripBullet(line); ok {
			items = append(items, tokenizeAt(nil, body, lines[j].suffixAt(body, false)))
			blank, plain, last = false, false, j
			continue
		}
		if _, heading := stripHeading(line); heading || blank {
			break
		}
		indented := line[0] == ' ' || line[0] == '\t'
		switch {
		case indented && len(items) > 0:
			items[len(items)-1] = tokenizeAt(items[len(items)-1], line, lines[j].pos)
		case plain:
			items = append(items, tokenizeAt(nil, line, lines[j].pos))
		default:
			return itemUnits(items, block), last
		}
		last = j
	}
	return itemUnits(items, block), last
}

// itemUnits splits each item into its sentences; the sentences of one item share a block number (block+1 for the
// first item, block+2 for the next…).
func itemUnits(items [][]token, block int) []*unit {
	var units []*unit
	for n, it := range items {
		got := splitSentences(it, true)
		for _, u := range got {
			u.block = block + n + 1
		}
		units = append(units, got...)
	}
	return units
}

// labelLine reports whether line is a Deliverables label and returns the text after its colon.
func labelLine(line string) (string, bool) {
	s := strings.TrimSpace(line)
	if low := strings.ToLower(strings.TrimRight(s, labelTrailers)); strings.Contains(low, labelStem) &&
		(strings.HasSuffix(low, ":") || strings.HasSuffix(low, labelBelow)) {
		words := strings.FieldsFunc(low, func(r rune) bool { return !unicode.IsLetter(r) && r != '\'' })
		if !slices.ContainsFunc(words, func(w string) bool { return negators[w] || labelNegators[w] }) {
			return "", true // "The deliverables are:", "Our deliverables are listed below."
		}
	}
	s = strings.TrimLeft(s, "#")
	if body, ok := stripBullet(s); ok {
		s = body
	}
	s = strings.TrimLeft(strings.TrimSpace(s), emphasisMarks)
	if rest, ok := modifiedLabel(s); ok {
		return rest, true // "Expected outputs:", "Final deliverables: a.md"
	}
	first, _ := utf8.DecodeRuneInString(s)
	for _, label := range labelsByFold[foldKey(first)] {
		after, ok := cutLabel(s, label)
		if !ok {
			continue
		}
		after = strings.TrimLeft(after, emphasisMarks+blanks)
		switch {
		case after == "":
			return "", true
		case after[0] == ':':
			return strings.TrimLeft(after[1:], emphasisMarks+blanks), true
		case strings.HasPrefix(after, wideColon):
			return strings.TrimLeft(after[len(wideColon):], emphasisMarks+blanks), true // "成果物："
		}
		for _, dash := range labelDashes {
			if rest, ok := strings.CutPrefix(after, dash); ok && (rest == "" || rest[0] == ' ') {
				return strings.TrimLeft(rest, emphasisMarks+blanks), true // "Deliverables —"
			}
		}
	}
	return "", false
}

// modifiedLabel reads a label of up to labelSpan words whose last word is a labelTails word and
// whose other words are plain modifiers, followed by a colon: the text after the colon is returned.
func modifiedLabel(s string) (string, bool) {
	head, rest, ok := strings.Cut(s, ":")
	if !ok {
		return "", false
	}
	words := strings.Fields(strings.ToLower(strings.Trim(head, emphasisMarks+blanks)))
	if len(words) < 2 || len(words) > labelSpan || !labelTails[words[len(words)-1]] ||
		slices.ContainsFunc(words[:len(words)-1], func(w string) bool {
			return labelModifierStops[w] || functionWords[w] || lemmaOf(w) != "" && !strings.HasSuffix(w, "ed")
		}) {
		return "", false
	}
	return strings.TrimLeft(rest, emphasisMarks+blanks), true
}

// stripBullet strips a list marker ("-", "1.", "a)", "- [ ]") from line.
func stripBullet(line string) (string, bool) {
	s := strings.TrimLeft(line, " \t")
	n := 0
	switch r, w := utf8.DecodeRuneInString(s); { // an empty s decodes to RuneError, no marker
	case strings.ContainsRune(bulletMarks, r):
		n = w
	case r >= '0' && r <= '9':
		for n < len(s) && n < 3 && s[n] >= '0' && s[n] <= '9' {
			n++
		}
		if n >= len(s) || !strings.ContainsRune(numberClosers, rune(s[n])) {
			return line, false
		}
		n++
	case (r >= 'a' && r <= 'z') && len(s) > 1 && s[1] == ')':
		n = 2
	default:
		return line, false
	}
	if n < len(s) && s[n] != ' ' && s[n] != '\t' {
		return line, false
	}
	body := strings.TrimLeft(s[n:], " \t")
	for _, box := range checkboxMarks {
		if rest, ok := strings.CutPrefix(body, box); ok {
			body = strings.TrimLeft(rest, " \t")
		}
	}
	return body, true
}

// stripHeading strips a markdown heading marker from line.
func stripHeading(line string) (string, bool) {
	s := strings.TrimLeft(line, " \t")
	if !strings.HasPrefix(s, "#") {
		return line, false
	}
	body := strings.TrimLeft(s, "#")
	if body != "" && body[0] != ' ' && body[0] != '\t' {
		return line, false
	}
	return body, true
}

// splitSentences splits toks into units at sentence-ending punctuation.
