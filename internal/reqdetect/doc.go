// Package reqdetect reads a task's text and reports whether it asks for a
// file and which files it names (the rules: shared/corpus/README.md). It is
// the reader behind deliverable.DetectRequests; Explain says, per file and for
// the decision, which rule decided and the span of text it read.
//
// One file per stage: tokens.go (tokens and sentences), lines.go (labels,
// list items, paragraphs), phrases.go (verbs, phrases, negation, inline
// markers), roles.go (a file's role in its phrase, unnamed requests),
// across.go (rules across sentences: repository work, denials, pronouns and
// anaphora, qualifiers, collection) and lexicon.go (every named word list).
//
// Roles come from structure where the text gives it: the object of an output
// preposition ("into", "as", "called", "named") is an output whatever the
// verb; a past or perfect verb with a subject ("the CSV I sent you", "we
// produced") or a statement of where something is ("is already in data.csv")
// makes a file an input; a negation reaches only its own clause, which ends
// at ";", ":", a parenthesis or a dash; a delivery verb reaches the file of an
// earlier phrase through "it" or through a noun phrase naming a made or edited
// file ("the updated file", "the corrected one", "the result").
//
// How it reads text, stage by stage.
//
// Stage 1, lines (readUnits, readBlock, labelLine). A label line opens a
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
// Stage 3, phrases (markVerbs, splitPhrases). Verbs come from a lexicon
// of classes (verbClasses): output (write, create, save, produce…), export,
// attach (attach, upload), send (send, share, publish, deliver…), transform
// (convert, render, translate…), input (read, summarize, compare…), reply
// (answer, explain…), edit (update, fix, refactor, add…), repository (commit,
// push, merge) and attempt (attempt, try), matched through inflections
// ("writes", "attached", "creating", "written"). A lexicon word in a noun
// position is a noun (nounPosition): right after a determiner ("a
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
// Stage 4, roles inside a phrase (negate, markInline,
// readPhrase, readMention, signalAt).
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
//     digestVerbs) reads an input but writes something new, so "as a
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
// Stage 5, across units (markRepoWork, markDenials, resolvePronouns,
// applyQualifiers).
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
// Collection (collect). A file is requested when it is delivered, or
// has an output role that is neither exempted nor made repository work, and
// is not forbidden. File is true when a file is requested or an unnamed
// request survives (not negated, denied, inline, exempted or forbidden).
package reqdetect
