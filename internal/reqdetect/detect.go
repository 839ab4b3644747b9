package reqdetect

import (
	"cmp"
	"fmt"
	"strings"
)

// Result is what a task's own text asks to be delivered as files, and why.
type Result struct {
	// File reports whether the text asks for a file output at all, named or not ("export the results
	// as a CSV"). It is true whenever Files is not empty.
	File bool
	// Files lists the output files the text names, exactly as written ("dist/index.html",
	// "report.pdf"), de-duplicated and sorted byte-wise. It is nil when the text names no output file.
	Files []string
	// Why holds one Reason for every file name the text mentions, requested or not, in order of first mention.
	Why []Reason
	// Decision is the reason for File.
	Decision Reason
	// Unsure is "" when the reader is sure of its reading, else why not: "language: the text is mostly Russian …, which has no
	// table", or "conflicting signals: …" (languages.go: unsure).
	Unsure string
}

// Reason is the rule that decided one file's role, or the overall decision, and the span of the objective that rule read.
type Reason struct {
	File      string // the file name as written; "" for the overall decision
	Requested bool   // the file (or, for the decision, a file) is requested
	ID        string // the deciding rule's id ("output-prep"); doc.go lists every rule
	Rule      string // the rule, in words: "output: the object of the output preposition \"into\""
	Span      string // the text of the objective the rule read, verbatim
}

func (r Reason) String() string {
	verdict := "not requested"
	if r.Requested {
		verdict = "requested"
	}
	s := fmt.Sprintf("%s: %s [%s] (%s)", cmp.Or(r.File, "decision"), verdict, r.ID, r.Rule)
	if r.Span != "" {
		s += fmt.Sprintf(" in %q", r.Span)
	}
	return s
}

// Detect reads a task's objective (the text the host bound to the run, never the agent's own
// summary) and reports whether it asks for a file output and which output files it names, following
// the rules of package deliverable's documentation (section "Requested files").
//
// Guarantees: the result depends only on objective; it never panics, for any input including invalid
// UTF-8; every entry of Files is written verbatim in objective; Files is sorted, without duplicates,
// and nil when empty; File is true whenever Files is not. The work is linear in the length of objective, and
// spread over GOMAXPROCS goroutines (each sentence is analyzed as soon as it is read); Detect returns when they are done.
//
// Non-guarantees: it is a heuristic reader of English and of the cue words of nine other languages
// (rule 9), not a parser. It sees file names only with a known extension ("Makefile" is not seen) and
// compares them as written ("./out.json" and "out.json" are two names).
func Detect(objective string) Result {
	units := readUnits(objective)
	language := make(chan string, 1) // read beside the rest, on the processor readUnits leaves idle
	go func() { language <- unsureLanguage(objective) }()
	bug := false // a bug label ("## Bug: …") came before: the statements below it are about the product (rule 11)
	for _, u := range units {
		if u.lead != nil && u.lead.listAsks && !(u.item && u.listed) {
			u.item, u.listed, u.phrases = true, true, nil
			analyze(u) // readUnits analyzed it before its lead asked for the list below it
		}
		bug = bug || bugLabel(u)
		readForeign(u, bug)
		if u.inputs {
			listedInputs(u)
		}
		u.listAsks = requestsList(u) // read by the bullets below u, if it is their lead
	}
	markRepoWork(units)
	markDenials(units)
	resolvePronouns(units)
	applyQualifiers(units)
	r := collect(units)
	r.Unsure = cmp.Or(<-language, unsure(units))
	return r
}

// Explain returns Detect's trace for objective, one line per file and one for the decision, each
// with the id of the rule that decided it in brackets: for tests and debugging.
func Explain(objective string) string {
	r := Detect(objective)
	var b strings.Builder
	for _, w := range append(r.Why, r.Decision) {
		fmt.Fprintln(&b, w)
	}
	return b.String()
}
