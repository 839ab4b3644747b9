package deliverable

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The worked cases live beside the reader, in internal/reqdetect; the shared
// corpus is read where the lead keeps it. Both are run through the public
// entry point here; internal/reqdetect's own tests print a trace for a miss.
const (
	detectCasesPath  = "../internal/reqdetect/testdata/requested-files.jsonl"
	detectCorpusPath = "../../shared/corpus/requested-files.jsonl"
)

type detectCase struct {
	Objective string   `json:"objective"`
	File      bool     `json:"file"`
	Files     []string `json:"files"`
}

func detectLoadCases(tb testing.TB, path string) []detectCase {
	tb.Helper()
	data, err := os.ReadFile(path)
	require.NoError(tb, err, "read the worked cases")
	var cases []detectCase
	for _, line := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
		var c detectCase
		require.NoError(tb, json.Unmarshal(line, &c), "%s: %q", path, line)
		cases = append(cases, c)
	}
	return cases
}

func TestDetectRequestsCases(t *testing.T) {
	paths := []string{detectCasesPath}
	if _, err := os.Stat(detectCorpusPath); errors.Is(err, os.ErrNotExist) {
		t.Logf("the shared corpus %s is absent; skipping it", detectCorpusPath)
	} else {
		paths = append(paths, detectCorpusPath)
	}
	for _, path := range paths {
		for i, c := range detectLoadCases(t, path) {
			got := DetectRequests(c.Objective)
			assert.Equal(t, c.File, got.File, "%s:%d File for %q", path, i+1, c.Objective)
			if len(c.Files) == 0 {
				assert.Nil(t, got.Files, "%s:%d Files for %q", path, i+1, c.Objective)
			} else {
				assert.Equal(t, c.Files, got.Files, "%s:%d Files for %q", path, i+1, c.Objective)
			}
		}
	}
}

func TestDetectRequestsZeroValue(t *testing.T) {
	for _, objective := range []string{"", " ", "\n\n", "\x00", "\xff", "Deliverables:", ".", "-"} {
		assert.Equal(t, Requests{}, DetectRequests(objective), "objective %q", objective)
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

func FuzzDetectRequests(f *testing.F) {
	for _, c := range detectLoadCases(f, detectCasesPath) {
		f.Add(c.Objective)
	}
	for _, s := range []string{
		"", "\x00", "\xff\xfe", `"a b.pdf`, "“x y.pdf”", "Deliverables:\n\n\n- ", "- \n-", "a:b:c.md:",
		"C:\\", "C:", "İ", "ſ", "Write it. Attach it. Send them.", "not not not deliverable",
		"Write a.txt — (no PDF) – attach the updated file", "I sent you a.csv; the result",
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
		// Line endings and the width of blanks change nothing.
		lf := strings.ReplaceAll(objective, "\r", "")
		want := DetectRequests(lf)
		assert.Equal(t, want, DetectRequests(strings.ReplaceAll(lf, "\n", "\r\n")), "CRLF changed the result")
		wide := DetectRequests(strings.ReplaceAll(lf, " ", "  "))
		assert.Equal(t, want.File, wide.File, "doubled blanks changed File")
		var narrowed []string
		for _, name := range wide.Files {
			narrowed = append(narrowed, strings.ReplaceAll(name, "  ", " "))
		}
		assert.Equal(t, want.Files, narrowed, "doubled blanks changed Files")
	})
}

// detectBrief builds a brief of about size bytes from the worked cases:
// prose, numbered steps and a Deliverables list, as a host would bind it.
func detectBrief(tb testing.TB, size int) string {
	var b strings.Builder
	cases := detectLoadCases(tb, detectCasesPath)
	for i := 0; b.Len() < size; i++ {
		c := cases[i%len(cases)]
		b.WriteString(c.Objective)
		b.WriteString("\n\n")
	}
	return b.String()
}

func BenchmarkDetectRequests(b *testing.B) {
	for _, bc := range []struct {
		name string
		size int
	}{{"2KiB", 2 << 10}, {"64KiB", 64 << 10}} {
		brief := detectBrief(b, bc.size)
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(brief)))
			for b.Loop() {
				DetectRequests(brief)
			}
		})
	}
}
