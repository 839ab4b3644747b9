package reqdetect

import (
	"strings"
)

// Lexicon

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
	add := func(c verbClass, words string) {
		for _, w := range strings.Fields(words) {
			m[w] = c
		}
	}
	add(verbOutput, "write create produce generate save output emit dump store make build draft prepare "+
		"compose put place provide give package bundle author assemble persist "+
		"plot draw touch record jot stash stow log")
	add(verbExport, "export")
	add(verbAttach, "attach upload")
	add(verbSend, "send share email e-mail deliver publish forward hand return ship")
	add(verbTransform, "convert transform turn translate reformat transcode render compile copy extract "+
		"encode decode compress zip archive split serialize")
	add(verbInput, "read summarize summarise review analyze analyse compare parse load open inspect check "+
		"examine use process import ingest scan study audit validate verify evaluate assess count search "+
		"grep find consult view skim download fetch run execute test interpret classify consider look diff "+
		"cite quote see")
	add(verbReply, "reply respond answer tell say explain describe discuss show list paste print report")
	add(verbEdit, "update edit modify fix refactor patch change tweak adjust correct improve rename delete "+
		"remove rewrite revise append insert replace clean lint add implement bump migrate amend "+
		"restructure reorganize reorganise optimize optimise document annotate debug repair resolve "+
		"overwrite truncate move extend rework polish tidy refine proofread")
	add(verbRepo, "commit push merge rebase")
	add(verbProbe, "attempt try")
	add(verbPseudo, "deliverable")
	add(verbWant, "need want require")
	return m
}()

// namingVerbs give their object the name after it: namedBy.
var namingVerbs = newSet("name call title label")

// politeWords may stand before a verb in a verb's place: namedBy.
var politeWords = []string{"please", "kindly"}

// givingVerbs take a recipient before their object: receives.
var givingVerbs = newSet("give hand")

// sameParticiples are lexicon verbs whose past participle is their base form: afterAux.
var sameParticiples = newSet("put read output cast")

// perfectClitic ends a subject contracted with a perfect auxiliary: afterAux.
const perfectClitic = "'ve"

var irregularVerbs = map[string]string{
	"wrote": "write", "written": "write", "made": "make", "built": "build", "sent": "send",
	"gave": "give", "given": "give", "drew": "draw", "drawn": "draw", "ran": "run", "found": "find",
	"told": "tell", "said": "say", "shown": "show", "rewrote": "rewrite", "rewritten": "rewrite",
	"saw": "see", "seen": "see",
}

// lemmaOf returns the lexicon verb that w is a form of, or "".
func lemmaOf(w string) string {
	step()
	if _, ok := verbClasses[w]; ok {
		return w
	}
	if b, ok := irregularVerbs[w]; ok {
		return b
	}
	known := func(b string) bool { _, ok := verbClasses[b]; return ok }
	for _, s := range inflections {
		if b, ok := strings.CutSuffix(w, s.suffix); ok && known(b+s.restore) {
			return b + s.restore
		}
	}
	for _, suf := range doubledInflections { // zipped, putting
		if b, ok := strings.CutSuffix(w, suf); ok && len(b) >= 2 && b[len(b)-1] == b[len(b)-2] && known(b[:len(b)-1]) {
			return b[:len(b)-1]
		}
	}
	return ""
}

// inflection is one regular verb ending: a word ending in suffix is a form of
// the lexicon verb spelled with suffix replaced by restore.
type inflection struct{ suffix, restore string }

// inflections are the regular endings lemmaOf strips, tried in this order: "copies" and "tried" (y
// restored), "fixes", "writes", "attached", "created", "attaching", "creating" (e restored).
var inflections = []inflection{
	{"ies", "y"}, {"ied", "y"}, {"es", ""}, {"s", ""}, {"ed", ""}, {"d", ""}, {"ing", ""}, {"ing", "e"},
}

// doubledInflections are the endings after which lemmaOf also undoes a doubled final consonant.
var doubledInflections = []string{"ed", "ing"}

func newSet(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

var (
	fileExts = newSet("txt md markdown rst adoc pdf csv tsv json jsonl ndjson xml yaml yml toml ini cfg " +
		"conf log html htm xhtml css scss sass less js mjs cjs ts tsx jsx vue svelte py ipynb rb go rs java kt " +
		"swift c h cc cpp hpp cs php pl sh bash zsh ps1 bat sql db sqlite parquet avro xlsx xls xlsm ods docx " +
		"doc odt rtf pptx ppt odp png jpg jpeg gif svg webp bmp tif tiff ico heic mp3 mp4 wav ogg webm mov " +
		"m4a flac zip tar gz tgz bz2 xz 7z rar jar whl deb rpm dmg iso apk epub ics vcf eml tex bib patch diff " +
		"proto graphql gql lock mod sum tf hcl gradle properties plist wasm bin dat pkl onnx npy npz pem crt " +
		"env dockerfile sha256 sha512 sha1 md5")
	notFiles = newSet("node.js vue.js next.js nuxt.js react.js express.js d3.js three.js chart.js " +
		"angular.js ember.js backbone.js nest.js p5.js alpine.js solid.js ext.js deno.js moment.js knockout.js " +
		"pixi.js docs.rs bun.sh")
	abbrevs    = newSet("e.g i.e etc vs cf approx incl eg ie mr mrs ms dr fig al")
	labelWords = []string{"deliverables", "deliverable", "output files", "output file", "outputs", "output",
		"artifacts", "artifact"} // languages.go adds the labels of the other languages (rule 9)
	determiners = newSet("a an the this these those my your our their its his her any some each " +
		"every no another")
	// inputDets mark a noun as something that already exists: an input.
	inputDets = newSet("this these those attached uploaded provided given existing original source " +
		"input above following current old your my their")
	functionWords = newSet("to and or but then also please i you we me us it them that which who should " +
		"must can could will would may might shall do does did don't not never be is are was were been being " +
		"so first next finally just only now of for with into as in on at from by about via using than " +
		"instead without if when once after before while here there what how why where")
	negators = newSet("not never don't dont doesn't didn't mustn't shouldn't won't can't cannot " +
		"needn't avoid refrain skip omit nobody")
	openers = newSet("and or nor but then also plus that which who while after before once when " +
		"without instead rather afterwards finally next additionally so")
	fillers = newSet("then also please finally next afterwards first just only additionally " +
		"optionally separately of than do does not don't dont never must should can will to and always " +
		"carefully immediately")
	prepFillers = newSet("and or plus both either file files new separate single " +
		"two three four several following all")
	// nounPreps are prepositions after which a lexicon word is a noun unless it is a gerund.
	nounPreps = newSet("of on about for in from with regarding into at by via per")
	// nounLeads open a noun phrase as a determiner would, but only with a plain word between them
	// and the lexicon word: nounPosition. compoundSpan is how many plain words may open a clause
	// before a lexicon word that ends their noun compound: compoundHead.
	compoundSpan = 3
	nounLeads    = []string{"only", "all", "both", "many", "few", "several", "more", "most", "other", "such"}
	// causatives take a bare verb after them ("make it", "try open").
	causatives = newSet("make try attempt")
	// Rule 8: source files, source trees, code nouns, builds.
	sourceExts = newSet("ts tsx js jsx mjs cjs vue svelte py rb go rs java kt swift c h cc cpp hpp cs " +
		"php pl scala dart lua ex exs erl hs ml clj")
	sourceDirs = newSet("src lib pkg internal cmd app apps components component pages hooks test tests " +
		"spec specs __tests__ source sources packages server client")
	codeNouns = newSet("component components function functions class classes module modules hook " +
		"hooks handler handlers endpoint endpoints method methods interface interfaces struct structs " +
		"controller controllers middleware route routes test tests")
	buildVerbs   = newSet("build rebuild rebuilt compile recompile bundle transpile transpiled minify minified")
	projectNouns = newSet("project projects app apps application site website package packages " +
		"library repo repository code codebase binary binaries frontend backend bundle assets extension " +
		"plugin docs documentation")
	buildExts = newSet("js mjs cjs css map wasm jar war whl exe dll so o class")
	buildDirs = newSet("dist build out target bin public .next _site")
	// digestVerbs are input verbs that write something new about their input: "summarize the bug
	// reports in a PDF".
	digestVerbs = newSet("summarize summarise analyze analyse compare evaluate assess audit classify")
	inputPreps  = newSet("of from between against versus vs using about on for regarding like " +
		"comparing than with")
	// questionWords open a question that asks about something rather than for something.
	questionWords = []string{"who", "what", "when", "where", "why", "how", "which", "whose", "is", "are",
		"was", "were", "does", "do", "did", "has", "have", "had", "isn't", "aren't", "doesn't", "didn't",
		"should", "shall", "what's", "where's", "how's", "who's", "what’s", "where’s", "how’s", "who’s"}
	beForms = []string{"is", "are", "should", "must", "will", "shall", "would", "could", "can", "goes", "go"}
	// outputSubjects before a beForms word are the subject of a statement of what the output is:
	// what follows names an output (markVerbs).
	outputSubjects = []string{"output", "outputs", "format", "formats"}
	// adverbSuffix marks a word that is no verb in a verb's place: unknownVerbAt.
	adverbSuffix  = "ly"
	replyNouns    = []string{"reply", "chat", "response", "answer", "message", "conversation", "thread", "comment", "body", "channel"}
	tempWords     = newSet("temp temporary tmp scratch intermediate throwaway throw-away")
	fileNouns     = newSet("file files attachment attachments artifact artifacts")
	fileModifiers = newSet("permission permissions system systems path paths name names format formats " +
		"size sizes type types handle handles descriptor descriptors extension extensions structure tree trees " +
		"manager managers picker access mode modes owner owners ownership server servers storage lock locks " +
		"watcher watchers browser dialog header headers io i/o sharing share sync count limit limits api apis " +
		"operations ops hierarchy layout naming encoding locking handling level based contents content")
	docNouns = newSet("file files document documents doc docs report reports export exports version " +
		"copy attachment output sheet spreadsheet workbook image chart graph plot diagram summary " +
		"invoice presentation deck slides archive download dump snapshot backup format form")
)

// formatDocNouns are document nouns that a format word before them makes a file: formatDocument.
var formatDocNouns = newSet("export exports dump dumps backup backups snapshot snapshots document " +
	"documents archive archives")

// formats maps format words to whether they are inherently a file (strong: "a PDF") or only a text
// format (weak: JSON, CSV — a file only as a destination or with a file noun).
var formats = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields("pdf xlsx xls docx pptx odt ods png jpg jpeg gif webp zip tarball archive " +
		"spreadsheet workbook excel powerpoint word image epub mp3 mp4 wav parquet avro orc feather sqlite odp") {
		m[w] = true
	}
	for _, w := range strings.Fields("csv tsv json jsonl ndjson yaml yml xml html markdown md txt toml svg " +
		"ics sql latex tex") {
		m[w] = false
	}
	return m
}()

// formatAliases map an extension or format word to the one spelling
// sameFormat compares: "markdown" is "md", "yml" is "yaml".
var formatAliases = map[string]string{"markdown": "md", "yml": "yaml", "htm": "html", "jpeg": "jpg",
	"tif": "tiff", "tgz": "gz"}

// outputPreps govern an output: the file or format after them is what the phrase produces.
var outputPreps = newSet("into as called named entitled titled")

// locativePreps say where something is.
var locativePreps = newSet("in inside at on within under")

// findingVerbs after the addressee and a modal present what they find as already there: findsThere.
var (
	findingVerbs   = []string{"find", "see"}
	findingClitics = []string{"you'll", "you’ll"}
	findingAux     = []string{"will", "can", "should", "'ll"}
)

// placeNames give the name a thing has in a place a statement names: locatedIn.
var placeNames = []string{"as"}

// presentSuffix ends the present-tense form of a verb no lexicon lists ("lives", "sits"); a word
// ending in it twice ("address") is none: placeStated.
const presentSuffix = "s"

// pluralSuffix ends a plural noun; a word ending in it twice is none: plural.
const pluralSuffix = "s"

// placeSpan is how many tokens a place named in two steps may hold between its two locative
// prepositions ("is in the shared repo under NAME"): locatedIn.
const placeSpan = 4

// indicativeBe are be-forms that state a fact; "be" after a modal ("should be
// in report.md") asks for something and is not among them.
var indicativeBe = newSet("is are was were 's")

// statementAdverbs may stand between a subject or be-form and the verb of a statement.
var statementAdverbs = newSet("already just recently previously earlier also still all both once")

// subjectPronouns open a statement when a past verb follows them.
var subjectPronouns = newSet("i we you they he she someone somebody everyone i've we've you've they've " +
	"i'd we'd you'd they'd i'll we'll you'll they'll")

// pastSubjects make a verb whose past form is its base form a past statement right after them;
// "you" is not among them, nor are the contracted future and conditional forms: pastAfterPronoun.
// askAux before the pronoun make it a request.
var (
	pastSubjects = newSet("i we they he she someone somebody everyone")
	askAux       = []string{"can", "could", "would", "will", "shall", "should", "may", "might", "let", "please"}
)

// Statements in the present progressive or the future and present passives of delivery:
// progressive, future, presentPassive. statingClitics and futureClitics are a subject other than
// the addressee contracted with "am/are/is" or "will"; progressiveBe and presentBe are the be-forms
// of those statements.
var (
	statingClitics = newSet("i'm we're they're he's she's i’m we’re they’re he’s she’s")
	futureClitics  = newSet("i'll we'll they'll he'll she'll i’ll we’ll they’ll he’ll she’ll")
	progressiveBe  = []string{"am", "are", "is"}
	presentBe      = []string{"is", "are", "'s"}
)

// statingPassiveAux are the indicative auxiliaries of a present passive that states what happens to
// a thing ("The metrics are exported to …", "the log gets written to app.log"); passivePronouns are
// the pronoun subjects of such a statement: presentPassive, passiveSubject.
var (
	statingPassiveAux = []string{"is", "are", "'s", "gets", "get"}
	passivePronouns   = []string{"it", "they", "this", "that", "these", "those", "everything", "each"}
)

// wantWords after "would" or a "'d" clitic want their object: conditionalWant. recipients after an
// unlisted verb opening its clause make it ask to be given its object: benefactive.
var (
	wantWords  = []string{"like", "love", "prefer", "appreciate"}
	recipients = []string{"me", "us"}
)

// referentModifiers may stand between a pointer and its file noun in an edit of the file an item
// names ("edit the existing file", "update the same document"): editsReferent.
var referentModifiers = []string{"existing", "same", "original", "current"}

// isClitics end in "'s" but contract "is", "has" or "us", not a possessive: possessive.
var isClitics = newSet("it's that's there's here's what's who's where's when's how's let's he's she's " +
	"one's everyone's someone's nobody's everything's nothing's something's")

// existingMarks before a file that no verb governs say it already exists, so it is an input:
// existingAt. compareLinks after such a file make it one side of a comparison.
var (
	existingMarks = newSet("existing attached uploaded provided given original source input current")
	compareLinks  = []string{"vs", "vs.", "versus", "against"}
)

// motionVerbs before "in/into/to" and a file say where an output goes: goesTo.
var (
	motionVerbs = []string{"go", "goes", "belong", "belongs"}
	motionPreps = []string{"in", "into", "to", "inside"}
	// endVerbs before "up" and a motion preposition say where an output ends up: goesTo.
	endVerbs = []string{"end", "ends"}
)

// outputRoles after "as" and an article name the role of the file before them ("keep report.pdf as
// the only output"): declaredOutput. roleFillers may stand between.
var (
	outputRoles = []string{"output", "deliverable", "attachment", "result"}
	roleFillers = []string{"only", "final", "sole", "main", "single", "one"}
)

// formatLeadMarks before a binary format standing as its own clause make
// it the form of the request ("— PDF, one page", "Format: PDF"): bareFormat.
var formatLeadMarks = []string{"—", "–", ":", "-"}

// acceptWords after a be-form accept the file or format before them as the answer: acceptedFormat.
var (
	acceptWords = []string{"fine", "ok", "okay", "enough", "acceptable", "perfect", "great", "best", "preferred"}
	acceptBe    = []string{"is", "'s", "would", "will", "be", "works", "should"}
)

// exceptWords open an exception to a negation; "other than" and "apart from" do too: exceptionAt.
var exceptWords = []string{"except", "besides", "excepting"}

// inlinePreps open an inline marker before a reply noun: inlineLen.
var inlinePreps = []string{"in", "into"}

// listIncludes after a verb of a list lead, and particles, still leave the list its object ("Your
// output should include:", "What I need back:"): asksForList.
var listIncludes = []string{"include", "includes", "contain", "contains", "cover", "covers", "consist", "be",
	"back", "over", "out", "up"}

// labelTails end a short label line whose first words modify them, and labelModifierStops are
// modifiers that make such a line name inputs instead: labelLine.
var (
	labelTails         = newSet("output outputs artifacts artifact deliverables deliverable")
	labelModifierStops = newSet("input inputs source sources reference existing attached provided sample " +
		"example current old no non")
	labelSpan = 3
)

// listPointers after an output or delivery verb on a line ending in ":" point at the list below it
// ("Create these:", "Write the following:", "the two files below:"): requestsList.
var listPointers = []string{"these", "those", "following", "below"}

// pastSuffix marks a regular past form of a verb no lexicon lists: pastAfterSubject.
const pastSuffix = "ed"

// thirdPersonSubjects make the present-tense verb after them a statement of
// what something does ("it writes a log to build.log"): describes.
var thirdPersonSubjects = newSet("it he she someone somebody everyone everybody nobody this")

// presentedClasses are the verb classes whose bare participle after "(", a file or a file and a
// comma describes a thing that already exists ("(exported to rotation.tsv, attached)",
// "headcount_plan.xlsx attached", "(shared in Drive)"): describesThing. Output verbs are not among
// them: "(saved as summary.md)" may say how a requested output is kept, unless a statement stands
// before the parenthesis (statedBefore).
var presentedClasses = map[verbClass]bool{verbAttach: true, verbSend: true, verbExport: true}

// parenSpan is how far back describesThing looks for the "(" that a
// participle after a comma stands inside.
const parenSpan = 8

// subordinators open a subordinate or embedded clause; a noun right after them is its subject:
// opensClause.
var subordinators = newSet("when whenever if once while after before until unless because since whether " +
	"why how where what which")

// howToWords before "to" and a verb make an embedded question: howTo.
var howToWords = []string{"how", "where", "when", "what", "which", "whether"}

// whetherWords open an embedded question wherever they stand; embeddedWh do so right after a reply
// verb and its recipient: embeddedQuestion, which looks back at most embeddedSpan tokens.
// clauseJoiners end the embedded clause, as punctuation does, and keep a gerund after them out of
// the object of a verb before them: discussedGerund.
var (
	whetherWords  = []string{"whether"}
	embeddedWh    = []string{"which", "how", "what", "why", "if", "where", "when"}
	embeddedSpan  = 12
	clauseJoiners = []string{"and", "but", "then", "so", "while", "after", "before", "once"}
	// alternativeMarks inside an embedded question list the alternatives it asks about:
	// embeddedQuestion does not stop at them before a gerund.
	alternativeMarks = []string{":", "—", "–"}
	// informWords after "let me/us" ask to be told, as a reply verb does: letKnow.
	informWords = []string{"know"}
)

// codeQuotes around a command make it the subject of the verb after them: quotedSubject.
var codeQuotes = []string{"`", `"`}

// ensureWords and a purposeLeads word before "that" make the clause after them what the user asks
// for, not a statement ("Make sure the script writes to out.json", "so that it saves …"): ensured.
var (
	ensureWords  = []string{"ensure", "ensures", "sure", "certain", "guarantee"}
	purposeLeads = []string{"so", "such"}
)

// possessives and determiners that open a noun subject; subjectCompound is how many plain words may
// stand between such a word and the noun: opensClause.
var subjectDets = newSet("the our my your their his her a an this that another some")

const subjectCompound = 2

// productSpan is how many tokens after an output or transform verb makesUnnamed looks for the
// indefinite article of the thing it makes ("turn this into a release overview").
const productSpan = 4

// perfectAux make the participle after them a statement; passiveBe the same for a past passive.
var (
	perfectAux = newSet("have has had 've")
	passiveBe  = newSet("was were been")
)

// anaphorHeads are nouns that, after "the", name a file made or edited earlier in the item ("the
// result", "the corrected one", "the revised copy"); anaphorPlurals are their plurals.
var (
	anaphorHeads   = newSet("one ones copy copies version versions result results edition draft")
	anaphorPlurals = newSet("ones copies versions results")
)

// storagePreps say where a product of the work is kept ("keep the result in
// backlog.csv"), and productDets open that product's noun phrase: storedIn.
var (
	storagePreps   = []string{"in", "inside", "within"}
	productDets    = []string{"the", "your", "a", "an"}
	storedPronouns = []string{"it", "them"}
)

// makingVerbs, in their base form with a pronoun object, make the file the pronoun refers to ("if
// not, create it"): makes. "make" is not among them: "make it shorter" edits.
var makingVerbs = newSet("create generate write produce")

// showVerbs present their object itself, so with an inline marker a file they refer back to is
// written in the reply ("show it to me inline", "paste them in the chat"): shows.
var showVerbs = newSet("show paste print")

// replyPlaces, after a verb of showing with a pronoun object, say the reply is where it goes, as an
// inline marker would ("paste it here"): resolvePronouns.
var replyPlaces = []string{"here"}

// keptNouns name a record kept of the work: productNP.
var keptNouns = newSet("record records log logs note notes changelog changelogs journal diary tally")

// sameDocHeads are the anaphorHeads that name the same document in a new state; only they reach a
// file reshaped by a transform verb with no destination: sameDocAt.
var sameDocHeads = newSet("copy copies version versions edition draft one ones")

// keepingTransforms are transform verbs whose result is the same document in a new shape, so their
// participle names the file they reshaped; other transforms make a new product: antecedent.
var keepingTransforms = newSet("reformat")

// editParticles, after a lexicon verb, make it an edit verb: a phrasal verb of touching up what
// exists ("touch up README.md"; "touch out.txt" creates the file): markVerbs.
var editParticles = map[string][]string{"touch": {"up"}}

// resultLeads open a clause saying what a change achieves ("refresh styles.css so buttons use the
// new palette"): resultClause. editSpan is how many tokens may stand between the verb opening a
// Deliverables item and the file it changes, or span the run of files it opens: itemEdit.
var (
	resultLeads = []string{"so"}
	editSpan    = 8
)

// adjectiveSuffixes end words that, opening a Deliverables item before a file, modify it rather
// than act on it: modifierWord.
var adjectiveSuffixes = []string{"al", "ive", "able", "ible", "ful", "ous", "ic", "less", "ish", "ent", "ant",
	"ary", "ory"}

// returnParticles after a delivery verb return a file to the user who gave it: such a pronoun
// reaches a file the text presents as already there (readPhrase sets phrase.returns; antecedent).
var returnParticles = []string{"back"}

// verbParticles may follow the object of a phrasal verb: kindAt.
var verbParticles = []string{"back", "over", "out", "along", "across"}

// kindNouns name a kind of file, with the extensions of that kind: after "the" such a noun refers
// back to a file of its kind made or edited earlier (kindAt, ofKind).
var kindNouns = map[string][]string{
	"spreadsheet":  {"xlsx", "xls", "xlsm", "ods", "csv", "tsv"},
	"workbook":     {"xlsx", "xls", "xlsm", "ods"},
	"sheet":        {"xlsx", "xls", "xlsm", "ods", "csv", "tsv"},
	"deck":         {"pptx", "ppt", "odp", "pdf"},
	"presentation": {"pptx", "ppt", "odp", "pdf"},
	"slides":       {"pptx", "ppt", "odp", "pdf"},
	"document":     {"docx", "doc", "odt", "rtf", "pdf", "md", "txt"},
	"doc":          {"docx", "doc", "odt", "rtf", "md", "txt"},
	"letter":       {"docx", "doc", "odt", "pdf", "md", "txt"},
	"memo":         {"docx", "doc", "odt", "pdf", "md", "txt"},
	"pdf":          {"pdf"},
	"stylesheet":   {"css", "scss", "sass", "less"},
	"page":         {"html", "htm", "md"},
	"image":        {"png", "jpg", "jpeg", "gif", "svg", "webp", "bmp", "tif", "tiff", "heic"},
	"picture":      {"png", "jpg", "jpeg", "gif", "webp", "heic"},
	"photo":        {"png", "jpg", "jpeg", "webp", "heic"},
	"screenshot":   {"png", "jpg", "jpeg", "webp"},
	"chart":        {"png", "svg", "jpg", "jpeg", "pdf", "webp"},
	"diagram":      {"png", "svg", "jpg", "jpeg", "pdf"},
	"logo":         {"png", "svg", "jpg", "jpeg", "webp"},
	"clip":         {"mp4", "mov", "webm", "mp3", "wav", "m4a"},
	"video":        {"mp4", "mov", "webm"},
	"recording":    {"mp3", "mp4", "wav", "m4a", "ogg", "webm"},
	"archive":      {"zip", "tar", "gz", "tgz", "bz2", "xz", "7z", "rar"},
	"transcript":   {"txt", "md", "docx", "vtt", "srt"},
	"notebook":     {"ipynb"},
	"config":       {"yaml", "yml", "json", "toml", "ini", "cfg", "conf", "env"},
}

// madeModifiers mark a noun phrase after "the" as the product of earlier work
// ("the new version", "the final copy"), besides any participle.
var madeModifiers = newSet("new final latest resulting finished revised updated corrected fixed edited " +
	"cleaned patched modified improved")

// clauseBreaks end a clause inside a phrase: a negation does not reach across them ("Export the
// totals as totals.csv (no PDF needed)", "Write report.md — no need to attach anything else").
var clauseBreaks = newSet("( ) — – ; : - --")

// Call-site lists: the words and marks one rule matches at one position.

// Stage 1 and 2 (tokens.go, lines.go): sentences, questions, bullets.
var (
	// sentenceEnds end a sentence in splitSentences (a "." after an abbreviation excepted).
	sentenceEnds = []string{".", "!", "?", "…", "。", "！", "？"}
	// whWords open the main clause of a question after a leading phrase and a comma, within leadSpan
	// tokens of its start: leadQuestion.
	whWords  = []string{"who", "what", "when", "where", "why", "how", "which", "whose"}
	leadSpan = 12
	// politeOpeners may open a question that is a polite request: politeAsk.
	politeOpeners = []string{"is", "are", "do", "does", "would", "could", "will"}
	// politeAbility come before "to" in a polite request: politeAsk.
	politeAbility = []string{"possible", "able", "way"}
	// labelDashes after a label word stand for its colon: labelLine.
	labelDashes = []string{"—", "–", "-"}
	// labelNegators, besides negators, make a Deliverables label a denial: labelLine.
	labelNegators = newSet("no non")
	// checkboxMarks are task-list boxes stripped after a bullet ("- [x] report.md"): stripBullet tries
	// them in this order.
	checkboxMarks = []string{"[ ]", "[x]", "[X]"}
	// bulletMarks are the runes that open a bullet item ("- a.md", "• a.md"): stripBullet.
	bulletMarks = "-*+•‣◦▪"
	// labelStem, in a line ending in ":" or in labelBelow, makes the line a Deliverables label:
	// labelLine, after trimming labelTrailers.
	labelStem     = "deliverable"
	labelBelow    = " below"
	labelTrailers = "*_ ."
	// emphasisMarks are the markdown emphasis around a label ("**Deliverables:**") and blanks the
	// spaces after it: labelLine.
	emphasisMarks = "*_"
	blanks        = " \t"
	// asideMarks open or close an aside, or a clause: a foreign verb governs no file across one
	// (languages.go: governing).
	asideMarks = []string{"(", ")", ";", "；", "（", "）"}
	// wideColon is the full-width colon of CJK text ("成果物：a.pdf"), a label's colon too: labelLine.
	wideColon = "："
	// runMarks, besides letters, digits and marks, belong to a word or path run: isRunRune.
	runMarks = `_-./~+\:'’`
	// nameQuotes open a quoted file name that may contain blanks: tokenize.
	nameQuotes = "\"`“"
	// apostrophes around a run are quotes (splitRun), runTrailers after it are punctuation, and
	// wordMarks may stand inside a word: classify.
	apostrophes = "'’"
	runTrailers = ".:'’"
	wordMarks   = "'’-"
	// pathSeparators separate a path's directories: IsFile, pathParts.
	pathSeparators = `/\`
	// numberClosers end a numbered bullet ("1.", "2)"): stripBullet.
	numberClosers = ".)"
	// nameMarks alone do not make a file's name ("..md" and "-.md" are not files): IsFile.
	nameMarks = ".-_~+'’"
)

// Stage 3 (phrases.go): verbs, phrase splits, negation, inline markers.
var (
	// inPlaceWords follow "in" to say a file is edited where it is: analyze sets inPlace.
	inPlaceWords = []string{"place", "situ"}
	// makeSureWords after "make" make it no output verb ("make sure", "make certain"): markVerbs.
	makeSureWords = []string{"sure", "certain"}
	// objectPronouns start the object of a verb (objectFollows), so the lexicon word before them is a
	// verb ("for each file write it").
	objectPronouns = []string{"it", "them", "me", "us", "him", "her"}
	// quoteMarks after a lexicon word do not show it to be a noun (nounFollows): a quote may open the
	// verb's object.
	quoteMarks = []string{`"`, "`", "'", "“", "‘"}
	// nounFollowers follow a noun rather than a verb (nounFollows): prepositions, coordinators,
	// be-forms and modals ("the bug reports in a PDF", "the code changes are …").
	nounFollowers = []string{"in", "as", "into", "of", "for", "from", "on", "about", "with", "and", "or",
		"are", "were", "is", "was", "should", "must", "will", "can", "need", "have", "has"}
	// relativePronouns open a relative phrase (splitPhrases sets rel), which inherits its antecedent
	// phrase's repository work.
	relativePronouns = []string{"that", "which", "who"}
	// openerMarks are the punctuation that may open a new phrase when a verb follows (isOpener; the
	// words are openers).
	openerMarks = []string{",", "(", ")", "—", "–", ":"}
	// negatingVerbs negate what follows them as a verb would ("avoid creating files", "skip the PDF"):
	// verbAhead counts them as verbs and negate negates their whole phrase.
	negatingVerbs = []string{"avoid", "refrain", "skip", "omit"}
	// existentials may open a negated clause after a comma: verbAhead skips them.
	existentials = []string{"there's", "there’s"}
	// negationFillers are skipped between a negator and the word it negates: nextContent.
	negationFillers = []string{"to", "be", "ever", "yet", "please", "also", "from", "just", "even", "you",
		"we", "i"}
	// infinitiveLeads are skipped between a negator and its verb only before "to"; "don't need a
	// PDF" negates the want itself: nextContent.
	infinitiveLeads = []string{"need", "needs", "have", "has"}
	// forgetVerbs turn a negation positive: negate.
	forgetVerbs = []string{"forget", "forgot", "fail", "omit", "neglect", "skip", "avoid", "hesitate"}
	// noWords negate a noun phrase or, before a file word, the phrase: negate.
	noWords = []string{"no", "zero"}
	// disjunctions open a verb phrase that a negation of the phrase before reaches: analyze.
	disjunctions = []string{"or", "nor"}
	// needWords after a no-word negate the whole phrase ("no need to attach"): negate.
	needWords = []string{"need", "needs"}
	// otherWords after a no-word negate only the noun phrase: negate.
	otherWords = []string{"other", "additional", "extra", "further", "more", "separate"}
	// insteadWords negate what follows: negate.
	insteadWords = []string{"without", "instead", "rather"}
	// insteadLinks join an instead-word to what it negates: negate skips them.
	insteadLinks = []string{"of", "than"}
	// nothingExceptions after "nothing" keep it from negating the phrase: negate.
	nothingExceptions = []string{"else", "more", "but", "except"}
	// npBreakMarks end a negated noun phrase (negateNP; so do "but" and a verb).
	npBreakMarks = []string{",", ";", ":", "(", ")", "—", "–"}
	// outputNouns, besides formats and fileNouns, name a kind of file output: isFiley.
	outputNouns = []string{"output", "outputs", "download", "downloads", "deliverable", "deliverables", "export", "exports"}
	// venueSpan is how many tokens before an inline marker deliveryVenue looks for the "as"/"into" of
	// a file destination ("as a CSV in this thread").
	venueSpan = 5
	// inlineWords are one-word inline markers: inlineLen, and coverInline skips them.
	inlineWords = []string{"inline", "in-line"}
	// replyDets may stand between "in" and a reply noun: inlineLen.
	replyDets = []string{"the", "your", "my", "this", "a", "our", "that"}
	// codeBlockNouns follow "code" in an inline marker ("in a code block"): inlineLen.
	codeBlockNouns = []string{"block", "blocks"}
	// textFileNouns after "as text" make it a file, not an inline marker ("as text files"): inlineLen.
	textFileNouns = []string{"file", "files"}
	// inlineLeadMarks are skipped between an inline marker and what it covers: coverInline.
	inlineLeadMarks = []string{",", "("}
	// fullnessWords after "in" say a file is given whole ("pasted in full in your reply"): beforeGiven
	// skips them with the participle before them.
	fullnessWords = []string{"full", "entirety"}
	// inlineQuantifiers gather the run of files before an inline marker: coverInline.
	inlineQuantifiers = []string{"both", "all", "each"}
	// fileListJoiners and fileListMarks join a run of file names that one inline marker covers
	// ("index.html and styles.css inline", "`a.md`, `b.md` inline"): coverInline.
	fileListJoiners = []string{"and", "or", "both", "plus"}
	fileListMarks   = []string{",", "&", "`", `"`, "*"}
)

// Stage 4 (roles.go): passives, destinations, markers, pronouns, repository
// work, qualifiers and denials.
var (
	// recipientPreps open the recipient or the venue of a send verb, looked for within
	// recipientSpan tokens of the verb; addressees, like recipients, name the user: toThirdParty.
	recipientPreps = []string{"to", "with", "on"}
	recipientSpan  = 6
	addressees     = []string{"you", "yourself", "myself", "ourselves"}
	// topicPreps before a pronoun make it the topic of a message, not the object a verb delivers or
	// forbids ("do not email the client about it"): readPhrase.
	topicPreps = []string{"about", "regarding", "concerning"}
	// appositionSpan is how many words the noun phrase before a parenthesised file may have for the
	// file to name it ("as a bar chart (spend.png)"): appositionPrep.
	appositionSpan = 4
	// wantSpan is how many tokens after a want verb wantedChanged looks for the participle that says
	// its object is changed.
	wantSpan = 8
	// sourcePreps before the noun phrase a parenthesised file names make the file a source ("from the
	// screen recording (signup.mov)"): appositionPrep.
	sourcePreps = []string{"from", "using"}
	// resumeSpan is how far back before a parenthesis resumedVerb looks for the verb that governs
	// again after it closes.
	resumeSpan = 16
	// npPrepSpan is how many modifiers may stand between an input preposition and the file heading its
	// noun phrase ("against last quarter's baseline.csv"): npPrep.
	npPrepSpan = 3
	// npPrepSkips are the input prepositions npPrep does not reach across modifiers: "notes for
	// Monday's standup.md" may name the notes' file.
	npPrepSkips = []string{"for"}
	// subjectSpan is how many tokens after a delivery marker inStatedSubject looks for the verb whose
	// subject holds it.
	subjectSpan = 8
	// sourceSpan is how many tokens before a file inSource looks for the source preposition whose noun
	// phrase holds it ("from the notes in my_week.md").
	sourceSpan = 6
	// passiveSpan is how many tokens after a file passiveVerb looks for its passive verb.
	passiveSpan = 7
	// passiveAux before a verb after a file make that verb passive and the file its object
	// ("report.pdf must be attached", "dist/app.js gets built"): passiveVerb.
	passiveAux = []string{"be", "is", "are", "was", "were", "been", "being", "get", "gets", "got"}
	// sourceLinks between two files make the first the source of the second: isSourceOf.
	sourceLinks = []string{"to", "into", "as"}
	// destPreps open a destination: signalAt.
	destPreps = []string{"as", "into", "to", "in"}
	// destOutputPreps are the destPreps that open a destination after any governing verb but a
	// reading, reply or edit one; "to" and "in" have rules of their own: signalAt.
	destOutputPreps = []string{"as", "into"}
	// resultPreps are the destOutputPreps that name what the object becomes after an edit or
	// reading verb too, and make a text format before a head noun a document; "as" after a reading
	// verb says how the input is read: signalAt, destFormat.
	resultPreps = []string{"into"}
	// destModifiers, like determiners, may stand between a destination preposition and its format or
	// file noun ("as a separate file", "into a new spreadsheet", "into one PDF"): signalAt.
	destModifiers = []string{"new", "separate", "single", "standalone", "proper", "real", "one"}
	// agentSuffixes turn a lexicon verb into the noun of a tool that does its work: after a format
	// in a destination such a noun names code, not a file: toolNoun.
	agentSuffixes = []string{"ers", "ors", "er", "or"}
	// destHeadSpan is how many words may follow a binary format in a destination up to the head noun
	// it modifies ("into a PDF recipe booklet"): destFormat.
	destHeadSpan = 2
	// formatWords after a format make "in" a destination even without an article: signalAt.
	formatWords = []string{"format", "form"}
	// makingParticles after a plain word make it a phrasal verb of making: phrasalMake.
	makingParticles = []string{"up", "together"}
	// indefArticles mark a destination or counted format as new ("in a PDF", "a CSV of all users"):
	// signalAt, countedFormat, markerLen.
	indefArticles = []string{"a", "an"}
	// locatedBe before "in" say where something already is, so "in" is no destination: signalAt.
	locatedBe = []string{"is", "are", "was", "were", "be", "goes", "go"}
	// wordDocNouns after "Word" make it the document format, not the noun "word": formatHead.
	wordDocNouns = []string{"document", "documents", "doc", "docs", "file", "files"}
	// downloadLinkNouns after "download" make a delivery marker: markerLen.
	downloadLinkNouns = []string{"link", "links", "url"}
	// downloadLeads before "download" make a delivery marker: markerLen.
	downloadLeads = []string{"for", "to", "can", "could"}
	// attachmentNouns after "as (a/an)" make a delivery marker: markerLen.
	attachmentNouns = []string{"attachment", "attachments", "download"}
	// pluralPronouns refer back to several files ("attach them", "send both"): pronounAt.
	pluralPronouns = []string{"them", "both"}
	// pairPronouns refer back to two files, across sentences if need be: antecedent.
	pairPronouns = []string{"both"}
	// pointerDets refer back to a file with or without a noun: pronounAt.
	pointerDets = []string{"this", "that", "these", "those", "the"}
	// pluralPointers are the plural pointerDets: pronounAt.
	pluralPointers = []string{"these", "those"}
	// pointedNouns and pointedPlurals after a pointer refer back to one or several files ("the file",
	// "these attachments"): pronounAt.
	pointedNouns   = []string{"file", "attachment", "output", "document"}
	pointedPlurals = []string{"files", "attachments", "outputs", "documents"}
	// productNouns after a pointer name a product of the work, read as an anaphoric noun phrase: it
	// refers within its sentence, or from the sentence's start to the one before: pronounAt.
	productNouns = []string{"output", "outputs"}
	// repoNouns make a phrase repository work ("open a PR", "on the branch"): repoAt.
	repoNouns = []string{"pr", "prs", "mr", "branch", "branches", "commit", "commits"}
	// pullWords and requestNouns make a phrase repository work as a pair: repoAt.
	pullWords    = []string{"pull", "merge"}
	requestNouns = []string{"request", "requests"}
	// governorStops are the punctuation that prepSkip does not look across when it seeks the word
	// governing a file.
	governorStops = []string{";", ".", "!", "?"}
	// nonDeliverables are one-word "not a deliverable" qualifiers: findQualifier.
	nonDeliverables = []string{"non-deliverable", "non-deliverables"}
	// qualifierNegators open a "not a deliverable" qualifier within five words of a deliverableWords
	// word ("is not a deliverable", "no delivery needed"): findQualifier.
	qualifierNegators = []string{"not", "no", "never", "isn't", "aren't", "nor"}
	deliverableWords  = []string{"deliverable", "deliverables", "delivery", "delivered"}
	// deniedLeads before "denied" mark an expected denial: denialAt.
	deniedLeads = []string{"be", "is", "are", "was", "were", "been", "being", "get", "gets", "got",
		"permission", "access"}
	// failLeads before "fail" mark an expected denial ("should fail", "expected to fail"): denialAt.
	failLeads = []string{"must", "should", "will", "to", "shall"}
	// refusalWords after a refusalLeads word mark an expected denial: denialAt.
	refusalWords = []string{"rejected", "refused", "blocked", "forbidden", "prevented"}
	refusalLeads = []string{"be", "is", "are", "was", "were", "been", "get", "gets"}
	// activeRefusals after a modal mark an expected denial by whatever refuses the write: denialAt.
	activeRefusals     = []string{"reject", "deny", "block", "refuse", "prevent"}
	activeRefusalLeads = []string{"should", "must", "will", "would", "to"}
	// negativeTestNouns after "negative" mark an expected denial: denialAt.
	negativeTestNouns = []string{"test", "tests", "case", "check"}
	// denialErrnos are error names that mark an expected denial by themselves: denialAt.
	denialErrnos = []string{"eacces", "eperm", "erofs"}
	// succeedNegators before "succeed" mark an expected denial ("must not succeed"): denialAt.
	succeedNegators = []string{"not", "never"}
	// permitWords after "not" mark an expected denial ("not permitted", "not allowed"): denialAt.
	permitWords = []string{"permitted", "allowed"}
)

// Stage 4 (roles.go): embedded topic clauses, comparisons and stated needs.
var (
	// topicWh open an embedded clause whose files are what a digest noun or a reading or reply verb
	// talks about: topicClause, which looks back at most topicSpan tokens from the file for it.
	topicWh   = []string{"how", "why", "whether", "what", "where", "when", "if"}
	topicSpan = 12
	// topicIntroPreps before a topicWh word make its clause the topic of the noun before them ("an
	// analysis of why …", "notes on how …", "a look into why …"): topicClause.
	topicIntroPreps = []string{"of", "on", "about", "regarding", "concerning", "into"}
	// comparisonLeads before "as", at most comparisonSpan words back, make it the "as" of a
	// comparison, whose object is the standard compared with, an input: comparisonAt.
	comparisonLeads = []string{"same", "such"}
	comparisonSpan  = 3
	asAsIdioms      = []string{"well"}
	// comparisonAdjectives before "to", or their "-ly" adverbs, make it the "to" of a comparison
	// ("similar to NAME", "keyed identically to NAME"): comparisonAt.
	comparisonAdjectives = newSet("similar identical equivalent analogous comparable")
	// comparisonAuxes right after "as NAME" and before punctuation or the end make NAME the subject of
	// a clause of comparison ("just as CHANGELOG-old.md does"): comparedAt.
	comparisonAuxes = []string{"does", "do", "did", "is", "was", "are", "were", "has", "had", "have"}
	// passiveInfinitives right before a delivery participle make it a passive infinitive or modal
	// passive ("needs to be shared", "should be uploaded", "has to get sent"): passiveNeed.
	passiveInfinitives = []string{"be", "get"}
	// agentPreps open the agent of a passive delivery, looked for within agentSpan tokens of the
	// participle; deadlineWords after them name a time, not an agent: agentAt.
	agentPreps    = []string{"by"}
	agentSpan     = 8
	deadlineWords = newSet("monday tuesday wednesday thursday friday saturday sunday today tonight tomorrow " +
		"noon midnight eod eow cob end close start beginning middle next then now morning afternoon evening " +
		"lunch time week weekend month quarter year january february march april may june july august september " +
		"october november december")
)

// inputLabels are headings and labels whose lines list inputs, context or references (rule 10):
// "Inputs", "Context", "Background", "References"; languages.go adds those of the other languages.
var inputLabels = []string{"inputs", "input", "input files", "context", "background", "references", "reference",
	"sources", "materials", "attachments", "given"}

// Rule 10 (roles.go): files named as a model, template, example or earlier
// version are inputs a later pronoun passes over: modelRef.
var (
	// modelWords before a file, or after it and "as", name it as a model.
	modelWords = newSet("template templates based modeled modelled model example sample blueprint pattern " +
		"reference starting basis layout style format skeleton boilerplate structure")
	// featureVerbs before a gerund of an output verb make it a feature
	// the product gains ("support writing NAME"): rule 11, featureGerund.
	featureVerbs = newSet("support supports implement allow enable stop stops")
	// modelHeads head a noun phrase naming a model, modelLinks join it to the file that holds it,
	// and modelGovernors govern it: modelNP.
	modelHeads     = newSet("template templates example examples sample samples model blueprint boilerplate skeleton")
	modelLinks     = []string{"in", "at", "of", "from", "on"}
	modelGovernors = []string{"like", "following", "using", "per", "after", "from"}
	// softwareNouns name a piece of software, softwareCausatives make one do something and
	// productModals state what it should do: rule 11, productVerb.
	softwareNouns = newSet("cli app application tool script exporter importer command service job daemon server " +
		"endpoint program binary plugin extension button api function module bot")
	softwareCausatives = newSet("make let have")
	productModals      = []string{"should", "must", "will", "shall"}
	// modelPreps govern a model ("like NAME").
	modelPreps = newSet("like after")
	// modelVerbs take a model or a tool as their object, not the thing made.
	modelVerbs = newSet("use reuse follow mirror mimic copy")
)
