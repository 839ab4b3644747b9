package reqdetect

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Stage 3 and 4: verbs, phrases, negation, inline markers, roles

type fileRole uint8

const (
	roleNone   fileRole = iota
	roleOutput          // the text asks for this file to be produced or delivered
	roleInput           // read, compared, summarized, a source
	roleEdit            // edited in place
	roleRepo            // repository work
	roleInline          // to be written inline in the reply
	roleDenied          // an expected-denied write
)

// mention is one occurrence of a file name.
type mention struct {
	name     string
	tok      int
	role     fileRole
	delivery bool // a delivery verb or marker reaches it
	forbid   bool // a negated output or delivery reaches it
	exempt   bool // a qualifier exempts it
	repoRef  bool // a repository verb reaches it through a pronoun
	reshaped bool // the object of a transform verb that names no destination
	verb     int  // token index of the verb it takes its role from, or -1
	checked  bool // a passive verb after it checks it, whatever governs it ("make sure site/index.html is produced")
	existing bool // an input the text presents as already there: stated, located, attached ("x.csv, attached")
	trace         // the last rule that decided its role
}

// trace is the rule that decided something and the span of the objective it read.
type trace struct {
	id   string
	rule string
	span string
}

// decide records rule r, quoting detail, and the span from token a to token b of u.
func (t *trace) decide(u *unit, r rule, detail string, a, b int) {
	if a > b {
		a, b = b, a
	}
	a, b = max(a, 0), min(b, len(u.toks)-1)
	lo, hi := u.toks[a].pos, u.toks[b].pos+len(u.toks[b].text)
	t.id, t.rule, t.span = r.id, r.text(detail), ""
	if 0 <= lo && lo <= hi && hi <= len(u.src) {
		t.span = u.src[lo:hi]
	}
}

// phrase is one verb phrase of a unit: toks[start:end].
type phrase struct {
	start, end int
	rel        bool // opened by a relative pronoun
	negated    bool
	repo       bool // mentions a pull request, branch or commit
	probe      bool // attempt/try
	denied     bool
	inline     bool // holds an inline marker
	export     bool
	attach     bool // attach/upload, not negated
	send       bool // send/share/publish/deliver…, not negated
	marker     bool // downloadable, as an attachment, for download
	negDeliver bool // a negated attach/send verb
	repoVerb   bool
	pronoun    bool   // a pronoun object ("it", "them", "the file", "the updated file")
	anaphor    bool   // that object is a noun phrase ("the revised copy"): it refers within the unit only
	sameDoc    bool   // that noun phrase's head names the same document ("the tidied version"), not a format
	part       string // the participle in that noun phrase ("shortened" in "the shortened one"), or ""
	kind       string // the kind noun heading that noun phrase ("spreadsheet" in "the spreadsheet"), or ""
	lastDest   int    // index of the last destination in the phrase ("to JSON", "as a PDF"), or -1
	plural     bool
	pair       bool // that object is "both": it refers to two files
	returns    bool // a delivery verb with "back" ("send it back"): it may return a file the user gave
	signal     bool // an unnamed file request
	delivered  bool // the unnamed request is delivery-marked
	exempt     bool
	forbid     bool
	mentions   []*mention
	trace      // the rule behind its unnamed request
}

// requestBy records an unnamed file request read by rule r, quoting detail, over tokens a..b.
func (p *phrase) requestBy(u *unit, r rule, detail string, a, b int) {
	p.signal = true
	if p.rule == "" {
		p.decide(u, r, detail, a, b)
	}
}

// Requests for a file the text does not name (rule 1), in the order readPhrase and signalAt try them.
var (
	ruleAttachUnnamed  = rule{"attach-unnamed", "unnamed request: an attach or upload verb or a delivery marker"}
	ruleExportUnnamed  = rule{"export-unnamed", "unnamed request: an export verb"}
	ruleDestFormat     = rule{"dest-format", "unnamed request: a file or format after a destination preposition"}
	ruleBareFormat     = rule{"bare-format", `unnamed request: a format standing as its own clause ("— PDF, one page")`}
	ruleAcceptedFormat = rule{"accepted-format", `unnamed request: a file or format accepted as the answer ("a Markdown file is fine")`}
	ruleOutputObject   = rule{"output-object", "unnamed request: a file or format is the object of an output verb"}
)

var _ = register(43, "unnamed", "requests for a file the text does not name",
	[]rule{ruleAttachUnnamed, ruleExportUnnamed, ruleDestFormat, ruleBareFormat, ruleAcceptedFormat, ruleOutputObject})

// namesOutput reports whether the phrase names an output file (requested or forbidden).
func (p *phrase) namesOutput() bool {
	return slices.ContainsFunc(p.mentions, func(m *mention) bool { return m.role == roleOutput || m.forbid })
}

// readPhrase finds the phrase's flags, file mentions and unnamed requests.
func readPhrase(u *unit, p *phrase) {
	toks := u.toks
	combineFiles(u, p)
	for i := p.start; i < p.end; i++ {
		t := toks[i]
		p.repo = p.repo || repoAt(toks, i) && !u.neg[i] // "… — don't commit it" leaves the phrase no repository work
		switch u.cls[i] {
		case verbProbe:
			p.probe = true
		case verbRepo:
			p.repo = p.repo || !u.neg[i]
			p.repoVerb = p.repoVerb || !u.neg[i]
		case verbAttach:
			if u.neg[i] {
				p.negDeliver = true
			} else if !passiveNeed(u, i, p.end) {
				p.attach = true // "… should be uploaded to the portal by the ops team" states a need
			}
		case verbSend:
			if u.neg[i] {
				// "do not email it to the client" forbids another action, a send to someone else, not the delivery of the file.
				p.negDeliver = p.negDeliver || !toThirdParty(u, i, p.end)
			} else if !passiveNeed(u, i, p.end) {
				p.send = true // "… needs to be shared with the mobile team" states a need
			}
		case verbExport:
			p.export = p.export || !u.neg[i]
		}
		p.marker = p.marker || !u.neg[i] && markerLen(toks, i) > 0 && !inStatedSubject(u, p, i)
		// A pronoun after a topic preposition ("email the client about
		// it") is what a message is about, not the object a verb delivers.
		if !p.pronoun && t.kind == tokWord && !(i > p.start && toks[i-1].is(topicPreps...)) {
			p.pronoun, p.plural, p.anaphor = pronounAt(toks, i, p.end)
			if t.is("the") {
				// "upload the spreadsheet", "the shorter clip": a noun naming
				// a kind of file refers back to a file of that kind.
				if kind, plural := kindAt(toks, i+1, p.end); kind != "" {
					p.kind = kind
					if !p.pronoun {
						p.pronoun, p.plural, p.anaphor = true, plural, true
					}
				}
			}
			p.sameDoc = p.anaphor && slices.ContainsFunc(npWords(toks, i+1, p.end), func(t token) bool { return sameDocHeads[t.low] })
			p.pair = p.pronoun && t.is(pairPronouns...)
			if p.anaphor {
				p.part = participleAt(toks, i+1, p.end)
			}
		}
	}

	lastVerb := -1      // nearest verb before i in the phrase
	head := -1          // the verb that governs the phrase at i (see below)
	prep := ""          // nearest word before i that is not a filler
	prepOfVerb := false // an input preposition lies between lastVerb and i
	gov := -1           // nearest token before i that is not a file, determiner or filler word
	p.lastDest = lastDestination(u, p)
	paren := toks[p.start].punct("(") // the phrase opens with a parenthesis
	for i := p.start; i < p.end; i++ {
		t := toks[i]
		if paren && i > p.start && t.punct(")") {
			// "generate a changelog … (attached) as CHANGELOG.md", "Write up the findings (no need to attach the raw logs) in
			// findings.md": after the parenthesis that opened the phrase closes, the verb before it governs again.
			lastVerb, head, prepOfVerb, paren = resumedVerb(u, p.start), -1, false, false
			head = lastVerb
		}
		switch t.kind {
		case tokFile:
			p.mentions = append(p.mentions, readMention(u, p, i, lastVerb, head, gov, npPrep(u, p, i, appositionPrep(u, p, i, prep))))
		case tokWord:
			if !u.neg[i] && !u.inl[i] {
				signalAt(u, p, i, lastVerb, head, prep, prepOfVerb)
			}
		}
		if u.verbAt(i) || (u.cls[i] == verbPseudo && !u.neg[i]) {
			// A verb inside a prepositional complement of the verb before it ("a guide on how to use the API", "a report on
			// testing X") does not take over the phrase, nor does a statement inside its object ("put everything you found into
			// X"): a destination later in the phrase still belongs to the verb before it.
			if (!prepOfVerb || head < 0) && (u.cls[i] != verbStated || head < 0) || u.asked[i] {
				head = i
			}
			lastVerb, prepOfVerb = i, false
		} else if t.kind == tokWord && inputPreps[t.low] {
			prepOfVerb = true
		}
		if !prepSkip(t) {
			prep = ""
			// A verb ("I'd like report.pdf") or the second word of an exception ("other than out.csv") is no preposition.
			if t.kind == tokWord && !u.verbAt(i) && !(i > p.start && exceptionAt(toks, i-1, p.end)) {
				prep = t.low
			}
		}
		if !prepSkip(t) || t.kind == tokPunct {
			gov = i
		}
	}

	p.returns = (p.send || p.attach) && hasWord(u, p, returnParticles)
	if p.attach || p.marker {
		p.requestBy(u, ruleAttachUnnamed, "", p.start, p.end-1)
		p.delivered = true
	}
	if p.export && !p.inline {
		p.requestBy(u, ruleExportUnnamed, "", p.start, p.end-1)
	}
	p.signal = p.signal && !p.negated && !u.question
}

// inStatedSubject reports whether the token at i stands in a definite subject of a statement.
func inStatedSubject(u *unit, p *phrase, i int) bool {
	if i == 0 || i-p.start > subjectSpan || !u.toks[i-1].is("the") && !inputDets[u.toks[i-1].low] ||
		anyIn(p.start, i-1, u.verbAt) {
		return false
	}
	for k := i + 1; k < p.end && k <= i+subjectSpan && u.toks[k].kind != tokPunct; k++ {
		if u.cls[k] == verbStated {
			return true
		}
	}
	return false
}

// resumedVerb returns the last verb, not negated, before the token at start, at most resumeSpan
// tokens back in its unit, or -1: the verb a parenthesis opening at start interrupts.
func resumedVerb(u *unit, start int) int {
	for k := start - 1; k >= 0 && k >= start-resumeSpan; k-- {
		if u.verbAt(k) && !u.neg[k] {
			return k
		}
	}
	return -1
}

// toThirdParty reports whether the send verb at i names a recipient or a venue other than the user.
func toThirdParty(u *unit, i, end int) bool {
	j, _ := prepHead(u, i, end, recipientSpan, recipientPreps)
	if j < 0 || u.toks[j].is(recipients...) || u.toks[j].is(addressees...) {
		return false
	}
	w := u.toks[j].low
	return !formatWord(w) && !fileNouns[w] && !functionWords[w]
}

// pastDets returns the index of the first token from j, before end, that is no determiner, or end.
func pastDets(toks []token, j, end int) int {
	for j < end && determiners[toks[j].low] {
		j++
	}
	return j
}

// prepHead finds the first of preps within span tokens after i, in i's clause, and returns the
// index of the word heading its noun phrase (past any determiners) and whether a determiner stood
// before it; -1 when there is no such preposition or its phrase holds no word.
func prepHead(u *unit, i, end, span int, preps []string) (head int, det bool) {
	toks := u.toks
	for k := i + 1; k < end && k <= i+span && !isClauseBreak(toks[k]); k++ {
		if !toks[k].is(preps...) {
			continue
		}
		j := pastDets(toks, k+1, end)
		if j >= end || toks[j].kind != tokWord {
			return -1, false
		}
		return j, j > k+1
	}
	return -1, false
}

// passiveNeed reports whether the attach or send verb at k, not negated, states a need rather than asks for a delivery.
func passiveNeed(u *unit, k, end int) bool {
	toks := u.toks
	c := u.cls[k]
	if c != verbAttach && c != verbSend || u.neg[k] || formOf(toks[k].low, lemmaOf(toks[k].low)) != formPerfect {
		return false
	}
	j := skipAdverbs(toks, k-1, true)
	return j >= 0 && toks[j].is(passiveInfinitives...) && (c == verbSend && toThirdParty(u, k, end) || agentAt(u, k, end))
}

// agentAt reports whether an agent phrase follows the passive participle at k within agentSpan tokens and its clause.
func agentAt(u *unit, k, end int) bool {
	n, det := prepHead(u, k, end, agentSpan, agentPreps)
	if n < 0 || deadlineWords[u.toks[n].low] {
		return false
	}
	r, _ := utf8.DecodeRuneInString(u.toks[n].text)
	return det || unicode.IsUpper(r)
}

// topicClause returns the index of the word that opens an embedded clause holding the file at i, or -1.
func topicClause(u *unit, p *phrase, i int, prep string) int {
	toks := u.toks
	inRun := func(k int) bool {
		return k > 0 && toks[k-1].kind == tokFile || k+1 < len(toks) && toks[k+1].kind == tokFile
	}
	for k := i - 1; k >= p.start && k >= i-topicSpan; k-- {
		t := toks[k]
		switch {
		case t.kind == tokFile || t.punct(quoteMarks...):
		case t.kind == tokPunct:
			if !t.punct(fileListMarks...) || !inRun(k) {
				return -1
			}
		case t.is(clauseJoiners...):
			if !inRun(k) {
				return -1
			}
		case t.is(topicWh...):
			if !topicIntro(u, k) {
				return -1
			}
			if outputPreps[prep] || prep == "to" || slices.Contains(storagePreps, prep) {
				for j := max(p.start, k-resumeSpan); j < k; j++ {
					if u.verbAt(j) && !u.neg[j] && u.cls[j] != verbInput && u.cls[j] != verbReply {
						return -1 // the destination of the verb before the clause
					}
				}
			}
			return k
		}
	}
	return -1
}

// topicIntro reports whether the topicWh word at k follows a topic preposition (topicIntroPreps) or
// a verb whose object the clause is, a recipient or a particle between allowed.
func topicIntro(u *unit, k int) bool {
	j := k - 1
	if j >= 0 && u.toks[j].is(recipients...) {
		j--
	}
	if j > 0 && particleAt(u.toks, j) && u.verbAt(j-1) {
		j--
	}
	return j >= 0 && (u.toks[j].is(topicIntroPreps...) || u.verbAt(j))
}

// comparisonAt reports whether the "as" or "to" at k introduces the standard of a comparison rather than a destination.
func comparisonAt(u *unit, k int) bool {
	toks := u.toks
	if k < 1 {
		return false
	}
	if toks[k].is("to") {
		w := toks[k-1].low
		return toks[k-1].kind == tokWord && (comparisonAdjectives[w] || comparisonAdjectives[strings.TrimSuffix(w, adverbSuffix)])
	}
	if !toks[k].is("as") {
		return false
	}
	for j, n := k-1, 0; j >= 0 && n <= comparisonSpan; j, n = j-1, n+1 {
		t := toks[j]
		switch {
		case t.kind != tokWord:
			return false
		case t.is(comparisonLeads...):
			return !examplesOf(u, k)
		case t.is("as"):
			return n >= 1 && !toks[k-1].is(asAsIdioms...)
		case u.verbAt(j) || functionWords[t.low] || determiners[t.low] || formatWord(t.low):
			return false // "save it as PNG as chart.png" names a destination twice
		}
	}
	return false
}

// echoesObject reports whether the file at i carries in its name the identifier that marks the object
// of its phrase, before the comparison at gov.
func echoesObject(u *unit, p *phrase, gov, i int) bool {
	name := u.toks[i].low
	if k := strings.LastIndexAny(name, `/\`); k >= 0 {
		name = name[k+1:]
	}
	segments := strings.FieldsFunc(name, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	return anyIn(max(p.start, gov-resumeSpan), gov-1, func(k int) bool {
		t := u.toks[k]
		return (t.kind == tokWord || t.kind == tokOther) && strings.ContainsFunc(t.low, unicode.IsDigit) &&
			slices.Contains(segments, t.low)
	})
}

// formatWord reports whether w names a format ("PNG", "JSON").
func formatWord(w string) bool {
	_, ok := formats[w]
	return ok
}

// examplesOf reports whether the "as" at k is the "such as" that names examples of a file noun right
// before it, a comma between allowed.
func examplesOf(u *unit, k int) bool {
	toks := u.toks
	if k < 2 || !toks[k].is("as") || !toks[k-1].is("such") {
		return false
	}
	j := k - 2
	if toks[j].punct(",") && j > 0 {
		j--
	}
	return fileNouns[toks[j].low] && toks[j].kind == tokWord
}

// comparedAt reports whether the file at i, governed by the token at gov (prep its word), is the standard of a comparison.
func comparedAt(u *unit, p *phrase, gov, i int, prep string) bool {
	if gov < 0 || prep != "as" && prep != "to" || !u.toks[gov].is(prep) {
		return false
	}
	if comparisonAt(u, gov) {
		return !echoesObject(u, p, gov, i)
	}
	return prep == "as" && i+1 < p.end && u.toks[i+1].is(comparisonAuxes...) &&
		(i+2 >= p.end || u.toks[i+2].kind == tokPunct)
}

// npPrep returns the input preposition that governs the noun phrase the file at i heads, when the word
// before the file is a modifier of it (a possessive or a plain word, not a preposition).
func npPrep(u *unit, p *phrase, i int, prep string) string {
	k := i - 1
	for k >= p.start && k >= i-npPrepSpan && prepSkip(u.toks[k]) && u.toks[k].kind != tokFile {
		k--
	}
	for n := 0; k >= p.start && n < npPrepSpan && u.toks[k].kind == tokWord; k, n = k-1, n+1 {
		t := u.toks[k]
		if inputPreps[t.low] && n > 0 && !t.is(npPrepSkips...) {
			return t.low
		}
		if inputPreps[t.low] || !possessive(t) && !plainWord(t) {
			return prep
		}
	}
	return prep
}

// appositionPrep returns the output or source preposition that governs the noun phrase a file in parentheses names.
func appositionPrep(u *unit, p *phrase, i int, prep string) string {
	if i-2 < p.start || !u.toks[i-1].punct("(") {
		return prep
	}
	for k := i - 2; k >= p.start && k >= i-1-appositionSpan; k-- {
		t := u.toks[k]
		switch {
		case t.kind != tokWord:
			return prep
		case outputPreps[t.low], t.is(sourcePreps...):
			return t.low // "as a chart (spend.png)", "from the screen recording (signup.mov)"
		case nounPreps[t.low] || inputPreps[t.low] || functionWords[t.low] || u.verbAt(k):
			return prep
		}
	}
	return prep
}

// combineFiles reads a repository verb that joins files into a named file as a transform verb.
func combineFiles(u *unit, p *phrase) {
	if anyIn(p.start, p.end-1, func(i int) bool { return repoAt(u.toks, i) }) {
		return
	}
	var pending []int // repository verbs not yet followed by an output preposition
	for k := p.start; k < p.end; k++ {
		if u.cls[k] == verbRepo {
			pending = append(pending, k)
			continue
		}
		if len(pending) == 0 || u.toks[k].kind != tokWord || !outputPreps[u.toks[k].low] {
			continue
		}
		if j := pastDets(u.toks, k+1, p.end); j < p.end && u.toks[j].kind == tokFile {
			for _, v := range pending {
				u.cls[v] = verbTransform
			}
		}
		pending = pending[:0]
	}
}

// readMention gives the file at toks[i] its role, and records the rule that gave it and the span that rule read.
func readMention(u *unit, p *phrase, i, lastVerb, head, gov int, prep string) *mention {
	toks := u.toks
	m := &mention{name: toks[i].text, tok: i}
	vi := lastVerb
	if vi < 0 {
		vi = passiveVerb(u, i, p.end)
	}
	if vi < 0 {
		vi = reducedPassive(u, i, p.end)
	}
	m.checked = lastVerb < 0 && vi >= 0 || passiveVerb(u, i, p.end) >= 0 // a passive verb after it governs it, or not
	verb := verbNone
	if vi >= 0 && u.cls[vi] != verbUnknown {
		verb = u.cls[vi]
	}
	compared := comparedAt(u, p, gov, i, prep) // "the same way as NAME": no destination
	if examplesOf(u, gov) {
		prep = "" // "Create the standard files, such as README.md": the verb governs the examples
	}
	topic := !compared && topicClause(u, p, i, prep) >= 0
	target := (outputPreps[prep] || prep == "to") && !compared
	if target && head >= 0 && head != vi && isOutputish(u.cls[head]) &&
		(verb == verbInput || verb == verbReply || verb == verbEdit ||
			verb == verbStated && formOf(toks[vi].low, lemmaOf(toks[vi].low)) != formS) {
		// "write a summary of how to use X to summary.md", "put everything you found into findings.xlsx"
		vi, verb = head, u.cls[head]
	}
	if vi >= 0 && outputPreps[prep] && closedAdjunct(u, p, vi, i) {
		// "Transcribe the memo, cleaning up filler words, into memo.txt": the destination after the
		// adjunct's closing comma is not the participle's.
		vi, verb = -1, verbNone
	}
	m.verb = vi
	// A Deliverables item states its outputs: no need there.
	need := vi >= 0 && !u.item && passiveNeed(u, vi, p.end)
	from := i // the span starts at the governing verb, or at the file
	if vi >= 0 && vi < i {
		from = vi
	}
	c := &mentionCtx{u: u, p: p, m: m, toks: toks, i: i, vi: vi, gov: gov, from: from, verb: verb, prep: prep,
		compared: compared, topic: topic, target: target, need: need, inputGoverned: inputPreps[prep]}
	c.firstRule(mentionRules)
	for k := range mentionOverrides {
		if mentionOverrides[k].match(c) {
			c.apply(&mentionOverrides[k])
		}
	}
	c.governedByDelivery = vi >= 0 && (verb == verbAttach || verb == verbSend) && !need
	c.firstRule(mentionMarks)
	return m
}

// inSource reports whether the file at i, governed by a storage preposition or "of" (prep), lies in the noun phrase of a source
// preposition (sourcePreps) between the verb at vi and the file, at most sourceSpan tokens back.
func inSource(u *unit, vi, i int, prep string) bool {
	if !slices.Contains(storagePreps, prep) && prep != "of" {
		return false
	}
	for k := i - 1; k > vi && k >= i-sourceSpan; k-- {
		t := u.toks[k]
		switch {
		case t.is(sourcePreps...):
			return madeBefore(u, vi, k)
		case t.kind != tokWord || outputPreps[t.low] || t.is("to") || u.verbAt(k):
			return false
		}
	}
	return false
}

// madeBefore reports whether the object of the verb at vi, before the token at k, introduces what
// the verb makes: a file or an indefinite article, looked for at most resumeSpan tokens before k.
func madeBefore(u *unit, vi, k int) bool {
	lo := min(max(vi+1, k-resumeSpan), k)
	return slices.ContainsFunc(u.toks[lo:k], func(t token) bool { return t.kind == tokFile || t.is(indefArticles...) })
}

// presentedAfter reports whether a participle that describes a thing already there (describesThing)
// follows the file at i, a comma or closing quote marks or a "(" between.
func presentedAfter(u *unit, i, end int) bool {
	for k := i + 1; k < end && k <= i+3; k++ {
		t := u.toks[k]
		if t.punct(",", "(") || t.punct(quoteMarks...) {
			continue
		}
		lemma := lemmaOf(t.low)
		return u.cls[k] == verbStated && lemma != "" && presentedClasses[verbClasses[lemma]] &&
			formOf(t.low, lemma) == formPerfect && describesThing(u, k, verbClasses[lemma])
	}
	return false
}

// itemEdit reports whether the file at i of a Deliverables item is the object of a verb no lexicon
// lists that opens the item as an imperative.
func itemEdit(u *unit, vi, i, gov int) bool {
	toks := u.toks
	if vi < 0 || u.cls[vi] != verbUnknown || vi > 1 || vi == 1 && !toks[0].is(politeWords...) ||
		modifierWord(toks[vi].low) || namedBy(u, i) || storedIn(u, gov) || goesTo(u, i) {
		return false
	}
	k := vi + 1
	if particleAt(toks, k) {
		k++ // "- freshen up index.html": a phrasal verb, no modifier
	}
	if i-k > editSpan {
		return false
	}
	direct := true // the file is the verb's object, or one of a run of them
	for j := k; j < i && direct; j++ {
		direct = toks[j].kind == tokFile || toks[j].is(fileListJoiners...) || toks[j].punct(",")
	}
	if !direct {
		return editedSpan(u, k, i) // "- modernize the wording in letter.docx"
	}
	if k > vi+1 {
		return true // "- freshen up index.html with the new copy"
	}
	// What follows the run says whether the work changes its files ("- refresh styles.css so …"; not
	// "- Combine jan.csv and feb.csv into q1.csv").
	e := i + 1
	for e < len(toks) && e-k <= editSpan && (toks[e].kind == tokFile || toks[e].is(fileListJoiners...) || toks[e].punct(",") &&
		e+1 < len(toks) && toks[e+1].kind == tokFile) {
		e++
	}
	return resultClause(u, e)
}

// editedSpan reports whether toks[k:i], between an item's opening verb and its file, is the object the
// verb changes and the place of that object in the file.
func editedSpan(u *unit, k, i int) bool {
	for j := k; j < i; j++ {
		t := u.toks[j]
		switch {
		case t.kind != tokWord || u.verbAt(j):
			return false
		case j == i-1 && (t.is(storagePreps...) || t.is("of")):
		case determiners[t.low], possessive(t):
		case !plainWord(t) && lemmaOf(t.low) == "":
			return false
		}
	}
	return true
}

// resultClause reports whether a clause of result or purpose opens at toks[k].
func resultClause(u *unit, k int) bool {
	toks := u.toks
	if k >= len(toks) {
		return false
	}
	if toks[k].is(resultLeads...) {
		return true
	}
	if !toks[k].is("to") || k+1 >= len(toks) {
		return false
	}
	if toks[k+1].kind == tokOther {
		return true // "shorten intro.md to 200 words", "crop shot.png to 800x600"
	}
	v := toks[k+1]
	return v.kind == tokWord && !functionWords[v.low] && !determiners[v.low] && objectFollows(toks, k+2)
}

// modifierWord reports whether w, opening a Deliverables item before a file, reads as a modifier or a noun rather than a verb.
func modifierWord(w string) bool {
	if formatWord(w) || kindNouns[w] != nil || madeModifiers[w] || inputDets[w] || existingMarks[w] || docNouns[w] || fileNouns[w] ||
		anaphorHeads[w] || keptNouns[w] || slices.Contains(roleFillers, w) || slices.Contains(destModifiers, w) ||
		participle(w) {
		return true
	}
	return slices.ContainsFunc(adjectiveSuffixes, func(suf string) bool { return len(w) > len(suf)+2 && strings.HasSuffix(w, suf) })
}

// markedAt reports whether the file at i follows, at most two words back, a word of marks (existingMarks, editedMarks).
func markedAt(toks []token, i int, marks map[string]bool) bool {
	k := i - 1
	if k >= 0 && toks[k].punct(nameQuoteMarks...) {
		k-- // "an updated `docs/usage.md`"
	}
	for n := 0; k >= 0 && n < 2 && toks[k].kind == tokWord; k, n = k-1, n+1 {
		if marks[toks[k].low] {
			return true
		}
	}
	return false
}

// changedBy reports whether the causative verb at vi gives the file at i a property.
func changedBy(u *unit, vi, i, end int) bool {
	toks := u.toks
	return causatives[lemmaOf(toks[vi].low)] && i+1 < end && plainWord(toks[i+1]) &&
		(i+2 >= end || toks[i+2].kind == tokPunct || openers[toks[i+2].low])
}

// wantedChanged reports whether the object of the want verb at vi is wanted changed rather than made.
func wantedChanged(u *unit, vi, i int) bool {
	changed := func(k int) bool {
		w := u.toks[k].low
		lemma := lemmaOf(w)
		c := verbClasses[lemma] // "updated" after a noun is read as a modifier, not a verb
		return lemma != "" && (c == verbEdit || c == verbTransform) && formOf(w, lemma) == formPerfect
	}
	return anyIn(vi+1, min(i-1, vi+wantSpan), changed) || i+1 < len(u.toks) && changed(i+1)
}

// namesFileNoun reports whether the file at i is set off by a comma or a parenthesis right after a
// file noun of a request ("keep them all in one file, emails.md"): it names that file.
func namesFileNoun(u *unit, i int) bool {
	toks := u.toks
	if i < 2 || !toks[i-1].punct(",", "(") || !fileNouns[toks[i-2].low] || u.question {
		return false
	}
	for k := i - 3; k >= 0 && k >= i-5 && toks[k].kind == tokWord; k-- {
		if existingMarks[toks[k].low] || inputDets[toks[k].low] || participle(toks[k].low) {
			return false // "the attached file, data.csv", "The exported file (contacts.vcf)"
		}
	}
	return true
}

// goesTo reports whether the file at i follows a verb of motion and a preposition.
func goesTo(u *unit, i int) bool {
	toks := u.toks
	k := i - 1
	for k >= 0 && prepSkip(toks[k]) && toks[k].kind != tokFile {
		k--
	}
	return k >= 1 && toks[k].is(motionPreps...) && (toks[k-1].is(motionVerbs...) ||
		k >= 2 && toks[k-1].is("up") && toks[k-2].is(endVerbs...)) // "should end up in docs/x.md"
}

// declaredOutput reports whether the file at i is followed by "as", an article and an output role.
func declaredOutput(toks []token, i, end int) bool {
	k := i + 1
	if k >= end || !toks[k].is("as") {
		return false
	}
	for k++; k < end && (determiners[toks[k].low] || toks[k].is(roleFillers...)); k++ {
	}
	return k < end && toks[k].is(outputRoles...)
}

// receives reports whether the file at i is the first object of a verb of giving and so receives the second one.
func receives(u *unit, vi, i, end int) bool {
	return vi >= 0 && vi == i-1 && givingVerbs[lemmaOf(u.toks[vi].low)] &&
		i+1 < end && u.toks[i+1].is(indefArticles...)
}

// namedBy reports whether the file at i is the name a naming verb gives its object.
func namedBy(u *unit, i int) bool {
	toks := u.toks
	k := i - 1
	for k >= 0 && i-k <= 5 && toks[k].kind == tokWord && !namingVerbs[toks[k].low] &&
		(toks[k].is(storedPronouns...) || determiners[toks[k].low] || !functionWords[toks[k].low]) {
		k--
	}
	if k < 0 || k >= i-1 || toks[k].kind != tokWord || !namingVerbs[toks[k].low] {
		return false
	}
	return k == 0 || toks[k-1].kind == tokPunct || openers[toks[k-1].low] || toks[k-1].is(politeWords...)
}

// wantsWork reports whether the file at i is the subject of a want verb right after it.
func wantsWork(u *unit, i, end int) bool {
	k := i + 1
	return k < end && u.cls[k] == verbWant && formOf(u.toks[k].low, lemmaOf(u.toks[k].low)) == formS
}

// storedIn reports whether the file whose governing token is k is where the product of the work goes.
func storedIn(u *unit, k int) bool {
	toks := u.toks
	if k < 2 || !toks[k].is(storagePreps...) {
		return false
	}
	if toks[k-1].is(storedPronouns...) {
		return verbPlace(toks[k-2]) // "file them in oldest.json"
	}
	for d := k - 1; d >= 1 && d >= k-6 && toks[d].kind == tokWord && !u.verbAt(d); d-- {
		if toks[d].is(productDets...) && productNP(toks, d+1, k) && verbPlace(toks[d-1]) {
			return true
		}
	}
	return false
}

// productNP reports whether the noun phrase from toks[k] names a made thing.
func productNP(toks []token, k, end int) bool {
	found, _, _ := anaphoricNP(toks, k, end)
	return found || k < end && toks[k].kind == tokWord && keptNouns[toks[k].low]
}

// verbPlace reports whether t may be the verb of the object after it.
func verbPlace(t token) bool {
	return t.kind == tokWord && !functionWords[t.low] && !determiners[t.low] && !nounPreps[t.low]
}

// lastDestination returns the index of the last destination in phrase p, or -1.
func lastDestination(u *unit, p *phrase) int {
	last := -1
	for k := p.start; k < p.end; k++ {
		if !u.toks[k].is(sourceLinks...) || comparisonAt(u, k) {
			continue // "the same way as base.yaml" is no destination
		}
		j := pastDets(u.toks, k+1, p.end)
		if j < p.end && (u.toks[j].kind == tokFile || u.toks[j].kind == tokWord && !u.verbAt(j)) {
			last = k
		}
		k = j - 1
	}
	return last
}

// editedPart reports whether the file whose governing token is k names what the edit verb at vi
// changes through "of" after the verb's own object.
func editedPart(u *unit, vi, k int) bool {
	return k > vi+1 && k-vi <= 6 && u.toks[k].is("of") && !anyIn(vi+1, k-1, func(j int) bool {
		t := u.toks[j]
		return t.kind != tokWord || u.verbAt(j) || functionWords[t.low] && !prepFillers[t.low]
	})
}

var attemptTarget = rule{"attempt-target", "output: the target of an attempted write"}

// probeOutput makes the target of an attempted write an output, for markDenials to deny.
func probeOutput(u *unit, m *mention, vi, i int) {
	for k := vi + 1; k < i; k++ {
		if verbClasses[lemmaOf(u.toks[k].low)] == verbOutput {
			m.role = roleOutput
			m.decide(u, attemptTarget, "", vi, i)
			return
		}
	}
}

// locatedIn reports whether the file whose governing token is k (gov in readMention) is where
// something already is: a locative preposition after an indicative be-form.
func locatedIn(u *unit, k int) bool {
	if k < 1 {
		return false
	}
	named := u.toks[k].is(placeNames...)
	if !named && !locativePreps[u.toks[k].low] {
		return false
	}
	if !named && beforeBe(u.toks, k) {
		return true
	}
	for j := k - 1; j > 0 && j >= k-1-placeSpan && u.toks[j].kind == tokWord && !u.verbAt(j); j-- {
		t := u.toks[j]
		if locativePreps[t.low] {
			if !named {
				return beforeBe(u.toks, j)
			}
			return (beforeBe(u.toks, j) || placeStated(u, j)) && !ensured(u.toks, j)
		}
		if !determiners[t.low] && !plainWord(t) && !(named && nounWord(u, j)) {
			return false // "in the shared drive as NAME": a lexicon word there is a modifier
		}
		if named && determiners[t.low] && !locativePreps[u.toks[j-1].low] {
			return false // one noun phrase names the place: "in the repo the chart as NAME" is none
		}
	}
	return false
}

// placeStated reports whether the locative preposition at k follows a present-tense verb no lexicon
// lists whose subject is a file, a third-person pronoun or a noun opening its clause.
func placeStated(u *unit, k int) bool {
	toks := u.toks
	v := skipAdverbs(toks, k-1, true)
	if v < 1 || toks[v].kind != tokWord || !plainWord(toks[v]) || !strings.HasSuffix(toks[v].low, presentSuffix) ||
		strings.HasSuffix(toks[v].low, presentSuffix+presentSuffix) {
		return false
	}
	j := skipAdverbs(toks, v-1, true) // "The logo currently lives on the CDN"
	if j < 0 {
		return false
	}
	s := toks[j]
	return s.kind == tokFile || s.kind == tokWord && (thirdPersonSubjects[s.low] ||
		(plainWord(s) || nounWord(u, j)) && opensClause(toks, j, true))
}

// nounWord reports whether toks[k] is a lexicon word read as a noun or a
// modifier there, not as a verb ("the vendor list", "the shared drive").
func nounWord(u *unit, k int) bool {
	t := u.toks[k]
	return t.kind == tokWord && lemmaOf(t.low) != "" && !u.verbAt(k) && !functionWords[t.low] && !determiners[t.low]
}

// beforeBe reports whether the preposition at k follows an indicative
// be-form, statement adverbs allowed between ("is already in").
func beforeBe(toks []token, k int) bool {
	k = skipAdverbs(toks, k-1, false)
	return k >= 0 && indicativeBe[toks[k].low] && toks[k].kind == tokWord
}

// findsThere reports whether the verb at vi is a verb of finding (findingVerbs) after the addressee
// and a modal or future auxiliary: it presents what it finds as already there.
func findsThere(toks []token, vi int) bool {
	if !toks[vi].is(findingVerbs...) || vi == 0 {
		return false
	}
	k := skipAdverbs(toks, vi-1, true)
	return k >= 0 && toks[k].is(findingClitics...) || k >= 1 && toks[k].is(findingAux...) && toks[k-1].is("you")
}

// locatedSubject reports whether the file at i, which no verb governs, is the subject of a statement of where it already is.
func locatedSubject(u *unit, i, end int) bool {
	k := i + 1
	if k >= end || !indicativeBe[u.toks[k].low] || u.toks[k].kind != tokWord {
		return false
	}
	for k++; k < end && statementAdverbs[u.toks[k].low]; k++ {
	}
	return k < end && locativePreps[u.toks[k].low]
}

// passiveVerb finds a passive verb after the file at i, or -1.
func passiveVerb(u *unit, i, end int) int {
	for k := i + 1; k < end && k <= i+passiveSpan; k++ {
		if u.verbAt(k) && k-1 > i && u.toks[k-1].is(passiveAux...) {
			return k
		}
		if t := u.toks[k]; u.verbAt(k) || t.kind == tokWord && (determiners[t.low] || plainWord(t) && !participle(t.low)) {
			return -1 // a verb with no passive auxiliary, or a word of another phrase
		}
	}
	return -1
}

// closedAdjunct reports whether the verb at vi is an -ing participle that opens phrase p after a
// comma, and another comma closes that adjunct before the file at i.
func closedAdjunct(u *unit, p *phrase, vi, i int) bool {
	w := u.toks[vi].low
	return vi > 0 && u.toks[vi-1].punct(",") && p.start == vi-1 && formOf(w, lemmaOf(w)) == formIng && vi < i &&
		slices.ContainsFunc(u.toks[vi+1:i], func(t token) bool { return t.punct(",") })
}

// reducedPassive finds the participle of an edit, repository, reading or reply verb right after the
// file at i, closing quote marks or the rest of a run of files between, that acts on it with no
// auxiliary, or -1: the file is then changed or read, not made.
func reducedPassive(u *unit, i, end int) int {
	k := i + 1
	for k < end && k <= i+passiveSpan && (u.toks[k].punct(quoteMarks...) || u.toks[k].kind == tokFile ||
		u.toks[k].is(fileListJoiners...) || u.toks[k].punct(",") && k+1 < end && u.toks[k+1].kind == tokFile) {
		k++
	}
	if k >= end {
		return -1
	}
	c, w := u.cls[k], u.toks[k].low
	if c != verbEdit && c != verbRepo && c != verbInput && c != verbReply || formOf(w, lemmaOf(w)) != formPerfect {
		return -1
	}
	return k
}

// isSourceOf reports whether the file at i is followed by "to/into/as" and another file, or a
// format other than its own: it is then the source of that file or that format.
func isSourceOf(toks []token, i, end int) bool {
	j := i + 1
	if j >= end || !toks[j].is(sourceLinks...) {
		return false
	}
	j = pastDets(toks, j+1, end)
	if j >= end {
		return false
	}
	if toks[j].kind == tokFile {
		return true
	}
	_, ext := pathParts(toks[i].text)
	return toks[j].kind == tokWord && formatWord(toks[j].low) && fileExts[toks[j].low] && !sameFormat(ext, toks[j].low)
}

// sameFormat reports whether the extension ext and the format word w name one format.
func sameFormat(ext, w string) bool {
	canon := func(s string) string {
		if c, ok := formatAliases[s]; ok {
			return c[0]
		}
		return s
	}
	return canon(ext) == canon(w)
}

// signalAt records an unnamed file request at the word toks[i].
func signalAt(u *unit, p *phrase, i, lastVerb, head int, prep string, prepOfVerb bool) {
	toks := u.toks
	vc, hc := verbNone, verbNone // classes of the nearest and of the governing verb
	if lastVerb >= 0 {
		vc, hc = u.cls[lastVerb], u.cls[head]
	}
	if u.item && (lastVerb < 0 || vc == verbUnknown && hc == verbUnknown) {
		// A Deliverables item states outputs: with no verb, or only a verb of no class ("- Help me name
		// the output file"), it asks for what it names.
		vc, hc = verbOutput, verbOutput
	}
	outputish := isOutputish(vc)
	// A digest verb ("summarize", "compare") writes something new: "as a PDF" or "in a PDF" after it is where that goes.
	digest := head >= 0 && hc == verbInput && digestVerbs[lemmaOf(toks[head].low)]
	t := toks[i]

	if t.is(destPreps...) {
		if comparisonAt(u, i) {
			return // "the same format as a CSV export" compares
		}
		k := i + 1
		for k < p.end && k < i+4 && (determiners[toks[k].low] || toks[k].is(destModifiers...) ||
			k > i+1 && determiners[toks[i+1].low] && (destAdjective(u, k) || extensionWord(toks[k]))) {
			k++ // "as a CSV", "into a single PDF", "into a one-page PDF"
		}
		if k >= p.end || u.neg[k] || u.inl[k] {
			return
		}
		format := formatHead(u, k, p.end) || destFormat(u, k, p.end, t.is(resultPreps...))
		noun := fileNounHead(toks, k, p.end) || // "to a file", "to a JSON file"
			format && k+1 < p.end && fileNounHead(toks, k+1, p.end)
		if !format && !noun {
			return
		}
		req := false
		switch {
		case t.is(destOutputPreps...):
			// "as a CSV" after any verb but a reading, reply or edit one, or a statement ("We used to export data as CSV");
			// after a reading verb "as" says how the input is read ("fetch the data as JSON").
			req = hc != verbInput && hc != verbReply && hc != verbEdit && hc != verbStated || digest ||
				t.is(resultPreps...) && (hc == verbEdit || hc == verbInput && i > head+1)
		case t.is("to"):
			// "to a JSON file" or "to a PDF" after a transform verb is a file; "to JSON" stays a text request (rule 3).
			req = (outputish || vc == verbTransform && (noun || format && formats[toks[k].low])) && (i == 0 || !toks[i-1].is(nearWords...))
		case t.is("in"):
			switch {
			case format && k+1 < p.end && toks[k+1].is(formatWords...):
				req = hc != verbInput && hc != verbReply && hc != verbEdit
			case !toks[i+1].is(indefArticles...) || i > 0 && toks[i-1].is(locatedBe...):
				// "in the PDF" is where something already is; "what is in a PDF"
			default:
				// "put the results in a CSV", "summarize X in a PDF", "explain the results in a Word document"
				req = isOutputish(hc) || digest || hc == verbReply && (noun || formats[toks[k].low])
			}
		}
		if req {
			p.requestBy(u, ruleDestFormat, t.low, i, min(k, p.end-1))
		}
		return
	}

	if bareFormat(u, i, p.end) && (isOutputish(hc) || isOutputish(vc) || i >= 2 && toks[i-2].is(outputSubjects...)) {
		p.requestBy(u, ruleBareFormat, "", i, i)
		return
	}
	if acceptedFormat(u, i, p.end) {
		p.requestBy(u, ruleAcceptedFormat, "", i, min(i+3, p.end-1))
		return
	}
	strong := formats[t.low] && formatHead(u, i, p.end) || countedFormat(u, i, p.end) || formatDocument(u, i, p.end)
	if !strong && !fileNounHead(toks, i, p.end) || inputPreps[prep] || !outputish && !phrasalMake(u, i) {
		return
	}
	for k := i - 1; k >= p.start && k >= i-2; k-- {
		if inputDets[toks[k].low] || tempWords[toks[k].low] {
			return
		}
	}
	if prepOfVerb || lastVerb > 0 && productVerb(u, lastVerb) {
		return // "advice on naming files": not the verb's object; "make the uploader write a checksum file" (rule 11)
	}
	p.requestBy(u, ruleOutputObject, "", max(lastVerb, p.start), i)
}

// destAdjective reports whether toks[k] may modify a destination's format or file noun after its
// article that is neither a format nor a file noun itself.
func destAdjective(u *unit, k int) bool {
	t := u.toks[k]
	return t.kind == tokWord && destWord(u, k) && !formatWord(t.low) && !fileNouns[t.low]
}

// destWord reports whether toks[k] may be a word of a destination's noun phrase.
func destWord(u *unit, k int) bool {
	return plainWord(u.toks[k]) || nounWord(u, k)
}

// destFormat reports whether the word at k, right after a destination's preposition and article, is
// an inherently binary format that modifies the head noun of the destination, at most destHeadSpan
// words on, a head that ends the noun phrase: the destination is a document of that format.
func destFormat(u *unit, k, end int, result bool) bool {
	strong, ok := formats[u.toks[k].low]
	if !ok || !strong && !result || k+1 >= end {
		return false
	}
	for j := k + 1; j < end && j <= k+destHeadSpan && u.toks[j].kind == tokWord && destWord(u, j) &&
		!toolNoun(u.toks[j].low); j++ {
		if nounFollows(u.toks, j+1) {
			return strong || plural(u.toks[j].low)
		}
	}
	return false
}

// plural reports whether w has the plural ending of a noun.
func plural(w string) bool {
	return strings.HasSuffix(w, pluralSuffix) && !strings.HasSuffix(w, pluralSuffix+pluralSuffix)
}

// toolNoun reports whether w is the agent noun of a lexicon verb: a tool that does the verb's work.
func toolNoun(w string) bool {
	return slices.ContainsFunc(agentSuffixes, func(suf string) bool {
		b, ok := strings.CutSuffix(w, suf)
		return ok && len(b) > 1 && (lemmaOf(b) == b || lemmaOf(b+"e") == b+"e")
	})
}

// bareFormat reports whether the word at i is an inherently binary format standing as its own clause
// after a dash or colon, before punctuation or the end.
func bareFormat(u *unit, i, end int) bool {
	toks := u.toks
	return formats[toks[i].low] && i > 0 && toks[i-1].punct(formatLeadMarks...) &&
		(i+1 >= end || toks[i+1].kind == tokPunct || toks[i+1].is(politeWords...))
}

// acceptedFormat reports whether the word at i heads a file noun phrase with an indefinite article
// that a be-form and an acceptance word follow: the text accepts that file as the answer.
func acceptedFormat(u *unit, i, end int) bool {
	toks := u.toks
	if !fileNouns[toks[i].low] && !formatWord(toks[i].low) {
		return false
	}
	k := i - 1
	for k >= 0 && k >= i-2 && toks[k].kind == tokWord && !toks[k].is(indefArticles...) {
		k--
	}
	if k < 0 || !toks[k].is(indefArticles...) {
		return false
	}
	j := i + 1
	for j < end && j <= i+3 && toks[j].is(acceptBe...) {
		j++
	}
	return j > i+1 && j < end && toks[j].is(acceptWords...)
}

// extensionWord reports whether t is a bare extension used as a modifier.
func extensionWord(t token) bool {
	ext, ok := strings.CutPrefix(t.low, ".")
	return ok && t.kind == tokOther && fileExts[ext]
}

// phrasalMake reports whether the format or file noun at toks[i] is the new object of a phrasal verb
// of making that no lexicon lists.
func phrasalMake(u *unit, i int) bool {
	if i < 3 || !u.toks[i-1].is(indefArticles...) || !u.toks[i-2].is(makingParticles...) {
		return false
	}
	v := u.toks[i-3]
	return v.kind == tokWord && !functionWords[v.low] && !determiners[v.low] && lemmaOf(v.low) == ""
}

// isOutputish reports whether a verb of class c makes its object an output.
func isOutputish(c verbClass) bool {
	return c == verbOutput || c == verbExport || c == verbAttach || c == verbSend || c == verbPseudo || c == verbWant
}

// countedFormat reports whether the text format at toks[i] is a counted noun of its own, so a document.
func countedFormat(u *unit, i, end int) bool {
	toks := u.toks
	if strong, ok := formats[toks[i].low]; !ok || strong || toks[i].kind != tokWord {
		return false
	}
	switch {
	case i > 0 && toks[i-1].is(indefArticles...):
	case i > 1 && toks[i-2].is(indefArticles...) && toks[i-1].kind == tokWord && !functionWords[toks[i-1].low] &&
		lemmaOf(toks[i-1].low) == "" && !fileNouns[toks[i-1].low]:
	default:
		return false
	}
	if i+1 >= end {
		return true
	}
	n := toks[i+1]
	return n.kind == tokPunct || n.kind == tokWord && (functionWords[n.low] || strings.HasSuffix(n.low, "ing"))
}

// formatDocument reports whether the text format at toks[i] names the format of a document noun right
// after it, which makes the pair a file.
func formatDocument(u *unit, i, end int) bool {
	t := u.toks[i]
	return formatWord(t.low) && t.kind == tokWord && i+1 < end && formatDocNouns[u.toks[i+1].low] && u.toks[i+1].kind == tokWord
}

// formatHead reports whether toks[k] is a format word used as the head of its noun phrase rather than as a modifier.
func formatHead(u *unit, k, end int) bool {
	t := u.toks[k]
	if !formatWord(t.low) || t.kind != tokWord && t.kind != tokOther { // "MP3" is a mixed token
		return false
	}
	if k+1 >= end {
		return !t.is("word")
	}
	n := u.toks[k+1]
	if t.is("word") {
		return n.is(wordDocNouns...)
	}
	if n.kind != tokWord || docNouns[n.low] || functionWords[n.low] || determiners[n.low] || nounPreps[n.low] ||
		u.verbAt(k+1) || strings.HasSuffix(n.low, "ing") || participle(n.low) {
		return true // "a CSV of …", "one CSV per region", "JSON keyed by week", "into JSON grouped by dock door"
	}
	// An inherently binary format before a compound document noun ("a PNG bar chart"), or before another format.
	return formats[t.low] && k+2 < end && u.toks[k+2].kind == tokWord && docNouns[u.toks[k+2].low] || formatWord(n.low)
}

// fileNounHead reports whether toks[k] is "file", "attachment" or the like used as a noun of its own.
func fileNounHead(toks []token, k, end int) bool {
	return fileNouns[toks[k].low] && toks[k].kind == tokWord && (k+1 >= end || !fileModifiers[toks[k+1].low])
}

// markerLen returns the length of a delivery marker at toks[i], or 0.
func markerLen(toks []token, i int) int {
	at := func(k int, words ...string) bool { return k < len(toks) && toks[k].is(words...) }
	t := toks[i]
	switch {
	case t.is("downloadable"):
		return 1
	case t.is("download") && at(i+1, downloadLinkNouns...), t.is(downloadLeads...) && at(i+1, "download") && !(t.is(abilityAux...) && thirdParty(toks, i-1)):
		return 2 // "a link to download", "so I can download it", not "so finance can download it" (a feature)
	case t.is("as"):
		k := i + 1
		if at(k, indefArticles...) {
			k++
		}
		if at(k, attachmentNouns...) {
			return k - i + 1
		}
	}
	return 0
}

// pronounAt reports whether toks[i] is a pronoun object that refers back to a file.
func pronounAt(toks []token, i, end int) (found, plural, np bool) {
	t := toks[i]
	switch {
	case t.is("it"):
		return true, false, false
	case t.is(pluralPronouns...):
		return true, true, false
	case t.is(pointerDets...):
		var n token // the token after it; at the end, the zero token, which is no word
		if i+1 < end {
			n = toks[i+1]
		}
		plural := t.is(pluralPointers...)
		if n.is(productNouns...) {
			// "a downloadable copy of the output": a product of the work
			// in this sentence, as "the result" is, not any earlier file.
			return true, n.is(pointedPlurals...), true
		}
		if n.is(pointedNouns...) || n.is(pointedPlurals...) {
			return true, plural || n.is(pointedPlurals...), false
		}
		if !t.is("the") && (n.kind != tokWord || functionWords[n.low]) {
			return true, plural, false
		}
		if t.is("the") {
			return anaphoricNP(toks, i+1, end)
		}
	}
	return false, false, false
}

// anaphoricNP reports whether the noun phrase after "the" at toks[k] refers back to a file made or
// edited earlier in the same item: a head that names a made thing or any head after a participle.
func anaphoricNP(toks []token, k, end int) (found, plural, np bool) {
	modified := false
	for n := 0; k < end && n < 4 && toks[k].kind == tokWord; k, n = k+1, n+1 {
		w := toks[k].low
		if anaphorHeads[w] {
			return true, anaphorPlurals[w], true
		}
		if madeModifiers[w] || participle(w) {
			modified = true
			continue
		}
		if modified && !functionWords[w] {
			return true, strings.HasSuffix(w, "s"), true
		}
		return false, false, false
	}
	return false, false, false
}

// kindAt returns the kind noun (kindNouns) that heads the noun phrase from toks[k], after at most two
// modifiers, and whether it is plural.
func kindAt(toks []token, k, end int) (string, bool) {
	for n := 0; k < end && n < 3 && toks[k].kind == tokWord; k, n = k+1, n+1 {
		w := toks[k].low
		head, plural := w, false
		if b, ok := strings.CutSuffix(w, "s"); ok && kindNouns[w] == nil && kindNouns[b] != nil {
			head, plural = b, true
		}
		if kindNouns[head] != nil && (nounFollows(toks, k+1) || toks[k+1].is(verbParticles...)) {
			return head, plural
		}
		if !plainWord(toks[k]) && !madeModifiers[w] && !participle(w) {
			return "", false
		}
	}
	return "", false
}

// participleAt returns the first participle of the noun phrase from toks[k].
func participleAt(toks []token, k, end int) string {
	np := npWords(toks, k, end)
	if j := slices.IndexFunc(np, func(t token) bool { return participle(t.low) }); j >= 0 {
		base, _, _ := strings.Cut(np[j].low, "-")
		return base
	}
	return ""
}

// npWords returns the words of the noun phrase from toks[k], at most four, before end.
func npWords(toks []token, k, end int) []token {
	n := k
	for n < end && n < k+4 && toks[n].kind == tokWord {
		n++
	}
	return toks[k:n]
}

// actedFrom returns the index of the first word of phrase p that is the verb whose participle part is, or -1.
func actedFrom(toks []token, p *phrase, part string) int {
	k := slices.IndexFunc(toks[p.start:p.end], func(t token) bool {
		return part != "" && t.kind == tokWord && participleOf(part, t.low)
	})
	if k < 0 {
		return -1
	}
	return p.start + k
}

// participleOf reports whether part is the regular past participle of the verb w.
func participleOf(part, w string) bool {
	return slices.ContainsFunc(inflections, func(s inflection) bool {
		b, ok := strings.CutSuffix(part, s.suffix)
		return ok && strings.HasSuffix(s.suffix, "d") && b+s.restore == w
	}) || len(w) >= 2 && part == w+w[len(w)-1:]+"ed"
}

// participle reports whether w looks like a past participle used as an adjective.
func participle(w string) bool {
	base, _, _ := strings.Cut(w, "-")
	return len(base) > 3 && strings.HasSuffix(base, "ed") || irregularVerbs[base] != nil && strings.HasSuffix(base, "n")
}

func repoAt(toks []token, i int) bool {
	t := toks[i]
	return t.is(repoNouns...) || t.is(pullWords...) && i+1 < len(toks) && toks[i+1].is(requestNouns...)
}

// prepSkip reports whether t is transparent when looking for the word that governs a file.
func prepSkip(t token) bool {
	switch t.kind {
	case tokFile:
		return true
	case tokPunct:
		return !t.punct(governorStops...)
	case tokWord:
		return determiners[t.low] || inputDets[t.low] || prepFillers[t.low]
	}
	return false
}

// findQualifier returns the index of a "not a deliverable" qualifier in toks, or -1.
func findQualifier(toks []token) int {
	for i, t := range toks {
		if t.is(nonDeliverables...) {
			return i
		}
		if !t.is(qualifierNegators...) {
			continue
		}
		for j := i + 1; j < len(toks) && j <= i+5 && toks[j].kind == tokWord; j++ {
			if toks[j].is(deliverableWords...) {
				return i
			}
		}
	}
	return -1
}

// denialAt reports whether an expected-denial marker starts at toks[i].
func denialAt(toks []token, i int) bool {
	t := toks[i]
	if t.is("negative") {
		return i+1 < len(toks) && toks[i+1].is(negativeTestNouns...)
	}
	leads, ok := denialLeads[t.low]
	return ok && t.kind == tokWord && (leads[0] == "*" || i > 0 && toks[i-1].is(leads...))
}

// modelRef reports whether the input file at i is named as a model, template, example or earlier version (rule 10).
func modelRef(u *unit, p *phrase, i, vi int, prep string, compared bool) bool {
	if compared || modelPreps[prep] || vi >= 0 && vi < i && modelVerbs[lemmaOf(u.toks[vi].low)] {
		return true
	}
	for k := i - 1; k >= p.start && k >= i-modelSpan; k-- {
		if modelWords[u.toks[k].low] {
			return true
		}
		if u.toks[k].kind == tokFile {
			break
		}
	}
	return anyIn(i+1, min(p.end-1, i+modelSpan), func(k int) bool { return modelWords[u.toks[k].low] && u.toks[i+1].is("as") })
}

// featureGerund reports whether the verb at vi is a gerund after a verb of building a feature.
func featureGerund(u *unit, vi int) bool {
	return strings.HasSuffix(u.toks[vi].low, "ing") && featureVerbs[lemmaOf(u.toks[vi-1].low)] ||
		featureVerbs[u.toks[vi-1].low]
}

// productVerb reports whether the verb at vi has a product as its subject (rule 11).
func productVerb(u *unit, vi int) bool {
	toks := u.toks
	return vi >= 3 && softwareNouns[toks[vi-1].low] && determiners[toks[vi-2].low] && softwareCausatives[toks[vi-3].low] ||
		vi >= 2 && toks[vi-1].is(productModals...) && softwareNouns[toks[vi-2].low]
}

// modelNP reports whether the file at i ends a noun phrase headed by a model word (modelHeads) that
// a preposition or verb of following governs: the file holds the model, not the output (rule 10).
func modelNP(u *unit, p *phrase, i int) bool {
	toks := u.toks
	k := i - 1
	for n := 0; k >= p.start && n < 3 && (toks[k].is(modelLinks...) || determiners[toks[k].low]); n++ {
		k--
	}
	if k < p.start || k == i-1 || !modelHeads[toks[k].low] {
		return false
	}
	for j, n := k-1, 0; j >= p.start && n < 3; j, n = j-1, n+1 {
		if toks[j].is(modelGovernors...) || modelVerbs[lemmaOf(toks[j].low)] {
			return true
		}
		if !determiners[toks[j].low] && !plainWord(toks[j]) {
			return false
		}
	}
	return false
}
