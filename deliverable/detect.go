package deliverable

import (
	"fmt"

	"github.com/airlockdev/airlock/internal/reqdetect"
)

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
	// Unsure is "" when the reading is sure; otherwise it says why it may
	// be wrong: "language: the text is mostly Russian, which has no
	// table", or "conflicting signals: …" (a delivery cue and a negation
	// of a language other than English bear on the same output; in English
	// the negation decides, as the rules below say). File and Files are
	// still the best reading;
	// Evidence.Unsure says what ValidateEvidence makes of them.
	Unsure string
}

// UnsurePolicy says what ValidateEvidence does with a task whose text
// DetectRequests is unsure of (Requests.Unsure).
type UnsurePolicy int

const (
	// UnsureAsRead (the zero value) follows the reading as it is (File and
	// Files) and logs the doubt: Evidence.Logger gets a warning naming the
	// task, the run and the reason.
	UnsureAsRead UnsurePolicy = iota
	// UnsureRequireFile requires at least one file registered for the task
	// in the run, whatever the reading says: a miss (a task closed without
	// the file its requester asked for) costs more than asking an agent
	// that did the job for its file. The rejection names the reason.
	UnsureRequireFile
)

// String returns the policy's name ("as-read", "require-file").
func (p UnsurePolicy) String() string {
	switch p {
	case UnsureAsRead:
		return "as-read"
	case UnsureRequireFile:
		return "require-file"
	}
	return fmt.Sprintf("UnsurePolicy(%d)", int(p))
}

// DetectRequests reads a task's objective (the text the host bound to the run,
// never the agent's own summary) and reports whether it asks for a file output
// and which output files it names, by the eleven rules of the package
// documentation (section "Requested files"): in short, an explicit
// publication request ("attach", "export as", "save as", "downloadable", "as
// a CSV", a named output file) asks for a file; reading or discussing an
// input does not; a "Deliverables" label and the list below it state
// outputs; negations, in-place edits, repository work, inline answers and
// expected-denied writes ask for none; a sentence that says a just-written
// file is "not a deliverable" exempts that one file unless it is also to be
// delivered; a file named as a model or template, or listed under an Inputs
// or Context heading, is an input; and the rules hold in other languages.
// The reading itself lives in internal/reqdetect, whose Explain says which
// rule decided each file.
//
// Guarantees: the result depends only on objective (two calls agree); it never
// panics, for any input including invalid UTF-8; every entry of Files is a
// file name written verbatim in objective; Files is sorted, without
// duplicates, and nil when empty; File is true whenever Files is not. The work
// is linear in the length of objective, spread over GOMAXPROCS goroutines that
// end before it returns (a 64 KiB brief takes ~25 ms on two cores); it is safe
// to call from many goroutines at once.
//
// Non-guarantees: it is a heuristic reader, not a parser: of English, and
// of the cue words of German, French, Spanish, Portuguese, Italian, Dutch,
// Japanese, Chinese and Korean (rule 9: delivery, output, reading and reply
// verbs, negations, labels), not their grammar. It recognizes file names
// only with a known extension ("Makefile" and "LICENSE" are not seen), and
// may misread unusual phrasings; the worked cases in
// internal/reqdetect/testdata/requested-files.jsonl show what it is held to.
// Names are compared as written: "./out.json" and "out.json" are two names.
// Where the reader has no table for the text's language, or its signals
// conflict, Unsure says so.
func DetectRequests(objective string) Requests {
	r := reqdetect.Detect(objective)
	return Requests{File: r.File, Files: r.Files, Unsure: r.Unsure}
}

// detectIsFile reports whether s names a file the way DetectRequests sees one:
// a known extension, not a framework's name ("Node.js").
func detectIsFile(s string) bool { return reqdetect.IsFile(s) }
