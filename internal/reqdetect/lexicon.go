package reqdetect

import (
	"strings"
)

// ---------------------------------------------------------------------------
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
	verbStated              // a past or perfect verb with a subject: a statement about a file that exists
	verbWant                // need, want: the object is what the user asks for
)

var verbClasses = func() map[string]verbClass {
	m := map[string]verbClass{}
	add := func(c verbClass, words string) {
		for _, w := range strings.Fields(words) {
			m[w] = c
		}
	}
	add(verbOutput, "write create produce generate save output emit dump store make build draft prepare "+
		"compose put place provide give return package bundle author assemble persist serialize "+
		"plot draw touch")
	add(verbExport, "export")
	add(verbAttach, "attach upload")
	add(verbSend, "send share email e-mail deliver publish forward hand")
	add(verbTransform, "convert transform turn translate reformat transcode render compile copy extract "+
		"encode decode compress zip archive split")
	add(verbInput, "read summarize summarise review analyze analyse compare parse load open inspect check "+
		"examine use process import ingest scan study audit validate verify evaluate assess count search "+
		"grep find consult view skim download fetch run execute test interpret classify consider look diff "+
		"cite quote proofread see")
	add(verbReply, "reply respond answer tell say explain describe discuss show list paste print report")
	add(verbEdit, "update edit modify fix refactor patch change tweak adjust correct improve rename delete "+
		"remove rewrite revise append insert replace clean lint add implement bump migrate amend "+
		"restructure reorganize reorganise optimize optimise document annotate debug repair resolve "+
		"overwrite truncate move extend rework polish tidy refine")
	add(verbRepo, "commit push merge rebase")
	add(verbProbe, "attempt try")
	add(verbPseudo, "deliverable")
	add(verbWant, "need want require")
	return m
}()

var irregularVerbs = map[string]string{
	"wrote": "write", "written": "write", "made": "make", "built": "build", "sent": "send",
	"gave": "give", "given": "give", "drew": "draw", "drawn": "draw", "ran": "run", "found": "find",
	"told": "tell", "said": "say", "shown": "show", "rewrote": "rewrite", "rewritten": "rewrite",
	"saw": "see", "seen": "see",
}

// lemmaOf returns the lexicon verb that w is a form of, or "".
func lemmaOf(w string) string {
	if _, ok := verbClasses[w]; ok {
		return w
	}
	if b, ok := irregularVerbs[w]; ok {
		return b
	}
	known := func(b string) bool { _, ok := verbClasses[b]; return ok }
	for _, s := range [...]struct{ suf, rep string }{
		{"ies", "y"}, {"ied", "y"}, {"es", ""}, {"s", ""}, {"ed", ""}, {"d", ""}, {"ing", ""}, {"ing", "e"},
	} {
		if b, ok := strings.CutSuffix(w, s.suf); ok && known(b+s.rep) {
			return b + s.rep
		}
	}
	for _, suf := range [...]string{"ed", "ing"} { // zipped, putting
		if b, ok := strings.CutSuffix(w, suf); ok && len(b) >= 2 && b[len(b)-1] == b[len(b)-2] && known(b[:len(b)-1]) {
			return b[:len(b)-1]
		}
	}
	return ""
}

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
		"env dockerfile")
	notFiles = newSet("node.js vue.js next.js nuxt.js react.js express.js d3.js three.js chart.js " +
		"angular.js ember.js backbone.js nest.js p5.js alpine.js solid.js ext.js deno.js moment.js knockout.js " +
		"pixi.js docs.rs bun.sh")
	abbrevs    = newSet("e.g i.e etc vs cf approx incl eg ie mr mrs ms dr fig al")
	labelWords = []string{"deliverables", "deliverable", "output files", "output file", "outputs", "output",
		"artifacts", "artifact"}
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
		"needn't avoid refrain skip omit")
	openers = newSet("and or but then also plus that which who while after before once when " +
		"without instead rather afterwards finally next additionally so")
	fillers = newSet("then also please finally next afterwards first just only additionally " +
		"optionally separately of than do does not don't dont never must should can will to and always " +
		"carefully immediately")
	prepFillers = newSet("and or plus both either file files new separate single " +
		"two three four several following all")
	// nounPreps are prepositions after which a lexicon word is a
	// noun unless it is a gerund ("a report on test results").
	nounPreps = newSet("of on about for in from with regarding into at by via per")
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
	// digestVerbs are input verbs that write something new about
	// their input: "summarize the bug reports in a PDF".
	digestVerbs = newSet("summarize summarise analyze analyse compare evaluate assess audit classify")
	inputPreps  = newSet("of from between against versus vs using about on for regarding like " +
		"comparing than with")
	// questionWords open a question that asks about something rather
	// than for something ("Who wrote report.pdf?"; not "Can you export …?").
	questionWords = []string{"who", "what", "when", "where", "why", "how", "which", "whose", "is", "are",
		"was", "were", "does", "do", "did", "has", "have", "had", "isn't", "aren't", "doesn't", "didn't"}
	beForms       = []string{"is", "are", "should", "must", "will", "shall", "goes", "go"}
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

// formats maps format words to whether they are inherently a file
// (strong: "a PDF") or only a text format (weak: JSON, CSV — a file only as a
// destination or with a file noun).
var formats = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields("pdf xlsx xls docx pptx odt ods png jpg jpeg gif webp zip tarball " +
		"spreadsheet workbook excel powerpoint word image epub mp3 mp4 wav") {
		m[w] = true
	}
	for _, w := range strings.Fields("csv tsv json jsonl ndjson yaml yml xml html markdown md txt toml svg " +
		"ics sql latex tex") {
		m[w] = false
	}
	return m
}()

// outputPreps govern an output: the file or format after them is what the
// phrase produces ("into answers.csv", "as revenue.png", "a file called
// notes.txt", "a workbook named budget.xlsx"). "to" is not among them: it
// marks an output only after an output verb (rule 3: "convert users.csv to
// JSON" is a text request).
var outputPreps = newSet("into as called named entitled titled")

// locativePreps say where something is ("is already in data.csv").
var locativePreps = newSet("in inside at on within")

// indicativeBe are be-forms that state a fact; "be" after a modal ("should be
// in report.md") asks for something and is not among them.
var indicativeBe = newSet("is are was were 's")

// statementAdverbs may stand between a subject or be-form and the verb of a
// statement ("you already generated", "is already in").
var statementAdverbs = newSet("already just recently previously earlier also still all both once")

// subjectPronouns open a statement when a past verb follows them ("I sent",
// "you already generated", "we've written").
var subjectPronouns = newSet("i we you they he she someone somebody everyone i've we've you've they've " +
	"i'd we'd you'd they'd")

// possessives and determiners that open a noun subject ("the designer sent",
// "our team exported").
var subjectDets = newSet("the our my your their his her a an this that another some")

// perfectAux make the participle after them a statement ("I have uploaded",
// "has been exported"); passiveBe the same for a past passive ("report.pdf
// was exported").
var (
	perfectAux = newSet("have has had 've")
	passiveBe  = newSet("was were been")
)

// anaphorHeads are nouns that, after "the", name a file made or edited
// earlier in the item ("the result", "the corrected one", "the revised
// copy"); anaphorPlurals are their plurals.
var (
	anaphorHeads   = newSet("one ones copy copies version versions result results edition draft")
	anaphorPlurals = newSet("ones copies versions results")
)

// madeModifiers mark a noun phrase after "the" as the product of earlier work
// ("the new version", "the final copy"), besides any participle.
var madeModifiers = newSet("new final latest resulting finished revised updated corrected fixed edited " +
	"cleaned patched modified improved")

// clauseBreaks end a clause inside a phrase: a negation does not reach across
// them ("Export the totals as totals.csv (no PDF needed)", "Write report.md —
// no need to attach anything else").
var clauseBreaks = newSet("( ) — – ; : - --")
