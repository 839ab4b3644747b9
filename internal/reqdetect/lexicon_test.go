package reqdetect

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// verbClassLists are the lists verbClasses reads.
var verbClassLists = []string{"verbOutput", "verbExport", "verbAttach", "verbSend", "verbTransform", "verbInput", "verbReply",
	"verbEdit", "verbRepo", "verbProbe", "verbPseudo", "verbWant"}

// TestLexicon checks that every list the Go code names exists in lexicon_en.txt and every list
// there is named by the code, once.
func TestLexicon(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	call := regexp.MustCompile(`lex(?:List|Set|Map|WordsMap)\("(\w+)"\)`)
	named := map[string]int{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range call.FindAllStringSubmatch(string(src), -1) {
			if m[1] != "name" {
				named[m[1]]++
			}
		}
	}
	// verbClasses names its lists through a map of class names.
	for _, name := range verbClassLists {
		named[name]++
	}
	for name, n := range named {
		_, ok := lexicon[name]
		assert.True(t, ok, "the code names list %q, which lexicon_en.txt lacks", name)
		assert.Equal(t, 1, n, "list %q is loaded %d times", name, n)
	}
	for name := range lexicon {
		assert.Positive(t, named[name], "lexicon_en.txt has list %q, which no code names", name)
	}
}

// Each verb of a class list is in that class alone: verbClasses keeps the last class a word is listed in.
func TestVerbClassesDisjoint(t *testing.T) {
	class := map[string]string{}
	for _, name := range verbClassLists {
		for _, w := range lexicon[name] {
			if other, dup := class[w]; dup {
				t.Errorf("lexicon_en.txt: %q is in two verb classes: %s and %s", w, min(name, other), max(name, other))
			}
			class[w] = name
		}
	}
	assert.Equal(t, verbClass(verbOutput), verbClasses["write"])
	assert.Len(t, verbClasses, len(class))
}

func TestParseLexicon(t *testing.T) {
	lists, err := parseLexicon("lexicon_en.txt", "# doc\na: x y\n\tz\n\nb: output files | output\n")
	require.NoError(t, err)
	assert.Equal(t, map[string][]string{"a": {"x", "y", "z"}, "b": {"output files", "output"}}, lists)
	for text, want := range map[string]string{
		"a x y\n":        `lexicon_en.txt:1: "a x y" is not a "name: words" line`,
		"a: x\na: y\n":   `lexicon_en.txt:2: list "a" is defined twice`,
		"a:\n":           `lexicon_en.txt:1: list "a" has no words`,
		"# doc\n\tx y\n": `lexicon_en.txt:2: indented line "x y" continues no list`,
		"two words: x\n": `lexicon_en.txt:1: "two words: x" is not a "name: words" line`,
		": x\n":          `lexicon_en.txt:1: ": x" is not a "name: words" line`,
	} {
		_, err := parseLexicon("lexicon_en.txt", text)
		assert.EqualError(t, err, want, "%q", text)
	}
	assert.PanicsWithValue(t, `reqdetect: lexicon_en.txt has no list "nope"; add a "nope: words" line`,
		func() { lexList("nope") })
	assert.True(t, slices.Equal(lexList("verbExport"), []string{"export", "dump"}))
}

// stripLemma is lemmaOf as rules: the verb itself, an irregular form, the first regular ending of inflections whose
// stem is a lexicon verb, a doubled last letter. TestLemmas holds the lemmas table to it.
func stripLemma(w string) string {
	if _, ok := verbClasses[w]; ok {
		return w
	}
	if b, ok := irregularVerbs[w]; ok {
		return b[0]
	}
	known := func(b string) bool { _, ok := verbClasses[b]; return ok }
	for _, s := range inflections {
		if b, ok := strings.CutSuffix(w, s.suffix); ok && known(b+s.restore) {
			return b + s.restore
		}
	}
	for _, suf := range doubledInflections {
		if b, ok := strings.CutSuffix(w, suf); ok && len(b) >= 2 && b[len(b)-1] == b[len(b)-2] && known(b[:len(b)-1]) {
			return b[:len(b)-1]
		}
	}
	return ""
}

func TestLemmas(t *testing.T) {
	words := []string{"", "s", "ies", "zipped", "putting", "copies", "tried", "fixes", "writes", "attached", "created",
		"attaching", "creating", "wrote", "written", "table", "exportss", "reports"}
	for w := range verbClasses {
		for _, end := range []string{"", "s", "es", "ed", "d", "ing", "ies", "ied", "ss", "x"} {
			words = append(words, w+end, w[:len(w)-1]+end, w+w[len(w)-1:]+end)
		}
	}
	for w := range lemmas {
		words = append(words, w, w+"s", w+"ed")
	}
	for _, w := range words {
		require.Equal(t, stripLemma(w), lemmaOf(w), "%q", w)
	}
}
