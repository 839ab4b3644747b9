package deliverable

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// How DetectRequests reads text.
//
// Stage 1, lines (detectUnits, detectBlock, detectLabel). A label line opens a
// Deliverables block: "Deliverable:", "Deliverables", "Output(s):", "Output
// files:", "Artifacts:" (markdown heading, bold and bullet decoration allowed),
// or a line naming the deliverables that ends in ":" or "below" ("The
// deliverables are:"). The text after the label's colon is an item, and so is
// every bullet or numbered line below it (blank lines between bullets
// allowed); plain lines directly under a bare label are items too, and an
// indented line continues the item above it. Any other line ends the block.
// The remaining lines form prose paragraphs: a blank line, a bullet, a heading
// or a line ending in ":" ends a paragraph.
//
// Stage 2, units (detectTokenize, detectSentences). Paragraphs and items are
// tokenized into words, file names and punctuation. A file name has a known
// extension (detectExts) and may carry a path ("dist/index.html",
// "/outside/probe.txt", `C:\out\q3.xlsx`); a quoted name may contain blanks
// ("final report.pdf"); URLs, "x.md:12" line suffixes and framework names
// ("Node.js") are not part of a name. Sentences end at ". ! ?" (not after
// "e.g." and the like); each sentence is a unit. A sentence that opens with a
// question word and ends in "?" ("Who wrote report.pdf?") asks about files,
// not for them, unless it is a polite request ("Is it possible to attach the
// log file?", "Do you mind attaching it?": detectPoliteAsk).
//
// Stage 3, phrases (detectMarkVerbs, detectSplit). Verbs come from a lexicon
// of classes (detectVerbs): output (write, create, save, produce…), export,
// attach (attach, upload), send (send, share, publish, deliver…), transform
// (convert, render, translate…), input (read, summarize, compare…), reply
// (answer, explain…), edit (update, fix, refactor, add…), repository (commit,
// push, merge) and attempt (attempt, try), matched through inflections
// ("writes", "attached", "creating", "written"). A lexicon word in a noun
// position is a noun (detectNounPosition): right after a determiner ("a
// native write", "the parsed records"); right after a noun preposition unless
// it is a gerund ("a report on test results", "a list of open issues"; not
// "instead of creating"); as the object right after a verb ("create test
// data"); and after a determiner or noun preposition and up to two nouns or
// adjectives ("on climate change", "the load test results", "of the code
// changes", "the bug reports in a PDF"; not "the script writes out.json",
// not "for each file write a summary"). A unit is cut into clauses at ";" and
// clauses into verb phrases wherever a coordinator, comma or relative pronoun
// is followed by a verb ("…, then attach it", "… and open a pull request", "…
// that fixes X", "… without creating files").
//
// Stage 4, roles inside a phrase (detectNegate, detectMarkInline,
// detectPhrase, detectMention, detectSignalAt).
//   - Negation (rule 5). "do not/don't/never/avoid/skip" before a verb,
//     "no … files", "no need to", "nothing", and a phrase opened by "without",
//     "instead of" or "rather than" negate the whole phrase; "not", "no" and
//     "without" before a noun negate that noun phrase only ("not as a file",
//     "no report.pdf", "no other files"). "Don't forget to" is positive. A file
//     named in a negated output or delivery phrase is forbidden: it is never
//     requested, whatever else the text says.
//   - Named files (rules 2, 3, 4, 8). A file takes its role from the nearest
//     verb before it in its phrase, or from a passive verb after it
//     ("report.pdf must be attached"), unless an input preposition governs it
//     ("of", "from", "between", "about", "with", "using"…): output, export,
//     attach and send verbs make it an output, except a source followed by
//     "to/as" and another file ("save notes.md as notes.pdf"); transform
//     verbs make their object the source and the file after "to/into/as" the
//     output; input and reply verbs make it an input; edit verbs an in-place
//     edit; a phrase that mentions a pull request, branch or commit makes it
//     repository work. In a Deliverables item a file with no verb is an
//     output, unless the item says it is changed "in place".
//   - The governing verb. A verb inside a prepositional complement of the
//     verb before it ("write a guide on how to use the API", "a report on
//     testing X") does not take the phrase over: a destination after it
//     ("as a PDF", "to guide.md") belongs to the verb that governs the
//     phrase.
//   - Unnamed requests (rules 1, 3). An export verb, an attach/upload verb, a
//     delivery marker ("downloadable", "as an attachment", "for download"), a
//     destination ("as/into a CSV" after any governing verb but a reading,
//     reply or edit verb, "to a PDF" after an output verb, "to a JSON file"
//     after a transform verb, "in XLSX format", "in a PDF" or "in a CSV file"
//     after an output or digest verb, "in a Word document" after a reply
//     verb), or a file noun or inherently binary format as the object of an
//     output verb ("create a file", "generate a PDF", "an Excel workbook")
//     asks for a file. A digest verb (summarize, analyze, compare…:
//     detectDigestVerbs) reads an input but writes something new, so "as a
//     PDF" or "in a PDF" after it is a destination; "in the PDF" is where
//     something already is. Text formats (JSON, CSV, HTML, Markdown…) ask for
//     a file only as a destination, with a file noun, or as a counted noun of
//     their own ("produce a CSV of all active users"; not "a CSV parser"):
//     "convert users.csv to JSON" is a text request. A format or file after
//     "this", "the attached", "of", after a preposition between it and the
//     verb ("advice on naming files"), a modifier use ("a CSV parser", "file
//     permissions") and a temporary file are not requests.
//   - Inline answers (rule 4). An inline marker ("inline", "in the
//     reply/chat/response", "as text", "in a code block") covers the conjunct
//     right before it: a run of file names ("index.html and styles.css inline
//     in the reply") or one noun phrase, "of" included ("index.html and a
//     short summary in the reply" leaves index.html requested; "a CSV of the
//     users in the chat" is inline).
//
// Stage 5, across units (detectRepoWork, detectDenials, detectPronouns,
// detectQualifiers).
//   - Code tasks (rule 8). An output that is a source file created in the
//     source tree (a source extension and a source directory such as src/,
//     or a code noun such as "component" or "test" in its phrase: "create a
//     new React component in src/Button.tsx") or a build output (a file
//     under dist/, build/… or with a build extension, produced by "build the
//     project" or checked by a passive verb in that unit or the next one:
//     "build the project and make sure dist/app.js is generated") is
//     repository work. A Deliverables item, an exported file and a delivered
//     one (attach, send, downloadable…) stay requested.
//   - Denied writes (rule 7). A denial marker ("must be denied", "should
//     fail", "is rejected", "negative test", "EACCES") denies the files before
//     it in its phrase, and every file of an attempt/try phrase whose unit or
//     next unit carries one; a write beside it in another phrase is unaffected.
//   - Pronouns (rule 6). A delivery verb or marker whose object is a pronoun
//     ("attach it", "send it to me", "publish it as an attachment", "make it
//     downloadable") reaches the files of the phrase before it in the unit, or
//     of the last earlier unit that is not a bare qualifier or denial remark;
//     the files it reaches are delivered, which wins over any other role or
//     qualifier. A negated delivery of a pronoun ("don't attach it") forbids
//     them; repository work on a pronoun ("commit it", "open a pull request
//     with it") makes them repository work.
//   - Qualifiers (rule 6). A unit saying "not a (task) deliverable" (also "not
//     for delivery", "not to be delivered", "non-deliverable") exempts the one
//     requested output before the qualifier in its own unit or, if there is
//     none, the one requested output of the unit right before it. When that
//     unit requests more than one output, or its output is delivered, the
//     qualifier exempts nothing. "For internal verification" is no qualifier.
//
// Collection (detectCollect). A file is requested when it is delivered, or
// has an output role that is neither exempted nor made repository work, and
// is not forbidden. File is true when a file is requested or an unnamed
// request survives (not negated, denied, inline, exempted or forbidden).

// Requests is what a task's own text asks to be delivered as files.
type Requests struct {
	// File reports whether the text asks for a file output at all, named or
	// not ("export the results as a CSV"). It is true whenever Files is not
	// empty.
	File bool
	// Files lists the output files the text names, exactly as written
	// ("dist/index.html", "report.pdf"), de-duplicated and sorted byte-wise.
	// It is nil when the text names no output file.
	Files []string
}

// DetectRequests reads a task's objective (the text the host bound to the run,
// never the agent's own summary) and reports whether it asks for a file output
// and which output files it names, following the rules of
// shared/corpus/README.md: an explicit publication request ("attach", "export
// as", "save as", "downloadable", "as a CSV", a named output file) asks for a
// file; reading or discussing an input does not; a "Deliverables" label and
// the list below it state outputs; negations, in-place edits, repository work,
// inline answers and expected-denied writes ask for none; and a sentence that
// says a just-written file is "not a deliverable" exempts that one file unless
// it is also to be delivered. The notes after the imports of this file say how
// each rule is implemented.
//
// Guarantees: the result depends only on objective (two calls agree); it never
// panics, for any input including invalid UTF-8; every entry of Files is a
// file name written verbatim in objective; Files is sorted, without
// duplicates, and nil when empty; File is true whenever Files is not. The work
// is linear in the length of objective.
//
// Non-guarantees: it is a heuristic reader of English, not a parser. It
// recognizes file names only with a known extension ("Makefile" and
// "LICENSE" are not seen), does not read other languages, and may misread
// unusual phrasings; the worked cases in testdata/requested-files.jsonl show
// what it is held to. Names are compared as written: "./out.json" and
// "out.json" are two names.
func DetectRequests(objective string) Requests {
	units := detectUnits(objective)
	for _, u := range units {
		detectAnalyze(u)
	}
	detectRepoWork(units)
	detectDenials(units)
	detectPronouns(units)
	detectQualifiers(units)
	return detectCollect(units)
}

// ---------------------------------------------------------------------------
// Tokens

type reqKind uint8

const (
	reqWord  reqKind = iota + 1 // letters, inner apostrophes and hyphens
	reqFile                     // a file name or path with a known extension
	reqPunct                    // one punctuation rune
	reqOther                    // numbers, URLs, paths without an extension, mixed tokens
)

type reqToken struct {
	text string // verbatim from the objective
	low  string // lower-cased, curly apostrophes folded to '
	kind reqKind
}

// is reports whether t is a word equal to one of words.
func (t reqToken) is(words ...string) bool {
	return t.kind == reqWord && slices.Contains(words, t.low)
}

func (t reqToken) punct(marks ...string) bool {
	return t.kind == reqPunct && slices.Contains(marks, t.low)
}

func reqPunctTok(s string) reqToken { return reqToken{text: s, low: s, kind: reqPunct} }

// detectRunRune reports whether r belongs to a word or path run.
func detectRunRune(r rune) bool {
	if r == utf8.RuneError {
		return false
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) ||
		strings.ContainsRune(`_-./~+\:'’`, r)
}

// detectTokenize splits one line into tokens. Every token's text is a
// substring of s.
func detectTokenize(s string) []reqToken {
	var toks []reqToken
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		switch {
		case unicode.IsSpace(r):
			i += w
		case r == '"' || r == '`' || r == '“':
			if n, ok := detectQuotedFile(s[i:], r, w); ok {
				inner := s[i+w : i+n]
				closeW := len(detectClosingQuote(r))
				toks = append(toks, reqPunctTok(s[i:i+w]), reqToken{text: inner, low: strings.ToLower(inner), kind: reqFile},
					reqPunctTok(s[i+n:i+n+closeW]))
				i += n + closeW
				continue
			}
			toks = append(toks, reqPunctTok(s[i:i+w]))
			i += w
		case detectRunRune(r):
			j := i + w
			for j < len(s) {
				r2, w2 := utf8.DecodeRuneInString(s[j:])
				if !detectRunRune(r2) {
					break
				}
				j += w2
			}
			toks = detectRun(toks, s[i:j])
			i = j
		default:
			toks = append(toks, reqPunctTok(s[i:i+w]))
			i += w
		}
	}
	return toks
}

func detectClosingQuote(open rune) string {
	if open == '“' {
		return "”"
	}
	return string(open)
}

// detectQuotedFile reports whether s starts with a quoted file name that
// contains blanks ("final report.pdf"); n is the offset of the closing quote.
// Names without blanks are found by the ordinary tokenizer.
func detectQuotedFile(s string, open rune, w int) (n int, ok bool) {
	closing := detectClosingQuote(open)
	window := s[w:]
	if len(window) > 256 {
		window = window[:256]
	}
	end := strings.Index(window, closing)
	if end <= 0 {
		return 0, false
	}
	inner := s[w : w+end]
	if !strings.Contains(inner, " ") || strings.TrimSpace(inner) != inner ||
		strings.ContainsAny(inner, "\"`“”\t\r\n") || !detectIsFile(inner) {
		return 0, false
	}
	return w + end, true
}

// detectRun classifies one run of word and path characters: quotes around it
// and sentence punctuation after it become punctuation tokens, a URL stays one
// token, and colons separate pieces (a drive letter excepted).
func detectRun(toks []reqToken, run string) []reqToken {
	for run != "" {
		r, w := utf8.DecodeRuneInString(run)
		if r != '\'' && r != '’' {
			break
		}
		toks = append(toks, reqPunctTok(run[:w]))
		run = run[w:]
	}
	end := len(run)
	for end > 0 {
		r, w := utf8.DecodeLastRuneInString(run[:end])
		if r != '.' && r != ':' && r != '\'' && r != '’' {
			break
		}
		end -= w
	}
	core, tail := run[:end], run[end:]
	if core != "" {
		low := strings.ToLower(core)
		if strings.Contains(low, "://") || strings.HasPrefix(low, "mailto:") {
			toks = append(toks, reqToken{text: core, low: low, kind: reqOther})
		} else {
			toks = detectPieces(toks, core)
		}
	}
	for tail != "" {
		_, w := utf8.DecodeRuneInString(tail)
		toks = append(toks, reqPunctTok(tail[:w]))
		tail = tail[w:]
	}
	return toks
}

// detectPieces splits s at colons ("report.md:12" is the file report.md, a
// colon and a number) and classifies each piece. A leading drive letter
// ("C:\out\a.pdf") is not split.
func detectPieces(toks []reqToken, s string) []reqToken {
	from := 0
	if len(s) > 2 && s[1] == ':' && (s[2] == '\\' || s[2] == '/') &&
		(s[0]|0x20 >= 'a' && s[0]|0x20 <= 'z') {
		from = 2
	}
	for {
		i := strings.IndexByte(s[from:], ':')
		if i < 0 {
			if s != "" {
				toks = append(toks, detectClassify(s))
			}
			return toks
		}
		i += from
		if i > 0 {
			toks = append(toks, detectClassify(s[:i]))
		}
		toks = append(toks, reqPunctTok(s[i:i+1]))
		s, from = s[i+1:], 0
	}
}

func detectClassify(s string) reqToken {
	low := strings.ToLower(strings.ReplaceAll(s, "’", "'"))
	if detectIsFile(s) {
		return reqToken{text: s, low: low, kind: reqFile}
	}
	hasLetter, onlyLetters := false, true
	for _, r := range s {
		switch {
		case unicode.IsLetter(r) || unicode.IsMark(r):
			hasLetter = true
		case r == '\'' || r == '’' || r == '-':
		default:
			onlyLetters = false
		}
	}
	if hasLetter && onlyLetters {
		return reqToken{text: s, low: low, kind: reqWord}
	}
	return reqToken{text: s, low: low, kind: reqOther}
}

// detectIsFile reports whether s names a file: its last path element is
// name.ext with a non-empty name and an extension from detectExts, and it is
// not a framework's name ("Node.js").
func detectIsFile(s string) bool {
	base := s[strings.LastIndexAny(s, `/\`)+1:]
	dot := strings.LastIndexByte(base, '.')
	if dot <= 0 || dot == len(base)-1 {
		return false
	}
	if !detectExts[strings.ToLower(base[dot+1:])] {
		return false
	}
	if strings.Trim(base[:dot], ".-_~+'’") == "" {
		return false
	}
	return !detectNotFiles[strings.ToLower(s)]
}

// ---------------------------------------------------------------------------
// Stage 1 and 2: lines, blocks, paragraphs, sentences

// reqUnit is one sentence of prose or of a Deliverables item.
type reqUnit struct {
	toks      []reqToken
	item      bool       // inside a Deliverables block
	question  bool       // a question ("Who wrote report.pdf?"), not a request
	cls       []reqClass // verb class of each token used as a verb
	neg       []bool     // token lies in a negated phrase or noun phrase
	inl       []bool     // token is covered by an inline marker
	inPlace   bool       // says "in place": verbless files are edited, not delivered
	phrases   []*reqPhrase
	qualifier int  // token index of a "not a deliverable" qualifier, or -1
	denial    bool // carries a denied-write marker
	bare      bool // names no file and requests nothing (set before pronouns resolve)
	last      int  // last phrase that names a file or requests one, or -1 (likewise)
}

func detectUnits(text string) []*reqUnit {
	lines := strings.Split(text, "\n")
	var units []*reqUnit
	var para []reqToken
	flush := func() {
		units = append(units, detectSentences(para, false)...)
		para = nil
	}
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSuffix(lines[i], "\r")
		if rest, ok := detectLabel(line); ok {
			flush()
			var items []*reqUnit
			items, i = detectBlock(lines, i, rest)
			units = append(units, items...)
			continue
		}
		trimmed := strings.TrimSpace(line)
		if trimmed == "" {
			flush()
			continue
		}
		body, bullet := detectBullet(line)
		heading := false
		if !bullet {
			body, heading = detectHeading(line)
		}
		if bullet || heading {
			flush()
		}
		para = append(para, detectTokenize(body)...)
		if heading || strings.HasSuffix(trimmed, ":") {
			flush()
		}
	}
	flush()
	return units
}

// detectBlock collects the items of the Deliverables block whose label is
// lines[i]; rest is the label line's text after the colon. It returns the items
// and the index of the last line it consumed.
func detectBlock(lines []string, i int, rest string) ([]*reqUnit, int) {
	var items [][]reqToken
	if strings.TrimSpace(rest) != "" {
		items = append(items, detectTokenize(rest))
	}
	plain := len(items) == 0 // plain lines may follow a bare label directly
	blank := false
	last := i
	for j := i + 1; j < len(lines); j++ {
		line := strings.TrimSuffix(lines[j], "\r")
		if strings.TrimSpace(line) == "" {
			blank = true
			continue
		}
		if _, ok := detectLabel(line); ok {
			break
		}
		if body, ok := detectBullet(line); ok {
			items = append(items, detectTokenize(body))
			blank, plain, last = false, false, j
			continue
		}
		if _, heading := detectHeading(line); heading || blank {
			break
		}
		indented := line[0] == ' ' || line[0] == '\t'
		switch {
		case indented && len(items) > 0:
			items[len(items)-1] = append(items[len(items)-1], detectTokenize(line)...)
		case plain:
			items = append(items, detectTokenize(line))
		default:
			return detectItemUnits(items), last
		}
		last = j
	}
	return detectItemUnits(items), last
}

func detectItemUnits(items [][]reqToken) []*reqUnit {
	var units []*reqUnit
	for _, it := range items {
		units = append(units, detectSentences(it, true)...)
	}
	return units
}

// detectLabel reports whether line is a Deliverables label and returns the
// text after its colon.
func detectLabel(line string) (string, bool) {
	s := strings.TrimSpace(line)
	if low := strings.ToLower(strings.TrimRight(s, "*_ .")); strings.Contains(low, "deliverable") &&
		(strings.HasSuffix(low, ":") || strings.HasSuffix(low, " below")) {
		negated := false
		for _, w := range strings.FieldsFunc(low, func(r rune) bool { return !unicode.IsLetter(r) && r != '\'' }) {
			negated = negated || detectNegators[w] || w == "no" || w == "non"
		}
		if !negated {
			return "", true // "The deliverables are:", "Our deliverables are listed below."
		}
	}
	s = strings.TrimLeft(s, "#")
	if body, ok := detectBullet(s); ok {
		s = body
	}
	s = strings.TrimLeft(strings.TrimSpace(s), "*_")
	for _, label := range detectLabels {
		if len(s) < len(label) || !strings.EqualFold(s[:len(label)], label) {
			continue
		}
		after := strings.TrimLeft(s[len(label):], "*_ \t")
		switch {
		case after == "":
			return "", true
		case after[0] == ':':
			return strings.TrimLeft(after[1:], "*_ \t"), true
		}
	}
	return "", false
}

// detectBullet strips a list marker ("-", "*", "+", "•", "1.", "2)", "a)",
// "- [ ]") from line.
func detectBullet(line string) (string, bool) {
	s := strings.TrimLeft(line, " \t")
	if s == "" {
		return line, false
	}
	n := 0
	switch r, w := utf8.DecodeRuneInString(s); {
	case r == '-' || r == '*' || r == '+' || r == '•' || r == '‣' || r == '◦' || r == '▪':
		n = w
	case r >= '0' && r <= '9':
		for n < len(s) && n < 3 && s[n] >= '0' && s[n] <= '9' {
			n++
		}
		if n >= len(s) || (s[n] != '.' && s[n] != ')') {
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
	for _, box := range []string{"[ ]", "[x]", "[X]"} {
		if rest, ok := strings.CutPrefix(body, box); ok {
			body = strings.TrimLeft(rest, " \t")
		}
	}
	return body, true
}

// detectHeading strips a markdown heading marker from line.
func detectHeading(line string) (string, bool) {
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

// detectSentences splits toks into units at sentence-ending punctuation.
func detectSentences(toks []reqToken, item bool) []*reqUnit {
	var units []*reqUnit
	add := func(ts []reqToken, asked bool) {
		for _, t := range ts {
			if t.kind == reqWord || t.kind == reqFile {
				u := &reqUnit{toks: ts, item: item}
				u.question = asked && ts[0].is(detectQuestionWords...) && !detectPoliteAsk(ts)
				units = append(units, u)
				return
			}
		}
	}
	start := 0
	for i, t := range toks {
		if !t.punct(".", "!", "?", "…") {
			continue
		}
		if t.low == "." && i > 0 && detectAbbrevs[toks[i-1].low] {
			continue
		}
		add(toks[start:i], t.low == "?")
		start = i + 1
	}
	add(toks[start:], false)
	return units
}

// detectPoliteAsk reports whether a question is a request phrased politely
// ("Is it possible to attach the log file?", "Do you mind attaching it?").
// A question opened by a wh-word ("Who is able to attach report.pdf?") is
// not one.
func detectPoliteAsk(toks []reqToken) bool {
	if !toks[0].is("is", "are", "do", "does", "would", "could", "will") {
		return false
	}
	for i := 1; i+1 < len(toks) && i < 8; i++ {
		t, n := toks[i], toks[i+1]
		if t.is("possible", "able", "way") && n.is("to") ||
			t.is("you") && n.is("mind") && i+2 < len(toks) && strings.HasSuffix(toks[i+2].low, "ing") {
			return true
		}
	}
	return false
}

// ---------------------------------------------------------------------------
// Stage 3 and 4: verbs, phrases, negation, inline markers, roles

type reqRole uint8

const (
	reqRoleNone   reqRole = iota
	reqRoleOutput         // the text asks for this file to be produced or delivered
	reqRoleInput          // read, compared, summarized, a source
	reqRoleEdit           // edited in place
	reqRoleRepo           // repository work
	reqRoleInline         // to be written inline in the reply
	reqRoleDenied         // an expected-denied write
)

// reqMention is one occurrence of a file name.
type reqMention struct {
	name     string
	tok      int
	role     reqRole
	delivery bool // a delivery verb or marker reaches it
	forbid   bool // a negated output or delivery reaches it
	exempt   bool // a qualifier exempts it
	repoRef  bool // a repository verb reaches it through a pronoun
	verb     int  // token index of the verb it takes its role from, or -1
	passive  bool // that verb is passive and after it ("dist/app.js is generated")
}

// reqPhrase is one verb phrase of a unit: toks[start:end].
type reqPhrase struct {
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
	pronoun    bool // a pronoun object ("it", "them", "the file")
	plural     bool
	signal     bool // an unnamed file request
	delivered  bool // the unnamed request is delivery-marked
	exempt     bool
	forbid     bool
	mentions   []*reqMention
}

// namesOutput reports whether the phrase names an output file (requested or
// forbidden): its unnamed request, if any, is about that file.
func (p *reqPhrase) namesOutput() bool {
	for _, m := range p.mentions {
		if m.role == reqRoleOutput || m.forbid {
			return true
		}
	}
	return false
}

func detectAnalyze(u *reqUnit) {
	n := len(u.toks)
	u.cls = make([]reqClass, n)
	u.neg = make([]bool, n)
	u.inl = make([]bool, n)
	for i, t := range u.toks {
		if t.is("in-place") || t.is("in") && i+1 < n && u.toks[i+1].is("place", "situ") {
			u.inPlace = true
		}
	}
	detectMarkVerbs(u)
	detectSplit(u)
	for _, p := range u.phrases {
		detectNegate(u, p)
	}
	detectMarkInline(u)
	for i, p := range u.phrases {
		if p.rel && i > 0 && u.phrases[i-1].repo {
			p.repo = true
		}
		detectPhrase(u, p)
	}
	u.qualifier = detectQualifier(u.toks)
	for i := range u.toks {
		if detectDenialAt(u.toks, i) {
			u.denial = true
			break
		}
	}
}

// detectMarkVerbs sets the verb class of every word used as a verb.
func detectMarkVerbs(u *reqUnit) {
	noun := make([]bool, len(u.toks)) // a lexicon word used as a noun or adjective
	for i, t := range u.toks {
		if t.kind != reqWord {
			continue
		}
		lemma := detectLemma(t.low)
		if lemma == "" {
			continue
		}
		c := detectVerbs[lemma]
		if c == reqPseudo {
			u.cls[i] = c
			continue
		}
		if lemma == "make" && i+1 < len(u.toks) && u.toks[i+1].is("sure", "certain") {
			continue
		}
		if lemma == "output" && i+1 < len(u.toks) && u.toks[i+1].is(detectBeForms...) {
			u.cls[i] = reqPseudo // "the output should be a CSV file"
			continue
		}
		if detectNounPosition(u, noun, i, detectFormOf(t.low, lemma)) {
			noun[i] = true
			continue
		}
		u.cls[i] = c
	}
}

// reqForm is the inflection of a lexicon word.
type reqForm uint8

const (
	reqFormBase    reqForm = iota // write, change
	reqFormS                      // writes, changes: a plural noun or a third-person verb
	reqFormIng                    // writing
	reqFormPerfect                // written, changed
)

func detectFormOf(w, lemma string) reqForm {
	switch {
	case w == lemma:
		return reqFormBase
	case strings.HasSuffix(w, "ing"):
		return reqFormIng
	case strings.HasSuffix(w, "s"):
		return reqFormS
	}
	return reqFormPerfect
}

// detectNounPosition reports whether the lexicon word at i is used as a noun
// or adjective ("climate change", "the code changes", "test results"):
//   - right after a determiner, in any form ("a native write", "the parsed
//     records");
//   - right after a noun preposition (of, on, about, for, in…), unless it is a
//     gerund ("a report on test results", "a list of open issues"; not
//     "instead of creating");
//   - in its base or -s form right after an active verb, as its object
//     ("create test data", "save search results");
//   - in its base form after a determiner or a noun preposition and up to two
//     plain words or nouns ("the CSV export", "on climate change", "the load
//     test results"); an -s form there only inside a prepositional phrase ("a
//     summary of the code changes") or when a preposition, a be-form or the
//     end of the phrase follows ("the bug reports in a PDF"; not "the script
//     writes out.json"); neither when an object follows ("for each file
//     write a summary").
//
// noun marks the earlier lexicon words already read as nouns.
func detectNounPosition(u *reqUnit, noun []bool, i int, form reqForm) bool {
	toks := u.toks
	if i == 0 || toks[i-1].kind != reqWord {
		return false
	}
	prev := toks[i-1]
	switch {
	case detectDeterminers[prev.low]:
		return true
	case detectNounPreps[prev.low]:
		return form != reqFormIng
	case u.verbAt(i - 1):
		return (form == reqFormBase || form == reqFormS) && !detectCausatives[detectLemma(prev.low)]
	}
	if form == reqFormIng || form == reqFormPerfect {
		return false
	}
	if detectObjectFollows(toks, i+1) {
		return false // "for each file write a summary", "in the folder create notes.txt"
	}
	for j, steps := i-1, 0; j >= 0 && steps < 3; j, steps = j-1, steps+1 {
		t := toks[j]
		if t.kind != reqWord {
			return false
		}
		if detectNounPreps[t.low] {
			return true
		}
		if detectDeterminers[t.low] {
			if form == reqFormBase {
				return true
			}
			return j > 0 && detectNounPreps[toks[j-1].low] || detectNounFollows(toks, i+1)
		}
		if noun[j] {
			continue
		}
		if detectFunction[t.low] || detectLemma(t.low) != "" || detectNegators[t.low] {
			return false
		}
	}
	return false
}

// detectObjectFollows reports whether toks[k] starts the object of a verb: a
// file, a determiner or an object pronoun.
func detectObjectFollows(toks []reqToken, k int) bool {
	if k >= len(toks) {
		return false
	}
	t := toks[k]
	return t.kind == reqFile || t.is("it", "them", "me", "us", "him", "her") ||
		detectDeterminers[t.low] && !t.is("no")
}

// detectNounFollows reports whether toks[k] is what follows a noun rather than
// a verb: the end, punctuation, a preposition, a coordinator or a be-form.
func detectNounFollows(toks []reqToken, k int) bool {
	if k >= len(toks) {
		return true
	}
	t := toks[k]
	if t.kind == reqPunct {
		return !t.punct(`"`, "`", "'", "“", "‘")
	}
	return t.is("in", "as", "into", "of", "for", "from", "on", "about", "with", "and", "or", "are", "were",
		"is", "was", "should", "must", "will", "can", "need", "have", "has")
}

// verbAt reports whether toks[i] is a verb (the noun "deliverable" is not
// counted here).
func (u *reqUnit) verbAt(i int) bool {
	return i >= 0 && i < len(u.toks) && u.cls[i] != reqNone && u.cls[i] != reqPseudo
}

// detectSplit splits a unit into clauses at ";" and clauses into phrases at a
// coordinator, comma or relative pronoun that is followed by a verb.
func detectSplit(u *reqUnit) {
	start, rel := 0, false
	add := func(end int) {
		if end > start {
			u.phrases = append(u.phrases, &reqPhrase{start: start, end: end, rel: rel})
		}
	}
	for i, t := range u.toks {
		if t.punct(";") {
			add(i)
			start, rel = i+1, false
			continue
		}
		if i > start && detectOpener(t) && detectVerbAhead(u, i+1) {
			add(i)
			start, rel = i, t.is("that", "which", "who")
		}
	}
	add(len(u.toks))
}

func detectOpener(t reqToken) bool {
	if t.kind == reqPunct {
		return t.punct(",", "(", ")", "—", "–", ":")
	}
	return detectOpeners[t.low]
}

// detectVerbAhead reports whether a verb (or a negating verb such as "avoid")
// follows from toks[j], across fillers ("then", "also", "do not", "of").
func detectVerbAhead(u *reqUnit, j int) bool {
	for k := j; k < len(u.toks) && k < j+5; k++ {
		t := u.toks[k]
		if u.verbAt(k) {
			return true
		}
		if t.is("avoid", "refrain", "skip", "omit") {
			return true
		}
		if t.punct(",") || (t.kind == reqWord && detectFillers[t.low]) {
			continue
		}
		return false
	}
	return false
}

// detectNextContent returns the index of the first token from j (before end)
// that is not a filler such as "to", "be", "ever", or -1.
func detectNextContent(toks []reqToken, j, end int) int {
	for k := j; k < end && k < j+4; k++ {
		if toks[k].is("to", "be", "ever", "yet", "please", "also", "from", "just", "even", "you", "we", "i", "need", "needs") {
			continue
		}
		return k
	}
	return -1
}

// detectNegate applies negation inside phrase p.
func detectNegate(u *reqUnit, p *reqPhrase) {
	toks := u.toks
	for i := p.start; i < p.end; i++ {
		t := toks[i]
		if t.kind != reqWord {
			continue
		}
		switch {
		case detectNegators[t.low]:
			k := detectNextContent(toks, i+1, p.end)
			if k >= 0 && toks[k].is("forget", "forgot", "fail", "omit", "neglect", "skip", "avoid", "hesitate") {
				i = k // "don't forget to attach": positive
				continue
			}
			if t.is("avoid", "refrain", "skip", "omit") || u.verbAt(k) {
				detectNegPhrase(u, p)
				return
			}
			detectNegNP(u, i+1, p.end)
		case t.is("no", "zero"):
			if i+1 < p.end && toks[i+1].is("need", "needs") {
				detectNegPhrase(u, p)
				return
			}
			if i+1 < p.end && toks[i+1].is("other", "additional", "extra", "further", "more", "separate") {
				detectNegNP(u, i+1, p.end)
				continue
			}
			for k := i + 1; k < p.end && k <= i+3; k++ {
				if toks[k].kind == reqFile { // "no report.pdf": that file only
					detectNegNP(u, i+1, p.end)
					break
				}
				if detectFiley(toks[k]) { // "create no files", "no attachments"
					detectNegPhrase(u, p)
					return
				}
			}
		case t.is("without", "instead", "rather"):
			k := i + 1
			if k < p.end && toks[k].is("of", "than") {
				k++
			}
			if i == p.start && u.verbAt(k) {
				detectNegPhrase(u, p)
				return
			}
			detectNegNP(u, k, p.end)
		case t.is("nothing"):
			if i+1 < p.end && toks[i+1].is("else", "more", "but", "except") {
				continue
			}
			detectNegPhrase(u, p)
			return
		}
	}
}

func detectNegPhrase(u *reqUnit, p *reqPhrase) {
	p.negated = true
	for i := p.start; i < p.end; i++ {
		u.neg[i] = true
	}
}

// detectNegNP negates the noun phrase starting at j: up to punctuation, "but",
// a verb, or eight tokens.
func detectNegNP(u *reqUnit, j, end int) {
	for k := j; k < end && k < j+8; k++ {
		t := u.toks[k]
		if t.punct(",", ";", ":", "(", ")", "—", "–") || t.is("but") || u.verbAt(k) {
			return
		}
		u.neg[k] = true
	}
}

// detectFiley reports whether t names a file or a kind of file output.
func detectFiley(t reqToken) bool {
	if t.kind == reqFile {
		return true
	}
	if t.kind != reqWord {
		return false
	}
	_, format := detectFormats[t.low]
	return format || detectFileNouns[t.low] || t.is("output", "outputs", "download", "downloads", "deliverable", "deliverables")
}

// detectInlineLen returns the length of an inline marker at toks[i], or 0.
func detectInlineLen(toks []reqToken, i int) int {
	t := toks[i]
	at := func(k int, words ...string) bool { return k < len(toks) && toks[k].is(words...) }
	switch {
	case t.is("inline", "in-line"):
		return 1
	case t.is("in"):
		k := i + 1
		if at(k, "the", "your", "my", "this", "a", "our", "that") {
			k++
		}
		switch {
		case at(k, detectReplyNouns...):
			return k - i + 1
		case at(k, "plain") && at(k+1, "text"):
			return k - i + 2
		case at(k, "code") && at(k+1, "block", "blocks"):
			return k - i + 2
		}
	case t.is("as"):
		k := i + 1
		if at(k, "plain") {
			k++
		}
		if at(k, "text") && !at(k+1, "file", "files") {
			return k - i + 1
		}
	}
	return 0
}

// detectMarkInline marks what each inline marker covers: the run of file names
// right before it, or the one noun phrase right before it.
func detectMarkInline(u *reqUnit) {
	for _, p := range u.phrases {
		for i := p.start; i < p.end; i++ {
			if detectInlineLen(u.toks, i) > 0 {
				p.inline = true
				detectCoverInline(u, i)
			}
		}
	}
}

// detectCoverInline marks what the inline marker at toks[i] covers.
func detectCoverInline(u *reqUnit, i int) {
	toks := u.toks
	j := i - 1
	for j >= 0 && j > i-8 && (toks[j].is("inline", "in-line") || toks[j].punct(",")) {
		j--
	}
	if j < 0 {
		return
	}
	switch toks[j].kind {
	case reqFile: // "index.html and styles.css inline in the reply"
		for k := j; k >= 0 && i-k < 64; k-- {
			t := toks[k]
			if t.kind == reqFile {
				u.inl[k] = true
				continue
			}
			if t.is("and", "or", "both", "plus") || t.punct(",", "&", "`", `"`, "*") || detectDeterminers[t.low] {
				continue
			}
			return
		}
	case reqWord: // "a short summary in the reply", "a CSV of the users in the chat"
		for k := j; k >= 0 && i-k < 8; k-- {
			t := toks[k]
			if t.kind != reqWord || u.verbAt(k) || detectFunction[t.low] && !t.is("of") {
				return
			}
			u.inl[k] = true
		}
	}
}

// detectPhrase finds the phrase's flags, file mentions and unnamed requests.
func detectPhrase(u *reqUnit, p *reqPhrase) {
	toks := u.toks
	for i := p.start; i < p.end; i++ {
		t := toks[i]
		if detectRepoAt(toks, i) {
			p.repo = true
		}
		switch u.cls[i] {
		case reqProbe:
			p.probe = true
		case reqRepo:
			p.repo = true
			p.repoVerb = !u.neg[i]
		case reqAttach:
			if u.neg[i] {
				p.negDeliver = true
			} else {
				p.attach = true
			}
		case reqSend:
			if u.neg[i] {
				p.negDeliver = true
			} else {
				p.send = true
			}
		case reqExport:
			p.export = p.export || !u.neg[i]
		}
		if !u.neg[i] && detectMarkerLen(toks, i) > 0 {
			p.marker = true
		}
		if !p.pronoun && t.kind == reqWord {
			p.pronoun, p.plural = detectPronounAt(toks, i, p.end)
		}
	}

	lastVerb := -1      // nearest verb before i in the phrase
	head := -1          // the verb that governs the phrase at i (see below)
	prep := ""          // nearest word before i that is not a filler
	prepOfVerb := false // an input preposition lies between lastVerb and i
	for i := p.start; i < p.end; i++ {
		t := toks[i]
		switch t.kind {
		case reqFile:
			p.mentions = append(p.mentions, detectMention(u, p, i, lastVerb, head, prep))
		case reqWord:
			if !u.neg[i] && !u.inl[i] {
				detectSignalAt(u, p, i, lastVerb, head, prep, prepOfVerb)
			}
		}
		if u.verbAt(i) || (u.cls[i] == reqPseudo && !u.neg[i]) {
			// A verb inside a prepositional complement of the verb before
			// it ("a guide on how to use the API", "a report on testing
			// X") does not take over the phrase: a destination later in
			// the phrase still belongs to the verb before it.
			if !prepOfVerb || head < 0 {
				head = i
			}
			lastVerb, prepOfVerb = i, false
		} else if t.kind == reqWord && detectInputPreps[t.low] {
			prepOfVerb = true
		}
		if !detectPrepSkip(t) {
			prep = ""
			if t.kind == reqWord {
				prep = t.low
			}
		}
	}

	if p.attach || p.marker {
		p.signal, p.delivered = true, true
	}
	if p.export && !p.inline {
		p.signal = true
	}
	if p.negated || u.question {
		p.signal = false
	}
}

// detectMention gives the file at toks[i] its role.
func detectMention(u *reqUnit, p *reqPhrase, i, lastVerb, head int, prep string) *reqMention {
	toks := u.toks
	m := &reqMention{name: toks[i].text, tok: i}
	vi := lastVerb
	if vi < 0 {
		vi = detectPassiveVerb(u, i, p.end)
		m.passive = vi >= 0
	}
	verb := reqNone
	if vi >= 0 {
		verb = u.cls[vi]
	}
	target := prep == "to" || prep == "into" || prep == "as"
	if target && head >= 0 && head != vi && detectOutputish(u.cls[head]) &&
		(verb == reqInput || verb == reqReply || verb == reqEdit) {
		vi, verb = head, u.cls[head] // "write a summary of how to use X to summary.md"
	}
	m.verb = vi
	switch {
	case u.question:
		m.role = reqRoleInput
	case detectInputPreps[prep]:
		m.role = reqRoleInput
	case verb == reqNone:
		switch {
		case u.item && u.inPlace:
			m.role = reqRoleEdit // "README.md (update in place)"
		case u.item:
			m.role = reqRoleOutput
		}
	case verb == reqOutput || verb == reqExport || verb == reqAttach || verb == reqSend || verb == reqPseudo:
		m.role = reqRoleOutput
		if !target && detectSourceOf(toks, i, p.end) {
			m.role = reqRoleInput // "save notes.md as notes.pdf"
		}
	case verb == reqTransform:
		m.role = reqRoleInput
		if target {
			m.role = reqRoleOutput
		}
	case verb == reqInput || verb == reqReply:
		m.role = reqRoleInput
	case verb == reqEdit:
		m.role = reqRoleEdit
	case verb == reqRepo:
		m.role = reqRoleRepo
	case verb == reqProbe:
		m.role = reqRoleInput
		for k := vi + 1; k < i; k++ {
			if detectVerbs[detectLemma(toks[k].low)] == reqOutput {
				m.role = reqRoleOutput // "attempt a native write to x"
				break
			}
		}
	}
	if m.role == reqRoleOutput && p.repo {
		m.role = reqRoleRepo
	}
	governedByDelivery := vi >= 0 && (verb == reqAttach || verb == reqSend)
	switch {
	case u.neg[i]:
		if m.role == reqRoleOutput || governedByDelivery {
			m.forbid = true
		}
		m.role = reqRoleNone
	case u.inl[i]:
		m.role = reqRoleInline
	case u.question:
	case !detectInputPreps[prep] && (p.marker || (governedByDelivery && (p.attach || p.send))):
		m.role, m.delivery = reqRoleOutput, true
	}
	return m
}

// detectPassiveVerb finds a passive verb after the file at i ("report.pdf must
// be attached"), or -1.
func detectPassiveVerb(u *reqUnit, i, end int) int {
	for k := i + 1; k < end && k < i+6; k++ {
		if !u.verbAt(k) {
			continue
		}
		if k-1 > i && u.toks[k-1].is("be", "is", "are", "was", "were", "been", "being", "get", "gets", "got") {
			return k
		}
		return -1
	}
	return -1
}

// detectSourceOf reports whether the file at i is followed by "to/into/as" and
// another file: it is then the source of that file.
func detectSourceOf(toks []reqToken, i, end int) bool {
	j := i + 1
	if j >= end || !toks[j].is("to", "into", "as") {
		return false
	}
	j++
	for j < end && detectDeterminers[toks[j].low] {
		j++
	}
	return j < end && toks[j].kind == reqFile
}

// detectSignalAt records an unnamed file request at the word toks[i]: a
// destination ("as a CSV") or a file-ish object of an output verb.
func detectSignalAt(u *reqUnit, p *reqPhrase, i, lastVerb, head int, prep string, prepOfVerb bool) {
	toks := u.toks
	vc, hc := reqNone, reqNone // classes of the nearest and of the governing verb
	if lastVerb >= 0 {
		vc, hc = u.cls[lastVerb], u.cls[head]
	} else if u.item {
		vc, hc = reqOutput, reqOutput
	}
	outputish := detectOutputish(vc)
	// A digest verb ("summarize", "compare") writes something new: "as a
	// PDF" or "in a PDF" after it is where that goes.
	digest := head >= 0 && hc == reqInput && detectDigestVerbs[detectLemma(toks[head].low)]
	t := toks[i]

	if t.is("as", "into", "to", "in") {
		k := i + 1
		for k < p.end && k < i+4 && (detectDeterminers[toks[k].low] || toks[k].is("new", "separate", "single", "standalone", "proper", "real")) {
			k++
		}
		if k >= p.end || u.neg[k] || u.inl[k] {
			return
		}
		format := detectFormatHead(u, k, p.end)
		noun := detectFileNounHead(toks, k, p.end) || // "to a file", "to a JSON file"
			format && k+1 < p.end && detectFileNounHead(toks, k+1, p.end)
		if !format && !noun {
			return
		}
		switch t.low {
		case "as", "into":
			if hc != reqInput && hc != reqReply && hc != reqEdit || digest {
				p.signal = true
			}
		case "to":
			if outputish || (noun && vc == reqTransform) {
				p.signal = true
			}
		case "in":
			switch {
			case format && k+1 < p.end && toks[k+1].is("format", "form"):
				if hc != reqInput && hc != reqReply && hc != reqEdit {
					p.signal = true
				}
			case !toks[i+1].is("a", "an") || i > 0 && toks[i-1].is("is", "are", "was", "were", "be", "goes", "go"):
				// "in the PDF" is where something already is; "what is in a PDF"
			case detectOutputish(hc) || digest:
				p.signal = true // "put the results in a CSV", "summarize X in a PDF"
			case hc == reqReply && (noun || detectFormats[toks[k].low]):
				p.signal = true // "explain the results in a Word document"
			}
		}
		return
	}

	strong := detectFormats[t.low] && detectFormatHead(u, i, p.end) || detectCountedFormat(u, i, p.end)
	if !strong && !detectFileNounHead(toks, i, p.end) {
		return
	}
	if detectInputPreps[prep] || !outputish {
		return
	}
	for k := i - 1; k >= p.start && k >= i-2; k-- {
		if detectInputDets[toks[k].low] || detectTempWords[toks[k].low] {
			return
		}
	}
	if prepOfVerb {
		return // "advice on naming files": not the verb's object
	}
	p.signal = true
}

// detectOutputish reports whether a verb of class c makes its object an
// output.
func detectOutputish(c reqClass) bool {
	return c == reqOutput || c == reqExport || c == reqAttach || c == reqSend || c == reqPseudo
}

// detectCountedFormat reports whether the text format at toks[i] is a counted
// noun of its own, so a document: "a CSV of all active users", "a clean JSON",
// but not "a JSON parser", "a Markdown summary" or "JSON" alone.
func detectCountedFormat(u *reqUnit, i, end int) bool {
	toks := u.toks
	if strong, ok := detectFormats[toks[i].low]; !ok || strong || toks[i].kind != reqWord {
		return false
	}
	switch {
	case i > 0 && toks[i-1].is("a", "an"):
	case i > 1 && toks[i-2].is("a", "an") && toks[i-1].kind == reqWord && !detectFunction[toks[i-1].low] &&
		detectLemma(toks[i-1].low) == "" && !detectFileNouns[toks[i-1].low]:
	default:
		return false
	}
	if i+1 >= end {
		return true
	}
	n := toks[i+1]
	return n.kind == reqPunct || n.kind == reqWord && (detectFunction[n.low] || strings.HasSuffix(n.low, "ing"))
}

// detectFormatHead reports whether toks[k] is a format word used as the head of
// its noun phrase ("a CSV", "a PDF report") rather than as a modifier ("a CSV
// parser").
func detectFormatHead(u *reqUnit, k, end int) bool {
	t := u.toks[k]
	if _, ok := detectFormats[t.low]; !ok || t.kind != reqWord {
		return false
	}
	if k+1 >= end {
		return !t.is("word")
	}
	n := u.toks[k+1]
	if t.is("word") {
		return n.is("document", "documents", "doc", "docs", "file", "files")
	}
	if n.kind != reqWord || detectDocNouns[n.low] || detectFunction[n.low] || detectDeterminers[n.low] ||
		u.verbAt(k+1) || strings.HasSuffix(n.low, "ing") {
		return true
	}
	_, format := detectFormats[n.low]
	return format
}

// detectFileNounHead reports whether toks[k] is "file", "attachment" or the
// like used as a noun of its own ("a file"), not as a modifier ("file
// permissions").
func detectFileNounHead(toks []reqToken, k, end int) bool {
	if !detectFileNouns[toks[k].low] || toks[k].kind != reqWord {
		return false
	}
	return k+1 >= end || !detectFileModifiers[toks[k+1].low]
}

// detectMarkerLen returns the length of a delivery marker at toks[i]
// ("downloadable", "download link", "for download", "as an attachment"), or 0.
func detectMarkerLen(toks []reqToken, i int) int {
	at := func(k int, words ...string) bool { return k < len(toks) && toks[k].is(words...) }
	t := toks[i]
	switch {
	case t.is("downloadable"):
		return 1
	case t.is("download") && at(i+1, "link", "links", "url"):
		return 2
	case t.is("for", "to", "can", "could") && at(i+1, "download"):
		return 2
	case t.is("as"):
		k := i + 1
		if at(k, "a", "an") {
			k++
		}
		if at(k, "attachment", "attachments", "download") {
			return k - i + 1
		}
	}
	return 0
}

// detectPronounAt reports whether toks[i] is a pronoun object that refers back
// to a file ("it", "them", "this", "the file", "these files").
func detectPronounAt(toks []reqToken, i, end int) (found, plural bool) {
	t := toks[i]
	next := func() (reqToken, bool) {
		if i+1 < end {
			return toks[i+1], true
		}
		return reqToken{}, false
	}
	switch {
	case t.is("it"):
		return true, false
	case t.is("them", "both"):
		return true, true
	case t.is("this", "that", "these", "those", "the"):
		n, ok := next()
		plural := t.is("these", "those")
		if ok && n.is("file", "attachment", "output", "document") {
			return true, plural
		}
		if ok && n.is("files", "attachments", "outputs", "documents") {
			return true, true
		}
		if !t.is("the") && (!ok || n.kind != reqWord || detectFunction[n.low]) {
			return true, plural
		}
	}
	return false, false
}

func detectRepoAt(toks []reqToken, i int) bool {
	t := toks[i]
	if t.is("pr", "prs", "mr", "branch", "branches", "commit", "commits") {
		return true
	}
	return t.is("pull", "merge") && i+1 < len(toks) && toks[i+1].is("request", "requests")
}

// detectPrepSkip reports whether t is transparent when looking for the word
// that governs a file: other files, coordinators, determiners, "file",
// quotes.
func detectPrepSkip(t reqToken) bool {
	switch t.kind {
	case reqFile:
		return true
	case reqPunct:
		return !t.punct(";", ".", "!", "?")
	case reqWord:
		return detectDeterminers[t.low] || detectInputDets[t.low] || detectPrepFillers[t.low]
	}
	return false
}

// detectQualifier returns the index of a "not a deliverable" qualifier in
// toks, or -1.
func detectQualifier(toks []reqToken) int {
	for i, t := range toks {
		if t.is("non-deliverable", "non-deliverables") {
			return i
		}
		if !t.is("not", "no", "never", "isn't", "aren't", "nor") {
			continue
		}
		for j := i + 1; j < len(toks) && j <= i+5; j++ {
			if toks[j].kind != reqWord {
				break
			}
			if toks[j].is("deliverable", "deliverables", "delivery", "delivered") {
				return i
			}
		}
	}
	return -1
}

// detectDenialAt reports whether an expected-denial marker starts at toks[i]:
// "must be denied", "should fail", "is rejected", "negative test", "EACCES".
func detectDenialAt(toks []reqToken, i int) bool {
	t := toks[i]
	prev := func(words ...string) bool { return i > 0 && toks[i-1].is(words...) }
	switch {
	case t.is("denied"):
		return prev("be", "is", "are", "was", "were", "been", "being", "get", "gets", "got", "permission", "access")
	case t.is("fail"):
		return prev("must", "should", "will", "to", "shall")
	case t.is("rejected", "refused", "blocked", "forbidden", "prevented"):
		return prev("be", "is", "are", "was", "were", "been", "get", "gets")
	case t.is("negative"):
		return i+1 < len(toks) && toks[i+1].is("test", "tests", "case", "check")
	case t.is("eacces", "eperm", "erofs"):
		return true
	case t.is("succeed"):
		return prev("not", "never")
	case t.is("permitted", "allowed"):
		return prev("not")
	}
	return false
}

// ---------------------------------------------------------------------------
// Stage 5: across units

// detectRepoWork makes the outputs of code tasks repository work (rule 8):
//   - a source file created in the source tree: a source-code extension
//     (detectSourceExts) and a source directory in its path ("src/Button.tsx")
//     or a code noun in its phrase ("a new React component in Button.tsx", "a
//     unit test in parser_test.go");
//   - a build output: after a unit or in a unit that builds the project ("build
//     the project", "compile the app"), a file under a build directory or with
//     a build extension ("dist/app.js", "public/bundle.js") that the build
//     verb produces or that a passive verb checks ("make sure dist/app.js is
//     generated"); an explicit "write the log to build.log" stays an output.
//
// A Deliverables item, a delivered file (attach, send, downloadable…) and an
// exported one stay requested.
func detectRepoWork(units []*reqUnit) {
	built := false // the unit before builds the project
	for _, u := range units {
		builds := detectBuilds(u)
		for _, p := range u.phrases {
			code := false
			for i := p.start; i < p.end; i++ {
				code = code || detectCodeNouns[u.toks[i].low] && u.toks[i].kind == reqWord
			}
			for _, m := range p.mentions {
				if m.role != reqRoleOutput || m.delivery || u.item || m.verb >= 0 && u.cls[m.verb] == reqExport {
					continue
				}
				dirs, ext := detectPathParts(m.name)
				switch {
				case detectSourceExts[ext] && (code || slices.ContainsFunc(dirs, func(d string) bool { return detectSourceDirs[d] })):
					m.role = reqRoleRepo
				case (builds || built) && (detectBuildExts[ext] || slices.ContainsFunc(dirs, func(d string) bool { return detectBuildDirs[d] })) &&
					(m.passive || m.verb >= 0 && detectBuildVerbs[detectLemma(u.toks[m.verb].low)]):
					m.role = reqRoleRepo
				}
			}
		}
		built = builds
	}
}

// detectBuilds reports whether u builds a project: a build verb, not negated,
// whose object is a project noun ("build the project", "compile the app").
func detectBuilds(u *reqUnit) bool {
	for i, t := range u.toks {
		if t.kind != reqWord || u.neg[i] || !detectBuildVerbs[detectLemma(t.low)] && !detectBuildVerbs[t.low] {
			continue
		}
		for k := i + 1; k < len(u.toks) && k <= i+4; k++ {
			n := u.toks[k]
			if n.kind != reqWord {
				break
			}
			if detectProjectNouns[n.low] {
				return true
			}
			if !detectDeterminers[n.low] && (detectFunction[n.low] || detectLemma(n.low) != "") {
				break
			}
		}
	}
	return false
}

// detectPathParts returns the lower-cased directories and extension of the
// file name s.
func detectPathParts(s string) (dirs []string, ext string) {
	low := strings.ToLower(s)
	parts := strings.FieldsFunc(low, func(r rune) bool { return r == '/' || r == '\\' })
	if len(parts) == 0 {
		return nil, ""
	}
	base := parts[len(parts)-1]
	return parts[:len(parts)-1], base[strings.LastIndexByte(base, '.')+1:]
}

// detectDenials marks denied-write phrases (rule 7).
func detectDenials(units []*reqUnit) {
	for ui, u := range units {
		next := ui+1 < len(units) && units[ui+1].denial
		for _, p := range u.phrases {
			marker := p.end // a marker inside the phrase denies the files before it
			for i := p.start; i < p.end; i++ {
				if detectDenialAt(u.toks, i) {
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
				if (whole || m.tok < marker) && m.role == reqRoleOutput && !m.forbid {
					m.role, m.delivery = reqRoleDenied, false
				}
			}
		}
	}
}

// detectPronouns resolves pronoun objects of delivery, negated delivery and
// repository verbs.
func detectPronouns(units []*reqUnit) {
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
			deliver := (p.attach || p.send || p.marker) && !p.denied
			repoRef := (p.repoVerb || p.repo) && !p.negated
			if !p.pronoun || !(deliver || p.negDeliver || repoRef) {
				continue
			}
			own := false
			for _, m := range p.mentions {
				if m.role == reqRoleOutput || m.forbid {
					own = true
				}
			}
			if own {
				continue
			}
			ms, ph := detectResolve(units, ui, pi, p.plural)
			switch {
			case deliver:
				for _, m := range ms {
					if !m.forbid {
						m.role, m.delivery = reqRoleOutput, true
					}
				}
				if ph != nil {
					ph.delivered = true
				}
				if len(ms) > 0 || ph != nil {
					p.signal, p.delivered = false, false
				}
			case p.negDeliver:
				for _, m := range ms {
					m.forbid = true
				}
				if ph != nil {
					ph.forbid = true
				}
			case repoRef:
				for _, m := range ms {
					m.repoRef = true
				}
			}
		}
	}
}

// detectResolve finds what a pronoun in phrase pi of unit ui refers to: the
// files (the last one, or all of them for a plural) of the nearest earlier
// phrase in the unit that has files, or an earlier phrase's unnamed request;
// for the unit's first phrase, the last such phrase of the previous unit that
// is not a bare qualifier or denial remark.
func detectResolve(units []*reqUnit, ui, pi int, plural bool) ([]*reqMention, *reqPhrase) {
	pick := func(p *reqPhrase) []*reqMention {
		if plural {
			return p.mentions
		}
		return p.mentions[len(p.mentions)-1:]
	}
	u := units[ui]
	for q := pi - 1; q >= 0 && q >= pi-8; q-- {
		pp := u.phrases[q]
		switch {
		case len(pp.mentions) > 0:
			return pick(pp), nil
		case pp.signal:
			return nil, pp
		case pp.pronoun:
			continue // "review it and attach it"
		}
		return nil, nil
	}
	for k := ui - 1; k >= 0 && k >= ui-8; k-- {
		pu := units[k]
		if pu.bare && (pu.qualifier >= 0 || pu.denial) {
			continue
		}
		if pu.last < 0 {
			return nil, nil
		}
		pp := pu.phrases[pu.last]
		if len(pp.mentions) > 0 {
			return pick(pp), nil
		}
		return nil, pp
	}
	return nil, nil
}

// reqCandidate is one requested output of a unit: a named file (all its
// mentions in the unit) or one phrase's unnamed request.
type reqCandidate struct {
	mentions []*reqMention
	phrase   *reqPhrase
}

func (c reqCandidate) delivered() bool {
	if c.phrase != nil {
		return c.phrase.delivered
	}
	for _, m := range c.mentions {
		if m.delivery {
			return true
		}
	}
	return false
}

func (c reqCandidate) exempt() {
	if c.phrase != nil {
		c.phrase.exempt = true
	}
	for _, m := range c.mentions {
		m.exempt = true
	}
}

// detectCandidates lists the requested outputs of u that start before token
// index before.
func detectCandidates(u *reqUnit, before int) []reqCandidate {
	var out []reqCandidate
	byName := map[string]int{}
	for _, p := range u.phrases {
		if p.start >= before {
			break
		}
		named := false
		for _, m := range p.mentions {
			if m.tok >= before || m.role != reqRoleOutput || m.forbid {
				continue
			}
			named = true
			if k, ok := byName[m.name]; ok {
				out[k].mentions = append(out[k].mentions, m)
				continue
			}
			byName[m.name] = len(out)
			out = append(out, reqCandidate{mentions: []*reqMention{m}})
		}
		if !named && p.signal && !p.denied && !p.forbid {
			out = append(out, reqCandidate{phrase: p})
		}
	}
	return out
}

// detectQualifiers applies "not a deliverable" qualifiers (rule 6).
func detectQualifiers(units []*reqUnit) {
	for ui, u := range units {
		if u.qualifier < 0 {
			continue
		}
		cands := detectCandidates(u, u.qualifier)
		if len(cands) == 0 && ui > 0 {
			cands = detectCandidates(units[ui-1], len(units[ui-1].toks))
		}
		if len(cands) == 1 && !cands[0].delivered() {
			cands[0].exempt()
		}
	}
}

func detectCollect(units []*reqUnit) Requests {
	forbidden := map[string]bool{}
	delivered := map[string]bool{}
	plain := map[string]bool{}
	repo := map[string]bool{}
	unnamed := false
	for _, u := range units {
		for _, p := range u.phrases {
			for _, m := range p.mentions {
				switch {
				case m.forbid:
					forbidden[m.name] = true
				case m.role != reqRoleOutput:
				case m.delivery:
					delivered[m.name] = true
				case !m.exempt:
					plain[m.name] = true
				}
				if m.repoRef {
					repo[m.name] = true
				}
			}
			if p.signal && !p.denied && !p.forbid && !p.negated && (!p.exempt || p.delivered) && !p.namesOutput() {
				unnamed = true
			}
		}
	}
	var files []string
	for name := range delivered {
		if !forbidden[name] {
			files = append(files, name)
		}
	}
	for name := range plain {
		if !forbidden[name] && !delivered[name] && !repo[name] {
			files = append(files, name)
		}
	}
	slices.Sort(files)
	return Requests{File: unnamed || len(files) > 0, Files: files}
}

// ---------------------------------------------------------------------------
// Lexicon

type reqClass uint8

const (
	reqNone      reqClass = iota
	reqOutput             // write, create, save: the object is an output
	reqExport             // export: an output verb that asks for a file by itself
	reqAttach             // attach, upload: delivery that asks for a file by itself
	reqSend               // send, share, publish: delivery of a file named elsewhere
	reqTransform          // convert, render: the object is the source, to/into/as the output
	reqInput              // read, compare: the object is an input
	reqReply              // reply, explain: an answer in text
	reqEdit               // update, fix: in-place work
	reqRepo               // commit, push, merge
	reqProbe              // attempt, try
	reqPseudo             // the noun "deliverable": what follows is an output
)

var detectVerbs = func() map[string]reqClass {
	m := map[string]reqClass{}
	add := func(c reqClass, words string) {
		for _, w := range strings.Fields(words) {
			m[w] = c
		}
	}
	add(reqOutput, "write create produce generate save output emit dump store make build draft prepare "+
		"compose put place provide give return package bundle author assemble persist serialize "+
		"plot draw touch")
	add(reqExport, "export")
	add(reqAttach, "attach upload")
	add(reqSend, "send share email e-mail deliver publish forward hand")
	add(reqTransform, "convert transform turn translate reformat transcode render compile copy extract "+
		"encode decode compress zip archive split")
	add(reqInput, "read summarize summarise review analyze analyse compare parse load open inspect check "+
		"examine use process import ingest scan study audit validate verify evaluate assess count search "+
		"grep find consult view skim download fetch run execute test interpret classify consider look diff "+
		"cite quote proofread see")
	add(reqReply, "reply respond answer tell say explain describe discuss show list paste print report")
	add(reqEdit, "update edit modify fix refactor patch change tweak adjust correct improve rename delete "+
		"remove rewrite revise append insert replace clean lint add implement bump migrate amend "+
		"restructure reorganize reorganise optimize optimise document annotate debug repair resolve "+
		"overwrite truncate move extend rework polish tidy refine")
	add(reqRepo, "commit push merge rebase")
	add(reqProbe, "attempt try")
	add(reqPseudo, "deliverable")
	return m
}()

var detectIrregular = map[string]string{
	"wrote": "write", "written": "write", "made": "make", "built": "build", "sent": "send",
	"gave": "give", "given": "give", "drew": "draw", "drawn": "draw", "ran": "run", "found": "find",
	"told": "tell", "said": "say", "shown": "show", "rewrote": "rewrite", "rewritten": "rewrite",
	"saw": "see", "seen": "see",
}

// detectLemma returns the lexicon verb that w is a form of, or "".
func detectLemma(w string) string {
	if _, ok := detectVerbs[w]; ok {
		return w
	}
	if b, ok := detectIrregular[w]; ok {
		return b
	}
	known := func(b string) bool { _, ok := detectVerbs[b]; return ok }
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

func detectSet(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

var (
	detectExts = detectSet("txt md markdown rst adoc pdf csv tsv json jsonl ndjson xml yaml yml toml ini cfg " +
		"conf log html htm xhtml css scss sass less js mjs cjs ts tsx jsx vue svelte py ipynb rb go rs java kt " +
		"swift c h cc cpp hpp cs php pl sh bash zsh ps1 bat sql db sqlite parquet avro xlsx xls xlsm ods docx " +
		"doc odt rtf pptx ppt odp png jpg jpeg gif svg webp bmp tif tiff ico heic mp3 mp4 wav ogg webm mov " +
		"m4a flac zip tar gz tgz bz2 xz 7z rar jar whl deb rpm dmg iso apk epub ics vcf eml tex bib patch diff " +
		"proto graphql gql lock mod sum tf hcl gradle properties plist wasm bin dat pkl onnx npy npz pem crt " +
		"env dockerfile")
	detectNotFiles = detectSet("node.js vue.js next.js nuxt.js react.js express.js d3.js three.js chart.js " +
		"angular.js ember.js backbone.js nest.js p5.js alpine.js solid.js ext.js deno.js moment.js knockout.js " +
		"pixi.js docs.rs bun.sh")
	detectAbbrevs = detectSet("e.g i.e etc vs cf approx incl eg ie mr mrs ms dr fig al")
	detectLabels  = []string{"deliverables", "deliverable", "output files", "output file", "outputs", "output",
		"artifacts", "artifact"}
	detectDeterminers = detectSet("a an the this these those my your our their its his her any some each " +
		"every no another")
	// detectInputDets mark a noun as something that already exists: an input.
	detectInputDets = detectSet("this these those attached uploaded provided given existing original source " +
		"input above following current old your my their")
	detectFunction = detectSet("to and or but then also please i you we me us it them that which who should " +
		"must can could will would may might shall do does did don't not never be is are was were been being " +
		"so first next finally just only now of for with into as in on at from by about via using than " +
		"instead without if when once after before while here there what how why where")
	detectNegators = detectSet("not never don't dont doesn't didn't mustn't shouldn't won't can't cannot " +
		"needn't avoid refrain skip omit")
	detectOpeners = detectSet("and or but then also plus that which who while after before once when " +
		"without instead rather afterwards finally next additionally so")
	detectFillers = detectSet("then also please finally next afterwards first just only additionally " +
		"optionally separately of than do does not don't dont never must should can will to and always " +
		"carefully immediately")
	detectPrepFillers = detectSet("and or plus both either file files named called new separate single " +
		"two three four several following all")
	// detectNounPreps are prepositions after which a lexicon word is a
	// noun unless it is a gerund ("a report on test results").
	detectNounPreps = detectSet("of on about for in from with regarding into at by via per")
	// detectCausatives take a bare verb after them ("make it", "try open").
	detectCausatives = detectSet("make try attempt")
	// Rule 8: source files, source trees, code nouns, builds.
	detectSourceExts = detectSet("ts tsx js jsx mjs cjs vue svelte py rb go rs java kt swift c h cc cpp hpp cs " +
		"php pl scala dart lua ex exs erl hs ml clj")
	detectSourceDirs = detectSet("src lib pkg internal cmd app apps components component pages hooks test tests " +
		"spec specs __tests__ source sources packages server client")
	detectCodeNouns = detectSet("component components function functions class classes module modules hook " +
		"hooks handler handlers endpoint endpoints method methods interface interfaces struct structs " +
		"controller controllers middleware route routes test tests")
	detectBuildVerbs   = detectSet("build rebuild rebuilt compile recompile bundle transpile transpiled minify minified")
	detectProjectNouns = detectSet("project projects app apps application site website package packages " +
		"library repo repository code codebase binary binaries frontend backend bundle assets extension " +
		"plugin docs documentation")
	detectBuildExts = detectSet("js mjs cjs css map wasm jar war whl exe dll so o class")
	detectBuildDirs = detectSet("dist build out target bin public .next _site")
	// detectDigestVerbs are input verbs that write something new about
	// their input: "summarize the bug reports in a PDF".
	detectDigestVerbs = detectSet("summarize summarise analyze analyse compare evaluate assess audit classify")
	detectInputPreps  = detectSet("of from between against versus vs using about on for regarding like " +
		"comparing than with")
	// detectQuestionWords open a question that asks about something rather
	// than for something ("Who wrote report.pdf?"; not "Can you export …?").
	detectQuestionWords = []string{"who", "what", "when", "where", "why", "how", "which", "whose", "is", "are",
		"was", "were", "does", "do", "did", "has", "have", "had", "isn't", "aren't", "doesn't", "didn't"}
	detectBeForms       = []string{"is", "are", "should", "must", "will", "shall", "goes", "go"}
	detectReplyNouns    = []string{"reply", "chat", "response", "answer", "message", "conversation", "thread", "comment", "body", "channel"}
	detectTempWords     = detectSet("temp temporary tmp scratch intermediate throwaway throw-away")
	detectFileNouns     = detectSet("file files attachment attachments artifact artifacts")
	detectFileModifiers = detectSet("permission permissions system systems path paths name names format formats " +
		"size sizes type types handle handles descriptor descriptors extension extensions structure tree trees " +
		"manager managers picker access mode modes owner owners ownership server servers storage lock locks " +
		"watcher watchers browser dialog header headers io i/o sharing share sync count limit limits api apis " +
		"operations ops hierarchy layout naming encoding locking handling level based contents content")
	detectDocNouns = detectSet("file files document documents doc docs report reports export exports version " +
		"copy attachment output sheet spreadsheet workbook image chart graph plot diagram summary " +
		"invoice presentation deck slides archive download dump snapshot backup format form")
)

// detectFormats maps format words to whether they are inherently a file
// (strong: "a PDF") or only a text format (weak: JSON, CSV — a file only as a
// destination or with a file noun).
var detectFormats = func() map[string]bool {
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
