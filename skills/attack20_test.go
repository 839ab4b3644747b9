package skills_test

// Attack tests written from go doc and issue 20 only: description cuts and
// the spec edge cases of default and strict mode.

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"log/slog"

	"github.com/airlockdev/airlock/skills"
)

type a20Result struct {
	bundle *skills.Bundle
	logs   []map[string]any
}

func a20Materialize(t *testing.T, state, name, skillMD string, opts ...skills.Option) a20Result {
	t.Helper()
	src := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.MkdirAll(src, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(src, "SKILL.md"), []byte(skillMD), 0o644))
	return a20Run(t, state, name, src, opts...)
}

func a20Run(t *testing.T, state, name, src string, opts ...skills.Option) a20Result {
	t.Helper()
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b, err := skills.Materialize(context.Background(), state, []skills.Source{{Key: "k-" + name, Name: name, Dir: src}},
		append([]skills.Option{skills.WithLogger(log)}, opts...)...)
	require.NoError(t, err)
	var logs []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal(line, &m))
		logs = append(logs, m)
	}
	return a20Result{b, logs}
}

func a20MD(name, desc string) string {
	return "---\nname: " + name + "\ndescription: " + desc + "\n---\n# body\n"
}

// a20Quoted is a YAML double-quoted scalar of s.
func a20Quoted(s string) string { return strconv.Quote(s) }

// checkCut asserts every promise about a cut description.
func a20CheckCut(t *testing.T, r a20Result, name, full, at string) string {
	t.Helper()
	require.Len(t, r.bundle.Skills, 1, "dropped: %v", r.bundle.Dropped)
	s := r.bundle.Skills[0]
	d := s.Description
	n := utf8.RuneCountInString(d)
	assert.LessOrEqual(t, n, skills.MaxDescription, "cut description over the limit")
	require.True(t, strings.HasSuffix(d, skills.CutMarker), "no marker: %q", d[max(0, len(d)-40):])
	require.NotNil(t, s.DescriptionCut, "the cut is not reported in the bundle")
	assert.Equal(t, at, s.DescriptionCut.At)
	assert.Equal(t, utf8.RuneCountInString(full), s.DescriptionCut.Original)
	kept := strings.TrimSuffix(d, skills.CutMarker)
	assert.Equal(t, utf8.RuneCountInString(kept), s.DescriptionCut.Kept)
	assert.True(t, strings.HasPrefix(full, kept), "kept text is not a prefix of the description")
	assert.False(t, strings.HasSuffix(kept, " "), "kept text ends in a space: %q", kept[max(0, len(kept)-20):])
	assert.True(t, utf8.ValidString(d))
	var warned bool
	for _, l := range r.logs {
		if l["level"] != "WARN" {
			continue
		}
		line, _ := json.Marshal(l)
		if strings.Contains(string(line), name) && strings.Contains(string(line), strconv.Itoa(s.DescriptionCut.Original)) &&
			strings.Contains(string(line), strconv.Itoa(s.DescriptionCut.Kept)) {
			warned = true
		}
	}
	assert.True(t, warned, "the cut is not logged at Warn with the skill and both lengths: %v", r.logs)
	prompt := r.bundle.Prompt("/sandbox/skills")
	assert.Contains(t, prompt, "- "+name+": "+d+" (file: /sandbox/skills/"+name+"/SKILL.md)")
	return kept
}

func TestAttackCutSentenceMultibyte(t *testing.T) {
	// "Ünïcödé sëntëncé ñümbér N. " in multibyte runes, past the limit.
	var b strings.Builder
	for i := 0; utf8.RuneCountInString(b.String()) < 1100; i++ {
		b.WriteString("Ünïcödé sëntëncé ñümbér " + strconv.Itoa(i) + ". ")
	}
	full := strings.TrimSpace(b.String())
	r := a20Materialize(t, t.TempDir(), "multi", a20MD("multi", a20Quoted(full)))
	kept := a20CheckCut(t, r, "multi", full, skills.CutSentence)
	assert.True(t, strings.HasSuffix(kept, "."), "a sentence cut keeps the full stop: %q", kept[len(kept)-10:])
}

func TestAttackCutClauseOnly(t *testing.T) {
	var b strings.Builder
	for i := 0; utf8.RuneCountInString(b.String()) < 1100; i++ {
		b.WriteString("run the grep first if no provider is named, ")
	}
	full := strings.TrimSuffix(b.String(), ", ")
	r := a20Materialize(t, t.TempDir(), "clause", a20MD("clause", a20Quoted(full)))
	kept := a20CheckCut(t, r, "clause", full, skills.CutClause)
	assert.True(t, strings.HasPrefix(full[len(kept):], ", "), "a clause cut is before \", \": %q", full[len(kept):len(kept)+5])
}

func TestAttackCutNoBoundaryAtAll(t *testing.T) {
	full := strings.Repeat("é", 1500)
	r := a20Materialize(t, t.TempDir(), "nospace", a20MD("nospace", full))
	kept := a20CheckCut(t, r, "nospace", full, skills.CutCharacter)
	assert.Equal(t, skills.MaxDescription-1, utf8.RuneCountInString(kept))
}

func TestAttackCutAbbreviationIsNoSentence(t *testing.T) {
	// "e.g. run" is not a sentence boundary (before a lowercase letter).
	var b strings.Builder
	for utf8.RuneCountInString(b.String()) < 1100 {
		b.WriteString("use tools e.g. grep or find ")
	}
	full := strings.TrimSpace(b.String())
	r := a20Materialize(t, t.TempDir(), "abbrev", a20MD("abbrev", a20Quoted(full)))
	a20CheckCut(t, r, "abbrev", full, skills.CutWord)
}

func TestAttackCutCJK(t *testing.T) {
	full := strings.Repeat("先运行搜索，再读文件。", 120)
	r := a20Materialize(t, t.TempDir(), "cjk", a20MD("cjk", full))
	kept := a20CheckCut(t, r, "cjk", full, skills.CutSentence)
	assert.True(t, strings.HasSuffix(kept, "。"))
}

func TestAttackCutEmojiAndCombining(t *testing.T) {
	// Each unit is one user-perceived character of several code points:
	// e + U+0301, a flag (two regional indicators), a thumbs-up with a skin tone.
	for name, unit := range map[string]string{"combining": "e\u0301", "flag": "🇫🇷", "skin": "👍🏽"} {
		t.Run(name, func(t *testing.T) {
			full := strings.Repeat(unit, 1100/utf8.RuneCountInString(unit)+2)
			r := a20Materialize(t, t.TempDir(), "emoji", a20MD("emoji", full))
			kept := a20CheckCut(t, r, "emoji", full, skills.CutCharacter)
			assert.True(t, strings.HasSuffix(kept, unit), "the cut split a character made of several code points (%q): kept ends %q",
				unit, []rune(kept)[len([]rune(kept))-3:])
		})
	}
}

func TestAttackCutJustUnderAndAt(t *testing.T) {
	for _, n := range []int{1023, 1024} {
		full := strings.Repeat("ü", n)
		r := a20Materialize(t, t.TempDir(), "fits", a20MD("fits", full))
		require.Len(t, r.bundle.Skills, 1)
		assert.Nil(t, r.bundle.Skills[0].DescriptionCut, "%d characters fit", n)
		assert.Equal(t, full, r.bundle.Skills[0].Description)
	}
	full := strings.Repeat("ü", 1025)
	r := a20Materialize(t, t.TempDir(), "over", a20MD("over", full), skills.WithStrictSpec())
	assert.Empty(t, r.bundle.Skills, "strict mode drops a description over the limit")
	require.Len(t, r.bundle.Dropped, 1)
}

func TestAttackCutReportedOnIndexHit(t *testing.T) {
	state := t.TempDir()
	src := filepath.Join(t.TempDir(), "again")
	require.NoError(t, os.MkdirAll(src, 0o755))
	var b strings.Builder
	for utf8.RuneCountInString(b.String()) < 1100 {
		b.WriteString("Do this. ")
	}
	full := strings.TrimSpace(b.String())
	require.NoError(t, os.WriteFile(filepath.Join(src, "SKILL.md"), []byte(a20MD("again", a20Quoted(full))), 0o644))
	first := a20Run(t, state, "again", src)
	a20CheckCut(t, first, "again", full, skills.CutSentence)
	// Past the index's two-second window the next calls are index hits.
	time.Sleep(2500 * time.Millisecond)
	second := a20Run(t, state, "again", src)
	third := a20Run(t, state, "again", src)
	a20CheckCut(t, second, "again", full, skills.CutSentence)
	a20CheckCut(t, third, "again", full, skills.CutSentence)
}

func TestAttackSpecEdgeCasesDefaultVsStrict(t *testing.T) {
	desc1024 := strings.Repeat("a", 1024)
	rows := []struct {
		name, dir, md string
		defaultKept   bool
		defaultDesc   string
		strictKept    bool
	}{
		{"crlf", "crlf", "---\r\nname: crlf\r\ndescription: Use it for CRLF files.\r\n---\r\nbody\r\n", true, "Use it for CRLF files.", true},
		{"bom", "bom", "\ufeff---\nname: bom\ndescription: Has a BOM.\n---\n", true, "Has a BOM.", true},
		{"unquoted colon", "colon", "---\nname: colon\ndescription: Use when: x\n---\n", true, "Use when: x", false},
		{"unquoted colon crlf", "colon", "---\r\nname: colon\r\ndescription: Use when: x\r\n---\r\n", true, "Use when: x", false},
		{"i18n name", "i18n-données", "---\nname: i18n-données\ndescription: Translate.\n---\n", true, "Translate.", true},
		{"decomposed name", "i18n-donne\u0301es", "---\nname: i18n-donne\u0301es\ndescription: Translate.\n---\n", true, "Translate.", false},
		{"plain trailing spaces", "trail", "---\nname: trail\ndescription: " + desc1024 + "   \n---\n", true, desc1024, true},
		{"quoted trailing spaces", "trailq", "---\nname: trailq\ndescription: \"" + desc1024 + "   \"\n---\n", true, desc1024, false},
		{"no frontmatter", "nofm", "# just a body\n", true, "", false},
		{"empty description", "empty", "---\nname: empty\ndescription: \"\"\n---\n", true, "", false},
		{"null description", "null", "---\nname: null\ndescription:\n---\n", false, "", false},
		{"upper name", "Upper", "---\nname: Upper\ndescription: X.\n---\n", true, "X.", false},
		{"name mismatch", "dir-a", "---\nname: dir-b\ndescription: X.\n---\n", true, "X.", false},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			r := a20Materialize(t, t.TempDir(), row.dir, row.md)
			if row.defaultKept {
				require.Len(t, r.bundle.Skills, 1, "default mode drops %s: %v", row.name, r.bundle.Dropped)
				assert.Equal(t, row.defaultDesc, r.bundle.Skills[0].Description)
				assert.Nil(t, r.bundle.Skills[0].DescriptionCut)
			} else {
				assert.Empty(t, r.bundle.Skills, "default mode keeps %s", row.name)
			}
			s := a20Materialize(t, t.TempDir(), row.dir, row.md, skills.WithStrictSpec())
			if row.strictKept {
				require.Len(t, s.bundle.Skills, 1, "strict mode drops %s: %v", row.name, s.bundle.Dropped)
			} else {
				assert.Empty(t, s.bundle.Skills, "strict mode keeps %s", row.name)
				require.Len(t, s.bundle.Dropped, 1)
				assert.NotEmpty(t, s.bundle.Dropped[0].Reason)
			}
		})
	}
}

func TestAttackLenientNeverInjectsLines(t *testing.T) {
	// A lenient value reads to the end of its line only: nothing after it
	// becomes part of the description or a new key.
	md := "---\nname: inj\ndescription: Use when: x\nallowed-tools: Bash(rm -rf /)\n---\n"
	r := a20Materialize(t, t.TempDir(), "inj", md)
	require.Len(t, r.bundle.Skills, 1)
	assert.Equal(t, "Use when: x", r.bundle.Skills[0].Description)
	m, lenient, err := skills.ParseMetaLenient([]byte(md))
	require.NoError(t, err)
	assert.Equal(t, []string{"description"}, lenient)
	assert.Equal(t, "Bash(rm -rf /)", m.AllowedTools)
	for _, c := range r.bundle.Prompt("/r") {
		if c != '\n' {
			assert.False(t, unicode.IsControl(c))
		}
	}
}

func TestAttackCutOffByOne(t *testing.T) {
	// A sentence that ends at exactly 1,023 characters fits with the marker;
	// one that ends at 1,024 does not.
	for _, end := range []int{1023, 1024} {
		t.Run(strconv.Itoa(end), func(t *testing.T) {
			first := "Éarly sentence. "
			body := strings.Repeat("Ö", end-utf8.RuneCountInString(first)-1) + "."
			full := first + body + " Then more words follow here, and more."
			require.Equal(t, end, utf8.RuneCountInString(first+body))
			r := a20Materialize(t, t.TempDir(), "obo", a20MD("obo", a20Quoted(full)))
			kept := a20CheckCut(t, r, "obo", full, skills.CutSentence)
			if end == 1023 {
				assert.Equal(t, first+body, kept)
			} else {
				assert.Equal(t, strings.TrimSpace(first), kept)
			}
		})
	}
}

func TestAttackCutCountsPromptForm(t *testing.T) {
	// Format characters are dropped and white space collapsed before
	// counting: 1,000 visible characters padded with U+200B and runs of
	// spaces fit; 1,100 visible ones are cut, counted without them.
	pad := func(n int) string {
		var b strings.Builder
		for i := range n {
			b.WriteString("w\u200b")
			if i%10 == 9 {
				b.WriteString("   ")
			}
		}
		return b.String()
	}
	r := a20Materialize(t, t.TempDir(), "pad", a20MD("pad", a20Quoted(pad(900))))
	require.Len(t, r.bundle.Skills, 1)
	assert.Nil(t, r.bundle.Skills[0].DescriptionCut)
	assert.NotContains(t, r.bundle.Skills[0].Description, "\u200b")
	r = a20Materialize(t, t.TempDir(), "pad", a20MD("pad", a20Quoted(pad(1100))))
	require.Len(t, r.bundle.Skills, 1)
	cut := r.bundle.Skills[0].DescriptionCut
	require.NotNil(t, cut)
	assert.Equal(t, skills.CutWord, cut.At)
	assert.Equal(t, 1100+109, cut.Original, "Original counts the prompt form: 1,100 w and 109 single spaces")
	assert.LessOrEqual(t, utf8.RuneCountInString(r.bundle.Skills[0].Description), skills.MaxDescription)
}

func TestAttackSpecEdgeCasesAreLogged(t *testing.T) {
	for name, row := range map[string]struct{ dir, md, want string }{
		"no frontmatter": {"nofm", "# body only\n", "frontmatter"},
		"unquoted colon": {"colon", "---\nname: colon\ndescription: Use when: x\n---\n", "description"},
		"empty":          {"empty", "---\nname: empty\ndescription: \"\"\n---\n", "description"},
		"violation":      {"Upper", "---\nname: Upper\ndescription: X.\n---\n", "Upper"},
	} {
		t.Run(name, func(t *testing.T) {
			r := a20Materialize(t, t.TempDir(), row.dir, row.md)
			var found bool
			for _, l := range r.logs {
				line, _ := json.Marshal(l)
				if l["level"] == "WARN" && strings.Contains(string(line), row.want) {
					found = true
				}
			}
			assert.True(t, found, "no Warn naming %q: %v", row.want, r.logs)
		})
	}
}

func TestAttackCutLenientCRLFBlock(t *testing.T) {
	// A long unquoted "Use when: …" value with CRLF line ends (lenient
	// parse), and a literal block whose sentences end at line ends.
	var b strings.Builder
	for utf8.RuneCountInString(b.String()) < 1100 {
		b.WriteString("Run the grep FIRST if no provider is named. ")
	}
	long := strings.TrimSpace(b.String())
	md := "---\r\nname: lenient\r\ndescription: Use when: " + long + "\r\n---\r\nbody\r\n"
	r := a20Materialize(t, t.TempDir(), "lenient", md)
	kept := a20CheckCut(t, r, "lenient", "Use when: "+long, skills.CutSentence)
	assert.True(t, strings.HasSuffix(kept, "named."), kept[len(kept)-20:])
	assert.NotContains(t, r.bundle.Skills[0].Description, "\r")

	var lit strings.Builder
	lit.WriteString("---\nname: block\ndescription: |\n")
	var flat []string
	for i := 0; utf8.RuneCountInString(strings.Join(flat, " ")) < 1100; i++ {
		line := "Step " + strconv.Itoa(i) + " reads the file?"
		lit.WriteString("  " + line + "\n")
		flat = append(flat, line)
	}
	lit.WriteString("---\n")
	r = a20Materialize(t, t.TempDir(), "block", lit.String())
	kept = a20CheckCut(t, r, "block", strings.Join(flat, " "), skills.CutSentence)
	assert.True(t, strings.HasSuffix(kept, "file?"), kept[len(kept)-20:])
}
