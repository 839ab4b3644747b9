package reqdetect

//go:generate go test -run ^TestDocGo$ -update-doc .

import "fmt"

// rule is one named decision of the reader, the way a go vet analyzer is a named value with a Doc: a kebab-case id, unique in
// the package ("output-verb", "input-heading", "forbidden"), and one line saying what it reads and what it decides.
type rule struct {
	id  string
	doc string
}

// text is the rule's doc, with detail (the word it read) in parentheses.
func (r rule) text(detail string) string {
	if detail == "" {
		return r.doc
	}
	return fmt.Sprintf("%s (%q)", r.doc, detail)
}

// ruleTable is one ordered table of rules; doc.go lists the tables by order.
type ruleTable struct {
	order int    // stage*10 + place in the stage; stages: 1 lines, 2 units, 3 phrases, 4 roles, 5 across sentences, 6 the decision
	name  string // "mention", "foreign"
	doc   string // one line
	rules []rule
}

// ruleTables holds every table, registered by register.
var ruleTables []ruleTable

// register adds a table to the registry that doc.go and Explain's ids come
// from; call it from a package-level var (var _ = register(...)).
func register(order int, name, doc string, rules []rule) bool {
	ruleTables = append(ruleTables, ruleTable{order, name, doc, rules})
	return true
}

// base returns the rule a table row embeds.
func (r rule) base() rule { return r }

// ruleList returns the rules of a table's rows, in order.
func ruleList[T interface{ base() rule }](rows []T) []rule {
	out := make([]rule, len(rows))
	for k, r := range rows {
		out[k] = r.base()
	}
	return out
}
