package deliverable

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// detectCasesPath holds the worked cases: the 44 of shared/corpus followed by
// the project's own, one JSON object a line.
const detectCasesPath = "../testdata/requested-files.jsonl"

// detectErrCase marks a malformed line of detectCasesPath.
var detectErrCase = errors.New("malformed requested-files case")

// detectCase is one line of detectCasesPath.
type detectCase struct {
	Line      int
	Objective string
	File      bool
	Files     []string
}

// detectParseCase decodes one case strictly: one object with exactly the keys
// objective (string), file (bool) and files (array of strings, never null), no
// trailing data, and a self-consistent expectation (files sorted, unique,
// written in the objective, and file true when files is not empty).
func detectParseCase(line []byte) (detectCase, error) {
	var raw struct {
		Objective *string   `json:"objective"`
		File      *bool     `json:"file"`
		Files     *[]string `json:"files"`
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return detectCase{}, fmt.Errorf("%w: %w", detectErrCase, err)
	}
	if err := dec.Decode(&struct{}{}); !errors.Is(err, io.EOF) {
		return detectCase{}, fmt.Errorf("%w: trailing data after the object", detectErrCase)
	}
	switch {
	case raw.Objective == nil:
		return detectCase{}, fmt.Errorf("%w: no \"objective\"", detectErrCase)
	case raw.File == nil:
		return detectCase{}, fmt.Errorf("%w: no \"file\"", detectErrCase)
	case raw.Files == nil || *raw.Files == nil:
		return detectCase{}, fmt.Errorf("%w: no \"files\" array", detectErrCase)
	}
	c := detectCase{Objective: *raw.Objective, File: *raw.File, Files: *raw.Files}
	for i, f := range c.Files {
		switch {
		case i > 0 && f <= c.Files[i-1]:
			return detectCase{}, fmt.Errorf("%w: files not sorted and unique at %q", detectErrCase, f)
		case !strings.Contains(c.Objective, f):
			return detectCase{}, fmt.Errorf("%w: file %q is not written in the objective", detectErrCase, f)
		}
	}
	if len(c.Files) > 0 && !c.File {
		return detectCase{}, fmt.Errorf("%w: files named but file is false", detectErrCase)
	}
	return c, nil
}

// detectLoadCases reads every case of detectCasesPath and fails the test on
// the first malformed line. Only the file's final newline may leave an empty
// line.
func detectLoadCases(tb testing.TB) []detectCase {
	tb.Helper()
	data, err := os.ReadFile(detectCasesPath)
	require.NoError(tb, err, "read the worked cases")
	lines := bytes.Split(data, []byte("\n"))
	var cases []detectCase
	for n, line := range lines {
		if len(line) == 0 && n == len(lines)-1 {
			break
		}
		c, err := detectParseCase(line)
		require.NoError(tb, err, "%s:%d: %q", detectCasesPath, n+1, line)
		c.Line = n + 1
		cases = append(cases, c)
	}
	return cases
}

// detectCheck asserts the invariants every result has, whatever the input.
func detectCheck(t *testing.T, objective string, r Requests) {
	t.Helper()
	if len(r.Files) == 0 {
		assert.Nil(t, r.Files, "Files is nil when no file is named")
	} else {
		assert.True(t, r.File, "File must be true when Files = %q", r.Files)
	}
	for i, f := range r.Files {
		if i > 0 {
			assert.Less(t, r.Files[i-1], f, "Files must be sorted and unique: %q", r.Files)
		}
		assert.Contains(t, objective, f, "every named file is written verbatim in the objective")
		assert.True(t, detectIsFile(f), "%q is not a file name", f)
	}
}

func TestDetectRequestsCorpus(t *testing.T) {
	cases := detectLoadCases(t)
	require.GreaterOrEqual(t, len(cases), 44+30, "the 44 shared cases and at least 30 of our own")
	seen := map[string]int{}
	for _, c := range cases {
		if prev, dup := seen[c.Objective]; dup {
			t.Errorf("%s:%d repeats the objective of line %d", detectCasesPath, c.Line, prev)
		}
		seen[c.Objective] = c.Line
		t.Run(fmt.Sprintf("line%03d", c.Line), func(t *testing.T) {
			got := DetectRequests(c.Objective)
			assert.Equal(t, c.File, got.File, "File for %q", c.Objective)
			if len(c.Files) == 0 {
				assert.Nil(t, got.Files, "Files for %q", c.Objective)
			} else {
				assert.Equal(t, c.Files, got.Files, "Files for %q", c.Objective)
			}
			detectCheck(t, c.Objective, got)
		})
	}
}

func TestDetectParseCaseRejectsMalformed(t *testing.T) {
	for _, line := range []string{
		``,
		`not json`,
		`[]`,
		`{}`,
		`{"objective":"x","file":true}`,
		`{"objective":"x","files":[]}`,
		`{"file":false,"files":[]}`,
		`{"objective":"x","file":true,"files":null}`,
		`{"objective":"x","file":"yes","files":[]}`,
		`{"objective":1,"file":true,"files":[]}`,
		`{"objective":"x","file":true,"files":[],"note":"extra"}`,
		`{"objective":"x","file":true,"files":[]} {}`,
		`{"objective":"a.txt","file":false,"files":["a.txt"]}`,
		`{"objective":"a.txt b.txt","file":true,"files":["b.txt","a.txt"]}`,
		`{"objective":"a.txt","file":true,"files":["a.txt","a.txt"]}`,
		`{"objective":"write it","file":true,"files":["a.txt"]}`,
	} {
		t.Run(line, func(t *testing.T) {
			_, err := detectParseCase([]byte(line))
			assert.ErrorIs(t, err, detectErrCase)
		})
	}
	c, err := detectParseCase([]byte(`{"objective":"Write a.txt.","file":true,"files":["a.txt"]}`))
	require.NoError(t, err)
	assert.Equal(t, detectCase{Objective: "Write a.txt.", File: true, Files: []string{"a.txt"}}, c)
}

func TestDetectTokenizeFiles(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"Write report.pdf.", []string{"report.pdf"}},
		{"see notes.md:12 and x.md:3:4", []string{"notes.md", "x.md"}},
		{"put it in `dist/index.html`, please", []string{"dist/index.html"}},
		{`save as "final report.pdf" now`, []string{"final report.pdf"}},
		{"save as “final report.pdf”", []string{"final report.pdf"}},
		{`"final report" and " padded.pdf"`, []string{"padded.pdf"}}, // no name with blanks inside the quotes
		{`C:\out\q3.xlsx and ./rel/a.txt and ~/notes.md and /outside/probe.txt`,
			[]string{`C:\out\q3.xlsx`, "./rel/a.txt", "~/notes.md", "/outside/probe.txt"}},
		{"https://example.com/a.pdf, ftp://host/b.csv and mailto:someone@example.com", nil},
		{"Node.js, Vue.js and next.js", nil},
		{"e.g. v1.2.3 3.14 example.com i.e.", nil},
		{".pdf .. ... -.md", nil},
		{"'notes.md' (a.txt, b.txt)", []string{"notes.md", "a.txt", "b.txt"}},
		{"résumé.pdf 報告.md", []string{"résumé.pdf", "報告.md"}},
		{"\xff\xfeout.json\xff", []string{"out.json"}},
		{"REPORT.PDF", []string{"REPORT.PDF"}},
	} {
		t.Run(tc.in, func(t *testing.T) {
			var got []string
			for _, tok := range detectTokenize(tc.in) {
				assert.Contains(t, tc.in, tok.text, "token text is verbatim")
				if tok.kind == reqFile {
					got = append(got, tok.text)
				}
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestDetectLabel(t *testing.T) {
	for _, tc := range []struct {
		line string
		rest string
		ok   bool
	}{
		{"Deliverables:", "", true},
		{"Deliverables", "", true},
		{"deliverable: dist/index.html", "dist/index.html", true},
		{"## Deliverables", "", true},
		{"**Deliverables:** out.csv", "out.csv", true},
		{"- Deliverables: a.txt", "a.txt", true},
		{"Outputs:", "", true},
		{"Output files: a.csv", "a.csv", true},
		{"The deliverables are:", "", true},
		{"Our deliverables are listed below.", "", true},
		{"Deliverables are due Friday.", "", false},
		{"Output the results as CSV.", "", false},
		{"This is not a deliverable:", "", false},
		{"Write memory.txt.", "", false},
		{"DELIVERABLES: a.txt", "a.txt", true},
	} {
		t.Run(tc.line, func(t *testing.T) {
			rest, ok := detectLabel(tc.line)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.rest, rest)
		})
	}
}

// TestLooksLikeLocalFile: a completion ref is a workspace file when it has a
// path prefix or scheme, or when DetectRequests would read it as a file name;
// bare domains and framework names are not.
func TestLooksLikeLocalFile(t *testing.T) {
	for ref, want := range map[string]bool{
		"./x": true, "../x": true, "/x": true, "~/x": true, `.\x`: true, `C:\x`: true,
		"file:x": true, "FILE:example.com": true, "./go.dev": true,
		"x.pdf": true, "REPORT.PDF": true, "report.md:12": true, "src/main.go:12:3": true,
		"out/data.csv": true, "dist/index.html": true, "notes.md#intro": true, ".env": true,
		"example.com": false, "go.dev": false, "bit.ly": false, "docs.rs": false, "node.js": false,
		"Node.js": false, "node.js:3": false, "EXAMPLE.COM": false, "v1.2.3": false, "3.14": false,
		"x.unknownext": false, "https://example.com/a.pdf": false, "work_product:42": false,
		"see report.pdf": false, "": false, " ": false, ".": false, "x.": false,
	} {
		assert.Equal(t, want, looksLikeLocalFile(ref), "looksLikeLocalFile(%q)", ref)
	}
}

func TestDetectLemma(t *testing.T) {
	for in, want := range map[string]string{
		"write": "write", "writes": "write", "writing": "write", "written": "write", "wrote": "write",
		"attached": "attach", "attaches": "attach", "creating": "create", "created": "create",
		"copies": "copy", "tried": "try", "zipped": "zip", "fixes": "fix", "deliverables": "deliverable",
		"files": "", "results": "", "the": "", "": "",
	} {
		assert.Equal(t, want, detectLemma(in), "lemma of %q", in)
	}
}

// TestDetectRequestsLargeInputs feeds 256 KiB adversarial objectives:
// the work is linear, so each finishes quickly; a quadratic path would not
// finish within the test timeout.
func TestDetectRequestsLargeInputs(t *testing.T) {
	const size = 1 << 18
	repeat := func(s string) string { return strings.Repeat(s, size/len(s)+1) }
	for name, objective := range map[string]string{
		"files":      repeat("a.txt, "),
		"file nouns": "Write " + repeat("file "),
		"inline":     repeat("inline "),
		"quotes":     repeat(`"a b.pdf `),
		"pronouns":   "Write a.txt" + repeat(" and attach it"),
		"qualifiers": "Write a.txt. " + repeat("This is not a deliverable. "),
		"sentences":  repeat("Write a.txt. Send it to me. "),
		"bullets":    "Deliverables:\n" + repeat("- out.csv\n\n"),
		"negation":   repeat("do not "),
		"colons":     repeat("a:"),
	} {
		t.Run(name, func(t *testing.T) {
			detectCheck(t, objective, DetectRequests(objective))
		})
	}
}

func TestDetectRequestsZeroValue(t *testing.T) {
	for _, objective := range []string{"", " ", "\n\n", "\x00", "\xff", "Deliverables:", ".", "-"} {
		assert.Equal(t, Requests{}, DetectRequests(objective), "objective %q", objective)
	}
}

func FuzzDetectRequests(f *testing.F) {
	for _, c := range detectLoadCases(f) {
		f.Add(c.Objective)
	}
	for _, s := range []string{
		"", "\x00", "\xff\xfe", `"a b.pdf`, "“x y.pdf”", "Deliverables:\n\n\n- ", "- \n-", "a:b:c.md:",
		"C:\\", "C:", "İ", "ſ", "Write it. Attach it. Send them.", "not not not deliverable",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, objective string) {
		got := DetectRequests(objective)
		require.Equal(t, got, DetectRequests(objective), "two calls differ")
		detectCheck(t, objective, got)
		// A neutral paragraph before the text changes nothing: units only
		// look back at a request, a qualifier or a denial.
		prefixed := DetectRequests("Explain how a newsletter works.\n\n" + objective)
		assert.Equal(t, got, prefixed, "a neutral paragraph before the objective changed the result")
	})
}

func BenchmarkDetectRequests(b *testing.B) {
	cases := detectLoadCases(b)
	b.ResetTimer()
	for b.Loop() {
		for _, c := range cases {
			DetectRequests(c.Objective)
		}
	}
}
