package reqdetect

import "slices"

// mentionCtx is what the mention rules read about the file at toks[i].
type mentionCtx struct {
	u                                 *unit
	p                                 *phrase
	m                                 *mention
	toks                              []token
	i, vi, gov, from                  int // from: where the span starts, the governing verb or the file
	verb                              verbClass
	prep                              string
	compared, topic, target, need     bool
	governedByDelivery, inputGoverned bool
}

// roleKeep leaves a file's role as it is.
const roleKeep fileRole = 255

// spanKind says which tokens a rule read, for Explain's span, and which word of them it quotes.
type spanKind uint8

const (
	spanVerb   spanKind = iota // from the governing verb (or the file) to the file
	quoteVerb                  // that span, quoting the governing verb
	quotePrep                  // that span, quoting the governing preposition
	quoteNext                  // that span, quoting the word after the file
	spanPhrase                 // the whole phrase
	spanToFile                 // from the phrase's start to the file
	spanOnward                 // from the file to the phrase's end
	spanPair                   // the two words before the verb's object, quoted: "Support writing"
	spanModel                  // the model word before the file
	spanNone                   // records nothing: the role stays explained by the rule before
)

// mentionRule is one row of a mention table: when match holds, the file
// takes role (roleKeep: its role stays) and then runs, if set.
type mentionRule struct {
	rule
	role  fileRole
	span  spanKind
	match func(c *mentionCtx) bool
	then  func(c *mentionCtx)
}

func (c *mentionCtx) apply(r *mentionRule) {
	if r.role != roleKeep {
		c.m.role = r.role
	}
	a, b, detail := c.from, c.i, ""
	switch r.span {
	case quoteVerb:
		detail = c.toks[c.vi].text
	case quotePrep:
		detail = c.prep
	case quoteNext:
		detail = c.toks[c.i+1].text
	case spanPhrase:
		a, b = c.p.start, c.p.end-1
	case spanToFile:
		a = c.p.start
	case spanOnward:
		a, b = c.i, c.p.end-1
	case spanPair:
		a, detail = c.vi-1, c.toks[c.vi-1].text+" "+c.toks[c.vi].text
	case spanModel:
		a = max(c.i-modelSpan, c.p.start)
	}
	if r.span != spanNone {
		c.m.decide(c.u, r.rule, detail, a, b)
	}
	if r.then != nil {
		r.then(c)
	}
}

// firstRule applies the first row of rows that matches.
func (c *mentionCtx) firstRule(rows []mentionRule) {
	for k := range rows {
		if rows[k].match(c) {
			c.apply(&rows[k])
			return
		}
	}
}

func (c *mentionCtx) stated() bool      { return c.verb == verbStated }
func (c *mentionCtx) outputish() bool   { return isOutputish(c.verb) }
func (c *mentionCtx) transform() bool   { return c.verb == verbTransform }
func (c *mentionCtx) unverbed() bool    { return c.verb == verbNone }
func (c *mentionCtx) output() bool      { return c.m.role == roleOutput }
func (c *mentionCtx) verbBefore() bool  { return c.vi > 0 && c.vi < c.i }
func (c *mentionCtx) markExisting()     { c.m.existing = true }
func (c *mentionCtx) probe()            { probeOutput(c.u, c.m, c.vi, c.i) }
func (c *mentionCtx) outputPrep() bool  { return outputPreps[c.prep] }
func (c *mentionCtx) verbLemma() string { return lemmaOf(c.toks[c.vi].low) }

// mentionRules give a file its role from the words that govern it in its phrase (stage 4): the first row that matches decides.
var mentionRules = []mentionRule{
	{rule{"question", "a question asks about the file, not for it"}, roleInput, spanVerb,
		func(c *mentionCtx) bool { return c.u.question }, nil},
	{rule{"edited-part", `edited in place: "of" names the file whose part an edit verb edits`}, roleEdit, quoteVerb,
		func(c *mentionCtx) bool { return c.verb == verbEdit && editedPart(c.u, c.vi, c.gov) }, nil},
	{rule{"input-prep", "input: governed by an input preposition"}, roleInput, quotePrep,
		func(c *mentionCtx) bool { return inputPreps[c.prep] }, nil},
	{rule{"compared", `input: the standard of a comparison ("the same way as NAME", "such as NAME")`}, roleInput, spanVerb,
		func(c *mentionCtx) bool { return c.compared }, nil},
	{rule{"topic-clause", `input: the topic of an embedded clause ("a summary of how NAME differs …")`}, roleInput, spanVerb,
		func(c *mentionCtx) bool { return c.topic }, nil},
	{rule{"source-phrase", `input: inside the source phrase of a verb ("from the notes in NAME")`}, roleInput, quoteVerb,
		func(c *mentionCtx) bool { return c.vi >= 0 && c.vi < c.i && inSource(c.u, c.vi, c.i, c.prep) }, nil},
	{rule{"presented-after", `input: a participle after it presents it as already there ("x.xlsx attached")`}, roleInput, spanVerb,
		func(c *mentionCtx) bool { return presentedAfter(c.u, c.i, c.p.end) }, (*mentionCtx).markExisting},
	{rule{"stated-does", "input: a statement of what something does"}, roleInput, quoteVerb,
		func(c *mentionCtx) bool { return c.stated() && formOf(c.toks[c.vi].low, c.verbLemma()) == formS }, nil},
	// "the export I attached (metrics.csv)", "the report the agency sent":
	// a file given to the reader is not one to deliver back.
	{rule{"stated-exists", "input: a statement about a file that exists"}, roleInput, quoteVerb,
		(*mentionCtx).stated, func(c *mentionCtx) { c.m.existing = presentedClasses[verbClasses[c.verbLemma()]] }},
	{rule{"located-in", "input: a statement of where something already is"}, roleInput, spanVerb,
		func(c *mentionCtx) bool { return locatedIn(c.u, c.gov) }, (*mentionCtx).markExisting},
	{rule{"attempt", "an attempt, not an output (its target is, for markDenials to deny)"}, roleInput, spanVerb,
		func(c *mentionCtx) bool { return c.verb == verbProbe && (c.outputPrep() || !c.need) }, (*mentionCtx).probe},
	{rule{"output-prep", `output: the object of an output preposition ("into", "as", "called"), whatever the verb`}, roleOutput, quotePrep,
		func(c *mentionCtx) bool {
			return c.outputPrep() && (c.unverbed() || c.outputish() || c.transform() ||
				c.verb == verbInput && digestVerbs[c.verbLemma()])
		}, nil},
	{rule{"existing-mark", `input: named as a file that already exists ("the existing NAME")`}, roleInput, spanVerb,
		func(c *mentionCtx) bool { return c.unverbed() && markedAt(c.toks, c.i, existingMarks) }, nil},
	{rule{"edited-mark", `edited in place: named as a file the work changes ("an updated NAME")`}, roleEdit, spanVerb,
		func(c *mentionCtx) bool { return c.unverbed() && markedAt(c.toks, c.i, editedMarks) }, nil},
	{rule{"located-subject", `input: the subject of a statement of where it already is ("NAME is in the shared drive")`}, roleInput, spanVerb,
		func(c *mentionCtx) bool { return c.unverbed() && locatedSubject(c.u, c.i, c.p.end) }, (*mentionCtx).markExisting},
	{rule{"compare-link", `input: one side of a comparison ("NAME vs NAME")`}, roleInput, spanVerb,
		func(c *mentionCtx) bool { return c.unverbed() && c.i+1 < c.p.end && c.toks[c.i+1].is(compareLinks...) }, nil},
	{rule{"item-in-place", `edited in place: a Deliverables item that says "in place"`}, roleEdit, spanVerb,
		func(c *mentionCtx) bool { return c.unverbed() && c.u.item && c.u.inPlace }, nil},
	{rule{"item-edit", "edited in place: the object of a verb opening the item that names no making"}, roleEdit, quoteVerb,
		func(c *mentionCtx) bool { return c.unverbed() && c.u.item && itemEdit(c.u, c.vi, c.i, c.gov) }, nil},
	{rule{"requested-list", "output: named in a list that a request for files introduces"}, roleOutput, spanVerb,
		func(c *mentionCtx) bool { return c.unverbed() && c.u.listed }, nil},
	{rule{"deliverables-item", "output: named in a Deliverables item"}, roleOutput, spanVerb,
		func(c *mentionCtx) bool { return c.unverbed() && c.u.item }, nil},
	{rule{"named-by", `output: the name a naming verb gives its object ("name it NAME")`}, roleOutput, spanVerb,
		func(c *mentionCtx) bool { return c.unverbed() && namedBy(c.u, c.i) }, nil},
	{rule{"wants-work", "edited in place: the subject of a need for work is what the work changes"}, roleEdit, quoteNext,
		func(c *mentionCtx) bool { return c.unverbed() && wantsWork(c.u, c.i, c.p.end) }, nil},
	{rule{"stored-in", `output: the place a product of the work ("the result") is kept`}, roleOutput, spanVerb,
		func(c *mentionCtx) bool { return c.unverbed() && storedIn(c.u, c.gov) }, nil},
	{rule{"file-noun-name", `output: the name of the file a request asks for ("keep them in one file, emails.md")`}, roleOutput, spanVerb,
		func(c *mentionCtx) bool { return c.unverbed() && namesFileNoun(c.u, c.i) }, nil},
	{rule{"goes-to", `output: where something goes ("results go in NAME")`}, roleOutput, spanVerb,
		func(c *mentionCtx) bool { return c.unverbed() && goesTo(c.u, c.i) }, nil},
	{rule{"declared-output", `output: named as the output ("NAME as the only output")`}, roleOutput, spanVerb,
		func(c *mentionCtx) bool { return c.unverbed() && declaredOutput(c.toks, c.i, c.p.end) }, nil},
	{rule{"ungoverned", "no verb or output preposition governs the file"}, roleNone, spanVerb,
		(*mentionCtx).unverbed, nil},
	// "The config (settings.yaml) needs to be shared with the mobile team":
	// the file is there already; a later pronoun passes it over.
	{rule{"passive-need", `input: a passive delivery to someone else states a need ("NAME needs to be shared with the team")`},
		roleInput, spanVerb, func(c *mentionCtx) bool { return c.need }, (*mentionCtx).markExisting},
	{rule{"receives", "edited in place: the file receives what an output verb gives"}, roleEdit, quoteVerb,
		func(c *mentionCtx) bool { return c.outputish() && receives(c.u, c.vi, c.i, c.p.end) }, nil},
	{rule{"changed-by", `edited in place: an output verb gives the file a new property ("make the chart in report.pptx bigger")`},
		roleEdit, quoteVerb, func(c *mentionCtx) bool { return c.outputish() && changedBy(c.u, c.vi, c.i, c.p.end) }, nil},
	{rule{"wanted-changed", `edited in place: what a verb of wanting wants is the file changed ("need the deck updated")`},
		roleEdit, quoteVerb, func(c *mentionCtx) bool { return c.verb == verbWant && wantedChanged(c.u, c.vi, c.i) }, nil},
	{rule{"source-of-named", `input: the source of a file named after "to/into/as" ("save notes.md as notes.pdf")`}, roleInput, spanVerb,
		func(c *mentionCtx) bool { return c.outputish() && !c.target && isSourceOf(c.toks, c.i, c.p.end) }, nil},
	{rule{"output-verb", "output: the object of an output verb"}, roleOutput, quoteVerb, (*mentionCtx).outputish, nil},
	{rule{"transform-target", "output: the destination of a transform verb"}, roleOutput, quoteVerb,
		func(c *mentionCtx) bool { return c.transform() && c.target }, nil},
	// "Translate menu.docx into Spanish in place": the file itself is changed, and stays the same document.
	{rule{"transform-in-place", `edited in place: the object of a transform verb in a sentence that says "in place"`}, roleEdit, quoteVerb,
		func(c *mentionCtx) bool { return c.transform() && c.u.inPlace }, nil},
	// "Reformat config.yaml so the keys are sorted".
	{rule{"transform-reshape", "edited in place: the object of a transform verb that names no destination"}, roleEdit, quoteVerb,
		func(c *mentionCtx) bool { return c.transform() && c.p.lastDest <= c.i }, func(c *mentionCtx) { c.m.reshaped = true }},
	{rule{"transform-source", "input: the source of a transform verb"}, roleInput, quoteVerb, (*mentionCtx).transform, nil},
	{rule{"how-to", "input: a how-to question asks for knowledge, not work"}, roleInput, quoteVerb,
		func(c *mentionCtx) bool { return c.verb == verbReply && howTo(c.toks, c.vi) }, nil},
	// "You'll find the template in docs/template.docx": there already.
	{rule{"read-verb", "input: the object of a reading or reply verb"}, roleInput, quoteVerb,
		func(c *mentionCtx) bool { return c.verb == verbInput || c.verb == verbReply },
		func(c *mentionCtx) { c.m.existing = findsThere(c.toks, c.vi) }},
	{rule{"edit-verb", "edited in place: the object of an edit verb"}, roleEdit, quoteVerb,
		func(c *mentionCtx) bool { return c.verb == verbEdit }, nil},
	{rule{"repo-verb", "repository work: the object of a repository verb"}, roleRepo, quoteVerb,
		func(c *mentionCtx) bool { return c.verb == verbRepo }, nil},
}

// mentionOverrides revise the role mentionRules gave: every row that matches applies, in order.
var mentionOverrides = []mentionRule{
	// "Support writing metrics.json from the exporter service" (rule 11).
	{rule{"feature-gerund", "repository work: a product feature that writes the file"}, roleRepo, spanPair,
		func(c *mentionCtx) bool { return c.output() && c.verbBefore() && featureGerund(c.u, c.vi) }, nil},
	// "Make the CLI save output.json by default" (rule 11).
	{rule{"product-writes", "repository work: a product writes the file"}, roleRepo, spanPair,
		func(c *mentionCtx) bool { return c.output() && !c.u.item && c.verbBefore() && productVerb(c.u, c.vi) }, nil},
	// "Add a --format xlsx option to the CLI so it can write out.xlsx" (rule 11); the flag at most 16 tokens back.
	{rule{"flag-feature", "repository work: a sentence opening with an edit verb names a flag before the file"}, roleRepo, spanToFile,
		func(c *mentionCtx) bool {
			return c.output() && !c.u.item && c.u.cls[0] == verbEdit && slices.ContainsFunc(c.u.toks[max(0, c.i-16):c.i], isFlag)
		}, nil},
	{rule{"model-noun", `input: a model noun phrase holds the file ("a sample in NAME")`}, roleInput, spanModel,
		func(c *mentionCtx) bool { return c.output() && !c.m.delivery && !c.u.item && modelNP(c.u, c.p, c.i) }, nil},
	// "in the same format as churn_october.csv and attach it": a model is
	// an input a later pronoun passes over; "it" is the new output (rule 10).
	{rule{"model-ref", "input: named as a model, template, example or earlier version"}, roleInput, spanModel,
		func(c *mentionCtx) bool {
			return (c.m.role == roleInput || c.m.role == roleNone && !c.u.item) && !c.m.existing &&
				modelRef(c.u, c.p, c.i, c.vi, c.prep, c.compared)
		}, (*mentionCtx).markExisting},
	{rule{"repo-phrase", "repository work: its phrase is about a pull request, branch or commit"}, roleRepo, spanPhrase,
		func(c *mentionCtx) bool { return c.output() && c.p.repo }, nil},
}

// mentionMarks apply the marks that cover the file: negation, inline markers, delivery. The first row that matches decides.
var mentionMarks = []mentionRule{
	{rule{"forbidden", "forbidden: a negated output or delivery names it"}, roleNone, spanToFile,
		func(c *mentionCtx) bool { return c.u.neg[c.i] && (c.output() || c.governedByDelivery) },
		func(c *mentionCtx) { c.m.forbid = true }},
	{rule{"negated", "not requested: a negation covers it"}, roleNone, spanToFile,
		func(c *mentionCtx) bool { return c.u.neg[c.i] }, nil},
	{rule{"inline", "inline: an inline marker covers it"}, roleInline, spanOnward,
		func(c *mentionCtx) bool { return c.u.inl[c.i] }, nil},
	{rule{"question-no-delivery", "a question: no delivery verb or marker reaches its files"}, roleKeep, spanNone,
		func(c *mentionCtx) bool { return c.u.question }, nil},
	{rule{"delivered", "delivered: a delivery verb or marker reaches it"}, roleOutput, spanPhrase,
		func(c *mentionCtx) bool {
			return !c.inputGoverned && !c.m.existing && !c.compared && !c.topic &&
				(c.p.marker && c.m.role != roleInput || c.governedByDelivery && (c.p.attach || c.p.send))
		}, func(c *mentionCtx) { c.m.delivery = true }},
}

var _ = register(40, "mention", "a file's role from the words that govern it: the first row that matches", ruleList(mentionRules))
var _ = register(41, "mention-override", "revisions of that role: every row that matches applies", ruleList(mentionOverrides))
var _ = register(42, "mention-mark", "negation, inline and delivery marks on the file: the first row that matches", ruleList(mentionMarks))
