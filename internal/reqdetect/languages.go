package reqdetect

import (
	"embed"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Rule 9: tasks written in other languages.

// langTable holds the cue words of one language, read from its lang_xx.txt: one "field: words" line a field (cueFields
// and langFields name them), words separated by blanks: "_" for a space inside a label, "*" ends a stem ("exportier*"),
// "…" joins a separable verb's head to the particle that must follow it ("voeg…bij"), ">" marks a negator that reaches
// only ahead ("no>"). Latin words match folded (foldWord), past an elided article ("l'export") and before clitics
// ("exporte-le"); a CJK cue matches anywhere in a run of CJK text. Adding a language is adding its file to langTables
// and cases to testdata/requested-files.jsonl.
type langTable struct {
	code, name string
	cues       map[string][]string     // each field's words, "_" read as a space
	own        map[*[]string]*[]string // each cue list's words of this table alone (inL)
}

// langFields are the fields of a table that join no cue list: the code and name, function words that tell the
// language, the labels of outputs ("Ergebnis") and inputs ("Kontext"), and CJK nouns that hold a cue ("共有フォルダ").
var langFields = []string{"code", "name", "function", "deliverables", "inputs", "nouns"}

// cueFields are the fields whose words join a cue list, and the class a verb cue among them gives its files. Verb cues
// by role, in the order a word is tried (foreignCueClasses): given with the task ("anbei"), attachment nouns
// ("Anhang"), naming ("nenne"), answering in text ("antworte"), converting, delivery ("hänge an"), send ("schick"),
// making ("erstelle"), editing in place ("korrigiere"), reading and running ("lies"). The reply as a place ("hier"),
// negators ("nicht"), file nouns ("Datei"), polite markers ("bitte"). Rule 10: model words before a file ("wie") or
// after it in CJK text ("と同じ"), model nouns after "as" ("als Vorlage"). Destination words ("als", "成"; namingPreps
// name a thing made without a verb); source words before or after a file ("aus", "から"). Rules 8 and 11: repository
// nouns ("Branch"), product nouns ("Skript"), feature verbs ("implementiere"), bug labels ("Fehler:"). Questions ("wie",
// "如何") and statements of what was done or of where a file is ("habe", "schon", "liegt", "了", "已经"). Pointers back
// to a file ("sie", "このファイル"), clitics on a verb ("adjúntalo"; with "-", after a hyphen only: "envoie-le"), words
// that make the cue after them a noun ("di consegna"), words for other files ("keine weiteren Dateien"), toward words
// after a presented form that say where it is to go ("ao"), the words for "and" that open another output before an
// inline marker ("index.html und eine Zusammenfassung hier"), and the relative pronouns that open, after a comma, a
// clause whose delivery word describes a thing and asks for nothing ("…, der einen Datensatz exportiert").
var cueFields = []cueField{
	{"presented", &foreignPresented, cuePresented}, {"attach", &foreignAttachNouns, cueAttached},
	{"naming", &foreignNaming, cueNaming}, {"reply", &foreignReply, cueReply},
	{"transform", &foreignTransform, cueTransform}, {"delivery", &foreignDelivery, cueDelivery},
	{"send", &foreignSend, cueSend}, {"output", &foreignOutput, cueOutput},
	{"edit", &foreignEdit, cueEdit}, {"input", &foreignInput, cueInput},
	{"inline", &foreignInline, 0}, {"negators", &foreignNegators, 0}, {"fileWords", &foreignFileWords, 0},
	{"polite", &foreignPolite, 0}, {"model", &foreignModel, 0}, {"modelAfter", &foreignModelAfter, 0},
	{"modelNouns", &foreignModelNouns, 0}, {"destPreps", &foreignDestPreps, 0},
	{"namingPreps", &foreignNamingPreps, 0}, {"sourcePreps", &foreignSourcePreps, 0},
	{"sourceAfter", &foreignSourceAfter, 0}, {"repo", &foreignRepo, 0},
	{"productNouns", &foreignProductNouns, 0}, {"featureVerbs", &foreignFeatureVerbs, 0},
	{"bug", &foreignBug, 0}, {"whWords", &foreignWhWords, 0}, {"howTo", &foreignHowTo, 0},
	{"perfect", &foreignPerfect, 0}, {"doneAfter", &foreignDoneAfter, 0},
	{"doneBefore", &foreignDoneBefore, 0}, {"nounMarks", &foreignNounMarks, 0},
	{"pointers", &foreignPointers, 0}, {"clitics", &foreignClitics, 0}, {"other", &foreignOther, 0}, {"toward", &foreignToward, 0},
	{"and", &foreignAnd, 0}, {"relatives", &foreignRelatives, 0},
}

//go:embed lang_*.txt
var langFiles embed.FS

// cueField is one field of a table that joins the cue list dst.
type cueField struct {
	name  string
	dst   *[]string
	class cueClass
}

// loadLang reads the table lang_<code>.txt; it panics on a file that is missing (TestLangTableFields checks the fields).
func loadLang(code string) *langTable {
	name := "lang_" + code + ".txt"
	text, err := langFiles.ReadFile(name)
	if err != nil {
		panic("reqdetect: " + err.Error())
	}
	t := &langTable{cues: map[string][]string{}}
	for field, ws := range mustParseLexicon(name, string(text)) {
		for i, w := range ws {
			ws[i] = strings.ReplaceAll(w, "_", " ")
		}
		t.cues[field] = ws
	}
	t.code, t.name = strings.Join(t.cues["code"], " "), strings.Join(t.cues["name"], " ")
	return t
}

// langTables are the tables of the languages the reader knows, in the order unitLang breaks ties in.
var (
	langJA, langZH, langKO = loadLang("ja"), loadLang("zh"), loadLang("ko")
	langTables             = []*langTable{loadLang("de"), loadLang("fr"), loadLang("es"), loadLang("pt"), loadLang("it"),
		loadLang("nl"), langJA, langZH, langKO}
)

// shared holds the cues every language borrows from English ("Save het
// resultaat", "een fix in", "PR", "**Bug:**") and binary formats.
var shared = loadLang("en")

// The cue lists the reader uses: every table's field joined.
var (
	foreignPresented, foreignAttachNouns, foreignDelivery, foreignSend, foreignOutput, foreignTransform,
	foreignInput, foreignReply, foreignEdit, foreignNaming, foreignInline, foreignNegators, foreignFileWords,
	foreignPolite, foreignModel, foreignModelAfter, foreignModelNouns, foreignDestPreps, foreignNamingPreps,
	foreignSourcePreps, foreignSourceAfter, foreignRepo, foreignProductNouns, foreignFeatureVerbs, foreignBug,
	foreignWhWords, foreignHowTo, foreignPerfect, foreignDoneAfter, foreignDoneBefore, foreignNouns,
	foreignNounMarks, foreignPointers, foreignClitics, foreignOther, foreignToward, foreignAnd, foreignRelatives []string
	foreignSeparable     []separable
	sharedCues           = slices.Concat(shared.cues["delivery"], shared.cues["edit"]) // they do not make a sentence foreign
	foreignFunctionWords = map[string][]*langTable{}
	// foreignAheadOnly are the negators that reach only a verb after them
	// ("no adjuntes"; "Anexa … no card" is "in the card").
	foreignAheadOnly []string
	// englishFunctionWords (lexicon_en.txt): a unit with more foreign function words than these, or with CJK text, is
	// foreign.
	englishFunctionWords = lexSet("englishFunctionWords")
)

// separable is a verb whose particle stands apart ("Voeg het bestand bij").
type separable struct {
	head, particle string
	class          cueClass
}

// init joins the tables into the cue lists, indexes every list, and adds the tables' labels to labelWords (longest
// first: "Ergebnisse" before "Ergebnis") and inputLabels.
func init() {
	var labels []string
	for _, t := range append([]*langTable{shared}, langTables...) {
		t.own = map[*[]string]*[]string{}
		for _, f := range cueFields {
			var own []string
			for _, w := range t.cues[f.name] {
				if a, ok := strings.CutSuffix(w, ">"); ok && f.dst == &foreignNegators {
					foreignAheadOnly = append(foreignAheadOnly, a)
					w = a
				}
				if head, particle, ok := strings.Cut(w, "…"); ok {
					foreignSeparable = append(foreignSeparable, separable{head, particle, f.class})
					continue
				}
				*f.dst, own = append(*f.dst, w), append(own, w)
			}
			t.own[f.dst] = &own
			foldedList(&own)
		}
		for _, w := range t.cues["function"] {
			foreignFunctionWords[w] = append(foreignFunctionWords[w], t)
		}
		// A CJK label, repository noun or other noun holds no verb ("交付物", "저장소", "共有フォルダ").
		for _, w := range slices.Concat(t.cues["deliverables"], t.cues["repo"], t.cues["nouns"]) {
			if isCJKString(w) {
				foreignNouns = append(foreignNouns, w)
			}
		}
		if t != shared {
			labels = append(labels, t.cues["deliverables"]...)
			inputLabels = append(inputLabels, t.cues["inputs"]...)
		}
	}
	slices.SortStableFunc(labels, func(a, b string) int { return len(b) - len(a) })
	labelWords = append(labelWords, labels...)
	labelsByFold = map[rune][]string{}
	for _, l := range labelWords {
		r, _ := utf8.DecodeRuneInString(l)
		labelsByFold[foldKey(r)] = append(labelsByFold[foldKey(r)], l)
	}
	for _, f := range cueFields {
		foldedList(f.dst)
	}
	for _, l := range []*[]string{&sharedCues, &foreignAheadOnly, &foreignNouns} {
		foldedList(l)
	}
}

// labelsByFold holds labelWords, in their order, by foldKey of their first rune: a line can start with a label only
// when its first rune has the same key (cutLabel compares case folded).
var labelsByFold map[rune][]string

// foldKey returns the smallest rune that r equals under simple case folding.
func foldKey(r rune) rune {
	k := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		k = min(k, f)
	}
	return k
}

// cueClass is the role a cue word gives the files it governs.
type cueClass uint8

const (
	cueNone      cueClass = iota
	cuePresented          // the file is given with the task: an input
	cueAttached           // an attachment noun: presented or a delivery marker, by context
	cueDelivery           // attach, export, save, upload: asks for a file by itself
	cueSend               // send, share: delivers a file named elsewhere
	cueOutput             // create, write: its files are outputs
	cueTransform          // convert: its object is the source, its destination the output
	cueNaming             // name, call: its file is the output's name
	cueInput              // read, summarize, use, run
	cueReply              // reply, explain: an answer in text
	cueEdit               // fix, update, adjust: its file is edited in place
)

// foreignCueClasses, the verb cue fields, are tried in this order on a word: a presented form is read before the
// delivery stem it shares ("anbei", "adjunto").
var foreignCueClasses = cueFields[:10]

// makes reports whether c makes or delivers its files.
func (c cueClass) makes() bool { return c >= cueDelivery && c <= cueNaming }

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
	productRuns        = 3  // or, in CJK text, at most this far before the file it writes
	repoSpan           = 2  // a repository noun stands at most this far after the verb it is the object of
	qualifierSpan      = 4  // a negator stands at most this far before the deliverable noun it denies
	labelCompound      = 8  // a label word this long ends a compound that names the same ("Aufgabenlieferung")
	productSuffix      = 4  // a compound ending in a product noun this long or longer names a product ("Rechnungsexport")
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
		case len(foreignFunctionWords[t.low]) > 0:
			foreign++
		case englishFunctionWords[t.low]:
			english++
		}
	}
	// With no function word at all, a cue word no English lexicon lists makes it foreign ("Konvertiere daten.csv in
	// daten.xlsx").
	return foreign > english || english == 0 && slices.ContainsFunc(u.toks, func(t token) bool {
		w := foldWord(t.text)
		return t.kind == tokWord && lemmaOf(t.low) == "" && latinCue(w) != cueNone && !inList(w, &sharedCues)
	})
}

// unitLang returns the table of the language u is written in, or nil when its function words do not tell: by script
// in CJK text (kana Japanese, hangul Korean, else Chinese), else the table with the most function words, at least
// langMin and more than any other.
func unitLang(u *unit) *langTable {
	count := make([]int, len(langTables))
	han := false
	for _, t := range u.toks {
		switch {
		case strings.ContainsFunc(t.text, func(r rune) bool { return unicode.Is(unicode.Hangul, r) }):
			return langKO
		case strings.ContainsFunc(t.text, func(r rune) bool { return unicode.In(r, unicode.Hiragana, unicode.Katakana) }):
			return langJA
		case strings.ContainsFunc(t.text, isCJK):
			han = true
		}
		for _, l := range foreignFunctionWords[t.low] {
			count[slices.Index(langTables, l)]++
		}
	}
	if han {
		return langZH
	}
	best := slices.Index(count, slices.Max(count)) // the first of the most counted: a tie is after it
	if count[best] < langMin || slices.Contains(count[best+1:], count[best]) {
		return nil
	}
	return langTables[best]
}

const langMin = 2

// foldWord lower-cases w and drops the accents of Latin letters.
func foldWord(w string) string {
	low := strings.ToLower(w)
	if !strings.ContainsFunc(low, func(r rune) bool { return r >= utf8.RuneSelf }) {
		return low // no accent to drop: every accentFolds key is beyond ASCII
	}
	return strings.Map(func(r rune) rune {
		if f, ok := accentFolds[r]; ok {
			return f
		}
		return r
	}, low)
}

var accentFolds = map[rune]rune{
	'á': 'a', 'à': 'a', 'â': 'a', 'ä': 'a', 'ã': 'a', 'å': 'a', 'é': 'e', 'è': 'e', 'ê': 'e', 'ë': 'e',
	'í': 'i', 'ì': 'i', 'î': 'i', 'ï': 'i', 'ó': 'o', 'ò': 'o', 'ô': 'o', 'ö': 'o', 'õ': 'o', 'ú': 'u',
	'ù': 'u', 'û': 'u', 'ü': 'u', 'ç': 'c', 'ñ': 'n', '’': '\'',
}

// latinIndex holds each list's Latin cues for look-up: the exact words in a set, the stems by their first stemKey
// bytes; cjkCues its CJK cues by their first rune.
var (
	latinIndex = map[*[]string]*cueIndex{}
	cjkCues    = map[*[]string]map[rune][]string{}
)

const stemKey = 3

type cueIndex struct {
	exact map[string]bool
	stems map[string][]string
}

func foldedList(l *[]string) {
	ix := &cueIndex{exact: map[string]bool{}, stems: map[string][]string{}}
	cjkCues[l] = map[rune][]string{}
	for _, c := range *l {
		f := foldWord(c)
		if r, _ := utf8.DecodeRuneInString(f); isCJK(r) {
			cjkCues[l][r] = append(cjkCues[l][r], f)
		} else if stem, ok := strings.CutSuffix(f, "*"); ok {
			k := stem[:min(len(stem), stemKey)]
			ix.stems[k] = append(ix.stems[k], stem)
		} else {
			ix.exact[f] = true
		}
	}
	latinIndex[l] = ix
}

// separableCue returns the class of a separable verb whose head is the
// folded word w and whose particle is still ahead in its unit (later).
func separableCue(w string, later map[string]int) cueClass {
	for _, sv := range foreignSeparable {
		step()
		if foldWord(sv.head) == w && later[foldWord(sv.particle)] > 0 {
			return sv.class
		}
	}
	return cueNone
}

// latinCue returns the class of the folded word w, or cueNone.
func latinCue(w string) cueClass {
	for _, c := range foreignCueClasses {
		if inList(w, c.dst) && (latinIndex[c.dst].exact[w] || c.class > cueOutput || !nominal(w)) {
			return c.class
		}
	}
	return cueNone
}

// nounEndings, folded, end the nouns a verb makes ("exportación", "esportazione", "exportação"): the stem of a cue
// that asks for a file ("exporta*") does not reach them; a cue listed whole does, and so do reading and editing
// stems ("una comparación entre a.xlsx y b.xlsx" reads both).
var nounEndings = []string{"cion", "ciones", "zione", "zioni", "ation", "ations", "cao", "coes"}

func nominal(w string) bool {
	return slices.ContainsFunc(nounEndings, func(e string) bool { return strings.HasSuffix(w, e) })
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
		if slices.ContainsFunc(ix.stems[w[:n]], func(stem string) bool { return strings.HasPrefix(w, stem) }) {
			return true
		}
	}
	return false
}

// cjkSpans returns the byte span of the first CJK cue of l at each offset of s where one starts, in order.
func cjkSpans(s string, l *[]string) [][2]int {
	step()
	ix := cjkCues[l]
	var sp [][2]int
	for k, r := range s {
		for _, cue := range ix[r] {
			if strings.HasPrefix(s[k:], cue) {
				sp = append(sp, [2]int{k, k + len(cue)})
				break
			}
		}
	}
	return sp
}

// cjkIndex returns every byte offset in s of a CJK cue of l, each once, in order.
func cjkIndex(s string, l *[]string) []int {
	var at []int
	for _, sp := range cjkSpans(s, l) {
		at = append(at, sp[0])
	}
	return at
}

// foreignReading is what readForeign finds in a unit.
type foreignReading struct {
	lang  *langTable // the unit's language, or nil
	hits  []cueHit   // verb cues, in text order
	cjk   []bool     // token holds CJK text
	words []string   // each word token folded ("" for others)
	// first[i] is the index in hits of the first cue at token i or after it: the cues of token i are
	// hits[first[i]:first[i+1]]. Every look-up reads through it, so the reading stays linear.
	first []int
	// inlineN[i] counts the inline markers at token i or after it; deliverFrom[i] says whether a delivery cue, not
	// negated, stands there; fileWordFrom[i] is the first file noun at or after token i in its clause, or -1.
	inlineN                     []int
	deliverFrom, negDeliverFrom []bool
	fileWordFrom                []int
	// group[i] is the open parenthesis token i stands in, or -1; clause[i] counts the ";" before it: a verb governs a
	// file of its own group and clause only ("- note.pdf (ne pas créer de brouillon.docx)").
	group, clause []int
	// product[k] says hits[k] is a product's verb, names a product or
	// takes repository work as object ("Der Export schreibt", "提交 PR").
	product []bool
	feature bool // the unit asks to build a product feature or reports a bug
}

// inL reports whether the folded word w is in the cue list l of the unit's
// language (or the shared table), or of any language when it is not known.
func (r *foreignReading) inL(w string, l *[]string) bool {
	if r.lang != nil {
		return inList(w, r.lang.own[l]) || inList(w, shared.own[l])
	}
	return inList(w, l)
}

// otherBeforeInline reports whether, after file i, an "and" opens another output before the first inline marker
// ("`index.html` y un resumen breve en la respuesta"): the marker places that output in the reply, not the file.
func (r *foreignReading) otherBeforeInline(u *unit, i int) bool {
	for k := i + 1; k < len(u.toks) && !r.inlineAt(u, k); k++ {
		if !r.cjk[k] && r.inL(r.words[k], &foreignAnd) {
			// the next token past punctuation: "`index.html` e `styles.css`" has a quote before the next file
			n := slices.IndexFunc(u.toks[k+1:], func(t token) bool { return t.kind != tokPunct })
			return n >= 0 && u.toks[k+1+n].kind != tokFile
		}
	}
	return false
}

// scan finds the cue words of u, decides which negators reach which verb, and records the CJK tokens.
func scan(u *unit) *foreignReading {
	r := &foreignReading{lang: unitLang(u), cjk: make([]bool, len(u.toks)), words: make([]string, len(u.toks))}
	type negAt struct{ tok, off int }
	var ngs []negAt
	later := map[string]int{} // the words still ahead, for a separable verb's particle
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
			nouns := cjkSpans(t.low, &foreignNouns)
			var local []cueHit
			seen := map[int]bool{}
			for _, c := range foreignCueClasses {
				for _, off := range cjkIndex(t.low, c.dst) {
					inNoun := slices.ContainsFunc(nouns, func(s [2]int) bool { return s[0] <= off && off < s[1] })
					if !seen[off] && !inNoun && !quoted(u, i, off) {
						seen[off] = true
						local = append(local, cueHit{tok: i, off: off, class: c.class})
					}
				}
			}
			slices.SortFunc(local, func(a, b cueHit) int { return a.off - b.off })
			r.hits = append(r.hits, local...)
			for _, off := range cjkIndex(t.low, &foreignNegators) {
				ngs = append(ngs, negAt{i, off})
			}
			continue
		}
		w := foldWord(t.text)
		if t.kind == tokWord {
			later[w]--
		}
		if k := strings.IndexByte(w, '\''); k > 0 && k <= 3 && !r.inL(w, &foreignNegators) {
			if w[:k+1] == "n'" { // "n'exporte"
				ngs = append(ngs, negAt{i, 0})
			}
			w = w[k+1:] // "l'export", "qu'il"
		}
		r.words[i] = w
		first, _ := utf8.DecodeRuneInString(t.text)
		if i > 0 && u.toks[i-1].kind != tokPunct && unicode.IsUpper(first) && !inList(w, &foreignAttachNouns) ||
			quoted(u, i, 0) || i > 0 && inList(r.words[i-1], &foreignNounMarks) {
			continue // a noun or a name ("der Export", "di consegna"), or a quoted label ('Exporteer facturen')
		}
		if r.inL(w, &foreignNegators) {
			ngs = append(ngs, negAt{i, 0})
			continue
		}
		c := latinCue(w)
		if c == cueNone {
			c = separableCue(w, later)
		}
		if head, _, ok := strings.Cut(w, "-"); c == cueNone && ok && head != "" {
			c = latinCue(head) // "exporte-le"
		}
		if c == cueNone && len(w) >= typoMin && !nominal(w) {
			c = typoCue(w) // "anhägen", "exportiern"
		}
		if c != cueNone {
			r.hits = append(r.hits, cueHit{tok: i, class: c})
		}
	}
	// An attachment noun beside another verb cue, or in a Deliverables item, is a delivery marker ("als Anhang
	// schicken"); alone it presents what the task brings ("Im Anhang findest du daten.csv"). So is a presented form
	// in an item ("hier ans Ticket angehängt").
	other := u.item || slices.ContainsFunc(r.hits, func(h cueHit) bool { return h.class.makes() })
	named := slices.ContainsFunc(u.toks, func(t token) bool { return t.kind == tokFile })
	for k := range r.hits {
		h := &r.hits[k]
		if h.class == cuePresented && !r.cjk[h.tok] && h.tok+1 < len(u.toks) && !named &&
			inList(foldWord(u.toks[h.tok+1].text), &foreignToward) {
			h.class = cueDelivery // "Um relatório em PDF anexado ao chamado.": where it is to go
		}
		if h.class == cueAttached || h.class == cuePresented && u.item {
			h.class = cuePresented
			if other {
				h.class = cueDelivery
			}
		}
	}
	n := len(u.toks)
	r.group, r.clause = make([]int, n), make([]int, n)
	open := []int{-1}
	for i, t := range u.toks {
		if i > 0 {
			r.clause[i] = r.clause[i-1]
		}
		switch {
		case t.punct("(", "（"):
			open = append(open, i)
		case t.punct(")", "）") && len(open) > 1:
			open = open[:len(open)-1]
		case t.punct(";", "；"):
			r.clause[i]++
		}
		r.group[i] = open[len(open)-1]
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
		r.product[k] = r.productName(u, h) || r.repoObject(u, h)
	}
	for _, ng := range ngs {
		if h := r.negated(u, ng.tok, ng.off); h >= 0 {
			r.hits[h].neg = true // and a cue coordinated right before it ("ファイルの作成や添付は不要")
			if c, _ := utf8.DecodeLastRuneInString(u.toks[ng.tok].low[:max(r.hits[h].off, 0)]); h > 0 && r.cjk[ng.tok] &&
				r.hits[h].tok == ng.tok && r.hits[h-1].tok == ng.tok && strings.ContainsRune("やと・和或及", c) {
				r.hits[h-1].neg = true
			}
		}
	}
	r.inlineN, r.deliverFrom, r.negDeliverFrom = make([]int, n+1), make([]bool, n+1), make([]bool, n+1)
	r.fileWordFrom = make([]int, n+1)
	r.fileWordFrom[n] = -1
	for i := n - 1; i >= 0; i-- {
		step()
		r.inlineN[i] = r.inlineN[i+1]
		if r.inlineAt(u, i) {
			r.inlineN[i]++
		}
		r.deliverFrom[i], r.negDeliverFrom[i] = r.deliverFrom[i+1], r.negDeliverFrom[i+1]
		for k := r.first[i]; k < r.first[i+1]; k++ {
			if h := r.hits[k]; (h.class == cueDelivery || h.class == cueSend) && !r.product[k] {
				r.deliverFrom[i] = r.deliverFrom[i] || !h.neg
				r.negDeliverFrom[i] = r.negDeliverFrom[i] || h.neg
			}
		}
		r.fileWordFrom[i] = r.fileWordFrom[i+1]
		switch {
		case u.toks[i].kind == tokPunct && u.toks[i].punct(";", "。", "."):
			r.fileWordFrom[i] = -1
		case r.fileWord(u, i):
			r.fileWordFrom[i] = i
		}
	}
	return r
}

func (r *foreignReading) inlineAt(u *unit, i int) bool {
	return r.cjk[i] && r.in(u, i, &foreignInline) || !r.cjk[i] && r.inL(r.words[i], &foreignInline)
}

// quoted reports whether the text right before byte off of token i opens a quotation: a cue there names a button or a
// menu ("klik op 'Exporteer facturen'", "「匯出對帳單」"), it asks for nothing.
func quoted(u *unit, i, off int) bool {
	p := u.toks[i].pos + off
	if p <= 0 || p > len(u.src) {
		return false
	}
	r, _ := utf8.DecodeLastRuneInString(u.src[:p])
	return strings.ContainsRune(`'"‘“「『«„`, r)
}

// typoMin is the shortest word read as a typo of a cue.
const typoMin, typoTail = 7, 2

// typoCue returns the class of the delivery, send or output cue the folded word w is one typo away from (a letter
// dropped, added, changed, or two swapped), or cueNone; w's start is compared with a stem.
func typoCue(w string) cueClass {
	for _, c := range foreignCueClasses[5:8] {
		for _, cue := range *c.dst {
			step()
			cue = foldWord(cue)
			stem, isStem := strings.CutSuffix(cue, "*")
			if isCJKString(cue) || len(stem) < typoMin-1 {
				continue
			}
			for d := -1; d <= 1; d++ {
				if n := len(stem) + d; (isStem || d == 0) && n <= len(w) && (isStem || n == len(w)) &&
					!strings.Contains(w, "-") && oneTypo(w[:n], stem) {
					return c.class
				}
			}
		}
	}
	return cueNone
}

// oneTypo reports whether a and b differ by one edit or one swap of neighbouring letters before their last typoTail
// letters, where an inflection ending differs ("escreve", "escreva").
func oneTypo(a, b string) bool {
	if len(a) < len(b) {
		a, b = b, a
	}
	i := 0
	for i < len(b) && a[i] == b[i] {
		i++
	}
	switch {
	case i == 0 || i+typoTail >= len(b): // a typo keeps the first letter ("llegaron" is no "allega")
		return false
	case len(a) == len(b) && i < len(a):
		return a[i+1:] == b[i+1:] || i+1 < len(a) && a[i] == b[i+1] && a[i+1] == b[i] && a[i+2:] == b[i+2:]
	case len(a) == len(b)+1:
		return a[i+1:] == b[i:]
	}
	return false
}

// repoObject reports whether the cue h takes repository work as its object
// ("提交 PR", "eine PR aufmachen", "プルリクエストを作成"): rule 8.
func (r *foreignReading) repoObject(u *unit, h cueHit) bool {
	return r.cjk[h.tok] && len(cjkIndex(u.toks[h.tok].low[:h.off], &foreignRepo)) > 0 ||
		anyIn(h.tok+1, min(len(u.toks)-1, h.tok+repoSpan), func(k int) bool { return r.in(u, k, &foreignRepo) })
}

// refersBack reports whether the delivery cue h refers back to a file named before: a pointer right after it or a
// clitic on it ("Envoie-le-moi", "adjúntalo", "hänge sie an", "このファイルを送って"), in a unit that names no file and makes
// nothing else.
func (r *foreignReading) refersBack(u *unit, h cueHit) bool {
	if len(u.phrases) == 0 || slices.ContainsFunc(u.phrases, func(p *phrase) bool { return len(p.mentions) > 0 }) ||
		slices.ContainsFunc(r.hits, func(o cueHit) bool { return o.class >= cueOutput && o.class <= cueNaming }) {
		return false
	}
	if r.cjk[h.tok] {
		return r.in(u, h.tok, &foreignPointers) || h.tok > 0 && r.cjk[h.tok-1] && r.in(u, h.tok-1, &foreignPointers)
	}
	if r.fileWordFrom[0] >= 0 {
		return false
	}
	head, rest, _ := strings.Cut(r.words[h.tok], "-")
	if slices.ContainsFunc(foreignClitics, func(c string) bool {
		return strings.HasSuffix(head, c) || slices.Contains(strings.Split(rest, "-"), strings.TrimPrefix(c, "-"))
	}) {
		return true
	}
	return anyIn(h.tok+1, min(len(u.toks)-1, h.tok+repoSpan), func(k int) bool { return inList(r.words[k], &foreignPointers) })
}

// statedBefore reports whether a perfect auxiliary or a statement verb stands at most modelSpan tokens before the file
// at i in its clause ("hat er als X", "liegt als X im Ordner").
func (r *foreignReading) statedBefore(u *unit, i int) bool {
	for k := i - 1; k >= 0 && k >= i-2*modelSpan && (u.toks[k].kind != tokPunct || u.toks[k].punct(nameQuoteMarks...)); k-- {
		if inList(r.words[k], &foreignPerfect) {
			return true
		}
	}
	return false
}

// markStated turns a cue that states what was done into a presented one (foreignPerfect before it, foreignDoneAfter
// or foreignDoneBefore around it in CJK text): "Ich habe bericht.pdf gestern hochgeladen", "我已经上传了".
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
			if h := &r.hits[k]; h.class.makes() && (aux >= 0 && aux < i || r.cjk[i] && doneAround(t.low, h.off) ||
				!r.cjk[i] && i+1 < len(u.toks) && inList(r.words[i+1], &foreignPerfect)) { // "hängen schon im Ticket"
				h.class = cuePresented
			}
		}
	}
}

// doneAround reports whether a CJK run marks the cue at byte off as done.
func doneAround(run string, off int) bool {
	if slices.ContainsFunc(foreignDoneBefore, func(d string) bool { return strings.HasSuffix(run[:off], d) }) {
		return true
	}
	tail := run[off:]
	for _, c := range []*[]string{&foreignDelivery, &foreignSend, &foreignOutput, &foreignTransform} {
		for _, cue := range *c {
			if rest, ok := strings.CutPrefix(tail, cue); ok && slices.ContainsFunc(foreignDoneAfter, func(d string) bool {
				return strings.HasPrefix(rest, d) || strings.HasPrefix(rest, "し"+d)
			}) {
				return true
			}
		}
	}
	return false
}

// question reports whether u asks about something, not for it: it ends in
// a question mark and opens with a wh-word, or has a how-to word in CJK text.
func (r *foreignReading) question(u *unit) bool {
	if anyIn(0, len(u.toks)-1, func(i int) bool { return r.cjk[i] && r.in(u, i, &foreignHowTo) }) {
		return true
	}
	last := u.toks[len(u.toks)-1]
	end := last.pos + len(last.text)
	if end < 0 || end > len(u.src) {
		return false
	}
	rest := strings.TrimLeft(u.src[end:], " \t")
	asked := strings.HasPrefix(rest, "?") || strings.HasPrefix(rest, "？")
	first := slices.IndexFunc(u.toks, func(t token) bool { return t.kind != tokPunct })
	return asked && first >= 0 && inList(foldWord(u.toks[first].text), &foreignWhWords)
}

// in reports whether token k holds a word of l: a CJK cue anywhere in its run, or its folded Latin word.
func (r *foreignReading) in(u *unit, k int, l *[]string) bool {
	if r.cjk[k] {
		return len(cjkIndex(u.toks[k].low, l)) > 0
	}
	return inList(r.words[k], l)
}

// cueAt reports whether a verb cue stands at token i.
func (r *foreignReading) cueAt(i int) bool {
	return i >= 0 && i < len(r.first)-1 && r.first[i] < r.first[i+1]
}

// katakanaRun returns the length in bytes of the run of katakana s opens (a loanword: "アップロード").
func katakanaRun(s string) int {
	return len(s) - len(strings.TrimLeftFunc(s, func(c rune) bool { return unicode.Is(unicode.Katakana, c) || c == 'ー' }))
}

// negated returns the verb cue a negator at token tok (byte off in a CJK run) reaches, or -1: the nearest after it
// within negAheadSpan tokens, or else before it within negBehindSpan tokens with no punctuation between; in CJK text
// the nearest in its run within cjkNegBytes bytes, or in one of the two runs right before ("첨부하지 마세요", "첨부는 하지 마세요").
func (r *foreignReading) negated(u *unit, tok, off int) int {
	if r.cjk[tok] {
		best, dist := -1, cjkNegBytes+1
		for k := r.first[max(tok-2, 0)]; k < r.first[tok+1]; k++ {
			step()
			h, d := r.hits[k], -1
			switch {
			case h.tok == tok && h.off >= off:
				d = h.off - off
			case h.tok == tok:
				d = max(off-h.off-katakanaRun(u.toks[tok].low[h.off:]), 0) // "アップロードは不要": from the loanword's end
			case off <= cjkNegBytes && !r.punctBetween(u, h.tok, tok):
				d = off + tok - h.tok
			}
			if d >= 0 && d < dist {
				best, dist = k, d
			}
		}
		return best
	}
	if r.cueAt(tok) {
		return r.first[tok] // "n'exporte"
	}
	for j := tok + 1; j <= tok+negAheadSpan && j < len(u.toks); j++ {
		if r.cueAt(j) && !r.punctBetween(u, tok, j) {
			return r.first[j]
		}
	}
	// Behind it, a verb of making or delivering is preferred to a reading
	// word between ("Schreib die Zusammenfassung nicht in eine Datei").
	any := -1
	for j := tok - 1; j >= 0 && j >= tok-negBehindSpan && !r.punctBetween(u, j, tok) &&
		!inList(r.words[tok], &foreignAheadOnly); j-- {
		if !r.cueAt(j) {
			continue
		}
		k := r.first[j+1] - 1
		if r.hits[k].class.makes() {
			return k
		}
		if any < 0 {
			any = k
		}
	}
	return any
}

func (r *foreignReading) punctBetween(u *unit, a, b int) bool {
	return anyIn(a+1, b-1, func(k int) bool { return u.toks[k].kind == tokPunct })
}

// governing returns the verb cue that governs the file at token i: the nearest before it in its group and clause, or
// after it if none is before (the other way round in Japanese and Korean), or -1.
func (r *foreignReading) governing(i int, after bool) int {
	same := func(k int) bool {
		t := r.hits[k].tok
		return r.group[t] == r.group[i] && r.clause[t] == r.clause[i]
	}
	before, next := r.first[i]-1, r.first[i+1]
	if before >= 0 && !same(before) {
		before = -1
	}
	if next >= len(r.hits) || !same(next) {
		next = -1
	}
	if after && next >= 0 || before < 0 {
		return next
	}
	return before
}

// modelAt reports whether the file at i is named as a model, template, example or earlier version (rule 10): a model
// word within modelSpan tokens before it and no verb cue between ("im gleichen Format wie X", "模板 X"), a modelAfter
// word right after it ("X と同じ形式で", "X 처럼"), or an "as" word and a model noun after it ("mit X als Vorlage").
func (r *foreignReading) modelAt(u *unit, i int) bool {
	for k := i - 1; k >= 0 && k >= i-modelSpan && u.toks[k].kind != tokFile && (!r.cueAt(k) || r.cjk[k]); k-- {
		if r.in(u, k, &foreignModel) {
			return true
		}
		if r.cjk[k] {
			break
		}
	}
	return i+1 < len(u.toks) && r.cjk[i+1] &&
		slices.ContainsFunc(cjkIndex(u.toks[i+1].low, &foreignModelAfter), func(off int) bool { return off <= cjkNegBytes }) ||
		i+1 < len(u.toks) && !r.cjk[i+1] && inList(r.words[i+1], &foreignModelAfter) ||
		i+2 < len(u.toks) && !r.cjk[i+1] && inList(r.words[i+1], &foreignNamingPreps) &&
			anyIn(i+2, min(i+3, len(u.toks)-1), func(k int) bool { return inList(foldWord(u.toks[k].text), &foreignModelNouns) })
}

// featureUnit reports whether u asks to build a product feature (a feature verb and a product noun
// in it, or a command-line flag): the files the product writes are repository work (rule 11).
func (r *foreignReading) featureUnit(u *unit) bool {
	verb, noun := false, false
	for i, t := range u.toks {
		verb = verb || r.in(u, i, &foreignFeatureVerbs)
		noun = noun || r.cjk[i] && r.in(u, i, &foreignProductNouns) || !r.cjk[i] && productWord(t.text)
		if !r.cjk[i] && isFlag(t) {
			return true // a command-line flag: the sentence is about the product ("quando for passada a flag --excel")
		}
	}
	return verb && noun || bugLabel(u)
}

func isFlag(t token) bool { return strings.HasPrefix(t.text, "--") && len(t.text) > 2 } // a command-line flag

// bugLabel reports whether u opens with a bug label ("Bug:", "**Bug** :", "버그 리포트:", "## 不具合: …"): Detect
// reads the units from there on as a bug report, whose files the product writes (rule 11).
func bugLabel(u *unit) bool {
	for i := 0; i < len(u.toks) && i < 3 && !u.toks[i].punct(":", "："); i++ {
		t := u.toks[i]
		if t.kind != tokPunct && (strings.ContainsFunc(t.text, isCJK) && len(cjkIndex(t.low, &foreignBug)) > 0 || inList(foldWord(t.text), &foreignBug)) {
			return strings.ContainsAny(u.src[t.pos:min(len(u.src), u.toks[len(u.toks)-1].pos)], ":：")
		}
	}
	return false
}

// productWord reports whether a Latin word, a part of it between hyphens, or the end of a compound, is a product noun
// ("Export-Button", "Rechnungsexport", "exportknop").
func productWord(w string) bool {
	for part := range strings.SplitSeq(foldWord(w), "-") {
		if inList(part, &foreignProductNouns) ||
			anyIn(1, len(part)-productSuffix, func(k int) bool { return latinIndex[&foreignProductNouns].exact[part[k:]] }) {
			return true
		}
	}
	return false
}

// destBy reports whether the file at i is a destination: right after a word of preps ("als X", "整理成 X") or, in
// Japanese and Korean, right before a CJK particle of preps ("X로", "Xに").
func (r *foreignReading) destBy(u *unit, i int, preps *[]string) bool {
	p, n := around(u, i)
	return p >= 0 && !r.cjk[p] && inList(r.words[p], preps) || slices.ContainsFunc(*preps, func(d string) bool {
		return isCJKString(d) && (p >= 0 && r.cjk[p] && strings.HasSuffix(u.toks[p].low, d) ||
			n < len(u.toks) && r.cjk[n] && strings.HasPrefix(u.toks[n].low, d))
	})
}

// around returns the tokens before and after token i, past the quotes
// around a file name ("`papers.bib` 에서"): -1 and len(u.toks) at the ends.
func around(u *unit, i int) (int, int) {
	p, n := i-1, i+1
	for p >= 0 && u.toks[p].punct(nameQuoteMarks...) {
		p--
	}
	for n < len(u.toks) && u.toks[n].punct(nameQuoteMarks...) {
		n++
	}
	return p, n
}

var nameQuoteMarks = []string{"`", `"`, "'", "“", "”", "‘", "’", "「", "」", "『", "』"}

// sourceAt reports whether the file at i is a source the work reads: after a source word ("aus daten.csv", "从
// data.csv"), before a CJK source particle ("data.csvから"), or followed by a destination word and another file
// ("exportiere daten.csv als daten.xlsx").
func (r *foreignReading) sourceAt(u *unit, i int) bool {
	p, n := around(u, i)
	switch {
	case p >= 0 && !r.cjk[p] && (inList(r.words[p], &foreignSourcePreps) ||
		p > 0 && inList(r.words[p-1]+" "+r.words[p], &foreignSourcePreps)): // "aus X", "à partir de X"
		return true
	case p >= 0 && r.cjk[p] && slices.ContainsFunc(foreignSourcePreps, func(s string) bool {
		return isCJKString(s) && strings.HasSuffix(u.toks[p].low, s)
	}):
		return true
	case n < len(u.toks) && r.cjk[n] && slices.ContainsFunc(foreignSourceAfter, func(s string) bool {
		return strings.HasPrefix(u.toks[n].low, s)
	}):
		return true
	}
	_, f := around(u, n)
	return n < len(u.toks) && f < len(u.toks) && u.toks[f].kind == tokFile &&
		slices.ContainsFunc(foreignDestPreps, func(d string) bool { return r.words[n] == d || r.cjk[n] && strings.HasSuffix(u.toks[n].low, d) })
}

// productSubject reports whether the cue hits[g] governing the file at i has a product as its subject (rule 11): a
// product noun at most productSubjectSpan tokens before the cue ("Der Export schreibt …"), or in CJK text in the
// cue's run before it or in the run right before the file ("导出功能生成的").
func (r *foreignReading) productSubject(u *unit, g, i int) bool {
	h := r.hits[g]
	if r.cjk[h.tok] {
		if slices.ContainsFunc(cjkIndex(u.toks[h.tok].low, &foreignProductNouns), func(off int) bool { return off < h.off }) {
			return true
		}
		// "エクスポート機能が空の `export.csv`", "내보내기 기능이 빈 `export.csv`"
		for k := i - 1; k >= 0 && k >= i-productRuns && (r.cjk[k] || u.toks[k].punct(nameQuoteMarks...)); k-- {
			if k != h.tok && r.cjk[k] && r.in(u, k, &foreignProductNouns) {
				return true
			}
		}
		return false
	}
	for k := h.tok - 1; k >= 0 && k >= h.tok-productSubjectSpan && u.toks[k].kind != tokFile &&
		!u.toks[k].punct(asideMarks...); k-- {
		if productWord(u.toks[k].text) {
			return true
		}
	}
	return false
}

// productName reports whether the cue h is part of a product's name: in CJK text a product noun right after it in its
// run ("导出功能"), in Latin text a product noun right before it ("El botón de exportar").
func (r *foreignReading) productName(u *unit, h cueHit) bool {
	if r.cjk[h.tok] {
		return slices.ContainsFunc(cjkIndex(u.toks[h.tok].low, &foreignProductNouns), func(off int) bool {
			return off > h.off && off <= h.off+productNameBytes
		}) || h.tok+1 < len(u.toks) && r.cjk[h.tok+1] && slices.Contains(cjkIndex(u.toks[h.tok+1].low, &foreignProductNouns), 0) // "내보내기 기능"
	}
	return anyIn(max(h.tok-2, 0), h.tok-1, func(k int) bool { return productWord(u.toks[k].text) })
}

// flagAt reports whether the file at i is the value of a command-line option ("--output summary.json", "-o out.csv"):
// rule 11, a file the product writes.
func flagAt(u *unit, i int) bool {
	return i > 0 && (strings.HasPrefix(u.toks[i-1].text, "--") || strings.HasPrefix(u.toks[i-1].text, "-o"))
}

// fileWord reports whether token j is a file noun or binary format ("eine PDF-Datei", "PDF檔"), not negated.
func (r *foreignReading) fileWord(u *unit, j int) bool {
	t := u.toks[j]
	hit := r.cjk[j] && slices.ContainsFunc(cjkIndex(t.low, &foreignFileWords), func(off int) bool {
		return !slices.ContainsFunc(cjkIndex(t.low, &foreignNegators), func(n int) bool { return n < off }) // "不要生成文件"
	})
	if !r.cjk[j] && t.kind != tokFile {
		for part := range strings.SplitSeq(foldWord(t.text), "-") {
			hit = hit || inList(part, &foreignFileWords)
		}
	}
	negd := j > 0 && !r.cjk[j-1] && r.inL(r.words[j-1], &foreignNegators) ||
		j > 1 && !r.cjk[j-2] && r.inL(r.words[j-2], &foreignNegators)
	return hit && !negd
}

// noFile returns the token of a file noun a sentence that names no file and makes nothing negates as a whole ("keine
// Datei nötig", "ファイルは不要", "파일은 필요 없습니다"), or -1; "keine weiteren Dateien" is not one.
func (r *foreignReading) noFile(u *unit) int {
	if slices.ContainsFunc(u.phrases, func(p *phrase) bool { return len(p.mentions) > 0 }) ||
		slices.ContainsFunc(r.hits, func(h cueHit) bool { return h.class.makes() && !h.neg }) {
		return -1
	}
	for j, t := range u.toks {
		if r.cjk[j] {
			if r.in(u, j, &foreignFileWords) && !r.in(u, j, &foreignOther) &&
				(r.in(u, j, &foreignNegators) || j+1 < len(u.toks) && r.cjk[j+1] && r.in(u, j+1, &foreignNegators)) {
				return j
			}
			continue
		}
		if t.kind == tokFile || !inList(r.words[j], &foreignFileWords) {
			continue
		}
		for k := j - 1; k >= 0 && k >= j-2 && !r.cjk[k] && !inList(r.words[k], &foreignOther); k-- {
			if r.inL(r.words[k], &foreignNegators) {
				if slices.ContainsFunc(r.hits, func(h cueHit) bool { return h.tok == k-1 && (h.class == cueEdit || h.class == cueInput) }) {
					break // "Ne modifie pas le fichier source": a file not to edit, not "no file"
				}
				return j
			}
		}
	}
	return -1
}

// imperative reports whether u opens with a verb cue ("Voeg een rapport …
// toe"): under an input heading such a sentence asks, as a polite one does.
func (r *foreignReading) imperative(u *unit) bool {
	k := slices.IndexFunc(u.toks, func(t token) bool { return t.kind != tokPunct }) // -1 for no word: no cue
	return r.cueAt(k) && !r.cjk[k] && k+imperativeMin < len(u.toks) && !u.toks[k+1].punct(":", "：")
}

const imperativeMin = 3 // words after the verb of an imperative: a heading word alone ("## Anhänge") is none

// polite reports whether u has a polite marker ("bitte", "merci de", "请",
// "ください"): under an input heading only such a sentence asks for a file.
func (r *foreignReading) polite(u *unit) bool {
	return anyIn(0, len(u.toks)-1, func(i int) bool {
		return r.in(u, i, &foreignPolite) || i > 0 && inList(r.words[i-1]+" "+r.words[i], &foreignPolite) // "por favor"
	})
}

// qualifierAt returns the token of a "not a deliverable" qualifier in u (rule 6: "kein Liefergegenstand", "no un
// entregable", "不是交付物", "成果物ではありません", "산출물이 아닙니다"), or -1.
func (r *foreignReading) qualifierAt(u *unit) int {
	noun := func(k int) bool {
		w := r.words[k]
		if r.cjk[k] {
			w = u.toks[k].low
		}
		return slices.ContainsFunc(labelWords, func(l string) bool {
			l = foldWord(l)
			return w == l || r.cjk[k] && strings.Contains(w, l) || len(l) >= labelCompound && strings.HasSuffix(w, l) // "Aufgabenlieferung"
		}) || strings.HasPrefix(w, "deliverable")
	}
	for i := range u.toks {
		if r.cjk[i] {
			if noun(i) && (len(cjkIndex(u.toks[i].low, &foreignNegators)) > 0 ||
				i+1 < len(u.toks) && r.cjk[i+1] && slices.Contains(cjkIndex(u.toks[i+1].low, &foreignNegators), 0)) {
				return i
			}
			continue
		}
		if !inList(r.words[i], &foreignNegators) {
			continue
		}
		for j := i + 1; j < len(u.toks) && j <= i+qualifierSpan && u.toks[j].kind == tokWord; j++ {
			if noun(j) {
				return i
			}
		}
	}
	return -1
}

// foreignCtx is what the foreign rules read about the file at token i.
type foreignCtx struct {
	u    *unit
	m    *mention
	r    *foreignReading
	i, g int      // the file's token; the governing cue's index in r.hits, or -1
	gc   cueClass // that cue's class, cueNone without one
	gneg bool     // that cue is negated
	from int      // the governing cue's token, or i
}

// foreignRule is one row of the foreign table: when match holds, the file takes role, then runs, if set.
type foreignRule struct {
	rule
	role  fileRole
	match func(c *foreignCtx) bool
	then  func(c *foreignCtx)
}

func (c *foreignCtx) existing()  { c.m.existing = true }
func (c *foreignCtx) forbid()    { c.m.forbid = true }
func (c *foreignCtx) delivered() { c.m.delivery = true }
func (c *foreignCtx) makes() bool {
	return c.gc == cueOutput || c.gc == cueDelivery || c.gc == cueNaming
}
func (c *foreignCtx) undelivered() bool { return c.m.role == roleOutput && !c.m.delivery }

// foreignRules give a file of a unit written in another language its role from the cue that governs it (governing): the
// first row that matches decides; foreignMarks then revise it, each row that matches applying.
var foreignRules = []foreignRule{
	{rule{"foreign-question", "rule 9: a question asks about the file, not for it"}, roleInput,
		func(c *foreignCtx) bool { return c.u.question }, nil},
	{rule{"foreign-flag", "rule 9: the value of a command-line option, a file the product writes (rule 11)"}, roleRepo,
		func(c *foreignCtx) bool { return flagAt(c.u, c.i) }, nil},
	{rule{"foreign-model", "rule 9: named as a model, template or example (rule 10)"}, roleInput,
		func(c *foreignCtx) bool { return c.r.modelAt(c.u, c.i) }, (*foreignCtx).existing},
	{rule{"foreign-input-heading", "rule 9: listed under a heading for inputs, context or references (rule 10)"}, roleInput,
		func(c *foreignCtx) bool { return c.u.inputs }, (*foreignCtx).existing},
	{rule{"foreign-presented", "rule 9: presented as given with the task"}, roleInput,
		func(c *foreignCtx) bool { return c.gc == cuePresented }, (*foreignCtx).existing},
	{rule{"foreign-source", "rule 9: the source the work reads (\"aus X\", \"X から\")"}, roleInput,
		func(c *foreignCtx) bool { return c.gc != cueNaming && c.r.sourceAt(c.u, c.i) }, nil},
	{rule{"foreign-product", "rule 9: the product writes it, a feature or bug: repository work (rule 11)"}, roleRepo,
		func(c *foreignCtx) bool {
			return c.makes() && (c.r.feature || c.r.product[c.g] || c.r.productSubject(c.u, c.g, c.i))
		}, func(c *foreignCtx) { c.r.product[c.g] = true }},
	{rule{"foreign-forbidden", "rule 9: forbidden: a negated output or delivery word names it"}, roleNone,
		func(c *foreignCtx) bool { return c.gneg && c.gc != cueInput && c.gc != cueReply && c.gc != cueEdit },
		(*foreignCtx).forbid},
	{rule{"foreign-edit", "rule 9: edited in place: the object of an edit word"}, roleEdit,
		func(c *foreignCtx) bool { return c.gc == cueEdit }, nil},
	{rule{"foreign-delivery", "rule 9: delivered: a delivery word governs it"}, roleOutput,
		func(c *foreignCtx) bool { return c.gc == cueDelivery || c.gc == cueSend }, (*foreignCtx).delivered},
	{rule{"foreign-output", "rule 9: output: the object of an output or naming word"}, roleOutput,
		func(c *foreignCtx) bool {
			return c.gc == cueOutput || c.gc == cueNaming || c.gc == cueTransform && c.r.destBy(c.u, c.i, &foreignDestPreps)
		}, nil},
	{rule{"foreign-transform-source", "rule 9: the source of a transform word"}, roleInput,
		func(c *foreignCtx) bool { return c.gc == cueTransform }, nil},
	{rule{"foreign-input", "rule 9: the object of a reading or reply word"}, roleInput,
		func(c *foreignCtx) bool { return c.gc == cueInput || c.gc == cueReply }, nil},
	{rule{"foreign-repo-item", "rule 9: named in a Deliverables item about repository work (rule 4)"}, roleRepo,
		func(c *foreignCtx) bool {
			return c.u.item && anyIn(0, len(c.u.toks)-1, func(k int) bool { return c.r.in(c.u, k, &foreignRepo) })
		}, nil},
	{rule{"foreign-stated", "rule 9: a statement of what was done or where it is names it: a perfect auxiliary or a statement verb before it"}, roleInput,
		func(c *foreignCtx) bool { return c.gc == cueNone && c.r.statedBefore(c.u, c.i) }, (*foreignCtx).existing},
	{rule{"foreign-item", "rule 9: output: named as a destination or in a Deliverables item"}, roleOutput,
		func(c *foreignCtx) bool { return c.u.item || c.r.destBy(c.u, c.i, &foreignNamingPreps) }, nil},
	{rule{"foreign-ungoverned", "rule 9: no cue word governs the file"}, roleNone,
		func(*foreignCtx) bool { return true }, nil},
}

var foreignMarks = []foreignRule{
	{rule{"foreign-negated-after", "rule 9: forbidden: a negated delivery word after it refers back to it"}, roleNone,
		func(c *foreignCtx) bool { return c.undelivered() && c.r.negDeliverFrom[c.i+1] }, (*foreignCtx).forbid},
	{rule{"foreign-delivered-after", "rule 9: delivered: a delivery word after it refers back to it"}, roleOutput,
		func(c *foreignCtx) bool {
			return (c.undelivered() || c.m.role == roleEdit) && c.r.deliverFrom[c.i+1]
		}, (*foreignCtx).delivered},
	{rule{"foreign-inline", "rule 9: inline: a marker places it in the reply"}, roleInline,
		func(c *foreignCtx) bool {
			return c.undelivered() && c.r.inlineN[c.i+1] > 0 && !c.r.otherBeforeInline(c.u, c.i)
		}, nil},
}

// foreignAsks are the rows by which a cue asks for a file by itself.
var foreignAsks = []rule{
	{"foreign-asks-delivery", "rule 9: a delivery or export word asks for a file"},
	{"foreign-asks-output", "rule 9: an output word before a file noun or format asks for a file"},
	{"foreign-asks-item", "rule 9: a Deliverables item names a file format (\"- die Präsentation als PDF\")"},
}

var _ = register(43, "foreign", "rule 9: a file in a sentence in another language: the first row that matches",
	ruleList(foreignRules))
var _ = register(44, "foreign-mark", "rule 9: revisions of that role: every row that matches applies", ruleList(foreignMarks))
var _ = register(45, "foreign-asks", "rule 9: an unnamed file request in another language", foreignAsks)

func (c *foreignCtx) apply(row *foreignRule, a, b int) {
	c.m.role = row.role
	detail := ""
	if c.g >= 0 && a == c.from {
		detail = c.u.toks[c.from].text
	}
	c.m.decide(c.u, row.rule, detail, a, b)
	if row.then != nil {
		row.then(c)
	}
}

// relativeAt reports whether the cue at tok stands in a relative clause, one that opens after a comma with a relative
// pronoun ("…, der einen Datensatz exportiert"): it describes a thing; it asks for nothing.
func (r *foreignReading) relativeAt(u *unit, tok int) bool {
	k := tok - 1
	for k >= 0 && k >= tok-relativeSpan && !u.toks[k].punct(",", ";", ":", ".", "!", "?") {
		k--
	}
	return k >= 0 && k+1 < tok && u.toks[k].punct(",") && r.inL(r.words[k+1], &foreignRelatives)
}

// relativeSpan bounds how far back relativeAt looks for the clause's opening comma, in tokens.
const relativeSpan = 24

// readForeign reads a unit written in another language (rule 9) and replaces the English reading of its files and
// requests: each file takes its role from foreignRules and foreignMarks, and a cue may ask for a file by itself.
func readForeign(u *unit, bug bool) {
	if !u.foreign {
		return
	}
	r := scan(u)
	r.feature = r.featureUnit(u) || bug && !r.polite(u) && !r.imperative(u)
	u.question = u.question || r.question(u)
	if u.qualifier < 0 {
		u.qualifier = r.qualifierAt(u)
	}
	after := r.lang == langJA || r.lang == langKO // their verbs come after their objects: governing
	clear(u.neg)
	clear(u.inl)
	for _, p := range u.phrases {
		*p = phrase{start: p.start, end: p.end, mentions: p.mentions, lastDest: -1}
		for _, m := range p.mentions {
			i := m.tok
			*m = mention{name: m.name, tok: i, verb: -1}
			c := &foreignCtx{u: u, m: m, r: r, i: i, g: r.governing(i, after), from: i}
			if c.g >= 0 {
				h := r.hits[c.g]
				c.gc, c.gneg, c.from, m.verb = h.class, h.neg, h.tok, h.tok
			}
			for k := range foreignRules {
				if foreignRules[k].match(c) {
					c.apply(&foreignRules[k], c.from, i)
					break
				}
			}
			for k := range foreignMarks {
				if foreignMarks[k].match(c) {
					c.apply(&foreignMarks[k], i, len(u.toks)-1)
				}
			}
		}
	}
	if u.question || u.inputs && !r.polite(u) && !r.imperative(u) {
		return // a question asks about files; a unit under an input heading lists them
	}
	if k := r.noFile(u); k >= 0 {
		// "Antworte hier, keine Datei nötig": no file at all, also of the
		// requests before it, as "don't attach them" refers back to them.
		for _, p := range u.phrases {
			if p.start <= k && k < p.end {
				p.pronoun, p.negDeliver, p.plural = true, true, true
			}
		}
	}
	q := 0 // the phrase holding the cue: hits and phrases are both in text order
	for k, h := range r.hits {
		step()
		for q < len(u.phrases) && u.phrases[q].end <= h.tok {
			q++
		}
		if q >= len(u.phrases) || u.phrases[q].start > h.tok || h.neg || r.product[k] || r.feature {
			continue
		}
		p := u.phrases[q]
		if (h.class == cueDelivery || h.class == cueSend) && r.refersBack(u, h) {
			// "Envoie-le-moi", "このファイルを私に送って": it delivers a file named before.
			p.pronoun, p.attach, p.send = true, p.attach || h.class == cueDelivery, p.send || h.class == cueSend
		}
		// A delivery cue asks; an output or transform cue asks before a file noun, with no inline marker in its phrase.
		if asks := h.class == cueDelivery || (h.class == cueOutput || h.class == cueTransform) &&
			(r.fileWordFrom[h.tok+1] >= 0 || r.cjk[h.tok] && r.fileWord(u, h.tok)) && r.inlineN[p.start] == r.inlineN[p.end]; !asks ||
			r.relativeAt(u, h.tok) {
			continue
		}
		p.requestBy(u, foreignAsks[min(int(h.class)-int(cueDelivery), 1)], u.toks[h.tok].text, h.tok, h.tok)
		p.delivered = p.delivered || h.class == cueDelivery
	}
	negated := slices.ContainsFunc(r.hits, func(h cueHit) bool { return h.neg })
	for _, p := range u.phrases {
		i := slices.IndexFunc(u.toks[p.start:p.end], func(t token) bool { return formats[t.low] }) // a strong format
		if i >= 0 && u.item && !r.feature && !negated && r.inlineN[p.start] == r.inlineN[p.end] {
			p.requestBy(u, foreignAsks[2], u.toks[p.start+i].text, p.start+i, p.start+i)
		}
	}
}

// otherScripts are scripts no table reads; otherLatinWords maps the function words of Latin-script languages no table
// reads (lexicon_en.txt: otherLatin) to the first language that lists them: Unsure names them.
var (
	otherScripts = []struct {
		name  string
		table *unicode.RangeTable
	}{
		{"Russian or another Cyrillic-script language", unicode.Cyrillic}, {"Arabic", unicode.Arabic},
		{"Hebrew", unicode.Hebrew}, {"Hindi or another Devanagari-script language", unicode.Devanagari},
		{"Thai", unicode.Thai}, {"Greek", unicode.Greek}, {"Bengali", unicode.Bengali}, {"Tamil", unicode.Tamil},
		{"Georgian", unicode.Georgian}, {"Armenian", unicode.Armenian}, {"Amharic", unicode.Ethiopic},
	}
	otherLatinWords = lexMap("otherLatin")
)

const otherLatinMin = 3 // function words a Latin-script language without a table needs to be named

// otherScriptsFirst is below every rune of otherScripts (Greek opens them; TestOtherScriptsFirst holds it): unsure
// skips the look-up for a letter under it.
const otherScriptsFirst = 0x370

// unsureLanguage returns why the reading of objective may be wrong, or "": the text is mostly in a language no table
// reads.
func unsureLanguage(objective string) string {
	counts := make([]int, len(otherScripts))
	letters := 0
	for _, c := range objective {
		if !unicode.IsLetter(c) {
			continue
		}
		letters++
		if c < otherScriptsFirst {
			continue
		}
		for k, s := range otherScripts {
			if unicode.Is(s.table, c) {
				counts[k]++
				break
			}
		}
	}
	for k, n := range counts {
		if 2*n > letters {
			return "language: the text is mostly " + otherScripts[k].name + ", which has no table"
		}
	}
	other, known := map[string]int{}, 0
	best := ""
	for f := range strings.FieldsFuncSeq(strings.ToLower(objective), func(r rune) bool { return !unicode.IsLetter(r) }) {
		step()
		switch {
		case otherLatinWords[f] != nil && len(foreignFunctionWords[f]) == 0:
			l := otherLatinWords[f][0]
			other[l]++
			if best == "" || other[l] > other[best] || other[l] == other[best] && l < best {
				best = l
			}
		case len(foreignFunctionWords[f]) > 0 || englishFunctionWords[f]:
			known++
		}
	}
	if best != "" && other[best] >= otherLatinMin && other[best] > known {
		return "language: the text is mostly " + best + ", which has no table"
	}
	return ""
}

// unsure returns why the reading of units may be wrong, or "": a delivery cue and a negation of another language bear on
// the same output file.
func unsure(units []*unit) string {
	forbid, delivered := map[string]bool{}, map[string]bool{}
	noFile, requested := false, ""
	for _, u := range units {
		if !u.foreign {
			continue
		}
		noFile = noFile || scan(u).noFile(u) >= 0
		for _, p := range u.phrases {
			for _, m := range p.mentions {
				forbid[m.name] = forbid[m.name] || m.forbid
				delivered[m.name] = delivered[m.name] || m.role == roleOutput
				if forbid[m.name] && delivered[m.name] {
					return "conflicting signals: a request and a negation of another language both bear on " + m.name
				}
				if m.role == roleOutput && !m.forbid && requested == "" {
					requested = m.name
				}
			}
		}
	}
	if noFile && requested != "" {
		// "Erstelle X. … ## Hinweis: keine Datei nötig" across sections.
		return "conflicting signals: a request and a negation of another language both bear on " + requested
	}
	return ""
}
