package reqdetect

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ---------------------------------------------------------------------------
// Rule 9: tasks written in other languages

// langTable holds the cue words of one language (rule 9), one field a
// role: words separated by spaces, "_" for a space inside a cue
// ("fichiers_de_sortie"), "*" ending a stem ("exportier*" reads
// "exportiere", "exportieren"), "…" joining the head of a separable verb to
// its particle ("voeg…bij"). A Latin word matches a cue when both, folded
// (foldWord), are equal or the word starts with the stem; it may carry an
// elided article before an apostrophe ("l'export") and clitics after a
// hyphen ("exporte-le"). A CJK cue matches anywhere in a run of CJK text.
// Adding a language is adding a table here and cases in testdata.
type langTable struct {
	code, name string
	// Verb cues, by the role they give the files they govern: given with
	// the task ("anbei"), attachment nouns ("Anhang"), delivery and export
	// ("hänge an"), send ("schick"), making ("erstelle"), converting
	// ("konvertiere"), reading ("lies") and answering in text ("antworte").
	presented, attach, delivery, send, output, transform, input, reply string
	// inline place an output in the reply ("hier"); negators negate the
	// nearest verb ("nicht"); fileWords are file nouns ("Datei").
	inline, negators, fileWords string
	// Rule 10: model words before a file ("wie", "Vorlage"), or right after
	// it in CJK text ("と同じ"), and model nouns after "as" ("als Vorlage").
	model, modelAfter, modelNouns string
	// Destination words before a file ("als", "成"); namingPreps are those
	// that name a thing made with no verb; source words before or after it
	// ("aus", "から").
	destPreps, namingPreps, sourcePreps, sourceAfter string
	// Rule 11: product nouns ("Skript") and verbs that build a feature
	// ("implementiere").
	productNouns, featureVerbs string
	// Questions about something ("wie", "如何") and statements of what was
	// done ("habe", "了", "已经").
	whWords, howTo, perfect, doneAfter, doneBefore string
	// function words tell the language; deliverables and inputs are the
	// headings and labels of outputs ("Ergebnis") and of inputs ("Kontext").
	function, deliverables, inputs string
}

var langTables = []*langTable{langDE, langFR, langES, langPT, langIT, langNL, langJA, langZH, langKO}

// The cue lists the reader uses are the union of every table's field.
var (
	foreignPresented, foreignAttachNouns, foreignDelivery, foreignSend, foreignOutput, foreignTransform,
	foreignInput, foreignReply, foreignInline, foreignNegators, foreignFileWords, foreignModel,
	foreignModelAfter, foreignModelNouns, foreignDestPreps, foreignNamingPreps, foreignSourcePreps,
	foreignSourceAfter, foreignProductNouns, foreignFeatureVerbs, foreignWhWords, foreignHowTo, foreignPerfect,
	foreignDoneAfter, foreignDoneBefore []string
	foreignSeparable     []separable
	foreignFunctionWords = map[string]bool{}
	// englishFunctionWords are common English words: a unit with more
	// foreign function words than these, or with CJK text, is foreign.
	englishFunctionWords = newSet("the and to of is it for with this that please me you your from into as be " +
		"are on by then my our all should must can will")
	// sharedFileWords are binary formats every language names as such.
	sharedFileWords = "file pdf xlsx xls docx pptx png jpg zip csv excel powerpoint"
	// foreignProductFlags open a command-line option whose value a product
	// writes ("--output summary.json", "-o out.csv"): rule 11.
	foreignProductFlags = []string{"--", "-o"}
)

// separable is a verb whose particle stands apart at the end of the clause
// ("Voeg het bestand bij", "Lade sie hoch").
type separable struct {
	head, particle string
	class          cueClass
}

func words(s string) []string {
	f := strings.Fields(s)
	for i, w := range f {
		f[i] = strings.ReplaceAll(w, "_", " ")
	}
	return f
}

// buildLists joins the tables into the cue lists and adds their labels to
// labelWords (longest first, so "Ergebnisse" is tried before "Ergebnis")
// and inputLabels.
func buildLists() {
	var labels []string
	foreignFileWords = words(sharedFileWords)
	foreignModelNouns = []string{"template"}
	for _, t := range langTables {
		for _, f := range []struct {
			dst   *[]string
			src   string
			class cueClass
		}{
			{&foreignPresented, t.presented, cuePresented}, {&foreignAttachNouns, t.attach, cueAttached},
			{&foreignDelivery, t.delivery, cueDelivery}, {&foreignSend, t.send, cueSend},
			{&foreignOutput, t.output, cueOutput}, {&foreignTransform, t.transform, cueTransform},
			{&foreignInput, t.input, cueInput}, {&foreignReply, t.reply, cueReply},
			{&foreignInline, t.inline, 0}, {&foreignNegators, t.negators, 0}, {&foreignFileWords, t.fileWords, 0},
			{&foreignModel, t.model, 0}, {&foreignModelAfter, t.modelAfter, 0}, {&foreignModelNouns, t.modelNouns, 0},
			{&foreignDestPreps, t.destPreps, 0}, {&foreignNamingPreps, t.namingPreps, 0},
			{&foreignSourcePreps, t.sourcePreps, 0}, {&foreignSourceAfter, t.sourceAfter, 0},
			{&foreignProductNouns, t.productNouns, 0}, {&foreignFeatureVerbs, t.featureVerbs, 0},
			{&foreignWhWords, t.whWords, 0}, {&foreignHowTo, t.howTo, 0}, {&foreignPerfect, t.perfect, 0},
			{&foreignDoneAfter, t.doneAfter, 0}, {&foreignDoneBefore, t.doneBefore, 0},
		} {
			for _, w := range words(f.src) {
				if head, particle, ok := strings.Cut(w, "…"); ok {
					foreignSeparable = append(foreignSeparable, separable{head, particle, f.class})
					continue
				}
				*f.dst = append(*f.dst, w)
			}
		}
		for _, w := range words(t.function) {
			foreignFunctionWords[w] = true
		}
		labels = append(labels, words(t.deliverables)...)
		inputLabels = append(inputLabels, words(t.inputs)...)
	}
	slices.SortStableFunc(labels, func(a, b string) int { return len(b) - len(a) })
	labelWords = append(labelWords, labels...)
}

// cueClass is the role a cue word of another language gives the files it
// governs (the lists are in lexicon.go).
type cueClass uint8

const (
	cueNone      cueClass = iota
	cuePresented          // the file is given with the task: an input
	cueAttached           // an attachment noun ("Anhang", "附件"): presented or a delivery marker, by context
	cueDelivery           // attach, export, save, upload: asks for a file by itself
	cueSend               // send, share: delivers a file named elsewhere
	cueOutput             // create, write: its files are outputs
	cueTransform          // convert: its object is the source, its destination the output
	cueInput              // read, summarize, use
	cueReply              // reply, explain: an answer in text
)

// foreignCueClasses are tried in this order on a word: a presented form is
// read before the delivery stem it shares ("anbei", "adjunto").
var foreignCueClasses = []struct {
	class cueClass
	words *[]string
}{
	{cuePresented, &foreignPresented},
	{cueAttached, &foreignAttachNouns},
	{cueReply, &foreignReply},
	{cueTransform, &foreignTransform},
	{cueDelivery, &foreignDelivery},
	{cueSend, &foreignSend},
	{cueOutput, &foreignOutput},
	{cueInput, &foreignInput},
}

// cueHit is one cue found in a unit: at token tok, byte off inside it.
type cueHit struct {
	tok, off int
	class    cueClass
	neg      bool
}

// Language-dependent reading spans, in tokens.
const (
	negAheadSpan       = 3  // a negator reaches a verb at most this far after it
	negBehindSpan      = 4  // or this far before it, with no punctuation between
	modelSpan          = 4  // a model word stands at most this far before its file
	cjkNegBytes        = 9  // within one CJK run, a negator touches a verb at most this many bytes away
	productNameBytes   = 24 // in CJK text a product noun starts at most this many bytes after the start of the cue naming it
	productSubjectSpan = 4  // a product noun stands at most this far before the verb it is the subject of
)

// isForeign reports whether u is written in another language than English:
// it has CJK text, or more foreignFunctionWords than englishFunctionWords.
func isForeign(u *unit) bool {
	foreign, english := 0, 0
	for _, t := range u.toks {
		if t.kind == tokFile {
			continue
		}
		if strings.ContainsFunc(t.text, isCJK) {
			return true
		}
		switch {
		case foreignFunctionWords[t.low]:
			foreign++
		case englishFunctionWords[t.low]:
			english++
		}
	}
	if foreign > english {
		return true
	}
	if english > 0 {
		return false
	}
	// No English function word: a cue word no English lexicon lists makes
	// it foreign ("Konvertiere daten.csv in daten.xlsx", "Salva i risultati
	// come risultati.csv").
	for _, t := range u.toks {
		if t.kind == tokWord && lemmaOf(t.low) == "" && latinCue(foldWord(t.text)) != cueNone {
			return true
		}
	}
	return false
}

// foldWord lower-cases w and drops the accents of Latin letters, so that
// "Hänge", "hange" and "hänge" match one cue.
func foldWord(w string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(w) {
		if f, ok := accentFolds[r]; ok {
			r = f
		}
		b.WriteRune(r)
	}
	return b.String()
}

var accentFolds = map[rune]rune{
	'á': 'a', 'à': 'a', 'â': 'a', 'ä': 'a', 'ã': 'a', 'å': 'a', 'é': 'e', 'è': 'e', 'ê': 'e', 'ë': 'e',
	'í': 'i', 'ì': 'i', 'î': 'i', 'ï': 'i', 'ó': 'o', 'ò': 'o', 'ô': 'o', 'ö': 'o', 'õ': 'o', 'ú': 'u',
	'ù': 'u', 'û': 'u', 'ü': 'u', 'ç': 'c', 'ñ': 'n', '’': '\'',
}

// folded caches every cue list folded once, and latinIndex its Latin cues
// for look-up: the exact words in a set, the stems by their first
// stemKey bytes (fewer for a shorter stem).
var (
	folded     = map[*[]string][]string{}
	latinIndex = map[*[]string]*cueIndex{}
	// cjkCues holds the CJK cues of each list by their first rune.
	cjkCues = map[*[]string]map[rune][]string{}
)

const stemKey = 3

type cueIndex struct {
	exact map[string]bool
	stems map[string][]string
}

func foldedList(l *[]string) []string {
	if f, ok := folded[l]; ok {
		return f
	}
	f := make([]string, len(*l))
	ix := &cueIndex{exact: map[string]bool{}, stems: map[string][]string{}}
	for i, c := range *l {
		f[i] = foldWord(c)
		if r, _ := utf8.DecodeRuneInString(f[i]); isCJK(r) {
			if cjkCues[l] == nil {
				cjkCues[l] = map[rune][]string{}
			}
			cjkCues[l][r] = append(cjkCues[l][r], f[i])
			continue
		}
		if stem, ok := strings.CutSuffix(f[i], "*"); ok {
			k := stem[:min(len(stem), stemKey)]
			ix.stems[k] = append(ix.stems[k], stem)
		} else {
			ix.exact[f[i]] = true
		}
	}
	folded[l], latinIndex[l] = f, ix
	return f
}

func init() {
	buildLists()
	for _, c := range foreignCueClasses {
		foldedList(c.words)
	}
	for _, l := range []*[]string{&foreignNegators, &foreignModel, &foreignModelAfter, &foreignInline,
		&foreignDestPreps, &foreignNamingPreps, &foreignProductNouns, &foreignFileWords, &foreignSourcePreps,
		&foreignSourceAfter, &foreignAttachNouns, &foreignModelNouns, &foreignFeatureVerbs, &foreignWhWords,
		&foreignHowTo, &foreignPerfect} {
		foldedList(l)
	}
}

func startsUpper(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return unicode.IsUpper(r)
}

// separableCue returns the class of a separable verb whose head is the
// folded word w and whose particle is one of the words still ahead in its
// unit (later), or cueNone ("Voeg het bestand bij", "Lade sie hoch").
func separableCue(w string, later map[string]int) cueClass {
	for _, sv := range foreignSeparable {
		step()
		if foldWord(sv.head) == w && later[sv.particle] > 0 {
			return sv.class
		}
	}
	return cueNone
}

// latinCue returns the class of the folded word w, or cueNone.
func latinCue(w string) cueClass {
	for _, c := range foreignCueClasses {
		if inList(w, c.words) {
			return c.class
		}
	}
	return cueNone
}

func isCJKString(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return isCJK(r)
}

// inList reports whether the folded word w is one of the Latin cues of l.
func inList(w string, l *[]string) bool {
	step()
	ix := latinIndex[l]
	if ix.exact[w] {
		return true
	}
	for n := 1; n <= stemKey && n <= len(w); n++ {
		for _, stem := range ix.stems[w[:n]] {
			if strings.HasPrefix(w, stem) {
				return true
			}
		}
	}
	return false
}

// cjkIndex returns every byte offset in s of a CJK cue of l, each offset
// once, in order.
func cjkIndex(s string, l *[]string) []int {
	step()
	ix := cjkCues[l]
	if len(ix) == 0 {
		return nil
	}
	var at []int
	for k, r := range s {
		for _, cue := range ix[r] {
			if strings.HasPrefix(s[k:], cue) {
				at = append(at, k)
				break
			}
		}
	}
	return at
}

// foreignReading is what readForeign finds in a unit.
type foreignReading struct {
	hits  []cueHit // verb cues, in text order
	cjk   []bool   // token holds CJK text
	words []string // each word token folded ("" for others)
	// first[i] is the index in hits of the first cue at token i or after
	// it (len(hits) past the last): the cues of token i are
	// hits[first[i]:first[i+1]]. Every look-up below reads through it, so
	// the reading stays linear in the unit's length.
	first []int
	// inlineFrom[i] and deliverFrom[i] say whether an inline marker, or a
	// delivery cue not negated, stands at token i or after it;
	// fileWordFrom[i] is the first file noun or binary format at or after
	// token i before the end of its clause, or -1.
	inlineFrom, deliverFrom, negDeliverFrom []bool
	fileWordFrom                            []int
	// barrier[i] is the last token at or before i that is a parenthesis
	// or ";", or -1: a verb does not govern a file across one ("- note.pdf
	// (ne pas créer de brouillon.docx)").
	barrier []int
	// product[k] says hits[k] is a product's verb or names a product
	// ("Der Export schreibt", "导出功能"): it asks for no file.
	product []bool
	// feature says the unit asks to build a product feature (featureUnit).
	feature bool
}

// scan finds the cue words of u, decides which negators reach which verb,
// and records the CJK tokens.
func scan(u *unit) *foreignReading {
	r := &foreignReading{cjk: make([]bool, len(u.toks)), words: make([]string, len(u.toks))}
	type negAt struct{ tok, off int }
	var negs []negAt
	// later counts the words still ahead of the token being read, for the
	// particle of a separable verb ("voeg … bij", "lade … hoch").
	later := map[string]int{}
	for _, t := range u.toks {
		if t.kind == tokWord {
			later[foldWord(t.text)]++
		}
	}
	for i, t := range u.toks {
		if t.kind == tokFile || t.kind == tokPunct {
			continue
		}
		if strings.ContainsFunc(t.text, isCJK) {
			r.cjk[i] = true
			var local []cueHit
			seen := map[int]bool{}
			for _, c := range foreignCueClasses {
				for _, off := range cjkIndex(t.low, c.words) {
					if !seen[off] {
						seen[off] = true
						local = append(local, cueHit{tok: i, off: off, class: c.class})
					}
				}
			}
			slices.SortFunc(local, func(a, b cueHit) int { return a.off - b.off })
			r.hits = append(r.hits, local...)
			for _, off := range cjkIndex(t.low, &foreignNegators) {
				negs = append(negs, negAt{i, off})
			}
			continue
		}
		w := foldWord(t.text)
		if t.kind == tokWord {
			later[w]--
		}
		if k := strings.IndexByte(w, '\''); k > 0 && k <= 3 {
			// "l'export", "n'exporte", "qu'il": an elided article or
			// negation before the word.
			if w[:k+1] == "n'" {
				negs = append(negs, negAt{i, 0})
			}
			w = w[k+1:]
		}
		r.words[i] = w
		if i > 0 && u.toks[i-1].kind != tokPunct && startsUpper(t.text) && !inList(w, &foreignAttachNouns) {
			continue // a noun or a name ("die Zusammenfassung", "der Export"), not a verb
		}
		if inList(w, &foreignNegators) {
			negs = append(negs, negAt{i, 0})
			continue
		}
		c := latinCue(w)
		if c == cueNone {
			c = separableCue(w, later)
		}
		if c == cueNone {
			if head, _, ok := strings.Cut(w, "-"); ok && head != "" {
				c = latinCue(head) // "exporte-le", "joins-la"
			}
		}
		if c != cueNone {
			r.hits = append(r.hits, cueHit{tok: i, class: c})
		}
	}
	// An attachment noun with another verb cue beside it is a delivery
	// marker ("Schick mir die Datei als Anhang"); alone it presents what
	// the task brings ("Im Anhang findest du daten.csv").
	other := slices.ContainsFunc(r.hits, func(h cueHit) bool {
		return h.class >= cueDelivery && h.class <= cueTransform
	})
	for k := range r.hits {
		if r.hits[k].class == cueAttached {
			r.hits[k].class = cuePresented
			if other {
				r.hits[k].class = cueDelivery
			}
		}
	}
	n := len(u.toks)
	r.barrier = make([]int, n)
	for i, t := range u.toks {
		r.barrier[i] = -1
		if i > 0 {
			r.barrier[i] = r.barrier[i-1]
		}
		if t.punct(asideMarks...) {
			r.barrier[i] = i
		}
	}
	r.first = make([]int, n+1)
	for i, k := n, len(r.hits); i >= 0; i-- {
		for k > 0 && r.hits[k-1].tok >= i {
			k--
			step()
		}
		r.first[i] = k
	}
	r.markStated(u)
	r.product = make([]bool, len(r.hits))
	for k, h := range r.hits {
		r.product[k] = r.productName(u, h)
	}
	for _, ng := range negs {
		if h := r.negated(u, ng.tok, ng.off); h >= 0 {
			r.hits[h].neg = true
		}
	}
	r.inlineFrom, r.deliverFrom, r.negDeliverFrom = make([]bool, n+1), make([]bool, n+1), make([]bool, n+1)
	r.fileWordFrom = make([]int, n+1)
	r.fileWordFrom[n] = -1
	for i := n - 1; i >= 0; i-- {
		step()
		t := u.toks[i]
		r.inlineFrom[i] = r.inlineFrom[i+1] ||
			r.cjk[i] && len(cjkIndex(t.low, &foreignInline)) > 0 || !r.cjk[i] && inList(r.words[i], &foreignInline)
		r.deliverFrom[i], r.negDeliverFrom[i] = r.deliverFrom[i+1], r.negDeliverFrom[i+1]
		for _, h := range r.hits[r.first[i]:r.first[i+1]] {
			if h.class == cueDelivery || h.class == cueSend {
				r.deliverFrom[i] = r.deliverFrom[i] || !h.neg
				r.negDeliverFrom[i] = r.negDeliverFrom[i] || h.neg
			}
		}
		r.fileWordFrom[i] = r.fileWordFrom[i+1]
		switch {
		case t.kind == tokPunct && t.punct(";", "。", "."):
			r.fileWordFrom[i] = -1
		case r.fileWord(u, i):
			r.fileWordFrom[i] = i
		}
	}
	return r
}

// markStated turns a cue that states what was done into a presented one
// (foreignPerfect before it, foreignDoneAfter or foreignDoneBefore around
// it in CJK text): "Ich habe bericht.pdf gestern hochgeladen", "我已经上传了
// report.pdf".
func (r *foreignReading) markStated(u *unit) {
	aux := -1 // the last perfect auxiliary, while no punctuation follows it
	k := 0
	for i, t := range u.toks {
		switch {
		case t.kind == tokPunct:
			aux = -1
		case !r.cjk[i] && inList(r.words[i], &foreignPerfect):
			aux = i
		}
		for ; k < len(r.hits) && r.hits[k].tok == i; k++ {
			h := &r.hits[k]
			if h.class < cueDelivery || h.class > cueTransform {
				continue
			}
			if aux >= 0 && aux < i || r.cjk[i] && doneAround(t.low, h.off) {
				h.class = cuePresented
			}
		}
	}
}

// doneAround reports whether a CJK run marks the cue at byte off as done.
func doneAround(run string, off int) bool {
	for _, d := range foreignDoneBefore {
		if strings.HasSuffix(run[:off], d) {
			return true
		}
	}
	tail := run[off:]
	for _, c := range []*[]string{&foreignDelivery, &foreignSend, &foreignOutput, &foreignTransform} {
		for _, cue := range *c {
			if rest, ok := strings.CutPrefix(tail, cue); ok {
				for _, d := range foreignDoneAfter {
					if strings.HasPrefix(rest, d) || strings.HasPrefix(rest, "し"+d) {
						return true
					}
				}
			}
		}
	}
	return false
}

// question reports whether u is a question that asks about something, not
// for it: it ends in a question mark and opens with a foreignWhWords word,
// or it has a foreignHowTo word in CJK text.
func (r *foreignReading) question(u *unit) bool {
	for i, t := range u.toks {
		if r.cjk[i] && len(cjkIndex(t.low, &foreignHowTo)) > 0 {
			return true
		}
	}
	last := u.toks[len(u.toks)-1]
	end := last.pos + len(last.text)
	if end < 0 || end > len(u.src) {
		return false
	}
	rest := strings.TrimLeft(u.src[end:], " \t")
	asked := strings.HasPrefix(rest, "?") || strings.HasPrefix(rest, "？")
	first := 0
	for first < len(u.toks) && u.toks[first].kind == tokPunct {
		first++
	}
	return asked && first < len(u.toks) && inList(foldWord(u.toks[first].text), &foreignWhWords)
}

// at returns the cues of token i.
func (r *foreignReading) at(i int) []cueHit {
	if i < 0 || i >= len(r.first)-1 {
		return nil
	}
	return r.hits[r.first[i]:r.first[i+1]]
}

// negated returns the verb cue a negator at token tok (byte off in a CJK
// run) reaches, or -1: the nearest after it within negAheadSpan tokens, or
// else before it within negBehindSpan tokens with no punctuation between; in
// CJK text the nearest in the same run within cjkNegBytes bytes, or in the
// run right before ("첨부하지 마세요").
func (r *foreignReading) negated(u *unit, tok, off int) int {
	if r.cjk[tok] {
		best, dist := -1, cjkNegBytes+1
		for k := r.first[max(tok-1, 0)]; k < r.first[tok+1]; k++ {
			step()
			h, d := r.hits[k], -1
			switch {
			case h.tok == tok && h.off >= off:
				d = h.off - off
			case h.tok == tok:
				d = off - h.off
			case off <= cjkNegBytes: // the run right before
				d = off + 1
			}
			if d >= 0 && d < dist {
				best, dist = k, d
			}
		}
		return best
	}
	if len(r.at(tok)) > 0 {
		return r.first[tok] // "n'exporte"
	}
	for j := tok + 1; j <= tok+negAheadSpan && j < len(u.toks); j++ {
		if len(r.at(j)) > 0 && !r.punctBetween(u, tok, j) {
			return r.first[j]
		}
	}
	// Behind it, a verb of making or delivering is preferred to a reading
	// word between ("Schreib die Zusammenfassung nicht in eine Datei").
	any := -1
	for j := tok - 1; j >= 0 && j >= tok-negBehindSpan && !r.punctBetween(u, j, tok); j-- {
		if len(r.at(j)) == 0 {
			continue
		}
		k := r.first[j+1] - 1
		if c := r.hits[k].class; c >= cueDelivery && c <= cueTransform {
			return k
		}
		if any < 0 {
			any = k
		}
	}
	return any
}

func (r *foreignReading) punctBetween(u *unit, a, b int) bool {
	for k := a + 1; k < b; k++ {
		if u.toks[k].kind == tokPunct {
			return true
		}
	}
	return false
}

// postpositional reports whether u is Japanese or Korean, whose verbs come
// after their objects: a file takes the role of the verb after it first.
func postpositional(u *unit) bool {
	for _, t := range u.toks {
		if strings.ContainsFunc(t.text, func(r rune) bool {
			return unicode.In(r, unicode.Hiragana, unicode.Katakana, unicode.Hangul)
		}) {
			return true
		}
	}
	return false
}

// governing returns the verb cue that governs the file at token i: the
// nearest before it, or after it if none is before (the other way round in
// Japanese and Korean), or -1.
func (r *foreignReading) governing(i int, after bool) int {
	before, next := r.first[i]-1, -1
	if k := r.first[i+1]; k < len(r.hits) {
		next = k
	}
	if before >= 0 && r.barrier[i] > r.hits[before].tok {
		before = -1
	}
	if next >= 0 && r.barrier[r.hits[next].tok] > i {
		next = -1
	}
	if after && next >= 0 || before < 0 {
		return next
	}
	return before
}

// modelAt reports whether the file at i is named as a model, template,
// example or earlier version (rule 10): a foreignModel word within
// modelSpan tokens before it and no verb cue between ("im gleichen Format
// wie X", "la plantilla X", "模板 X"), or a foreignModelAfter word in the
// run right after it ("X と同じ形式で", "X 처럼").
func (r *foreignReading) modelAt(u *unit, i int) bool {
	for k := i - 1; k >= 0 && k >= i-modelSpan; k-- {
		t := u.toks[k]
		if t.kind == tokFile || r.verbTok(k) && !r.cjk[k] {
			break
		}
		if r.cjk[k] && len(cjkIndex(t.low, &foreignModel)) > 0 || !r.cjk[k] && inList(r.words[k], &foreignModel) {
			return true
		}
		if r.cjk[k] {
			break
		}
	}
	if i+1 < len(u.toks) && r.cjk[i+1] {
		for _, off := range cjkIndex(u.toks[i+1].low, &foreignModelAfter) {
			if off <= cjkNegBytes {
				return true
			}
		}
	}
	if i+1 < len(u.toks) && !r.cjk[i+1] && inList(r.words[i+1], &foreignModelAfter) {
		return true
	}
	// "mit X als Vorlage", "X comme modèle": an "as" word and a model noun
	// after the file, an article between allowed.
	if i+2 < len(u.toks) && !r.cjk[i+1] && inList(r.words[i+1], &foreignNamingPreps) {
		for k := i + 2; k < len(u.toks) && k <= i+3; k++ {
			if inList(foldWord(u.toks[k].text), &foreignModelNouns) {
				return true
			}
		}
	}
	return false
}

// featureUnit reports whether u asks to build a product feature: a
// foreignFeatureVerbs word and a foreignProductNouns word in it (rule 11).
func (r *foreignReading) featureUnit(u *unit) bool {
	verb, noun := false, false
	for i, t := range u.toks {
		if r.cjk[i] {
			verb = verb || len(cjkIndex(t.low, &foreignFeatureVerbs)) > 0
			noun = noun || len(cjkIndex(t.low, &foreignProductNouns)) > 0
			continue
		}
		verb = verb || inList(r.words[i], &foreignFeatureVerbs)
		noun = noun || productWord(t.text)
	}
	return verb && noun
}

// productWord reports whether a Latin word, or a part of it between
// hyphens, is a product noun ("Export-Button").
func productWord(w string) bool {
	for part := range strings.SplitSeq(foldWord(w), "-") {
		if inList(part, &foreignProductNouns) {
			return true
		}
	}
	return false
}

func (r *foreignReading) verbTok(k int) bool { return len(r.at(k)) > 0 }

// destAt reports whether the file at i is a destination: right after a
// foreignDestPreps word ("als X", "整理成 X", "保存为 X") or, in Japanese and
// Korean, right before a particle of destination ("X로", "Xに").
func (r *foreignReading) destAt(u *unit, i int) bool { return r.destBy(u, i, &foreignDestPreps) }

// destBy reports whether a word of preps makes the file at i a
// destination (destAt).
func (r *foreignReading) destBy(u *unit, i int, preps *[]string) bool {
	if i > 0 {
		p := u.toks[i-1]
		if !r.cjk[i-1] && inList(r.words[i-1], preps) {
			return true
		}
		if r.cjk[i-1] {
			for _, d := range *preps {
				if isCJKString(d) && strings.HasSuffix(p.low, d) {
					return true
				}
			}
		}
	}
	if i+1 < len(u.toks) && r.cjk[i+1] {
		for _, d := range *preps {
			if isCJKString(d) && strings.HasPrefix(u.toks[i+1].low, d) {
				return true
			}
		}
	}
	return false
}

// sourceAt reports whether the file at i is a source the work reads: after
// a source preposition (foreignSourcePreps: "aus daten.csv", "从 data.csv"),
// before a CJK source particle (foreignSourceAfter: "data.csvから"), or
// followed by a destination word and another file ("exportiere daten.csv
// als daten.xlsx").
func (r *foreignReading) sourceAt(u *unit, i int) bool {
	if i > 0 && !r.cjk[i-1] && inList(r.words[i-1], &foreignSourcePreps) {
		return true
	}
	if i > 0 && r.cjk[i-1] {
		for _, s := range foreignSourcePreps {
			if isCJKString(s) && strings.HasSuffix(u.toks[i-1].low, s) {
				return true
			}
		}
	}
	if i+1 < len(u.toks) && r.cjk[i+1] {
		for _, s := range foreignSourceAfter {
			if strings.HasPrefix(u.toks[i+1].low, s) {
				return true
			}
		}
	}
	return i+2 < len(u.toks) && u.toks[i+2].kind == tokFile && r.destAt(u, i+2)
}

// productSubject reports whether the cue hits[g] governing the file at i
// has a product as its subject (rule 11): a foreignProductNouns word at
// most productSubjectSpan tokens before the cue ("Der Export schreibt …", "Le
// script génère …", "El botón de exportar genera …"), or in CJK text in the
// cue's run before it or in the run right before the file ("导出功能生成的",
// "エクスポート機能が壊れた orders.csv を出力する").
func (r *foreignReading) productSubject(u *unit, g, i int) bool {
	h := r.hits[g]
	if r.cjk[h.tok] {
		if slices.ContainsFunc(cjkIndex(u.toks[h.tok].low, &foreignProductNouns), func(off int) bool { return off < h.off }) {
			return true
		}
		return i > 0 && r.cjk[i-1] && i-1 != h.tok && len(cjkIndex(u.toks[i-1].low, &foreignProductNouns)) > 0
	}
	for k := h.tok - 1; k >= 0 && k >= h.tok-productSubjectSpan; k-- {
		if u.toks[k].kind == tokFile || u.toks[k].punct(asideMarks...) {
			return false
		}
		if productWord(u.toks[k].text) {
			return true
		}
	}
	return false
}

// productName reports whether the cue h is part of a product's name: in CJK
// text a product noun right after it in its run ("导出功能", "エクスポート機能"),
// in Latin text a product noun right before it and a linking word
// ("El botón de exportar", "le bouton d'export").
func (r *foreignReading) productName(u *unit, h cueHit) bool {
	if r.cjk[h.tok] {
		return slices.ContainsFunc(cjkIndex(u.toks[h.tok].low, &foreignProductNouns), func(off int) bool {
			return off > h.off && off <= h.off+productNameBytes
		})
	}
	for k := h.tok - 1; k >= 0 && k >= h.tok-2; k-- {
		if productWord(u.toks[k].text) {
			return true
		}
	}
	return false
}

// flagAt reports whether the file at i is the value of a command-line
// option ("--output summary.json"): rule 11, a file the product writes.
func flagAt(u *unit, i int) bool {
	if i == 0 {
		return false
	}
	p := u.toks[i-1].text
	for _, f := range foreignProductFlags {
		if strings.HasPrefix(p, f) && len(p) > 1 {
			return true
		}
	}
	return false
}

// inlineAfter reports whether an inline marker ("hier im Chat", "ici",
// "在这里") follows the file at i in its unit.
func (r *foreignReading) inlineAfter(i int) bool { return r.inlineFrom[i+1] }

// deliveredAfter reports whether a delivery cue, not negated, follows token
// i ("… als umsatz.xlsx und hänge sie an"): it delivers the outputs before
// it.
func (r *foreignReading) deliveredAfter(i int) bool { return r.deliverFrom[i+1] }

// fileWord reports whether token j is a file noun or binary format
// (foreignFileWords: "eine PDF-Datei", "un fichier Excel", "PDF檔"), not
// negated.
func (r *foreignReading) fileWord(u *unit, j int) bool {
	t := u.toks[j]
	hit := r.cjk[j] && len(cjkIndex(t.low, &foreignFileWords)) > 0
	if !r.cjk[j] && t.kind != tokFile {
		for part := range strings.SplitSeq(foldWord(t.text), "-") {
			hit = hit || inList(part, &foreignFileWords)
		}
	}
	negd := j > 0 && !r.cjk[j-1] && inList(r.words[j-1], &foreignNegators) ||
		j > 1 && !r.cjk[j-2] && inList(r.words[j-2], &foreignNegators)
	return hit && !negd
}

// fileWordAt reports whether a file noun or binary format the text asks to
// be made stands after the cue at token k in its clause: an output verb
// then asks for a file ("Erstelle eine PDF-Datei").
func (r *foreignReading) fileWordAt(k int) bool { return r.fileWordFrom[k+1] >= 0 }

// readForeign reads a unit written in another language (rule 9) and
// replaces the English reading of its files and requests. A file takes the
// role of the cue that governs it (governing): a delivery, send or output
// verb makes it an output, a transform verb its source or, after a
// destination word, its output, a reading or reply verb an input; a negated
// output or delivery forbids it; a model word makes it an input (rule 10),
// and so does a presented form or an input heading; a file after a
// command-line option is repository work (rule 11); a file no cue governs
// is an output in a Deliverables item or after a destination word. A
// delivery or export cue, not negated, asks for a file by itself, and so
// does an output verb before a file noun or binary format.
func readForeign(u *unit) {
	if !isForeign(u) {
		return
	}
	r := scan(u)
	r.feature = r.featureUnit(u)
	if r.question(u) {
		u.question = true
	}
	after := postpositional(u)
	for i := range u.toks {
		u.neg[i], u.inl[i] = false, false
	}
	for _, p := range u.phrases {
		*p = phrase{start: p.start, end: p.end, mentions: p.mentions, lastDest: -1}
	}
	for _, p := range u.phrases {
		for _, m := range p.mentions {
			readForeignMention(u, p, m, r, after)
		}
	}
	if u.question || u.inputs {
		return // a question asks about files; a unit under an input heading lists them
	}
	q := 0 // the phrase holding the cue: hits and phrases are both in text order
	for k, h := range r.hits {
		step()
		asks := h.class == cueDelivery ||
			h.class == cueOutput && (r.fileWordAt(h.tok) || r.cjk[h.tok] && r.fileWord(u, h.tok)) // "PDFファイルを作成"
		if !asks || h.neg || r.product[k] || r.feature {
			continue
		}
		for q < len(u.phrases) && u.phrases[q].end <= h.tok {
			q++
		}
		if q < len(u.phrases) && u.phrases[q].start <= h.tok {
			p := u.phrases[q]
			p.request(u, "rule 9: the "+cueName(h.class)+" \""+u.toks[h.tok].text+"\" asks for a file", h.tok, h.tok)
			p.delivered = p.delivered || h.class == cueDelivery
		}
	}
}

func cueName(c cueClass) string {
	if c == cueDelivery {
		return "delivery or export word"
	}
	return "output verb"
}

func readForeignMention(u *unit, p *phrase, m *mention, r *foreignReading, after bool) {
	i := m.tok
	*m = mention{name: m.name, tok: i, verb: -1}
	why := func(role fileRole, rule string, from int) {
		m.role = role
		m.note(u, "rule 9: "+rule, from, i)
	}
	g := r.governing(i, after)
	gc, gneg, from := cueNone, false, i
	if g >= 0 {
		gc, gneg, from = r.hits[g].class, r.hits[g].neg, r.hits[g].tok
		m.verb = r.hits[g].tok
	}
	dest := r.destAt(u, i)
	switch {
	case u.question:
		why(roleInput, "a question asks about the file, not for it", i)
	case flagAt(u, i):
		why(roleRepo, "the value of a command-line option: a file the product writes (rule 11)", i-1)
	case r.modelAt(u, i):
		why(roleInput, "named as a model, template or example (rule 10)", max(i-modelSpan, 0))
		m.existing = true
	case u.inputs:
		why(roleInput, "listed under a heading for inputs, context or references (rule 10)", i)
		m.existing = true
	case gc == cuePresented:
		why(roleInput, "presented as given with the task (\""+u.toks[from].text+"\")", from)
		m.existing = true
	case r.sourceAt(u, i):
		why(roleInput, "the source of a destination named after it", i)
	case (gc == cueOutput || gc == cueDelivery) && (r.feature || r.productSubject(u, g, i)):
		r.product[g] = true
		why(roleRepo, "the product (\""+u.toks[from].text+"\") writes it: a feature or bug, repository work (rule 11)", from)
	case gneg && gc != cueInput && gc != cueReply:
		m.forbid = true
		m.note(u, "rule 9: forbidden: a negated output or delivery (\""+u.toks[from].text+"\") names it", from, i)
	case gc == cueDelivery || gc == cueSend:
		why(roleOutput, "delivered: the delivery word \""+u.toks[from].text+"\" governs it", from)
		m.delivery = true
	case gc == cueOutput || gc == cueTransform && dest:
		why(roleOutput, "output: the object of the output verb \""+u.toks[from].text+"\"", from)
	case gc == cueTransform:
		why(roleInput, "the source of the transform verb \""+u.toks[from].text+"\"", from)
	case gc == cueInput || gc == cueReply:
		why(roleInput, "the object of the reading or reply word \""+u.toks[from].text+"\"", from)
	case u.item || r.destBy(u, i, &foreignNamingPreps):
		why(roleOutput, "output: named as a destination or in a Deliverables item", i)
	default:
		why(roleNone, "no cue word governs the file", i)
	}
	if m.role == roleOutput && !m.delivery {
		switch {
		case r.negDeliverFrom[i+1]:
			// "Erstelle X, aber hänge sie nicht an": as "don't attach it"
			// after an output, a negated delivery forbids it.
			m.role, m.forbid = roleNone, true
			m.note(u, "rule 9: forbidden: a negated delivery word after it refers back to it", i, len(u.toks)-1)
		case r.deliveredAfter(i):
			m.delivery = true
			m.note(u, "rule 9: delivered: a delivery word after it refers back to it", i, len(u.toks)-1)
		case r.inlineAfter(i):
			m.role = roleInline
			m.note(u, "rule 9: inline: a marker places it in the reply", i, len(u.toks)-1)
		}
	}
}
