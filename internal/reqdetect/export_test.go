package reqdetect

// countSteps runs Detect on objective with work counting on and returns the
// steps it took (tokens.go: step). Tests that call it must not run Detect
// concurrently.
func countSteps(objective string) int64 {
	counting.Store(true)
	defer counting.Store(false)
	steps.Store(0)
	Detect(objective)
	return steps.Load()
}

// tokenize splits one line into tokens, as Detect does: every token's text is a substring of s.
func tokenize(s string) []token { return appendTokens(nil, s) }
