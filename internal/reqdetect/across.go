package reqdetect

import (
	"cmp"
	"slices"
	"strings"
)

// Stage 5: across units

// markRepoWork makes the outputs of code tasks repository work (rule 8):
func markRepoWork(units []*unit) {
	built := false // the unit before builds the project
	// A text that asks for a pull request, branch or commit anywhere does code work: the source files it makes ("split it into
	// model.py and render.py … and open a pull request") are modules of that change.
	pr := slices.ContainsFunc(units, func(u *unit) bool {
		return !u.question && slices.ContainsFunc(u.phrases, func(p *phrase) bool { return p.repo && !p.negated })
	})
	var prev *unit
	for _, u := range units {
		builds := buildsProject(u)
		built = built && reaches(u, prev)
		for _, p := range u.phrases {
			code := slices.ContainsFunc(u.toks[p.start:p.end], func(t token) bool { return t.kind == tokWord && codeNouns[t.low] })
			for _, m := range p.mentions {
				if m.role != roleOutput || m.delivery || u.item && !u.listed || m.verb >= 0 && u.cls[m.verb] == verbExport {
					continue
				}
				c := repoCtx{u: u, m: m, code: code, pr: pr, builds: builds || built}
				c.dirs, c.ext = pathParts(m.name)
				for _, r := range repoRules {
					if r.match(&c) {
						m.role = roleRepo
						m.decide(u, r.rule, "", p.start, p.end-1)
						break
					}
				}
			}
		}
		built, prev = builds, u
	}
}

// repoCtx is what repoRules read about an output file m of unit u.
type repoCtx struct {
	u                *unit
	m                *mention
	code, pr, builds bool // a code noun in its phrase; a pull request asked for; the project built here or just before
	dirs             []string
	ext              string
}

type repoRule struct {
	rule
	match func(c *repoCtx) bool
}

func (c *repoCtx) under(set map[string]bool) bool {
	return slices.ContainsFunc(c.dirs, func(d string) bool { return set[d] })
}

// repoRules make an output file repository work (rule 8): the first row that matches decides.
var repoRules = []repoRule{
	{rule{"repo-source-tree", "repository work: a source file created in the source tree"},
		func(c *repoCtx) bool { return sourceExts[c.ext] && (c.code || c.under(sourceDirs)) }},
	{rule{"repo-change-module", "repository work: a source file of a change the text asks to open as a pull request, branch or commit"},
		func(c *repoCtx) bool { return sourceExts[c.ext] && c.pr }},
	{rule{"repo-build-output", "repository work: a build output"},
		func(c *repoCtx) bool {
			return c.builds && (c.m.checked || (buildExts[c.ext] || c.under(buildDirs)) &&
				c.m.verb >= 0 && buildVerbs[lemmaOf(c.u.toks[c.m.verb].low)])
		}},
}

var _ = register(50, "repo", "repository work across the text (rule 8): the first row that matches", ruleList(repoRules))

// reaches reports whether a reference in unit ref (a pronoun, a noun phrase naming an earlier file, a
// qualifier, a denial remark or a build step) may reach back to unit to.
func reaches(ref, to *unit) bool {
	return to != nil && (!ref.item || ref.block == to.block)
}

// buildsProject reports whether u builds a project.
func buildsProject(u *unit) bool {
	for i, t := range u.toks {
		if t.kind != tokWord || u.neg[i] || !buildVerbs[lemmaOf(t.low)] && !buildVerbs[t.low] {
			continue
		}
		for k := i + 1; k < len(u.toks) && k <= i+4 && u.toks[k].kind == tokWord; k++ {
			n := u.toks[k]
			if projectNouns[n.low] {
				return true
			}
			if !determiners[n.low] && (functionWords[n.low] || lemmaOf(n.low) != "") {
				break
			}
		}
	}
	return false
}

// pathParts returns the lower-cased directories and extension of the file name s.
func pathParts(s string) (dirs []string, ext string) {
	parts := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return strings.ContainsRune(pathSeparators, r) })
	if len(parts) == 0 {
		return nil, ""
	}
	base := parts[len(parts)-1]
	return parts[:len(parts)-1], base[strings.LastIndexByte(base, '.')+1:]
}

// requestsList reports whether the unit lead, if it is a line ending in ":", asks for the files listed below it.
func requestsList(lead *unit) bool {
	if len(lead.phrases) == 0 || lead.question {
		return false
	}
	p := lead.phrases[len(lead.phrases)-1]
	if p.negated || p.namesOutput() {
		return false
	}
	verb, pointer, object := false, false, false
	for i := p.start; i < p.end; i++ {
		t := lead.toks[i]
		if listVerb(lead, i) {
			verb, object = true, false // the object, if any, is that of the last verb
			continue
		}
		// "Files to produce:", "Files to attach:": a file noun before the infinitive that asks for them.
		pointer = pointer || verb && t.kind == tokWord && (fileNouns[t.low] || t.is(listPointers...)) ||
			fileNouns[t.low] && i+2 < p.end && lead.toks[i+1].is("to") && listVerb(lead, i+2)
		object = object || verb && (t.kind == tokFile || t.kind == tokWord && !t.is(listPointers...) &&
			!t.is(listIncludes...) && (determiners[t.low] || plainWord(t)))
	}
	// A verb with no object of its own before the colon asks for the list itself ("Return:", "What I need back:", "Your output
	// should include:"), as it does with a pointer ("We need the following:").
	return pointer || verb && !object
}

// listVerb reports whether toks[i] of a list lead asks for what follows.
func listVerb(lead *unit, i int) bool {
	c := lead.cls[i]
	if lead.neg[i] || c == verbNone {
		return false
	}
	if howTo(lead.toks, i) {
		c = verbClasses[lemmaOf(lead.toks[i].low)]
	}
	return isOutputish(c)
}

// The two ways a write is expected to be denied (rule 7).
var (
	denialMarker  = rule{"denial-marker", "denied: a remark in its phrase says the write is expected to be denied (rule 7)"}
	deniedAttempt = rule{"denied-attempt", "denied: an attempt its sentence or the next says must be denied (rule 7)"}
)

// markDenials marks denied-write phrases (rule 7).
func markDenials(units []*unit) {
	for ui, u := range units {
		next := ui+1 < len(units) && units[ui+1].denial && reaches(units[ui+1], u)
		for _, p := range u.phrases {
			marker := p.end // a marker inside the phrase denies the files before it
			for i := p.start; i < p.end; i++ {
				if denialAt(u.toks, i) {
					marker = i
					break
				}
			}
			whole := p.probe && (u.denial || next) // "attempt …; this negative test must be denied"
			if marker == p.end && !whole {
				continue
			}
			p.denied, p.signal = true, false
			for _, m := range p.mentions {
				if (whole || m.tok < marker) && m.role == roleOutput && !m.forbid {
					m.role, m.delivery = roleDenied, false
					r := deniedAttempt
					if m.tok < marker && marker < p.end {
						r = denialMarker
					}
					m.decide(u, r, "", p.start, p.end-1)
				}
			}
		}
	}
}

// resolvePronouns resolves pronoun objects of delivery, negated delivery and repository verbs.
func resolvePronouns(units []*unit) {
	for _, u := range units {
		u.bare, u.last = true, -1
		for q, p := range u.phrases {
			if len(p.mentions) > 0 || p.signal {
				u.bare, u.last = false, q
			}
		}
	}
	for ui, u := range units {
		for pi, p := range u.phrases {
			deliver := (p.attach || p.send && !p.repo || p.marker) && !p.denied // "ship it as a pull request" is repository work
			repoRef := (p.repoVerb || p.repo) && !p.negated
			inlineRef := (p.inline || hasWord(u, p, replyPlaces)) && !deliver && !p.negated && hasVerb(u, p, showVerbs, true) // "show it to me inline"
			makeRef := !p.negated && !p.inline && !p.anaphor && hasVerb(u, p, makingVerbs, false)                             // "if not, create it"
			if !p.pronoun || !(deliver || p.negDeliver || repoRef || inlineRef || makeRef) || p.namesOutput() {
				continue
			}
			c := pronounCtx{u: u, p: p, deliver: deliver, repoRef: repoRef, makeRef: makeRef, inlineRef: inlineRef}
			c.ms, c.ph, c.from = antecedent(units, ui, pi, p)
			for _, r := range pronounRules {
				if r.match(&c) {
					r.apply(&c, r.rule)
					break
				}
			}
		}
	}
}

// pronounCtx is what pronounRules read: phrase p of u refers back to the
// files ms or the unnamed request ph (from: the phrase it was found in).
type pronounCtx struct {
	u                                    *unit
	p, ph, from                          *phrase
	ms                                   []*mention
	deliver, repoRef, makeRef, inlineRef bool
}

type pronounRule struct {
	rule
	match func(c *pronounCtx) bool
	apply func(c *pronounCtx, r rule)
}

// each records r on every file m it refers to for which ok holds.
func (c *pronounCtx) each(r rule, ok func(m *mention) bool, set func(m *mention)) {
	for _, m := range c.ms {
		if ok(m) {
			set(m)
			m.decide(c.u, r, "", c.p.start, c.p.end-1)
		}
	}
}

// pronounRules give the files a pronoun or anaphor refers to the role of
// the verb that refers: the first row that matches decides.
var pronounRules = []pronounRule{
	{rule{"pronoun-delivered", "delivered: a delivery verb refers back to it"},
		func(c *pronounCtx) bool { return c.deliver },
		func(c *pronounCtx, r rule) {
			c.each(r, func(m *mention) bool { return !m.forbid }, func(m *mention) { m.role, m.delivery = roleOutput, true })
			if c.ph != nil {
				c.ph.delivered = true
			}
			if len(c.ms) > 0 || c.ph != nil {
				c.p.signal, c.p.delivered = false, false
			}
		}},
	{rule{"pronoun-forbidden", "forbidden: a negated delivery refers back to it"},
		func(c *pronounCtx) bool { return c.p.negDeliver },
		func(c *pronounCtx, r rule) {
			c.each(r, func(*mention) bool { return true }, func(m *mention) { m.forbid = true })
			if c.ph != nil {
				c.ph.forbid = true
			}
		}},
	// "build the Docker image and push it to the registry": the unnamed request it refers to is repository work too.
	{rule{"pronoun-repo", "repository work: a repository verb refers back to it"},
		func(c *pronounCtx) bool { return c.repoRef },
		func(c *pronounCtx, r rule) {
			c.each(r, func(*mention) bool { return true }, func(m *mention) { m.repoRef = true })
			if c.ph != nil && !c.ph.delivered {
				c.ph.signal = false
			}
		}},
	{rule{"pronoun-made", `output: a verb of making refers back to it ("create it")`},
		func(c *pronounCtx) bool { return c.makeRef },
		func(c *pronounCtx, r rule) {
			c.each(r, func(m *mention) bool { return m.role == roleInput || m.role == roleNone }, func(m *mention) { m.role = roleOutput })
		}},
	// "Render README.md as HTML and paste it here": the unnamed request it refers to is shown, not delivered.
	{rule{"pronoun-inline", "inline: a verb of showing refers back to it with an inline marker"},
		func(c *pronounCtx) bool { return c.inlineRef },
		func(c *pronounCtx, r rule) {
			c.each(r, func(m *mention) bool { return m.role == roleOutput && !m.delivery }, func(m *mention) { m.role = roleInline })
			for _, q := range []*phrase{c.ph, c.from} {
				if q != nil && !q.delivered {
					q.signal = false
				}
			}
		}},
}

var _ = register(52, "pronoun", "what a pronoun or anaphor refers back to takes the referring verb's role: the first row that matches", ruleList(pronounRules))

// hasVerb reports whether phrase p has a verb, not negated, that set holds.
func hasVerb(u *unit, p *phrase, set map[string]bool, lemma bool) bool {
	return anyIn(p.start, p.end-1, func(i int) bool {
		w := u.toks[i].low
		return u.verbAt(i) && !u.neg[i] && (set[w] && !lemma || lemma && set[lemmaOf(w)])
	})
}

// hasWord reports whether phrase p holds one of words.
func hasWord(u *unit, p *phrase, words []string) bool {
	return slices.ContainsFunc(u.toks[p.start:p.end], func(t token) bool { return t.is(words...) })
}

// antecedent finds what a pronoun in phrase pi of unit ui refers to.
func antecedent(units []*unit, ui, pi int, ref *phrase) (ms []*mention, ph, from *phrase) {
	plural, pair, np, sameDoc, part, kind := ref.plural, ref.pair, ref.anaphor, ref.sameDoc, ref.part, ref.kind
	// pickLive picks from the files of p that are not inputs the text presents as already there
	// (existing): "Numbers are in the export I attached (metrics.csv). Please make it something I can
	// download" delivers the one-pager, not metrics.csv; "send it back" may return such a file.
	live := func(p *phrase) []*mention {
		if ref.returns {
			return p.mentions // "I attached budget.xlsx. Please fix the formulas and send it back."
		}
		return slices.DeleteFunc(slices.Clone(p.mentions), func(m *mention) bool { return m.existing })
	}
	pickLive := func(p *phrase) []*mention {
		ms := live(p)
		if plural {
			return ms
		}
		return ms[len(ms)-1:]
	}
	// made returns the files of phrase pp of unit pu that a noun phrase ("the updated file") names: a
	// file made or edited earlier, not one read, or the file its participle's verb worked on ("Shorten
	// abstract.txt … the shortened one"); adjacent says pp is the phrase right before the noun phrase.
	made := func(pu *unit, pp *phrase, adjacent bool) []*mention {
		var got []*mention
		acted := actedFrom(pu.toks, pp, part) // first word of pp that part's verb is, or -1
		for _, m := range pp.mentions {
			// "Reformat speakers.csv … the reformatted file": a transform that keeps the document (keepingTransforms), named by
			// its participle; "Convert data.csv … the converted file" is the product of the conversion.
			byVerb := acted >= 0 && acted < m.tok && keepingTransforms[lemmaOf(part)]
			if m.reshaped && !sameDoc && !byVerb {
				continue // "compile paper.tex and attach the resulting PDF"
			}
			if _, ext := pathParts(m.name); kind != "" && !slices.Contains(kindNouns[kind], ext) {
				continue // not of the kind the noun names: "fix notes.md and attach the spreadsheet"
			}
			if m.role == roleInput && kind != "" && changedPart(part) {
				got = append(got, m) // "The team uses candidates.xlsx. … share the updated sheet"
				continue
			}
			// A file no verb governs in the phrase right before, after a verb no lexicon lists, is what the noun phrase names
			// ("Fill in the owners in raci.xlsx and upload the completed sheet", "Trim intro.mp4 … upload the shorter clip").
			ungoverned := m.role == roleNone && (acted >= 0 && acted < m.tok || adjacent || kind != "")
			if m.role == roleOutput || m.role == roleEdit || ungoverned {
				got = append(got, m)
			}
		}
		if len(got) > 1 && !plural {
			got = got[len(got)-1:]
		}
		return got
	}
	u := units[ui]
	for q := pi - 1; q >= 0 && q >= pi-8; q-- {
		pp := u.phrases[q]
		switch {
		case np:
			if got := made(u, pp, q == pi-1); len(got) > 0 {
				return got, nil, pp
			}
			continue
		case pp.signal && onlyInputs(pp):
			// "Convert users.csv to a JSON file and share it": the pronoun is the product, not its source.
			return nil, pp, nil
		case onlyInputs(pp) && slices.ContainsFunc(u.cls[pp.start:pp.end], func(c verbClass) bool { return c == verbTransform }):
			// "Convert rates.csv to JSON … and return it": the pronoun is the product, not its source.
			return nil, nil, nil
		case len(live(pp)) > 0:
			return pickLive(pp), nil, pp
		case pp.signal:
			return nil, pp, nil
		case !np && makesUnnamed(u, pp):
			// "Please turn this into a release overview … and deliver it as a PDF": the pronoun is that
			// product, which has no name, not a file of an earlier sentence.
			return nil, nil, nil
		}
		// "review it and attach it", "Once you are done, please attach it": a phrase that names nothing is passed over.
	}
	if np {
		// A noun phrase opening its sentence, or a kind noun anywhere in it, reaches the last phrase of the sentence before,
		// past a bare qualifier or denial remark ("the onboarding doc (onboarding.docx) is too long. Can you cut it down and
		// send the trimmed doc back?", ("Update the totals in q3.xlsx. Then upload the spreadsheet.", "Edit chapter3.docx. Then
		// email me the edited chapter.").
		for k := ui - 1; (pi == 0 || kind != "") && k >= 0 && k >= ui-3 && reaches(u, units[k]); k-- {
			pu := units[k]
			if pu.bare && (pu.qualifier >= 0 || pu.denial) {
				continue
			}
			if pu.last >= 0 {
				if got := made(pu, pu.phrases[pu.last], false); len(got) > 0 {
					return got, nil, pu.phrases[pu.last]
				}
			}
			break
		}
		return nil, nil, nil
	}
	// "both" gathers files from earlier units until it has two ("Write a.json. … Write b.json. … Attach both.").
	var got []*mention
	for k := ui - 1; k >= 0 && k >= ui-8 && reaches(u, units[k]); k-- {
		pu := units[k]
		if pu.bare && (pu.qualifier >= 0 || pu.denial) {
			continue
		}
		if pu.last < 0 {
			break
		}
		pp := pu.phrases[pu.last]
		if len(live(pp)) == 0 || pp.signal && onlyInputs(pp) {
			if got == nil && pp.signal {
				return nil, pp, nil
			}
			break
		}
		if from == nil {
			from = pp
		}
		got = append(got, pickLive(pp)...)
		if !pair || distinctNames(got) >= 2 {
			break
		}
	}
	return got, nil, from
}

// makesUnnamed reports whether phrase p makes something it does not name.
func makesUnnamed(u *unit, p *phrase) bool {
	for i := p.start; i < p.end; i++ {
		if !u.verbAt(i) || u.neg[i] || u.cls[i] != verbOutput && u.cls[i] != verbTransform {
			continue
		}
		for k := i + 1; k < p.end && k <= i+productSpan; k++ {
			t := u.toks[k]
			if t.is(indefArticles...) {
				return true
			}
			if t.kind == tokFile || u.verbAt(k) || t.kind == tokPunct {
				break
			}
		}
	}
	return false
}

// onlyInputs reports whether every file of phrase p is an input, so that
// a pronoun after p refers to p's unnamed request, not to its sources.
func onlyInputs(p *phrase) bool {
	return !slices.ContainsFunc(p.mentions, func(m *mention) bool { return m.role != roleInput })
}

// changedPart reports whether part is the participle of an edit or transform verb.
func changedPart(part string) bool {
	c := verbClasses[lemmaOf(part)]
	return part != "" && (c == verbEdit || c == verbTransform)
}

// distinctNames counts the distinct file names of ms.
func distinctNames(ms []*mention) int {
	n := 0
	for i, m := range ms {
		if !slices.ContainsFunc(ms[:i], func(o *mention) bool { return o.name == m.name }) {
			n++
		}
	}
	return n
}

// candidate is one requested output of a unit: a named file (all its mentions in the unit) or one phrase's unnamed request.
type candidate struct {
	mentions []*mention
	phrase   *phrase
}

func (c candidate) delivered() bool {
	if c.phrase != nil {
		return c.phrase.delivered
	}
	return slices.ContainsFunc(c.mentions, func(m *mention) bool { return m.delivery })
}

var notDeliverable = rule{"not-deliverable", "exempt: the sentence after its request says it is not a deliverable (rule 6)"}

func (c candidate) exempt(q *unit) {
	if c.phrase != nil {
		c.phrase.exempt = true
	}
	for _, m := range c.mentions {
		m.exempt = true
		m.decide(q, notDeliverable, "", q.qualifier, len(q.toks)-1)
	}
}

// candidates lists the requested outputs of u that start before token index before.
func candidates(u *unit, before int) []candidate {
	var out []candidate
	byName := map[string]int{}
	for _, p := range u.phrases {
		if p.start >= before {
			break
		}
		named := false
		for _, m := range p.mentions {
			if m.tok >= before || m.role != roleOutput || m.forbid {
				continue
			}
			named = true
			if k, ok := byName[m.name]; ok {
				out[k].mentions = append(out[k].mentions, m)
				continue
			}
			byName[m.name] = len(out)
			out = append(out, candidate{mentions: []*mention{m}})
		}
		if !named && p.signal && !p.denied && !p.forbid {
			out = append(out, candidate{phrase: p})
		}
	}
	return out
}

// applyQualifiers applies "not a deliverable" qualifiers (rule 6).
func applyQualifiers(units []*unit) {
	for ui, u := range units {
		if u.qualifier < 0 {
			continue
		}
		cands := candidates(u, u.qualifier)
		if len(cands) == 0 && ui > 0 && reaches(u, units[ui-1]) {
			cands = candidates(units[ui-1], len(units[ui-1].toks))
		}
		if len(cands) == 1 && !cands[0].delivered() {
			cands[0].exempt(u)
		}
	}
}

func collect(units []*unit) Result {
	type verdict struct{ forbid, delivered, plain, repo, last *mention }
	byName := map[string]*verdict{}
	var order []string
	var unnamed *phrase
	for _, u := range units {
		for _, p := range u.phrases {
			for _, m := range p.mentions {
				v := byName[m.name]
				if v == nil {
					v = &verdict{}
					byName[m.name] = v
					order = append(order, m.name)
				}
				v.last = m
				switch {
				case m.forbid:
					v.forbid = cmp.Or(v.forbid, m)
				case m.role != roleOutput:
				case m.delivery:
					v.delivered = cmp.Or(v.delivered, m)
				case !m.exempt:
					v.plain = cmp.Or(v.plain, m)
				}
				if m.repoRef {
					v.repo = cmp.Or(v.repo, m)
				}
			}
			if unnamed == nil && p.signal && !p.denied && !p.forbid && !p.negated && (!p.exempt || p.delivered) && !p.namesOutput() {
				unnamed = p
			}
		}
	}
	var r Result
	for _, name := range order {
		v := byName[name]
		why := Reason{File: name}
		var by *mention
		switch {
		case v.forbid != nil:
			by = v.forbid
		case v.delivered != nil:
			by, why.Requested = v.delivered, true
		case v.plain != nil && v.repo != nil:
			by = v.repo
		case v.plain != nil:
			by, why.Requested = v.plain, true
		default:
			by = v.last
		}
		why.ID, why.Rule, why.Span = by.id, by.rule, by.span
		if why.ID == "" {
			why.ID, why.Rule = noRole.id, noRole.doc
		}
		if why.Requested {
			r.Files = append(r.Files, name)
		}
		r.Why = append(r.Why, why)
	}
	slices.Sort(r.Files)
	c := decisionCtx{r: &r, unnamed: unnamed}
	for _, d := range decisionRules {
		if d.match(&c) {
			r.File = d.requested
			r.Decision = d.decide(&c)
			r.Decision.Requested = d.requested
			break
		}
	}
	return r
}

// decisionCtx is what decisionRules read: the reasons of every file and the first unnamed request that survives.
type decisionCtx struct {
	r       *Result
	unnamed *phrase
}

type decisionRule struct {
	rule
	requested bool
	match     func(c *decisionCtx) bool
	decide    func(c *decisionCtx) Reason // its ID is the rule that decided: a file's, the request's, or the row's own
}

// firstWhy returns the first reason whose Requested is want.
func (c *decisionCtx) firstWhy(want bool) (Reason, bool) {
	for _, w := range c.r.Why {
		if w.Requested == want {
			return w, true
		}
	}
	return Reason{}, false
}

// decisionRules make the overall decision (Result.File): the first row that
// matches decides. The decision's ID is that of the reason behind it.
var decisionRules = []decisionRule{
	{rule{"named-file", "a named file is requested: the decision takes the rule of the first one mentioned"}, true,
		func(c *decisionCtx) bool { return len(c.r.Files) > 0 },
		func(c *decisionCtx) Reason {
			w, _ := c.firstWhy(true)
			return Reason{ID: w.ID, Rule: "a named file is requested: " + strings.Join(c.r.Files, ", "), Span: w.Span}
		}},
	{rule{"unnamed-file", "an unnamed request for a file survives: the decision takes its rule"}, true,
		func(c *decisionCtx) bool { return c.unnamed != nil },
		func(c *decisionCtx) Reason {
			return Reason{ID: c.unnamed.id, Rule: c.unnamed.rule, Span: c.unnamed.span}
		}},
	{rule{"no-request", "no request for a file survives: the decision takes the rule of the first file mentioned, if any"}, false,
		func(*decisionCtx) bool { return true },
		func(c *decisionCtx) Reason {
			if w, ok := c.firstWhy(false); ok {
				return Reason{ID: w.ID, Rule: "no request for a file survives; first " + w.File + ": " + w.Rule, Span: w.Span}
			}
			return Reason{ID: "no-request", Rule: "no request for a file survives"}
		}},
}

// noRole explains a file no rule gave a role.
var noRole = rule{"no-role", "no rule gave it a role"}

var _ = register(60, "decision", "the overall decision: the first row that matches", ruleList(decisionRules))

var _ = register(51, "across", "single rules of the later stages: inputs under a heading, denials, qualifiers, attempts",
	[]rule{inputHeading, denialMarker, deniedAttempt, notDeliverable, attemptTarget, noRole})
