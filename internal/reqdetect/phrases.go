package reqdetect

import (
	"strings"
)

func analyze(u *unit) {
	n := len(u.toks)
	u.cls = make([]verbClass, n)
	u.neg, u.inl, u.asked = make([]bool, n), make([]bool, n), make([]bool, n)
	u.inPlace = anyIn(0, n-1, func(i int) bool {
		return u.toks[i].is("in-place") || u.toks[i].is("in") && i+1 < n && u.toks[i+1].is(inPlaceWords...)
	})
	markVerbs(u)
	splitPhrases(u)
	for i, p := range u.phrases {
		negate(u, p)
		if i > 0 && !p.negated && u.toks[p.start].is(disjunctions...) {
			// "don't create any files or attach anything": a negation reaches the verb phrases its "or" joins.
			if q := u.phrases[i-1]; q.negated || u.neg[q.end-1] {
				negatePhrase(u, p, p.start)
			}
		}
	}
	markInline(u)
	u.inPlace = u.inPlace || u.item && editsReferent(u) // "CHANGELOG.md entry for 1.8.0 (edit the existing file)"
	for i, p := range u.phrases {
		p.repo = p.repo || p.rel && i > 0 && u.phrases[i-1].repo
		readPhrase(u, p)
	}
	u.qualifier = findQualifier(u.toks)
	u.denial = anyIn(0, len(u.toks)-1, func(i int) bool { return denialAt(u.toks, i) })
	u.foreign = isForeign(u) // for readForeign
}

// editsReferent reports whether a Deliverables item has an edit verb, not negated, whose object refers back to the item's file.
func editsReferent(u *unit) bool {
	for i := range u.toks {
		if u.cls[i] != verbEdit || u.neg[i] || i+1 >= len(u.toks) {
			continue
		}
		k := i + 1
		if u.toks[k].is("it") {
			return true
		}
		if !u.toks[k].is(pointerDets...) {
			continue
		}
		for k++; k < len(u.toks) && u.toks[k].is(referentModifiers...); k++ {
		}
		if k < len(u.toks) && u.toks[k].is(pointedNouns...) {
			return true
		}
	}
	return false
}

// markVerbs sets the verb class of every word used as a verb.
func markVerbs(u *unit) {
	noun, ticks, last := make([]bool, len(u.toks)), u.ticks, u.toks[0].pos // nouns; backticks before (odd: in code)
	for i, t := range u.toks {
		if t.pos >= last && t.pos <= len(u.src) {
			ticks += strings.Count(u.src[last:t.pos], "`")
			last = t.pos
		}
		if t.kind != tokWord || ticks%2 == 1 { // "the `payouts export` command": a name, no verb
			continue
		}
		if t.is(outputSubjects...) && i+1 < len(u.toks) && u.toks[i+1].is(beForms...) {
			u.cls[i] = verbPseudo // "the output should be a CSV file", "the format should be PPTX"
			continue
		}
		lemma := lemmaOf(t.low)
		if lemma == "" {
			switch {
			case pastAfterSubject(u.toks, i):
				u.cls[i] = verbStated // "I dropped last year's budget into budget-2025.xlsx"
			case (conditionalWant(u.toks, i) || benefactive(u.toks, i)) && embeddedQuestion(u, i):
				u.cls[i], u.asked[i] = verbReply, true // "tell me whether they would prefer a CSV"
			case conditionalWant(u.toks, i) || benefactive(u.toks, i):
				u.cls[i] = verbWant // "I'd love a PDF version", "Get me a zip of the invoices"
			case phrasalMaking(u.toks, i):
				u.cls[i] = verbOutput // "whip up a quick FAQ page (faq.html)", "set up a template"
			case unknownVerbAt(u.toks, i):
				u.cls[i] = verbUnknown // "and then recreate it as graph.svg"
			}
			continue
		}
		c := verbClasses[lemma]
		if i+1 < len(u.toks) && u.toks[i+1].is(editParticles[lemma]...) {
			c = verbEdit // "touch up README.md": the particle makes it an edit
		}
		if c == verbPseudo {
			u.cls[i] = c
			continue
		}
		if lemma == "make" && i+1 < len(u.toks) && u.toks[i+1].is(makeSureWords...) {
			continue
		}
		form := formOf(t.low, lemma)
		if form == formBase && sameParticiples[lemma] && (afterAux(u.toks, i) || pastAfterPronoun(u.toks, i)) {
			form = formPerfect // "I've put the numbers in numbers.xlsx", "I put the answers in survey.xlsx"
		}
		if nounPosition(u, noun, i, form) {
			noun[i] = true
			continue
		}
		if form == formBase && i >= 2 && u.toks[i-1].is("to") && u.toks[i-2].is("used") {
			u.cls[i] = verbStated // "We used to export data as CSV": a past habit, not a request
			continue
		}
		if form == formBase && howTo(u.toks, i) {
			c = verbReply // "explain how to export report.pdf": knowledge, not work
		}
		if embeddedQuestion(u, i) || form == formIng && discussedGerund(u, i) {
			// "tell me whether exporting to CSV is better", "compare exporting to XLSX with …": the work is asked about
			c, u.asked[i] = verbReply, true
		}
		if inflectedNoun(u, i, form, c) {
			noun[i] = true // "Exports are slow", "Exported files open blank"
			continue
		}
		if form == formPerfect && (stated(u.toks, i) || !u.item && (presents(u.toks, i) || describesThing(u, i, c)) ||
			presentPassive(u, i, c)) ||
			form == formBase && c != verbWant && habitual(u.toks, i) ||
			// an -s form that describes finds no subject for is still a finite verb unless it is asked about or a label
			form == formS && c != verbWant && (describes(u.toks, i) || !u.asked[i] && !ensured(u.toks, i) && !labelAt(u, i)) ||
			c != verbWant && (form == formIng && progressive(u.toks, i) || form == formBase && (future(u.toks, i) || ability(u.toks, i))) {
			c = verbStated
		} else if form == formPerfect && !(u.item && presentedClasses[c] && !modifierKept(u, i)) && modifies(u, i) {
			// In a Deliverables item a delivery participle after a noun says how the output is given ("- screenshots of the
			// page attached to this ticket"): it stays a verb, unless the noun before it is read or negated (modifierKept).
			noun[i] = true // "the product prices listed on …", "write corrected ones"
			continue
		}
		if c == verbWant && i+2 < len(u.toks) && u.toks[i+1].is("to") && u.toks[i+2].kind == tokWord &&
			!determiners[u.toks[i+2].low] {
			continue // "I just need to know whether …": the verb after "to" governs, not the want
		}
		u.cls[i] = c
	}
}

// modifierKept reports whether the participle at i in a Deliverables item still modifies the noun before it.
func modifierKept(u *unit, i int) bool {
	for k := i - 1; k >= 0 && k >= i-resumeSpan && u.toks[k].kind != tokPunct; k-- {
		if u.verbAt(k) && (u.cls[k] == verbInput || u.cls[k] == verbReply) || negators[u.toks[k].low] || u.toks[k].is(noWords...) {
			return true
		}
	}
	return false
}

// labelAt reports whether the word at i stands as a label does.
func labelAt(u *unit, i int) bool {
	toks := u.toks
	if i+1 >= len(toks) {
		return false
	}
	if toks[i+1].punct(":") {
		return true
	}
	end, next := toks[i].pos+len(toks[i].text), toks[i+1].pos
	return i == 0 && end <= next && next <= len(u.src) && strings.Contains(u.src[end:next], "\n")
}

// inflectedNoun reports whether the lexicon word at i, in an -s or perfect form, is a noun or its modifier rather than a verb,
// since it stands where only an imperative could stand and an imperative takes the base form.
func inflectedNoun(u *unit, i int, form wordForm, c verbClass) bool {
	toks := u.toks
	if c == verbWant || u.asked[i] || i+1 >= len(toks) || labelAt(u, i) {
		return false
	}
	opens := i == 0 || toks[i-1].kind == tokPunct && !toks[i-1].punct(quoteMarks...)
	switch form {
	case formS:
		clause := opens || toks[i-1].kind == tokWord && (toks[i-1].is("that") || subordinators[toks[i-1].low])
		// "a tool that exports …": a relative pronoun is the verb's subject.
		return (clause || objectOfVerb(u, i)) && !ensured(toks, i) && !describes(toks, i)
	case formPerfect:
		return opens && !u.item && toks[i+1].kind == tokWord && plainWord(toks[i+1])
	}
	return false
}

// objectOfVerb reports whether the word at i ends the object of a verb before it, with only plain
// modifiers between, at most compoundSpan of them.
func objectOfVerb(u *unit, i int) bool {
	for k := i - 1; k >= 0 && k >= i-1-compoundSpan; k-- {
		t := u.toks[k]
		if u.verbAt(k) {
			return true
		}
		if t.kind != tokWord || !plainWord(t) && !prepFillers[t.low] {
			return false
		}
		if k > 0 && (negators[u.toks[k-1].low] || u.toks[k-1].is("to")) {
			return true
		}
	}
	return false
}

// modifies reports whether the participle at i modifies a noun rather than heads a clause.
func modifies(u *unit, i int) bool {
	if i == 0 {
		return false
	}
	prev := u.toks[i-1]
	if u.verbAt(i - 1) {
		return i+1 < len(u.toks) && u.toks[i+1].kind == tokWord && !functionWords[u.toks[i+1].low] &&
			!determiners[u.toks[i+1].low]
	}
	return prev.kind == tokWord && !functionWords[prev.low] && !determiners[prev.low] &&
		!negators[prev.low] && lemmaOf(prev.low) == "" && !subjectPronouns[prev.low]
}

// stated reports whether the past or perfect verb at i states what was done rather than asks for it.
func stated(toks []token, i int) bool {
	if (i == 0 || toks[i-1].kind == tokPunct) && i+1 < len(toks) && indicativeBe[toks[i+1].low] {
		return true // "Attached is", "Attached are"
	}
	k := skipAdverbs(toks, i-1, false)
	if k < 0 || toks[k].kind != tokWord {
		return false
	}
	w := toks[k].low
	switch {
	case subjectPronouns[w], passiveBe[w], perfectAux[w]:
		return true
	case functionWords[w] || determiners[w] || lemmaOf(w) != "":
		return false
	}
	// A noun subject opening the sentence or clause: "The designer sent", "Our team exported", "Someone's script generated"; or
	// of a relative clause with no "that": "the brochure the vendor sent".
	return opensClause(toks, k, false) || reducedRelative(toks, k)
}

// conditionalWant reports whether the word at i is a verb of liking after "would" or a subject
// contracted with it: a polite want (wantWords).
func conditionalWant(toks []token, i int) bool {
	if i == 0 || !toks[i].is(wantWords...) {
		return false
	}
	p := toks[i-1]
	return p.is("would") || strings.HasSuffix(p.low, "'d") || strings.HasSuffix(p.low, "’d")
}

// clauseVerb reports whether the word at i, with two tokens after it and no function word, determiner or adverb, opens
// its clause in a verb's place: after punctuation, a polite word or an opener, or with you after "you".
func clauseVerb(toks []token, i int, you bool) bool {
	w := toks[i].low
	if i+2 >= len(toks) || functionWords[w] || determiners[w] || strings.HasSuffix(w, adverbSuffix) {
		return false
	}
	return i == 0 || toks[i-1].kind == tokPunct || toks[i-1].is(politeWords...) || openers[toks[i-1].low] ||
		you && toks[i-1].is("you")
}

// benefactive reports whether the word at i, which no lexicon lists, opens its clause and is followed
// by a recipient pronoun and an object.
func benefactive(toks []token, i int) bool {
	return clauseVerb(toks, i, false) && toks[i+1].is(recipients...) && objectFollows(toks, i+2)
}

// phrasalMaking reports whether the word at i, which no lexicon lists, opens its clause before a
// making particle and an indefinite article: a phrasal verb of making, read as an output verb.
func phrasalMaking(toks []token, i int) bool {
	return clauseVerb(toks, i, true) && toks[i+1].is(makingParticles...) && toks[i+2].is(indefArticles...)
}

// progressive reports whether the -ing verb at i is the present progressive of a subject other than
// the addressee: the subject does the work, so it states what happens rather than asks for it.
func progressive(toks []token, i int) bool {
	return statedAux(toks, i, statingClitics, progressiveBe) // "I'm", "we're"
}

// future reports whether the base verb at i follows "will" or "going to" and a subject other than
// the addressee: a plan of someone else's, not a request.
func future(toks []token, i int) bool {
	if k := skipAdverbs(toks, i-1, true); k >= 1 && toks[k].is("to") && toks[k-1].is("going") {
		return progressive(toks, k-1) // "I'm going to upload v2.csv later"
	}
	return statedAux(toks, i, futureClitics, []string{"will"}) // "I'll", "they'll"
}

// ability reports whether the base verb at i follows "can" or "could" after a subject other than "you": what a feature
// lets someone do ("so analysts can export the table"), not a request.
func ability(toks []token, i int) bool {
	k := skipAdverbs(toks, i-1, true)
	return k > 0 && toks[k].is(abilityAux...) && (thirdParty(toks, k-1) || pastSubjects[toks[k-1].low])
}

// thirdParty reports whether toks[k] is a noun subject, someone other than the requester and the agent ("finance").
func thirdParty(toks []token, k int) bool {
	return k >= 0 && toks[k].kind == tokWord && plainWord(toks[k]) && !toks[k].is("you", "i", "we")
}

// statedAux reports whether the verb at i follows, past adverbs, a subject contracted with an auxiliary (clitics)
// or a subject and an auxiliary (aux) that asks nothing: the subject does the work, the text states it.
func statedAux(toks []token, i int, clitics map[string]bool, aux []string) bool {
	k := skipAdverbs(toks, i-1, true)
	switch {
	case k < 0 || toks[k].kind != tokWord:
		return false
	case clitics[toks[k].low]:
		return !askedBefore(toks, k)
	}
	return toks[k].is(aux...) && k > 0 && statingSubject(toks, k-1) && !askedBefore(toks, k-1)
}

// presentPassive reports whether the participle at i of an attach or send verb follows an indicative present be-form.
func presentPassive(u *unit, i int, c verbClass) bool {
	toks := u.toks
	k := skipAdverbs(toks, i-1, true)
	if k <= 0 || ensured(toks, k) {
		return false
	}
	switch c {
	case verbAttach, verbSend:
		return toks[k].is(presentBe...)
	case verbOutput, verbExport:
		return !u.item && toks[k].is(statingPassiveAux...) && passiveSubject(u, k-1)
	}
	return false
}

// passiveSubject reports whether toks[k], right before the be-form of a present passive, ends a noun-phrase subject.
func passiveSubject(u *unit, k int) bool {
	t := u.toks[k]
	switch {
	case t.kind == tokFile, t.punct(")"):
		return true
	case t.kind != tokWord:
		return false
	case t.is(passivePronouns...):
		return !askedBefore(u.toks, k)
	}
	w := t.low
	return !u.verbAt(k) && !functionWords[w] && !determiners[w] && !negators[w] && !openers[w] &&
		!subjectPronouns[w] && !t.is(questionWords...) && !t.is(politeWords...) && !numeric(w) &&
		!askedBefore(u.toks, k)
}

// describesThing reports whether the participle at i of a verb that delivers or exports
// (presentedClasses) describes a thing that already exists, with no auxiliary before it.
func describesThing(u *unit, i int, c verbClass) bool {
	toks := u.toks
	if i == 0 || specifies(u, i) {
		return false
	}
	prev := toks[i-1]
	if !presentedClasses[c] {
		return prev.punct("(") && statedBefore(u, i)
	}
	switch {
	case prev.punct("("), prev.kind == tokFile:
		return true
	case prev.punct(","):
		if i >= 2 && (toks[i-2].kind == tokFile || toks[i-2].punct(quoteMarks...) && i >= 3 && toks[i-3].kind == tokFile) {
			return true // "x.csv, attached", "`x.csv`, attached"
		}
		for k := i - 2; k >= 0 && k >= i-parenSpan && !toks[k].punct(")"); k-- {
			if toks[k].punct("(") {
				return true // "(sample: inv_8812.edi, attached)"
			}
		}
	}
	return false
}

// specifies reports whether the participle at i, followed by "to", "into" or "as", says how a thing an
// earlier request verb of its sentence asks for is to be given.
func specifies(u *unit, i int) bool {
	return i+1 < len(u.toks) && u.toks[i+1].is(sourceLinks...) &&
		anyIn(max(i-resumeSpan, 0), i-1, func(k int) bool { return requestVerb(u, k) })
}

// requestVerb reports whether the verb at k, not negated, asks for a thing to be made or given.
func requestVerb(u *unit, k int) bool {
	c := u.cls[k]
	switch {
	case u.neg[k] || c == verbNone:
		return false
	case c == verbWant || c == verbPseudo:
		return true
	case !isOutputish(c) && c != verbTransform:
		return false
	}
	lemma := lemmaOf(u.toks[k].low)
	return lemma != "" && formOf(u.toks[k].low, lemma) == formBase
}

// statedBefore reports whether the nearest verb before the participle at i, at most resumeSpan tokens
// back, states what someone did.
func statedBefore(u *unit, i int) bool {
	for k := i - 1; k >= 0 && k >= i-resumeSpan; k-- {
		if !u.verbAt(k) {
			continue
		}
		c, lemma := u.cls[k], lemmaOf(u.toks[k].low)
		f := formOf(u.toks[k].low, lemma)
		return c == verbStated || c != verbWant && lemma != "" && (f == formPerfect || f == formS)
	}
	return false
}

// habitual reports whether the base verb at i follows a subject pronoun other than the addressee
// (pastSubjects) that opens a subordinate clause.
func habitual(toks []token, i int) bool {
	k := skipAdverbs(toks, i-1, true)
	return k >= 1 && toks[k].kind == tokWord && pastSubjects[toks[k].low] && toks[k-1].kind == tokWord &&
		subordinators[toks[k-1].low]
}

// statingSubject reports whether toks[k] is the subject of a statement.
func statingSubject(toks []token, k int) bool {
	t := toks[k]
	return t.kind == tokWord && (pastSubjects[t.low] || plainWord(t) && opensClause(toks, k, true))
}

// askedBefore reports whether a modal or question word stands right before the subject at k.
func askedBefore(toks []token, k int) bool {
	return k > 0 && (toks[k-1].is(askAux...) || toks[k-1].is(questionWords...))
}

// skipAdverbs returns the index of the first token at or before k that is not a statement adverb ("already", "just") or,
// with ly, an "-ly" adverb ("currently").
func skipAdverbs(toks []token, k int, ly bool) int {
	for k >= 0 && toks[k].kind == tokWord && (statementAdverbs[toks[k].low] || ly && strings.HasSuffix(toks[k].low, adverbSuffix)) {
		k--
	}
	return k
}

// howTo reports whether the base verb at i follows a wh-word and "to".
func howTo(toks []token, i int) bool {
	return i >= 2 && toks[i-1].is("to") && toks[i-2].is(howToWords...)
}

// embeddedQuestion reports whether the verb at i stands in an embedded question.
func embeddedQuestion(u *unit, i int) bool {
	toks := u.toks
	gerund := strings.HasSuffix(toks[i].low, "ing")
	for k := i - 1; k >= 0 && k >= i-embeddedSpan; k-- {
		t := toks[k]
		if t.kind == tokPunct && !(gerund && t.punct(alternativeMarks...)) || t.is(clauseJoiners...) {
			return false
		}
		if t.is(whetherWords...) {
			return true
		}
		if !t.is(embeddedWh...) {
			continue
		}
		v := k - 1
		if v >= 0 && toks[v].is(recipients...) {
			v--
		}
		// "let me know" asks to be told as a reply verb does (informWords)
		if v >= 0 && (u.cls[v] == verbReply ||
			v >= 2 && toks[v].is(informWords...) && toks[v-1].is(recipients...) && toks[v-2].is("let")) {
			return true // "tell me how …", "tell me what happens if I convert …", "let me know if …"
		}
	}
	return false
}

// discussedGerund reports whether the -ing verb at i names an activity that a reading or reply verb before it discusses.
func discussedGerund(u *unit, i int) bool {
	for k := i - 1; k >= 0 && k >= i-embeddedSpan; k-- {
		t := u.toks[k]
		if t.kind != tokWord || k == i-1 && openers[t.low] || t.is(clauseJoiners...) {
			return false
		}
		if u.verbAt(k) {
			return u.cls[k] == verbInput || u.cls[k] == verbReply
		}
	}
	return false
}

// afterAux reports whether a perfect auxiliary or a past be-form stands right before the word at i,
// past statement adverbs: a verb whose participle is its base form is then a participle.
func afterAux(toks []token, i int) bool {
	k := skipAdverbs(toks, i-1, false)
	return k >= 0 && toks[k].kind == tokWord &&
		(perfectAux[toks[k].low] || passiveBe[toks[k].low] || strings.HasSuffix(toks[k].low, perfectClitic))
}

// pastAfterPronoun reports whether the verb at i, whose past form is its base form, follows a
// subject pronoun that cannot be the addressee of a request, past statement adverbs allowed, and no
// modal or question word asks before that pronoun: a statement, not an imperative.
func pastAfterPronoun(toks []token, i int) bool {
	k := skipAdverbs(toks, i-1, false)
	return k >= 0 && toks[k].kind == tokWord && pastSubjects[toks[k].low] && !askedBefore(toks, k)
}

// unknownVerbAt reports whether the plain word at i, which no lexicon lists, stands in a verb's place before an object.
func unknownVerbAt(toks []token, i int) bool {
	w := toks[i].low
	if i+1 >= len(toks) || functionWords[w] || determiners[w] || strings.HasSuffix(w, adverbSuffix) ||
		negators[w] || fillers[w] || subjectPronouns[w] || numeric(w) || isClitics[w] || nounPreps[w] || inputPreps[w] {
		return false // not "Here's the export …", "Per the spec …"
	}
	opens := i == 0 || toks[i-1].is(politeWords...) && (i == 1 || toks[i-2].kind == tokPunct)
	if !opens && (i == 0 || !openers[toks[i-1].low] || toks[i-1].kind != tokWord) {
		return false
	}
	return objectFollows(toks, i+1) || particleAt(toks, i+1) && objectFollows(toks, i+2) // "freshen up index.html"
}

// particleAt reports whether toks[k] is the particle of a phrasal verb.
func particleAt(toks []token, k int) bool {
	return k < len(toks) && (toks[k].is(makingParticles...) || toks[k].is(verbParticles...))
}

// pastAfterSubject reports whether the plain word at i, which no lexicon lists, is a past verb
// after a subject pronoun: a regular past form states what was done.
func pastAfterSubject(toks []token, i int) bool {
	w := toks[i].low
	if len(w) < 5 || !strings.HasSuffix(w, pastSuffix) || functionWords[w] {
		return false
	}
	k := skipAdverbs(toks, i-1, false)
	return k >= 0 && toks[k].kind == tokWord && subjectPronouns[toks[k].low]
}

// presents reports whether the participle at i opens a clause of prose and its object, a subject or
// a colon follows: an imperative takes the base form, so this presents what exists.
func presents(toks []token, i int) bool {
	if i > 0 && toks[i-1].kind != tokPunct || i+1 >= len(toks) {
		return false
	}
	n := toks[i+1]
	return n.punct(":") || n.kind == tokFile || // "Attached: the Q3 board deck (board-q3.pptx)"
		n.kind == tokWord && (determiners[n.low] || subjectPronouns[n.low])
}

// opensClause reports whether the plain noun at k, with the determiner or possessive before it,
// opens its sentence, a clause after punctuation or a subordinate clause.
func opensClause(toks []token, k int, compound bool) bool {
	j, n := k-1, 0
	for compound && j >= 0 && n < subjectCompound && toks[j].kind == tokWord && plainWord(toks[j]) {
		j, n = j-1, n+1 // "Our monitoring stack": back to the determiner
	}
	if j >= 0 && subjectDets[toks[j].low] {
		j--
	} else if n > 0 {
		return false
	}
	return j < 0 || toks[j].kind == tokPunct || toks[j].kind == tokWord && subordinators[toks[j].low]
}

// reducedRelative reports whether the noun subject at k, with its determiner, follows a noun directly.
func reducedRelative(toks []token, k int) bool {
	if k < 2 || !subjectDets[toks[k-1].low] {
		return false
	}
	t := toks[k-2]
	return t.kind == tokWord && !functionWords[t.low] && !determiners[t.low] && !subjectPronouns[t.low] &&
		!negators[t.low] && !subjectDets[t.low] && !t.is(recipients...) && !openers[t.low] && !fillers[t.low] &&
		!nounPreps[t.low] && !inputPreps[t.low]
}

// describes reports whether the present-tense verb at i has a subject, and so describes what something
// does rather than asks for it.
func describes(toks []token, i int) bool {
	k := skipAdverbs(toks, i-1, false)
	if k < 0 {
		return false
	}
	switch t := toks[k]; {
	case t.kind == tokFile || t.kind == tokWord && thirdPersonSubjects[t.low] || quotedSubject(toks, k):
	case t.is(relativePronouns...):
		// "a Makefile target that builds app.zip", "scraper.py, which dumps data to scraped.json": what
		// the antecedent does; "make sure that …" and "so that …" are no relative.
		a := k - 1
		if a > 0 && toks[a].punct(",") && toks[a-1].kind == tokFile {
			a--
		}
		if a < 0 || toks[a].kind == tokFile {
			break
		}
		if toks[a].kind != tokWord || functionWords[toks[a].low] || lemmaOf(toks[a].low) != "" ||
			toks[a].is(ensureWords...) {
			return false
		}
	case t.kind != tokWord || functionWords[t.low] || determiners[t.low] || lemmaOf(t.low) != "" || !opensClause(toks, k, true):
		return false
	}
	return !ensured(toks, k)
}

// quotedSubject reports whether toks[k] closes a quoted span that can be a subject.
func quotedSubject(toks []token, k int) bool {
	t := toks[k]
	return t.punct(codeQuotes...) &&
		anyIn(max(k-8, 0), k-2, func(j int) bool { return toks[j].kind == tokPunct && toks[j].low == t.low })
}

// ensured reports whether the clause before the subject at k asks for what follows.
func ensured(toks []token, k int) bool {
	for j := k - 1; j >= 0 && j >= k-8 && toks[j].kind != tokPunct; j-- {
		if toks[j].is(ensureWords...) || toks[j].is("that") && j > 0 && toks[j-1].is(purposeLeads...) {
			return true
		}
	}
	return false
}

// wordForm is the inflection of a lexicon word.
type wordForm uint8

const (
	formBase    wordForm = iota // write, change
	formS                       // writes, changes: a plural noun or a third-person verb
	formIng                     // writing
	formPerfect                 // written, changed
)

func formOf(w, lemma string) wordForm {
	switch {
	case w == lemma:
		return formBase
	case strings.HasSuffix(w, "ing"):
		return formIng
	case strings.HasSuffix(w, "s"):
		return formS
	}
	return formPerfect
}

// nounPosition reports whether the lexicon word at i is used as a noun or adjective:
func nounPosition(u *unit, noun []bool, i int, form wordForm) bool {
	toks := u.toks
	if i == 0 || toks[i-1].kind != tokWord {
		return false
	}
	prev := toks[i-1]
	switch {
	case determiners[prev.low], prev.is("that") && i >= 2 && (nounPreps[toks[i-2].low] || u.verbAt(i-2)), possessive(prev):
		return true // "the parsed records", "the log of that attempt", "return that list", "the survey's free-text answers"
	case nounPreps[prev.low]:
		return form != formIng
	case formatWord(prev.low) && (form == formBase || form == formS):
		return true // "Implement CSV export in the admin dashboard", "the PDF exports"
	case u.verbAt(i - 1):
		return (form == formBase || form == formS) && !causatives[lemmaOf(prev.low)]
	}
	if form == formIng && nounFollows(toks, i+1) && afterDeterminedNoun(toks, i) {
		return true // "from the screen recording (signup.mov)", "the meeting recording to MP3"
	}
	if form == formIng || form == formPerfect || objectFollows(toks, i+1) {
		return false // an object follows: "for each file write a summary", "in the folder create notes.txt"
	}
	if form == formBase && compoundHead(toks, noun, i) {
		return true // "landing page copy (copy.md)", "marketing copy in copy.md"
	}
	for j, steps := i-1, 0; j >= 0 && steps < 3; j, steps = j-1, steps+1 {
		t := toks[j]
		if t.kind == tokOther && j < i-1 {
			continue // a number or mixed modifier: "a 40-page settlement draft", "the Q3 board update"
		}
		if t.kind != tokWord {
			return false
		}
		if nounPreps[t.low] || possessive(t) {
			return true // "on climate change", "the survey's free-text answers"
		}
		if determiners[t.low] {
			if form == formBase {
				return true
			}
			// "a summary of the code changes", "the bug reports in a PDF",
			// "write the error counts to counts.json" (the object of a verb)
			return j > 0 && (nounPreps[toks[j-1].low] || u.verbAt(j-1)) || nounFollows(toks, i+1)
		}
		if j < i-1 && form == formS && t.is(nounLeads...) {
			return nounFollows(toks, i+1) // "keeping only direct quotes about pricing"
		}
		if !noun[j] && (functionWords[t.low] || lemmaOf(t.low) != "" || negators[t.low]) {
			return false
		}
	}
	return false
}

// possessive reports whether t is a noun in the possessive.
func possessive(t token) bool {
	if t.kind != tokWord || isClitics[t.low] {
		return false
	}
	w := strings.ReplaceAll(t.low, "’", "'")
	return len(w) > 2 && (strings.HasSuffix(w, "'s") || strings.HasSuffix(w, "s'"))
}

// afterDeterminedNoun reports whether a determiner and one or two plain words stand right before
// toks[i] ("the screen recording", "a team meeting"): an -ing word there ends a noun compound.
func afterDeterminedNoun(toks []token, i int) bool {
	for j := i - 1; j >= 0 && j >= i-3 && toks[j].kind == tokWord; j-- {
		t := toks[j]
		if determiners[t.low] {
			return j < i-1
		}
		if !plainWord(t) {
			return false
		}
	}
	return false
}

// compoundHead reports whether the base-form lexicon word at i ends a noun compound that opens its clause.
func compoundHead(toks []token, noun []bool, i int) bool {
	if i+1 < len(toks) && toks[i+1].punct(":") {
		return false
	}
	n := 0
	for j := i - 1; j >= 0; j-- {
		t := toks[j]
		if t.kind == tokPunct {
			return n > 0 && !t.punct(quoteMarks...)
		}
		if t.kind != tokWord || n == compoundSpan || !plainWord(t) && !noun[j] {
			return false
		}
		n++
	}
	return n > 0
}

// plainWord reports whether t is a content word no lexicon lists as a verb and no closed class holds.
func plainWord(t token) bool {
	w := t.low
	return !functionWords[w] && !determiners[w] && !negators[w] && !openers[w] && !fillers[w] &&
		!subjectPronouns[w] && !t.is(politeWords...) && !strings.HasSuffix(w, adverbSuffix) &&
		lemmaOf(w) == "" && !numeric(w)
}

func numeric(w string) bool {
	return w != "" && !strings.ContainsFunc(w, func(r rune) bool { return r < '0' || r > '9' })
}

// objectFollows reports whether toks[k] starts the object of a verb.
func objectFollows(toks []token, k int) bool {
	if k >= len(toks) {
		return false
	}
	t := toks[k]
	return t.kind == tokFile || t.is(objectPronouns...) ||
		determiners[t.low] && !t.is("no")
}

// nounFollows reports whether toks[k] is what follows a noun rather than a verb.
func nounFollows(toks []token, k int) bool {
	if k >= len(toks) {
		return true
	}
	t := toks[k]
	if t.kind == tokPunct {
		return !t.punct(quoteMarks...)
	}
	return t.is(nounFollowers...)
}

// verbAt reports whether toks[i] is a verb.
func (u *unit) verbAt(i int) bool {
	step()
	return i >= 0 && i < len(u.toks) && u.cls[i] != verbNone && u.cls[i] != verbPseudo
}

// splitPhrases splits a unit into clauses at ";" and clauses into phrases at a
// coordinator, comma or relative pronoun that is followed by a verb.
func splitPhrases(u *unit) {
	start, rel := 0, false
	add := func(end int) {
		if end > start {
			u.phrases = append(u.phrases, &phrase{start: start, end: end, rel: rel})
		}
	}
	for i, t := range u.toks {
		if t.punct(";") {
			add(i)
			start, rel = i+1, false
			continue
		}
		if i > start && (t.punct(openerMarks...) || t.kind != tokPunct && openers[t.low]) && verbAhead(u, i+1) {
			add(i)
			start, rel = i, t.is(relativePronouns...)
		}
	}
	add(len(u.toks))
}

// verbAhead reports whether a verb follows from toks[j], across fillers.
func verbAhead(u *unit, j int) bool {
	for k := j; k < len(u.toks) && k < j+5; k++ {
		t := u.toks[k]
		if u.verbAt(k) || t.is(negatingVerbs...) || t.is(noWords...) && k+1 < len(u.toks) && u.toks[k+1].is(needWords...) {
			return true // a verb, or "…, avoid creating files", "…, no need to summarise it here"
		}
		if t.punct(",") || (t.kind == tokWord && fillers[t.low]) || t.is(existentials...) {
			continue // "…, there's no need to …"
		}
		if !t.is("there") || k+1 >= len(u.toks) || !u.toks[k+1].is("is") {
			return false
		}
		k++ // "…, there is no need to …"
	}
	return false
}

// nextContent returns the index of the first token from j (before end) that is not a filler such as "to", "be", "ever", or -1.
func nextContent(toks []token, j, end int) int {
	for k := j; k < end && k < j+4; k++ {
		if toks[k].is(infinitiveLeads...) {
			if k+1 < end && toks[k+1].is("to") {
				continue // "you don't have to create a file"
			}
			return k // "We don't need a PDF": the want itself is negated
		}
		if !toks[k].is(negationFillers...) {
			return k
		}
	}
	return -1
}

// negate applies negation inside phrase p.
func negate(u *unit, p *phrase) {
	toks := u.toks
	for i := p.start; i < p.end; i++ {
		t := toks[i]
		if t.kind != tokWord {
			continue
		}
		switch {
		case negators[t.low]:
			k := nextContent(toks, i+1, p.end)
			if k >= 0 && toks[k].is(forgetVerbs...) {
				i = k // "don't forget to attach": positive
				continue
			}
			if t.is(negatingVerbs...) || u.verbAt(k) {
				negatePhrase(u, p, i)
				return
			}
			negateNP(u, i+1, p.end)
		case t.is(noWords...):
			if i+1 < p.end && toks[i+1].is(needWords...) {
				negatePhrase(u, p, i)
				return
			}
			if i+1 < p.end && toks[i+1].is(otherWords...) {
				negateNP(u, i+1, p.end)
				continue
			}
			for k := i + 1; k < p.end && k <= i+3; k++ {
				if toks[k].kind == tokFile { // "no report.pdf": that file only
					negateNP(u, i+1, p.end)
					break
				}
				if w := toks[k]; w.kind == tokWord && (formatWord(w.low) || fileNouns[w.low] || w.is(outputNouns...)) {
					negatePhrase(u, p, i) // "create no files", "no attachments"
					return
				}
			}
		case t.is(insteadWords...):
			k := i + 1
			linked := k < p.end && toks[k].is(insteadLinks...)
			if linked {
				k++
			}
			if !linked && t.is(insteadAdverbs...) && u.verbAt(k) {
				continue // "Instead attach X": a discourse adverb before the imperative, not a negation
			}
			if i == p.start && u.verbAt(k) {
				negatePhrase(u, p, i)
				return
			}
			negateNP(u, k, p.end)
		case t.is("nothing") && (i+1 >= p.end || !toks[i+1].is(nothingExceptions...)):
			negatePhrase(u, p, i)
			return
		}
	}
}

// negatePhrase negates the clause of phrase p that holds the negator at i.
func negatePhrase(u *unit, p *phrase, i int) {
	lo, hi := i, i
	for lo > p.start && !isClauseBreak(u.toks[lo-1]) {
		lo--
	}
	for hi < p.end && !isClauseBreak(u.toks[hi]) && !exceptionAt(u.toks, hi, p.end) {
		hi++
	}
	p.negated = p.negated || lo == p.start
	for k := lo; k < hi; k++ {
		u.neg[k] = true
	}
}

// exceptionAt reports whether an exception opens at toks[k].
func exceptionAt(toks []token, k, end int) bool {
	t := toks[k]
	return t.is(exceptWords...) || k+1 < end && (t.is("other") && toks[k+1].is("than") || t.is("apart") && toks[k+1].is("from"))
}

// isClauseBreak reports whether t ends a clause inside a phrase.
func isClauseBreak(t token) bool {
	return (t.kind == tokPunct || t.kind == tokOther) && clauseBreaks[t.low]
}

// negateNP negates the noun phrase starting at j.
func negateNP(u *unit, j, end int) {
	for k := j; k < end && k < j+8 && !u.toks[k].punct(npBreakMarks...) && !u.toks[k].is("but") && !u.verbAt(k); k++ {
		u.neg[k] = true
	}
}

// inlineLen returns the length of an inline marker at toks[i], or 0.
func inlineLen(toks []token, i int) int {
	t := toks[i]
	at := func(k int, words ...string) bool { return k < len(toks) && toks[k].is(words...) }
	switch {
	case t.is(inlineWords...):
		return 1
	case t.is(inlinePreps...):
		k := i + 1
		if at(k, replyDets...) {
			k++
		}
		switch {
		case at(k, replyNouns...):
			return k - i + 1
		case at(k, "plain") && at(k+1, "text"), at(k, "code") && at(k+1, codeBlockNouns...):
			return k - i + 2
		}
	case t.is("as"):
		k := i + 1
		if at(k, "plain") {
			k++
		}
		if at(k, "text") && !at(k+1, textFileNouns...) {
			return k - i + 1
		}
	}
	return 0
}

// markInline marks what each inline marker covers.
func markInline(u *unit) {
	for _, p := range u.phrases {
		for i := p.start; i < p.end; i++ {
			if inlineLen(u.toks, i) > 0 && !deliveryVenue(u, p, i) {
				p.inline = true
				coverInline(u, i)
			}
		}
	}
}

// deliveryVenue reports whether the inline marker at i, a preposition and a reply noun, names where a
// file is shared rather than text written.
func deliveryVenue(u *unit, p *phrase, i int) bool {
	toks := u.toks
	if !toks[i].is(inlinePreps...) || i < 2 || !formatWord(toks[i-1].low) && !fileNouns[toks[i-1].low] {
		return false
	}
	d := -1
	for k := i - 2; k >= p.start && k >= i-venueSpan; k-- {
		if toks[k].is(destOutputPreps...) {
			d = k
			break
		}
		if toks[k].kind != tokWord || u.verbAt(k) {
			return false
		}
	}
	for k := d - 1; d > 0 && k >= p.start && k >= d-resumeSpan; k-- {
		if u.verbAt(k) {
			c := u.cls[k]
			return c == verbSend || c == verbAttach || c == verbUnknown
		}
	}
	return false
}

// coverInline marks what the inline marker at toks[i] covers.
func coverInline(u *unit, i int) {
	toks := u.toks
	j := i - 1
	for j >= 0 && j > i-8 && (toks[j].is(inlineWords...) || toks[j].punct(inlineLeadMarks...) ||
		toks[j].is(inlineQuantifiers...)) {
		j-- // "report.md, inline", "index.html and styles.css, both inline"
	}
	j = beforeGiven(toks, j, i)
	if j < 0 {
		return
	}
	switch toks[j].kind {
	case tokFile: // "index.html and styles.css inline in the reply"
		for k := j; k >= 0 && i-k < 64; k-- {
			t := toks[k]
			if t.kind == tokFile {
				u.inl[k] = true
				continue
			}
			if !t.is(fileListJoiners...) && !t.punct(fileListMarks...) && !determiners[t.low] {
				return
			}
		}
	case tokWord: // "a short summary in the reply", "a CSV of the users in the chat"
		for k := j; k >= 0 && i-k < 8 && toks[k].kind == tokWord && !u.verbAt(k) &&
			(!functionWords[toks[k].low] || toks[k].is("of")); k-- {
			u.inl[k] = true
		}
	}
}

// beforeGiven returns the index before the reduced participle clause that ends at toks[j], right
// before the inline marker at toks[i], or j when there is none.
func beforeGiven(toks []token, j, i int) int {
	k := j
	for k >= 0 && j-k < 2 && toks[k].kind == tokWord && strings.HasSuffix(toks[k].low, adverbSuffix) {
		k-- // "written directly into your reply"
	}
	if k >= 1 && toks[k].is(fullnessWords...) && toks[k-1].is("in") {
		k -= 2 // "pasted in full"
	}
	for k >= 0 && j-k < 3 && particleAt(toks, k) {
		k-- // "written out", "written up"
	}
	if k < 0 || k < i-8 || toks[k].kind != tokWord || !givenParticiple(toks[k].low) {
		return j
	}
	p := k
	for k--; k >= 0 && p-k <= 3 && (toks[k].is(passiveAux...) || toks[k].is("to")); k-- {
	}
	for k >= 0 && p-k <= 6 && (toks[k].punct(inlineLeadMarks...) || toks[k].is(inlineQuantifiers...)) {
		k-- // "report.md and summary.md, both written inline"
	}
	return k
}

// givenParticiple reports whether w is a past participle.
func givenParticiple(w string) bool {
	lemma := lemmaOf(w)
	return lemma != "" && formOf(w, lemma) == formPerfect || participle(w)
}
