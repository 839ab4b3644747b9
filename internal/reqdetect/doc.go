// Package reqdetect reads a task's text and reports whether it asks for a file
// and which files it names. It is the reader behind
// deliverable.DetectRequests; Explain says, per file and for the decision,
// which rule decided and the span of text it read.
//
// The rules it implements are stated, numbered 1 to 11, in package
// deliverable's documentation, section "Requested files" (go doc
// github.com/airlockdev/airlock/deliverable); "rule 9" below and in the code
// means that list's rule 9. In one line each: (1) a publication request
// asks for a file; (2) reading or discussing an input does not; (3) a
// format is an output file only through an output name or "as"/"into", not
// "convert X to JSON"; (4) a Deliverables label and its list state
// outputs, minus repository changes, inputs, forbidden, in-place, inline
// and no-file items; (5) negation asks for none; (6) the next sentence can
// exempt one just-requested file as "not a deliverable", unless a delivery
// verb wins; (7) an expected-denied write is an attempt, not a
// deliverable; (8) repository work is not a file deliverable; (9) the
// rules hold in other languages; (10) models, templates and files under
// Inputs or Context headings are inputs; (11) a product feature or bug
// naming a file the product writes is repository work. The worked cases
// in testdata/requested-files.jsonl are examples of them.
//
// One file per stage: tokens.go (tokens and sentences), lines.go (labels, list
// items, paragraphs), phrases.go (verbs, phrases, negation, inline markers),
// roles.go (a file's role in its phrase, unnamed requests), across.go (rules
// across sentences: repository work, denials, pronouns and anaphora,
// qualifiers, collection), languages.go (rule 9: units written in other
// languages) and lexicon.go (every named word list).
//
// Roles come from structure where the text gives it: the object of an output
// preposition ("into", "as", "called", "named") is an output whatever the
// verb, unless "as" is a comparison's ("the same way as X", "such as X")
// or gives the name a thing has in a place a statement names ("The export
// is already in the workspace as X", "The list lives in the repo as X");
// a file in an embedded clause that a noun or verb talks about ("a summary
// of how X differs from Y") is an input; a passive delivery to someone else
// ("X needs to be shared with the team") states a need; a past or perfect verb with a subject ("the CSV I sent you", "we
// produced"), a participle opening a clause ("Given the results in data.csv",
// "Attached you'll find x.docx"), a present-tense verb with a subject ("when
// app.py writes to cache.db", "it writes a log to build.log") or a statement
// of where something is ("is already in data.csv") makes a file an input; a
// negation reaches only its own clause, which ends at ";", ":", a parenthesis
// or a dash; a delivery verb reaches the file of an earlier phrase through
// "it" or through a noun phrase naming a made or edited file ("the updated
// file", "the corrected one", "the result").
//
// How it reads text, stage by stage.
//
// Stage 1, lines (readUnits, readBlock, labelLine). A label line opens a
// Deliverables block: "Deliverable:", "Deliverables", "Output(s):", "Output
// files:", "Artifacts:" (markdown heading, bold and bullet decoration
// allowed), or a line naming the deliverables that ends in ":" or "below"
// ("The deliverables are:"). The text after the label's colon is an item, and
// so is every bullet or numbered line below it (blank lines between bullets
// allowed); plain lines directly under a bare label are items too, and an
// indented line continues the item above it. Any other line ends the block.
// The remaining lines form prose paragraphs: a blank line, a bullet, a heading
// or a line ending in ":" ends a paragraph. The bullets right below a prose
// line ending in ":" (blank lines between them allowed) keep that line as
// their lead: when its last phrase asks for files with an output or delivery
// verb pointing at the list ("Create these:", "Write the two files below:",
// "Attach the following files:": requestsList), each bullet is read as a
// Deliverables item, except that source files there stay repository work.
//
// Stage 2, units (tokenize, splitSentences). Paragraphs and items are
// tokenized into words, file names and punctuation. A file name has a known
// extension (fileExts) and may carry a path ("dist/index.html",
// "/outside/probe.txt", `C:\out\q3.xlsx`); a quoted name may contain blanks
// ("final report.pdf"); URLs, "x.md:12" line suffixes and framework names
// ("Node.js") are not part of a name. Sentences end at ". ! ?" (not after
// "e.g." and the like); each sentence is a unit. A sentence that opens with a
// question word and ends in "?" ("Who wrote report.pdf?") asks about files,
// not for them, unless it is a polite request ("Is it possible to attach the
// log file?", "Do you mind attaching it?": politeAsk).
//
// Stage 3, phrases (markVerbs, splitPhrases). Verbs come from a lexicon of
// classes (verbClasses): output (write, create, save, produce…), export,
// attach (attach, upload), send (send, share, publish, deliver…), transform
// (convert, render, translate…), input (read, summarize, compare…), reply
// (answer, explain…), edit (update, fix, refactor, add…), repository (commit,
// push, merge) and attempt (attempt, try), matched through inflections
// ("writes", "attached", "creating", "written"). A word no lexicon lists is a
// verb of no class of its own (verbUnknown) where it stands after a
// coordinator or "then", or opens its sentence as an imperative does, and
// before an object, a particle allowed between ("and then recreate it as
// graph.svg", "Stitch the three weekly reports together into one PDF",
// "freshen up index.html"): it opens a phrase, a destination after it is its
// own, and the nouns of its object are nouns. In a Deliverables item such a
// verb leaves the item's own reading (it states outputs) in place. "The
// output" or "the format" before a be-form or modal ("the format should be
// PPTX") says what follows is an output. A lexicon word in a noun position is
// a noun (nounPosition): right after a determiner ("a native write", "the
// parsed records") or a "that" after a noun preposition or a verb ("the log
// of that attempt", "return that list"); right after a noun preposition
// unless it is a gerund ("a report on test results", "a list of open
// issues"; not "instead of creating"); as
// the object right after a verb ("create test data"); and after a determiner
// or noun preposition and up to two nouns, adjectives or number-like
// modifiers ("on climate change", "the load test results", "of the code
// changes", "the bug reports in a PDF", "a 40-page settlement draft",
// "write the error counts to counts.json"; not "the script writes out.json",
// not "for each file write a summary"). A unit is cut into clauses at ";" and
// clauses into verb phrases wherever a coordinator, comma or relative pronoun
// is followed by a verb ("…, then attach it", "… and open a pull request", "…
// that fixes X", "… without creating files"), and where a comma is followed
// by "no need to" ("…, no need to summarise it here").
//
// Stage 4, roles inside a phrase (negate, markInline, readPhrase, readMention,
// signalAt).
//   - Negation (rule 5). "do not/don't/never/avoid/skip" before a verb, "no …
//     files", "no need to", "nothing", and a phrase opened by "without",
//     "instead of" or "rather than" negate the whole phrase; "not", "no" and
//     "without" before a noun negate that noun phrase only ("not as a file",
//     "no report.pdf", "no other files"). A verb phrase opened by "or" or
//     "nor" after a negated one is negated too ("please don't generate any
//     files or add attachments": disjunctions). "Don't forget to" is
//     positive. A
//     file named in a negated output or delivery phrase is forbidden: it is
//     never requested, whatever else the text says. A negated send to
//     someone other than the user forbids that other action, not the
//     delivery ("Produce the invoice as a PDF (do not email it to the
//     client)", "don't share it with the sales team": toThirdParty; "don't
//     send it to me" still forbids), and a pronoun after a topic
//     preposition is what a message is about, not the object it delivers
//     ("do not email the client about it").
//   - Named files (rules 2, 3, 4, 8). A file takes its role from the nearest
//     verb before it in its phrase, or from a passive verb after it
//     ("report.pdf must be attached"), unless an input preposition governs it
//     ("of", "from", "between", "about", "with", "using"…): output, export,
//     attach and send verbs make it an output, except a source followed by
//     "to/as" and another file ("save notes.md as notes.pdf"); transform verbs
//     make their object the source and the file after "to/into/as" the output;
//     input and reply verbs make it an input; edit verbs an in-place edit; a
//     phrase that mentions a pull request, branch or commit makes it
//     repository work. In a Deliverables item a file with no verb is an
//     output, unless the item says it is changed "in place"; a file that a
//     verb no lexicon lists, opening the item, works on is changed where it
//     is (itemEdit: "- refresh styles.css so buttons use the new palette",
//     "- modernize the wording in letter.docx", "- freshen up index.html"),
//     unless that word reads as a modifier ("- Final report.pdf", "- Annual
//     report.pdf"), or stands right before the file with no particle and
//     no clause of result after the file ("- Quick notes.md on the
//     meeting"; "- recolour logo.svg to match the brand" is one), or the
//     item names, stores or places the file ("- Keep the final version in
//     notes.md"); a particle can make a lexicon verb an edit ("touch up
//     README.md": editParticles).
//   - Statements (rule 2). A verb is a statement, and its files inputs, when
//     it is a past or perfect form with a subject (stated: "I sent", "the
//     designer exported", "has been uploaded", "I've put": sameParticiples;
//     also a regular past form no lexicon lists after a subject pronoun: "I
//     dropped … into x.xlsx"), a participle opening a prose clause before its
//     object or a subject (presents: "Given the results in data.csv",
//     "Attached you'll find minutes.docx"), or a present-tense form with a
//     subject (describes): a file, a quoted command ("`make build` writes"), a
//     relative pronoun after a noun ("a Makefile target that builds app.zip"),
//     a third-person pronoun, or a noun opening its clause, a subordinate
//     clause ("when", "if", "whenever") or an embedded one ("why", "how"):
//     "when app.py writes to cache.db", "it writes a log to build.log"; for
//     a present, progressive or future form the noun may be a compound after
//     its determiner ("Our legacy CRM exports contacts as …": opensClause),
//     and a past form may stand in a relative clause with no "that" ("the
//     report the agency sent": reducedRelative). A base form after a subject
//     pronoun that opens a subordinate clause states a habit ("when we
//     export from Amplitude", "If we export the ledger as XLSX": habitual).
//     A bare participle of a delivery or export verb (presentedClasses)
//     describes a thing that exists, with no auxiliary before it: after "("
//     ("(exported to rotation.tsv, attached)", "(shared in Drive)"), after a
//     file ("headcount_plan.xlsx attached") or after a comma following a
//     file or inside a parenthesis ("(sample: inv.edi, attached)":
//     describesThing); not in a Deliverables item, and not when a
//     destination follows it in a sentence with an earlier request verb
//     ("Send me the final deck (exported as PDF)": specifies). In a
//     Deliverables item such a participle after a noun is no modifier of
//     the noun ("the prices listed on …" is one in prose) but says how the
//     output is given ("- screenshots of the page attached to this
//     ticket" asks for files), unless a reading or reply verb takes the
//     noun as its object or a negator or "no" stands before it in its
//     clause ("- look at the screenshot attached to this task", "- no
//     screenshots attached": modifierKept). That verb
//     asks only in its base form, the imperative's, or as a want verb
//     ("The client needs the deck (exported as deck.pdf)": requestVerb); a
//     past, perfect or -s form states what someone did, so "Opposing
//     counsel sent a draft (attached as draft_v4.pdf)" describes an input.
//     After such a statement the participle of any verb opening a
//     parenthesis describes the thing stated ("Our designer exported the
//     logo (saved as logo_v3.svg)": statedBefore). A
//     clause asking for that behaviour ("make sure the script writes to
//     out.json", "so that it saves …") and a want verb ("the client needs a
//     PDF") are requests; a want verb before "to" and a verb is none ("I
//     just need to know whether …": the verb after "to" governs). A verb after a wh-word and "to" ("explain how to
//     export report.pdf", "where to save it") asks for knowledge, not work
//     (howTo), and reads as a reply verb. A past statement inside the object
//     of an earlier verb ("put everything you found into findings.xlsx") does
//     not take the phrase over: a destination after it belongs to the earlier
//     verb.
//   - Presented inputs and sources. A file that such a describing
//     participle follows, past a comma, "(" or quote marks, is an input
//     whatever verb stands before it ("I want a gut check on our plan
//     (plan.xlsx attached)": presentedAfter); so is a file in the noun phrase
//     of a source preposition after a verb whose object already named what
//     it makes ("put together a downloadable talking_points.pdf from the
//     notes in my_week.md", "a one-pager from the figures in kpis.csv";
//     not "Write the results from the test run in results.json": inSource),
//     and a file whose noun phrase an input preposition governs across up
//     to three modifiers ("a comparison of incidents.csv against last
//     quarter's baseline.csv": npPrep; "for" excepted). After a parenthesis
//     that opens a phrase closes, the verb before the parenthesis governs
//     again ("generate a changelog … (attached) as CHANGELOG.md":
//     resumedVerb). Such inputs, and a file stated as given by a delivery
//     verb ("the export I attached (metrics.csv)", "the report the agency
//     sent"), are existing: no delivery marker of their phrase delivers them
//     and a pronoun reaches them only through "back" ("send it back"). So
//     are files a statement of place presents: after a be-form and a
//     locative preposition, the place perhaps named in two steps ("is in
//     the repo under templates/monthly.docx", placeSpan: locatedIn), the
//     name "as" gives the thing in that place, after such a be-form or after
//     a present-tense verb no lexicon lists with a subject ("The Q3 export
//     is already in the workspace as churn_q3.csv", "The vendor list lives
//     in the repo as vendors.yaml": placeStated; not the imperative "keep it
//     in the workspace as notes.md", nor "make sure the summary is in the
//     folder as summary.docx": ensured), a file
//     that is the subject of such a statement ("budget.xlsx is in the
//     shared drive": locatedSubject), and the object of "you'll find" or
//     "you can find" (findsThere). A later "save it as a downloadable DOCX"
//     or "export it as a PDF" passes them over: it asks for a new unnamed
//     file in that format, not for the file presented.
//   - Topics, comparisons and needs. A file in an embedded clause opened by
//     "how", "why", "whether", "what", "where", "when" or "if" right after
//     a noun's topic preposition ("of", "on", "about", "into"…) or a verb
//     whose object the clause is (a recipient or particle between allowed)
//     is what the noun or verb talks about, an input, whatever verb stands
//     in the clause: "- a summary of how jan.csv differs from feb.csv", "- a
//     report on whether staging.yaml matches prod.yaml", "tell me if a.csv
//     and b.csv agree", "write up how import.py maps fields"
//     (topicClause, looking back at most topicSpan tokens). Punctuation or
//     a clause joiner ends the clause, except inside a run of files; with a
//     verb before the clause that is no reading or reply verb, a file after
//     an output preposition, "to" or a storage preposition is that verb's
//     destination ("Write an explanation of how parser.py handles empty
//     lines to notes.md"). The "as" of a comparison names the standard
//     compared with, an input, not a destination: after "same" or "such"
//     up to comparisonSpan words back ("keyed the same way as
//     locales/en.json", "with the same structure as staging.yaml", "such as
//     contacts.vcf"), after an earlier "as" ("as detailed as
//     notes-1.2.md"; not "as well as"), before a clause of its own ("just as
//     CHANGELOG-old.md does"), and "to" after "similar", "identical"… or
//     their adverbs (comparisonAt, comparedAt); such an "as" or "to" makes no
//     unnamed destination either, and a transform verb whose only "as" is
//     a comparison's names no destination ("Reformat config.yaml the same
//     way as base.yaml" edits in place). "Such as" after a file noun names
//     examples of the noun, which take the role its verb gives ("Attach the
//     usual files, such as notes.md and log.txt": examplesOf), and a file
//     whose name carries the number-like identifier of the phrase's object
//     names that object, not a standard ("Draft the Q4 version in the same
//     structure as okrs-q4.docx": echoesObject). A delivery verb in a
//     passive infinitive or modal passive ("needs to be shared", "has to be
//     sent", "should be uploaded") that sends to someone other than the
//     user ("with the mobile team", "to legal": toThirdParty) or names
//     another agent ("by the ops team"; not "by Friday": agentAt) states a
//     need, not a delivery (passiveNeed): it delivers nothing, its file is
//     an existing input, and later sentences are read by their own rules
//     ("… needs to be shared with the mobile team. Convert
//     config/settings.yaml to JSON and paste the output in your reply" asks
//     for no file). "report.pdf must be attached to the task", "data.csv
//     should be shared with me" and a Deliverables item ("- report.pdf (to
//     be shared with the board)") still ask for the file.
//   - Products and edited parts. With no verb to govern it, a file after a
//     storage preposition ("in", "inside") that holds a made thing ("keep the
//     result in backlog.csv", "leave the cleaned data in clean.csv", "keep a
//     record of the attempt in notes.md") or a pronoun ("file them in
//     oldest.json") is an output (storedIn). A file governed by "of" right
//     after an edit verb's object ("tidy up the formatting of resume.docx") is
//     the file the verb edits (editedPart). A file right after a verb of
//     giving and before an indefinite noun phrase receives it ("give
//     invoice.pdf a once-over": receives) and is not produced. A file after a
//     naming verb and its object is the name it gives ("name it
//     INV-2026-001.pdf", "call the output file summary.txt": namedBy). A file
//     that is the subject of a want verb ("Résumé.PDF needs a new header") is
//     what the work changes (wantsWork). A transform verb that names no
//     destination ("reformat config.yaml so the keys are sorted") reshapes its
//     file in place. A repository verb followed by an output preposition and a
//     file, in a phrase that names no pull request, branch or commit, joins
//     files ("merge a.csv and b.csv into merged.csv": combineFiles) and reads
//     as a transform verb.
//   - The governing verb. A verb inside a prepositional complement of the verb
//     before it ("write a guide on how to use the API", "a report on testing
//     X") does not take the phrase over: a destination after it ("as a PDF",
//     "to guide.md") belongs to the verb that governs the phrase.
//   - Unnamed requests (rules 1, 3). An export verb, an attach/upload verb, a
//     delivery marker ("downloadable", "as an attachment", "for download"), a
//     destination ("as/into a CSV" after any governing verb but a reading,
//     reply or edit verb; "into" also after an edit verb, and after a
//     reading verb with its object between, since it names what the object
//     becomes: "parse the log into JSON", "load the line items into a CSV";
//     not the particle of "look into JSON Schema"; "as" after a reading verb
//     says how the input is read: "fetch the data as JSON"; resultPreps;
//     "to a PDF" after an output verb, "to a JSON file" or
//     an inherently binary format ("to a PDF", "to PNG") after a transform
//     verb, "in XLSX format", "in a PDF" or "in a CSV file" after an output or
//     digest verb, "in a Word document" after a reply verb; an inherently
//     binary format before the head noun of the destination counts as well:
//     "into a PDF handout", "as a PNG poster", "to PDF handouts", and after
//     "into" a text format before a plural head noun, a set of documents:
//     "into JSON fixtures", "into CSV batches of 500 rows" (not "into a SQL
//     table", "as Markdown bullet points": plural); but not a
//     tool noun made from a lexicon verb, "into a PDF generator", "a PNG
//     viewer", "into a JSON validator": destFormat, toolNoun), or a file noun or
//     inherently binary format as the object of an output verb ("create a
//     file", "generate a PDF", "an Excel workbook", "a PNG bar chart") or of a
//     phrasal verb of making that no lexicon lists ("whip up a CSV", "throw
//     together a PDF": phrasalMake) asks for a file. A digest verb (summarize,
//     analyze, compare…: digestVerbs) reads an input but writes something new,
//     so "as a PDF" or "in a PDF" after it is a destination; "in the PDF" is
//     where something already is. Text formats (JSON, CSV, HTML, Markdown…)
//     ask for a file only as a destination, with a file noun, or as a counted
//     noun of their own ("produce a CSV of all active users"; not "a CSV
//     parser"), or before a document noun ("a CSV export", "a JSON dump":
//     formatDocNouns): "convert users.csv to JSON" is a text request. A format
//     or file after "this", "the attached", "of", after a preposition between
//     it and the verb ("advice on naming files"), a modifier use ("a CSV
//     parser", "file permissions") and a temporary file are not requests. A
//     format followed by a participle or a noun preposition still heads its
//     noun phrase ("into JSON keyed by week", "one CSV per region"); an edit
//     verb reshaping its object "into" a format makes a document ("restructure
//     the scans into JSON grouped by dock door"). A delivery marker in a
//     definite subject of a statement describes what exists ("The
//     downloadable report the agency sent (x.pdf) claims …":
//     inStatedSubject).
//   - Inline answers (rule 4). An inline marker ("inline", "in the
//     reply/chat/response", "as text", "in a code block") covers the conjunct
//     right before it: a run of file names ("index.html and styles.css inline
//     in the reply") or one noun phrase, "of" included ("index.html and a
//     short summary in the reply" leaves index.html requested; "a CSV of the
//     users in the chat" is inline). A verb of showing (show, paste, print)
//     with a pronoun object and an inline marker makes the file the pronoun
//     refers to inline ("write script.py …, but only show it to me inline"),
//     and so does "here" ("render README.md as HTML and paste it here": the
//     unnamed request it refers to is shown, not delivered); "summarize it in
//     the chat" does not. A reduced participle clause between a file and the
//     marker says how the file is given and is passed over ("main.go
//     written inline in the reply", "query.sql, written out inline in the
//     chat", "schema.sql, to be written inline", "app.js, pasted in full in
//     your reply": beforeGiven). A marker "in the thread/channel…" right
//     after a file destination ("as a CSV", "as an XLSX file") of a delivery
//     verb or a verb no lexicon lists names where the file is shared, not
//     text ("Share the segment list as a CSV in this thread", "Post it as
//     an XLSX in the channel": deliveryVenue).
//
// Stage 5, across units (markRepoWork, markDenials, resolvePronouns,
// applyQualifiers). Every reference back across sentences (a pronoun, a
// noun phrase naming an earlier file, "both", a qualifier, a denial remark
// in the next sentence, a build step before) made in a Deliverables item
// or in a bullet a request introduces stays inside its own item (rule 4
// reads "within such an item": reaches): "- a branch release/s14 with the
// version bump" or "- a status blurb; paste it inline" leaves the file of
// the item above it requested. Prose refers across its sentences.
//   - Code tasks (rule 8). An output that is a source file created in the
//     source tree (a source extension and a source directory such as src/, or
//     a code noun such as "component" or "test" in its phrase: "create a new
//     React component in src/Button.tsx") or a build output (in that unit or
//     the next one after "build the project": a file under dist/, build/… or
//     with a build extension that the build verb produces, or any file a
//     passive verb checks: "build the project and make sure dist/app.js is
//     generated", "… make sure site/index.html is produced") is repository
//     work, and so is any source file made in a text that asks anywhere for
//     a pull request, branch or commit, not negated ("split it into
//     invoice_model.py and invoice_tax.py … and open a pull request"). A
//     Deliverables item, an exported file and a delivered one (attach,
//     send, downloadable…) stay requested.
//   - Denied writes (rule 7). A denial marker ("must be denied", "should
//     fail", "is rejected", "negative test", "EACCES") denies the files before
//     it in its phrase, and every file of an attempt/try phrase whose unit or
//     next unit carries one; a write beside it in another phrase is
//     unaffected.
//   - Pronouns (rule 6). A delivery verb or marker whose object is a pronoun
//     ("attach it", "send it to me", "publish it as an attachment", "make it
//     downloadable") reaches the files of the phrase before it in the unit, or
//     of the last earlier unit that is not a bare qualifier or denial remark
//     (a noun phrase reaches only a made or edited file of its own unit, or a
//     file whose phrase holds the verb its participle is a form of, listed or
//     not: "Shorten abstract.txt … the shortened one", "Normalize the column
//     names in data.csv … the normalized file"; and a file reshaped by a
//     transform verb only through a head naming the same document: "the tidied
//     version", not "the resulting PDF"); the files it reaches are delivered,
//     which wins over any other role or qualifier; "both" gathers two files
//     across earlier units if need be. A verb of making in its base form ("if
//     not, create it": makingVerbs) makes the file it refers to an output. A
//     negated delivery of a pronoun ("don't attach it") forbids them;
//     repository work on a pronoun ("commit it", "open a pull request with
//     it") makes them repository work. A pronoun passes over existing inputs
//     (see Roles) unless it is sent "back"; after a phrase whose files are
//     all inputs and which makes an unnamed request it is that request
//     ("Convert users.csv to a JSON file and share it"); and a phrase that
//     makes a thing it does not name ("turn this into a release overview …
//     and deliver it as a PDF": makesUnnamed) ends the search. "The
//     output" reads as a noun phrase naming a product ("a downloadable copy
//     of the output"), as "the result" does.
//   - Qualifiers (rule 6). A unit saying "not a (task) deliverable" (also "not
//     for delivery", "not to be delivered", "non-deliverable") exempts the one
//     requested output before the qualifier in its own unit or, if there is
//     none, the one requested output of the unit right before it. When that
//     unit requests more than one output, or its output is delivered, the
//     qualifier exempts nothing. "For internal verification" is no qualifier.
//
// Further structure, by stage (each rule is general; the words it reads are
// named lists in lexicon.go).
//   - Lines. A label word may take a dash for its colon ("Deliverables —")
//     and up to two plain modifiers before it ("Expected outputs:", not
//     "Input files:": modifiedLabel). A lead line ending in ":" asks for the
//     bullets below it also when its output, delivery or want verb has no
//     object of its own ("Return:", "What I need back:", "Your output
//     should include:", "What to deliver:") or when a file noun precedes the
//     infinitive ("Files to produce:").
//   - Questions. A question also opens its main clause with a wh-word after
//     a leading phrase and a comma ("Per the spec in docs/spec.md, which
//     fields are required?": leadQuestion), with a contracted wh-word
//     ("What's …?") or with "should/shall" ("Should I export it as CSV?").
//     An embedded question asks about work, not for it: a verb in a clause
//     opened by "whether", or by a wh-word or "if" right after a reply verb
//     and its recipient ("Tell me whether exporting to CSV or XLSX is
//     better", "tell me how converting the slides to PDF would …", "let me
//     know if saving as PDF …": embeddedQuestion), reads as a reply verb and
//     governs a destination after it ("your opinion on whether to export the
//     ledger as XLSX"); so does a gerund that a reading or reply verb takes as
//     its object or its preposition's ("Compare exporting to XLSX with
//     exporting to CSV": discussedGerund). The clause ends at punctuation,
//     except a colon or dash before a gerund that lists the alternatives
//     ("which is faster — exporting to CSV or to XLSX"), or at a clause
//     joiner ("…, then export the ledger as XLSX").
//   - Nouns. A lexicon word is a noun when it ends a compound that opens its
//     clause ("landing page copy (copy.md)": compoundHead), follows a
//     possessive ("the survey's free-text answers"), or is an "-ing" word
//     after a determiner and a noun before a preposition or punctuation
//     ("from the screen recording (signup.mov)").
//   - Inflected forms. An imperative takes the base form, so an -s form
//     ("exports", "saves", "uploads") is never one: opening its clause (the
//     sentence, a clause after punctuation, "that" or a subordinator:
//     "Exports are slow", "reports that downloads fail") or ending the
//     object of a verb past plain modifiers ("Produce two exports", "don't
//     include drafts": objectOfVerb) it is a plural noun (inflectedNoun);
//     after a verb it is that verb's object ("says exports time out"); any
//     other -s form is a finite verb with a subject, a statement ("The
//     nightly job exports results to out.json": finiteS). A perfect form
//     opening a prose sentence before a plain word modifies it ("Exported
//     files open blank"). A want verb ("needs"), an embedded question, a
//     clause asking for the behaviour ("make sure the job exports …") and
//     a label ("… last week. Outputs: summary.json": labelAt) keep their
//     reading.
//   - Statements. Besides past and perfect forms, a verb with a subject
//     other than the addressee states what happens: the present progressive
//     ("I'm sharing budget.xlsx", "They are currently writing spec.md"), the
//     future ("The auditors will send audit.pdf", "I'm going to upload
//     v2.csv"), a base-form past after a pronoun ("I put the answers in
//     survey.xlsx"; not "Could we put …"), a past habit ("We used to export
//     data as CSV"), a present passive of delivery ("proposal.docx is
//     attached"; not "make sure it is attached"), a present passive of an
//     output or export verb after "is/are/gets" and a noun-phrase subject
//     ("The metrics are exported to s3://…", "the log gets written to
//     app.log", "Each build's coverage report is saved to …":
//     presentPassive, passiveSubject; not in a Deliverables item, not a
//     modal or need passive, "must be exported as PDF", "needs to be saved
//     as report.pdf", which asks) and an opening participle before a colon
//     ("Attached: deck.pptx"). A statement governing a destination ("as
//     CSV") asks for nothing.
//   - Wants. "I'd like/love/appreciate" and an unlisted imperative before
//     "me/us" and an object ("Get me a zip of the invoices") are want verbs,
//     and an unlisted word before "up/together" and "a" is a verb of making
//     ("Whip up a quick FAQ page (faq.html)": phrasalMaking); a want whose
//     object is wanted changed ("need the deck updated", "want report.docx
//     fixed") is an in-place edit;
//     "don't need a PDF" and "nobody needs a file" negate the want, "don't
//     need to"/"don't have to" negate the verb after them. An exception
//     ("except", "other than", "apart from") ends the negation before it
//     ("Don't create new files except summary.md").
//   - Roles. A file in parentheses names the noun phrase before it and takes
//     the output preposition governing that phrase ("present it as a chart
//     (spend.png)": appositionPrep). A file followed by "as/to/into" and a
//     format other than its own is a source ("give me users.csv as JSON";
//     not "write report.md as Markdown"). A participle of an edit, reading
//     or reply verb right after a file or a run of files acts on them with
//     no auxiliary ("`README.md` updated with the new numbers", "a.csv and
//     b.csv compared": reducedPassive). A passive verb after a file has its
//     own subject when a noun stands between ("docs/spec.md, which fields
//     are required"). A transform verb in a sentence that says "in place"
//     edits its file, and so does "make" with a predicate adjective after
//     the file ("make the chart in report.pptx bigger": changedBy). A file
//     with no verb is an input after a mark of
//     existence ("the existing report.docx") or before "vs", and an output
//     after a verb of motion ("Results go in results/summary.json", "It
//     should end up in docs/onboarding.md"), before "as the only output", or
//     set off by a comma or parenthesis after a file noun of a request
//     ("keep them all in one file, emails.md": namesFileNoun). A destination after a comma-closed "-ing"
//     adjunct is not the adjunct's ("Transcribe the memo, cleaning up filler
//     words, into memo.txt"). A destination's format may follow adjectives
//     ("into a one-page PDF", "a chart image", "an .ics file", "to MP3"); a
//     file or format accepted as the answer ("a Markdown file is fine") asks
//     for a file, and so does a binary format standing as its own clause
//     after a dash or colon in a request ("I need a checklist — PDF, one
//     page", "Format: PDF"). A digest verb's "into NAME" is an output
//     ("Summarize the notes into summary.md"). "into the reply" is inline,
//     and an inline marker after "both"/"all" covers the run of files
//     before it.
//   - References. "the" and a kind noun ("the spreadsheet", "the shorter
//     clip": kindNouns) refer back to a made or edited file of that kind; a
//     noun phrase opening a sentence reaches the last phrase of the sentence
//     before ("Edit chapter3.docx. Then email me the edited chapter."); an
//     edit participle with a kind noun names the file it changed even if
//     first named as an input ("The team uses candidates.xlsx. … share the
//     updated sheet"); a transform that keeps the document names its file by
//     its participle ("the reformatted file": keepingTransforms); and
//     a noun phrase reaches a file no verb governs in the phrase right
//     before it ("Trim intro.mp4 … upload the shorter clip"). A repository
//     verb reaching an unnamed request makes it repository work ("build the
//     Docker image and push it"); a negated one makes nothing repository
//     work ("— don't commit it"). In a Deliverables item an edit verb whose
//     object refers back ("edit the existing file", "update it") says the
//     item's file is changed in place.
//   - Denials. A refusal verb after a modal marks an expected denial ("the
//     sandbox should reject it").
//
// Other languages (rule 9: languages.go, readForeign). A unit with CJK
// text, with more function words of German, French, Spanish, Portuguese,
// Italian or Dutch than of English, or with no English function word and a
// cue word no English lexicon lists, is read by cue words instead of the
// English grammar above; the lists are in lexicon.go, one per role.
// Latin-script words match folded (lower case, no accents) and by stem
// ("exportier*"), with an elided article or negation ("l'export",
// "n'exporte") and hyphenated clitics ("joins-le") allowed, and separable
// verbs by their particle later in the unit ("voeg … bij", "lade … hoch");
// a capitalized word inside a sentence is a noun, not a verb ("die
// Zusammenfassung"). CJK text has no spaces: a file name written against
// it is cut out of its run ("整理成summary.pdf並附上", "report.pdf로"), and
// cues match as substrings of a run ("並附在這個任務上" holds "附在"). A file
// takes the role of the nearest verb cue before it, or after it when none
// is before (after first in Japanese and Korean), never across a
// parenthesis or ";": a delivery, export or send word makes it a delivered
// output, an output verb an output, a transform verb its source or, after
// a destination word ("als", "en", "como", "成", "为", "로"), its output, a
// reading or reply word ("lies", "réponds ici", "在这里回复") an input. A
// negator reaches the nearest verb cue after it, or before it with no
// punctuation between, a verb of making before a reading word ("nicht
// anhängen", "Hänge die Datei nicht an", "不要附", "添付不要", "첨부하지
// 마세요"); a negated output or delivery forbids its files. A source
// preposition ("aus", "à partir de", "从", "から") makes a file an input;
// so does a presented form ("anbei", "ci-joint", "adjunto", "添付の"), and
// an attachment noun with no other verb cue beside it ("Im Anhang findest
// du …"; "als Anhang" beside a verb is a delivery marker). A file no cue
// governs is an output in a Deliverables item, whose labels exist in each
// language ("Livrables", "Ergebnis", "Entregables", "成果物", "交付物",
// "산출물"), or after a naming destination word ("als X"). An output
// followed by a delivery word is delivered ("… als umsatz.xlsx und hänge
// sie an"), and one followed by an inline marker ("hier im Chat", "ici")
// is written inline. A delivery or export word, not negated, asks for a
// file by itself, and so does an output verb before a file noun or binary
// format ("eine PDF-Datei", "PDFファイルを作成"), except the verb of a product
// or a cue naming one (rule 11 below). A unit ending in a question mark
// that opens with a question word ("Wie exportiere ich …?", "¿Cómo …?"),
// or with a CJK how-to word ("如何", "方法"), asks about files, not for
// them; a cue after a perfect auxiliary ("ich habe … hochgeladen", "j'ai
// exporté") or marked done in CJK text ("上传了", "已经上传",
// "アップロードしました") states what was done, and its files are inputs; a
// negated delivery after an output forbids it ("…, aber hänge sie nicht
// an"), as "don't attach it" does.
//
// Models and inputs (rule 10). A file named as a model, template, example
// or earlier version is an input that a later pronoun passes over, so "and
// attach it" after it refers to the new output: the standard of a
// comparison ("in the same format as X"), the object of "like" or of a
// verb of following ("use X", "follow X": modelVerbs), or a file with a
// modelWords word before it or after "as" ("based on X", "modeled on X",
// "X as a template"): modelRef; in other languages the foreignModel words
// before the file ("wie X", "comme X", "la plantilla X", "按照 X") or the
// foreignModelAfter words after it ("X と同じ形式で", "X처럼"). A heading or
// label for inputs, context or references (inputLabels: "## Context",
// "Inputs:", "Kontext", "Contexte", "参考資料", "背景") makes the files below
// it inputs, until the next heading or Deliverables label (a label line:
// while its bullets last): listedInputs.
//
// Products (rule 11). A file that a product writes is repository work: the
// value of a command-line option ("--output summary.json"), the object of
// a gerund after a verb of building a feature ("support writing
// metrics.json": featureGerund), and in other languages the object of an
// output or export verb whose subject is a product noun ("Der Export
// schreibt eine kaputte rechnungen.csv", "导出功能生成的 orders.csv":
// productSubject).
//
// Collection (collect). A file is requested when it is delivered, or has an
// output role that is neither exempted nor made repository work, and is not
// forbidden. File is true when a file is requested or an unnamed request
// survives (not negated, denied, inline, exempted or forbidden).
package reqdetect
