package reqdetect

import (
	_ "embed"
	"fmt"
	"slices"
	"strings"
)

// Lexicon: the English word lists live in lexicon_en.txt, one "name: words" entry per list with
// its documentation above it; the rules that read them stay in Go.

type verbClass uint8

const (
	verbNone      verbClass = iota
	verbOutput              // write, create, save: the object is an output
	verbExport              // export: an output verb that asks for a file by itself
	verbAttach              // attach, upload: delivery that asks for a file by itself
	verbSend                // send, share, publish: delivery of a file named elsewhere
	verbTransform           // convert, render: the object is the source, to/into/as the output
	verbInput               // read, compare: the object is an input
	verbReply               // reply, explain: an answer in text
	verbEdit                // update, fix: in-place work
	verbRepo                // commit, push, merge
	verbProbe               // attempt, try
	verbPseudo              // the noun "deliverable": what follows is an output
	verbStated              // a verb with a subject, or an opening participle: a statement, not a request
	verbWant                // need, want: the object is what the user asks for
	verbUnknown             // a word no lexicon lists, in a verb's place ("and then recreate it"): no role of its own
)

var verbClasses = func() map[string]verbClass {
	m := map[string]verbClass{}
	for c, name := range []string{verbOutput: "verbOutput", verbExport: "verbExport", verbAttach: "verbAttach",
		verbSend: "verbSend", verbTransform: "verbTransform", verbInput: "verbInput", verbReply: "verbReply", verbEdit: "verbEdit",
		verbRepo: "verbRepo", verbProbe: "verbProbe", verbPseudo: "verbPseudo", verbWant: "verbWant"} {
		if name == "" {
			continue // verbNone, verbStated and verbUnknown come from the rules, not from a list
		}
		for _, w := range lexList(name) {
			m[w] = verbClass(c) // in one class only: TestVerbClassesDisjoint
		}
	}
	return m
}()

// perfectClitic ends a subject contracted with a perfect auxiliary: afterAux.
const perfectClitic = "'ve"

// lemmaOf returns the lexicon verb that w is a form of, or "".
func lemmaOf(w string) string {
	step()
	return lemmas[w]
}

// lemmas maps every form lemmaOf knows to its lexicon verb: the verb itself, then an irregular form ("wrote"), then a
// regular one by the first of inflections that fits ("copies", "attached"), then one with a doubled last letter
// ("zipped", "putting"). Each form keeps the first reading in that order.
var lemmas = func() map[string]string {
	m := map[string]string{}
	add := func(form, lemma string) {
		if _, ok := m[form]; !ok {
			m[form] = lemma
		}
	}
	for w := range verbClasses {
		add(w, w)
	}
	for w, b := range irregularVerbs {
		add(w, b[0])
	}
	for _, s := range inflections {
		for w := range verbClasses {
			if b, ok := strings.CutSuffix(w, s.restore); ok {
				add(b+s.suffix, w)
			}
		}
	}
	for _, suf := range doubledInflections {
		for w := range verbClasses { // parseLexicon keeps no empty word
			add(w+w[len(w)-1:]+suf, w)
		}
	}
	return m
}()

// inflection is one regular verb ending: a word ending in suffix is a form of
// the lexicon verb spelled with suffix replaced by restore.
type inflection struct{ suffix, restore string }

// inflections are the regular endings lemmaOf strips, tried in this order: "copies" and "tried" (y
// restored), "fixes", "writes", "attached", "created", "attaching", "creating" (e restored).
var inflections = []inflection{
	{"ies", "y"}, {"ied", "y"}, {"es", ""}, {"s", ""}, {"ed", ""}, {"d", ""}, {"ing", ""}, {"ing", "e"},
}

// formats maps format words to whether they are inherently a file (strong: "a PDF") or only a text
// format (weak: JSON, CSV — a file only as a destination or with a file noun).
var formats = func() map[string]bool {
	m := lexSet("fileFormats")
	for _, w := range lexList("textFormats") {
		m[w] = false
	}
	return m
}()

// presentedClasses are the verb classes whose bare participle after "(", a file or a file and a comma describes a thing that
// already exists ("(exported to rotation.tsv, attached)", "headcount_plan.xlsx attached", "(shared in Drive)"): describesThing.
// Output verbs are not among them: "(saved as summary.md)" may say how a requested output is kept, unless a statement stands
// before the parenthesis (statedBefore).
var presentedClasses = map[verbClass]bool{verbAttach: true, verbSend: true, verbExport: true}

// The word lists and word maps (lexicon_en.txt says what each is for).
var (
	irregularVerbs       = lexMap("irregularVerbs")
	formatAliases        = lexMap("formatAliases")
	kindNouns            = lexMap("kindNouns")
	editParticles        = lexMap("editParticles")
	namingVerbs          = lexSet("namingVerbs")
	politeWords          = lexList("politeWords")
	givingVerbs          = lexSet("givingVerbs")
	sameParticiples      = lexSet("sameParticiples")
	doubledInflections   = lexList("doubledInflections")
	fileExts             = lexSet("fileExts")
	notFiles             = lexSet("notFiles")
	abbrevs              = lexSet("abbrevs")
	labelWords           = lexList("labelWords")
	determiners          = lexSet("determiners")
	inputDets            = lexSet("inputDets")
	functionWords        = lexSet("functionWords")
	negators             = lexSet("negators")
	openers              = lexSet("openers")
	fillers              = lexSet("fillers")
	prepFillers          = lexSet("prepFillers")
	nounPreps            = lexSet("nounPreps")
	nounLeads            = lexList("nounLeads")
	causatives           = lexSet("causatives")
	sourceExts           = lexSet("sourceExts")
	sourceDirs           = lexSet("sourceDirs")
	codeNouns            = lexSet("codeNouns")
	buildVerbs           = lexSet("buildVerbs")
	projectNouns         = lexSet("projectNouns")
	buildExts            = lexSet("buildExts")
	buildDirs            = lexSet("buildDirs")
	digestVerbs          = lexSet("digestVerbs")
	inputPreps           = lexSet("inputPreps")
	questionWords        = lexList("questionWords")
	beForms              = lexList("beForms")
	outputSubjects       = lexList("outputSubjects")
	replyNouns           = lexList("replyNouns")
	tempWords            = lexSet("tempWords")
	fileNouns            = lexSet("fileNouns")
	fileModifiers        = lexSet("fileModifiers")
	docNouns             = lexSet("docNouns")
	formatDocNouns       = lexSet("formatDocNouns")
	outputPreps          = lexSet("outputPreps")
	locativePreps        = lexSet("locativePreps")
	nearWords            = lexList("nearWords")
	findingVerbs         = lexList("findingVerbs")
	findingClitics       = lexList("findingClitics")
	findingAux           = lexList("findingAux")
	placeNames           = lexList("placeNames")
	indicativeBe         = lexSet("indicativeBe")
	statementAdverbs     = lexSet("statementAdverbs")
	subjectPronouns      = lexSet("subjectPronouns")
	pastSubjects         = lexSet("pastSubjects")
	askAux               = lexList("askAux")
	statingClitics       = lexSet("statingClitics")
	futureClitics        = lexSet("futureClitics")
	abilityAux           = lexList("abilityAux")
	progressiveBe        = lexList("progressiveBe")
	presentBe            = lexList("presentBe")
	statingPassiveAux    = lexList("statingPassiveAux")
	passivePronouns      = lexList("passivePronouns")
	wantWords            = lexList("wantWords")
	recipients           = lexList("recipients")
	referentModifiers    = lexList("referentModifiers")
	isClitics            = lexSet("isClitics")
	existingMarks        = lexSet("existingMarks")
	editedMarks          = lexSet("editedMarks")
	compareLinks         = lexList("compareLinks")
	motionVerbs          = lexList("motionVerbs")
	motionPreps          = lexList("motionPreps")
	endVerbs             = lexList("endVerbs")
	outputRoles          = lexList("outputRoles")
	roleFillers          = lexList("roleFillers")
	formatLeadMarks      = lexList("formatLeadMarks")
	acceptWords          = lexList("acceptWords")
	acceptBe             = lexList("acceptBe")
	exceptWords          = lexList("exceptWords")
	inlinePreps          = lexList("inlinePreps")
	listIncludes         = lexList("listIncludes")
	labelTails           = lexSet("labelTails")
	labelModifierStops   = lexSet("labelModifierStops")
	listPointers         = lexList("listPointers")
	thirdPersonSubjects  = lexSet("thirdPersonSubjects")
	subordinators        = lexSet("subordinators")
	howToWords           = lexList("howToWords")
	whetherWords         = lexList("whetherWords")
	embeddedWh           = lexList("embeddedWh")
	clauseJoiners        = lexList("clauseJoiners")
	alternativeMarks     = lexList("alternativeMarks")
	informWords          = lexList("informWords")
	codeQuotes           = lexList("codeQuotes")
	ensureWords          = lexList("ensureWords")
	purposeLeads         = lexList("purposeLeads")
	subjectDets          = lexSet("subjectDets")
	perfectAux           = lexSet("perfectAux")
	passiveBe            = lexSet("passiveBe")
	anaphorHeads         = lexSet("anaphorHeads")
	anaphorPlurals       = lexSet("anaphorPlurals")
	storagePreps         = lexList("storagePreps")
	productDets          = lexList("productDets")
	storedPronouns       = lexList("storedPronouns")
	makingVerbs          = lexSet("makingVerbs")
	showVerbs            = lexSet("showVerbs")
	replyPlaces          = lexList("replyPlaces")
	keptNouns            = lexSet("keptNouns")
	sameDocHeads         = lexSet("sameDocHeads")
	keepingTransforms    = lexSet("keepingTransforms")
	resultLeads          = lexList("resultLeads")
	adjectiveSuffixes    = lexList("adjectiveSuffixes")
	returnParticles      = lexList("returnParticles")
	verbParticles        = lexList("verbParticles")
	madeModifiers        = lexSet("madeModifiers")
	clauseBreaks         = lexSet("clauseBreaks")
	sentenceEnds         = lexList("sentenceEnds")
	whWords              = lexList("whWords")
	politeOpeners        = lexList("politeOpeners")
	politeAbility        = lexList("politeAbility")
	labelDashes          = lexList("labelDashes")
	labelNegators        = lexSet("labelNegators")
	checkboxMarks        = lexList("checkboxMarks")
	asideMarks           = lexList("asideMarks")
	inPlaceWords         = lexList("inPlaceWords")
	makeSureWords        = lexList("makeSureWords")
	objectPronouns       = lexList("objectPronouns")
	quoteMarks           = lexList("quoteMarks")
	nounFollowers        = lexList("nounFollowers")
	relativePronouns     = lexList("relativePronouns")
	openerMarks          = lexList("openerMarks")
	negatingVerbs        = lexList("negatingVerbs")
	existentials         = lexList("existentials")
	negationFillers      = lexList("negationFillers")
	infinitiveLeads      = lexList("infinitiveLeads")
	forgetVerbs          = lexList("forgetVerbs")
	noWords              = lexList("noWords")
	disjunctions         = lexList("disjunctions")
	needWords            = lexList("needWords")
	otherWords           = lexList("otherWords")
	insteadWords         = lexList("insteadWords")
	insteadLinks         = lexList("insteadLinks")
	insteadAdverbs       = lexList("insteadAdverbs")
	nothingExceptions    = lexList("nothingExceptions")
	npBreakMarks         = lexList("npBreakMarks")
	outputNouns          = lexList("outputNouns")
	inlineWords          = lexList("inlineWords")
	replyDets            = lexList("replyDets")
	codeBlockNouns       = lexList("codeBlockNouns")
	textFileNouns        = lexList("textFileNouns")
	inlineLeadMarks      = lexList("inlineLeadMarks")
	fullnessWords        = lexList("fullnessWords")
	inlineQuantifiers    = lexList("inlineQuantifiers")
	fileListJoiners      = lexList("fileListJoiners")
	fileListMarks        = lexList("fileListMarks")
	recipientPreps       = lexList("recipientPreps")
	addressees           = lexList("addressees")
	topicPreps           = lexList("topicPreps")
	sourcePreps          = lexList("sourcePreps")
	npPrepSkips          = lexList("npPrepSkips")
	passiveAux           = lexList("passiveAux")
	sourceLinks          = lexList("sourceLinks")
	destPreps            = lexList("destPreps")
	destOutputPreps      = lexList("destOutputPreps")
	resultPreps          = lexList("resultPreps")
	destModifiers        = lexList("destModifiers")
	agentSuffixes        = lexList("agentSuffixes")
	formatWords          = lexList("formatWords")
	makingParticles      = lexList("makingParticles")
	indefArticles        = lexList("indefArticles")
	locatedBe            = lexList("locatedBe")
	wordDocNouns         = lexList("wordDocNouns")
	downloadLinkNouns    = lexList("downloadLinkNouns")
	downloadLeads        = lexList("downloadLeads")
	attachmentNouns      = lexList("attachmentNouns")
	pluralPronouns       = lexList("pluralPronouns")
	pairPronouns         = lexList("pairPronouns")
	pointerDets          = lexList("pointerDets")
	pluralPointers       = lexList("pluralPointers")
	pointedNouns         = lexList("pointedNouns")
	pointedPlurals       = lexList("pointedPlurals")
	productNouns         = lexList("productNouns")
	repoNouns            = lexList("repoNouns")
	pullWords            = lexList("pullWords")
	requestNouns         = lexList("requestNouns")
	governorStops        = lexList("governorStops")
	nonDeliverables      = lexList("nonDeliverables")
	qualifierNegators    = lexList("qualifierNegators")
	deliverableWords     = lexList("deliverableWords")
	denialLeads          = lexMap("denialLeads")
	negativeTestNouns    = lexList("negativeTestNouns")
	topicWh              = lexList("topicWh")
	topicIntroPreps      = lexList("topicIntroPreps")
	comparisonLeads      = lexList("comparisonLeads")
	asAsIdioms           = lexList("asAsIdioms")
	comparisonAdjectives = lexSet("comparisonAdjectives")
	comparisonAuxes      = lexList("comparisonAuxes")
	passiveInfinitives   = lexList("passiveInfinitives")
	agentPreps           = lexList("agentPreps")
	deadlineWords        = lexSet("deadlineWords")
	inputLabels          = lexList("inputLabels")
	modelWords           = lexSet("modelWords")
	featureVerbs         = lexSet("featureVerbs")
	modelHeads           = lexSet("modelHeads")
	modelLinks           = lexList("modelLinks")
	modelGovernors       = lexList("modelGovernors")
	softwareNouns        = lexSet("softwareNouns")
	softwareCausatives   = lexSet("softwareCausatives")
	productModals        = lexList("productModals")
	modelPreps           = lexSet("modelPreps")
	modelVerbs           = lexSet("modelVerbs")
)

// Spans: how many tokens (or words) a rule looks across.
const (
	compoundSpan    = 3  // plain words that may open a clause before the lexicon word ending their compound: compoundHead
	subjectCompound = 2  // plain words between a subjectDets word and its noun: opensClause
	placeSpan       = 4  // tokens between the two locative prepositions of a place ("in the shared repo under NAME")
	labelSpan       = 3  // words of a short label line: labelLine
	parenSpan       = 8  // tokens back to the "(" a participle after a comma stands inside: describesThing
	embeddedSpan    = 12 // tokens back to the word opening an embedded question: embeddedQuestion
	productSpan     = 4  // tokens after an output or transform verb to the article of what it makes: makesUnnamed
	editSpan        = 8  // tokens between an item's opening verb and the files it changes: itemEdit
	leadSpan        = 12 // tokens of a leading phrase before a question's wh-word: leadQuestion
	venueSpan       = 5  // tokens before an inline marker to the "as"/"into" of a file destination: deliveryVenue
	recipientSpan   = 6  // tokens after a send verb to its recipient preposition: toThirdParty
	appositionSpan  = 4  // words of the noun phrase a parenthesised file names ("as a bar chart (spend.png)")
	wantSpan        = 8  // tokens after a want verb to the participle saying its object is changed: wantedChanged
	resumeSpan      = 16 // tokens back before a parenthesis to the verb that governs again after it: resumedVerb
	npPrepSpan      = 3  // modifiers between an input preposition and the file heading its noun phrase: npPrep
	subjectSpan     = 8  // tokens after a delivery marker to the verb whose subject holds it: inStatedSubject
	sourceSpan      = 6  // tokens before a file to the source preposition of its noun phrase: inSource
	passiveSpan     = 7  // tokens after a file to its passive verb: passiveVerb
	destHeadSpan    = 2  // words after a binary format in a destination up to its head noun: destFormat
	topicSpan       = 12 // tokens back from a file to a topicWh word: topicClause
	comparisonSpan  = 3  // words back from "as" to a comparisonLeads word: comparisonAt
	agentSpan       = 8  // tokens after a passive delivery participle to its agent preposition: agentAt
)

// Suffixes and marks, matched inside words and lines.
const (
	adverbSuffix  = "ly"      // a word that is no verb in a verb's place: unknownVerbAt
	presentSuffix = "s"       // present tense of a verb no lexicon lists ("lives"); twice ("address") none: placeStated
	pluralSuffix  = "s"       // a plural noun; a word ending in it twice is none: plural
	pastSuffix    = "ed"      // a regular past form of a verb no lexicon lists: pastAfterSubject
	bulletMarks   = "-*+•‣◦▪" // open a bullet item ("- a.md", "• a.md"): stripBullet
	// labelStem, in a line ending in ":" or in labelBelow, makes the line a Deliverables label:
	// labelLine, after trimming labelTrailers; emphasisMarks around a label and blanks after it.
	labelStem      = "deliverable"
	labelBelow     = " below"
	labelTrailers  = "*_ ."
	emphasisMarks  = "*_"
	blanks         = " \t"
	wideColon      = "："           // the full-width colon of CJK text ("成果物：a.pdf"), a label's colon too
	runMarks       = `_-./~+\:'’`  // besides letters, digits and marks, belong to a word or path run: isRunRune
	nameQuotes     = "\"`“"        // open a quoted file name that may contain blanks: appendTokens
	nameOpeners    = "\"`“'‘「『【(（" // before a run, may open a file name written in CJK: cjkPieces
	apostrophes    = "'’"          // around a run are quotes: splitRun
	runTrailers    = ".:'’"        // after a run are punctuation: classify
	wordMarks      = "'’-"         // may stand inside a word: classify
	pathSeparators = `/\`          // separate a path's directories: IsFile, pathParts
	numberClosers  = ".)"          // end a numbered bullet ("1.", "2)"): stripBullet
	nameMarks      = ".-_~+'’"     // alone do not make a file's name ("..md" and "-.md" are not files): IsFile
)

//go:embed lexicon_en.txt
var lexiconText string

// lexicon holds lexicon_en.txt's lists by name.
var lexicon = mustParseLexicon("lexicon_en.txt", lexiconText)

// parseLexicon reads the table: "name: words" lines, continued by indented lines, "#" comments and
// blank lines. Words are split at blanks, or at "|" when the line has one ("output files | output").
func parseLexicon(file, text string) (map[string][]string, error) {
	lists := map[string][]string{}
	name := ""
	for n, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "" || strings.HasPrefix(trimmed, "#"):
			name = ""
		case line[0] == ' ' || line[0] == '\t':
			if name == "" {
				return nil, fmt.Errorf("%s:%d: indented line %q continues no list", file, n+1, trimmed)
			}
			lists[name] = append(lists[name], lexWords(trimmed)...)
		default:
			k, v, ok := strings.Cut(line, ":")
			if !ok || k == "" || strings.ContainsAny(k, " \t|") {
				return nil, fmt.Errorf("%s:%d: %q is not a \"name: words\" line", file, n+1, line)
			}
			if _, dup := lists[k]; dup {
				return nil, fmt.Errorf("%s:%d: list %q is defined twice", file, n+1, k)
			}
			if lists[k] = lexWords(v); len(lists[k]) == 0 {
				return nil, fmt.Errorf("%s:%d: list %q has no words", file, n+1, k)
			}
			name = k
		}
	}
	return lists, nil
}

func lexWords(s string) []string {
	if !strings.Contains(s, "|") {
		return strings.Fields(s)
	}
	var out []string
	for w := range strings.SplitSeq(s, "|") {
		if w = strings.TrimSpace(w); w != "" {
			out = append(out, w)
		}
	}
	return out
}

func mustParseLexicon(file, text string) map[string][]string {
	lists, err := parseLexicon(file, text)
	if err != nil {
		panic("reqdetect: " + err.Error())
	}
	return lists
}

// lexList returns the list called name in lexicon_en.txt, in its order; it panics if there is none.
func lexList(name string) []string {
	words, ok := lexicon[name]
	if !ok {
		panic(fmt.Sprintf("reqdetect: lexicon_en.txt has no list %q; add a %q line", name, name+": words"))
	}
	return slices.Clip(slices.Clone(words))
}

// lexSet returns the list called name as a set.
func lexSet(name string) map[string]bool {
	m := map[string]bool{}
	for _, w := range lexList(name) {
		m[w] = true
	}
	return m
}

// lexMap returns the list called name, whose words are "key=value,value" or "key,key=value,value", as a map from
// each key.
func lexMap(name string) map[string][]string {
	m := map[string][]string{}
	for _, w := range lexList(name) {
		ks, v, ok := strings.Cut(w, "=")
		if !ok {
			panic(fmt.Sprintf("reqdetect: lexicon_en.txt: list %q: %q is not key=value,value", name, w))
		}
		for k := range strings.SplitSeq(ks, ",") {
			m[k] = strings.Split(v, ",")
		}
	}
	return m
}
