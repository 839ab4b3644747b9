package skills

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCutDescription(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		limit    int
		want     string
		cut      *Cut
	}{
		{"fits", "One. Two.", 9, "One. Two.", nil},
		{"sentence", "One two. Three four five.", 20, "One two.…", &Cut{Original: 25, Kept: 8, At: CutSentence}},
		{"last sentence that fits", "A b. C d. E f g h", 12, "A b. C d.…", &Cut{Original: 17, Kept: 9, At: CutSentence}},
		{"sentence beats a later clause", "Use X. Never run Y, unless Z holds", 26, "Use X.…", &Cut{Original: 34, Kept: 6, At: CutSentence}},
		{"e.g. is no sentence end", "Use e.g. the grep, then more words", 22, "Use e.g. the grep…", &Cut{Original: 34, Kept: 17, At: CutClause}},
		{"clause: semicolon", "do this; then that thing", 14, "do this…", &Cut{Original: 24, Kept: 7, At: CutClause}},
		{"clause: em dash", "run grep first — don't read it", 20, "run grep first…", &Cut{Original: 30, Kept: 14, At: CutClause}},
		{"clause: colon", "Use when: the user asks", 12, "Use when…", &Cut{Original: 23, Kept: 8, At: CutClause}},
		{"word", "alpha beta gamma delta", 13, "alpha beta…", &Cut{Original: 22, Kept: 10, At: CutWord}},
		{"character", "abcdefghij", 5, "abcd…", &Cut{Original: 10, Kept: 4, At: CutCharacter}},
		{"multi-byte, no space", strings.Repeat("é", 10), 4, "ééé…", &Cut{Original: 10, Kept: 3, At: CutCharacter}},
		{"CJK sentence", "これは文です。次の文はとても長いです", 12, "これは文です。…", &Cut{Original: 18, Kept: 7, At: CutSentence}},
		{"CJK clause", "これは、とても長い文です", 8, "これは…", &Cut{Original: 12, Kept: 3, At: CutClause}},
		{"emoji kept whole", "ok 🦀🦀🦀🦀", 5, "ok…", &Cut{Original: 7, Kept: 2, At: CutWord}},
		{"combining mark stays with its letter", strings.Repeat("e\u0301", 5), 5, "e\u0301e\u0301…", &Cut{Original: 10, Kept: 4, At: CutCharacter}},
		{"flags paired from the run's start", "🇫🇷🇩🇪🇮🇹", 4, "🇫🇷…", &Cut{Original: 6, Kept: 2, At: CutCharacter}},
		{"skin tone stays with its emoji", "👍🏽👍🏽👍🏽", 4, "👍🏽…", &Cut{Original: 6, Kept: 2, At: CutCharacter}},
		{"ZWJ sequence whole", "👩\u200d💻👩\u200d💻", 5, "👩\u200d💻…", &Cut{Original: 6, Kept: 3, At: CutCharacter}},
		{"variation selector and keycap", "1\ufe0f\u20e32\ufe0f\u20e3", 5, "1\ufe0f\u20e3…", &Cut{Original: 6, Kept: 3, At: CutCharacter}},
		{"tag sequence whole", "🏴\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007fab", 7, "…", &Cut{Original: 9, At: CutCharacter}},
		{"one cluster longer than the room", "e" + strings.Repeat("\u0301", 10), 4, "…", &Cut{Original: 11, At: CutCharacter}},
		{"no word cut inside a ZWJ pair", "ab\u200d cd", 4, "a…", &Cut{Original: 6, Kept: 1, At: CutCharacter}},
		{"limit one", "abc", 1, "…", &Cut{Original: 3, At: CutCharacter}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, cut := cutDescription(tc.in, tc.limit)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.cut, cut)
			assert.LessOrEqual(t, utf8.RuneCountInString(got), tc.limit)
		})
	}
}

// The case: a real skill lost "don't Read the file" mid-sentence.
func TestCutDescriptionKeepsInstructionsWhole(t *testing.T) {
	head := strings.Repeat("Handles provider lookups. ", 38) // 988 characters, 38 sentences
	in := head + "Run this grep FIRST if no provider is named — don't Read the file."
	got, cut := description(in)
	require.NotNil(t, cut)
	assert.Equal(t, strings.TrimSpace(head)+CutMarker, got)
	assert.Equal(t, CutSentence, cut.At)
	assert.Equal(t, utf8.RuneCountInString(in), cut.Original)
	assert.NotContains(t, got, "FIRST", "no half instruction")
}

// FuzzCutDescription: whatever the text, the result fits the limit with its
// marker, is valid UTF-8 when the input is, is the input when it fits, and
// is otherwise a prefix of the input plus the marker, as Cut reports.
func FuzzCutDescription(f *testing.F) {
	f.Add("One two. Three four five.", 12)
	f.Add("a, b; c: d — e", 5)
	f.Add(strings.Repeat("é", 40), 7)
	f.Add("これは、文です。", 4)
	f.Fuzz(func(t *testing.T, in string, limit int) {
		if !utf8.ValidString(in) || limit < 1 || limit > 4096 {
			return
		}
		got, cut := cutDescription(in, limit)
		n := utf8.RuneCountInString(got)
		if n > limit || !utf8.ValidString(got) {
			t.Fatalf("cut(%q, %d) = %q: %d characters or invalid UTF-8", in, limit, got, n)
		}
		if cut == nil {
			if got != in {
				t.Fatalf("no cut reported but %q became %q", in, got)
			}
			return
		}
		kept, ok := strings.CutSuffix(got, CutMarker)
		if !ok || !strings.HasPrefix(in, kept) || utf8.RuneCountInString(kept) != cut.Kept ||
			cut.Original != utf8.RuneCountInString(in) || cut.Kept+1 > limit {
			t.Fatalf("cut(%q, %d) = %q, %+v: not a reported prefix plus the marker", in, limit, got, cut)
		}
	})
}

// TestMaterializeCutsLongDescription: default mode keeps the skill with its
// description cut, marked, logged (skill, lengths) and reported in the
// bundle, on an index hit too; strict mode drops it.
func TestMaterializeCutsLongDescription(t *testing.T) {
	src, state := t.TempDir(), t.TempDir()
	long := strings.Repeat("Reads every PDF form. ", 60) + "Never sign one unasked."
	writeMD(t, filepath.Join(src, "pdf"), "---\nname: pdf\ndescription: "+long+"\n---\n")
	sel := []Source{{Key: "k/pdf", Name: "pdf", Dir: filepath.Join(src, "pdf")}}
	fast := func(o *options) { o.racy = 0 }
	for _, call := range []string{"built", "index hit"} {
		var logs bytes.Buffer
		b, err := Materialize(context.Background(), state, sel, fast, WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
		require.NoError(t, err, call)
		require.Len(t, b.Skills, 1, call)
		s := b.Skills[0]
		want := strings.TrimSpace(strings.Repeat("Reads every PDF form. ", 46)) + CutMarker
		assert.Equal(t, want, s.Description, call)
		assert.LessOrEqual(t, utf8.RuneCountInString(s.Description), MaxDescription)
		assert.Equal(t, &Cut{Original: len(long), Kept: 1011, At: CutSentence}, s.DescriptionCut, call)
		assert.Contains(t, b.Prompt("/sb"), "- pdf: "+want+" (file: /sb/pdf/SKILL.md)\n")

		var cutLog map[string]any
		for line := range bytes.Lines(logs.Bytes()) {
			var rec map[string]any
			require.NoError(t, json.Unmarshal(line, &rec))
			if rec["msg"] == "skill description cut to fit the prompt" {
				cutLog = rec
			}
		}
		require.NotNil(t, cutLog, "%s: the cut is logged:\n%s", call, logs.String())
		assert.Equal(t, "WARN", cutLog["level"])
		assert.Equal(t, "k/pdf", cutLog["skill.key"])
		assert.Equal(t, "pdf", cutLog["skill.name"])
		assert.EqualValues(t, len(long), cutLog["original"])
		assert.EqualValues(t, 1011, cutLog["kept"])
		assert.Equal(t, CutSentence, cutLog["at"])
	}

	b, err := Materialize(context.Background(), t.TempDir(), sel, WithStrictSpec())
	require.NoError(t, err)
	assert.Empty(t, b.Skills)
	require.Len(t, b.Dropped, 1)
	assert.Contains(t, b.Dropped[0].Reason, "description is 1343 characters; at most 1024")
}
