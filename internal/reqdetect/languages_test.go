package reqdetect

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Result.Unsure names a language no table reads, by script or by function
// words, and a delivery and a negation of another language that bear on one
// file; a text the reader reads with confidence has none.
func TestDetectUnsure(t *testing.T) {
	for _, c := range []struct{ objective, unsure string }{
		{"Export the table as totals.xlsx and attach it.", ""},
		{"Bitte exportiere die Tabelle als umsatz.xlsx und hänge sie an.", ""},
		{"請把結果整理成 summary.pdf 並附上", ""},
		{"Lee notas.txt y responde aquí.", ""},
		{"Пожалуйста, экспортируй таблицу в отчет.xlsx и приложи его к задаче.",
			"language: the text is mostly Russian or another Cyrillic-script language, which has no table"},
		{"يرجى تصدير الجدول إلى report.xlsx وإرفاقه بالمهمة.", "language: the text is mostly Arabic, which has no table"},
		{"Proszę wyeksportować tabelę do raport.xlsx i załączyć ją do zadania, jest to pilne dla zespołu, który czeka.",
			"language: the text is mostly Polish, which has no table"},
		{"Exportera tabellen som rapport.xlsx och bifoga den till ärendet, det är inte klart till fredag.",
			"language: the text is mostly Swedish, which has no table"},
		{"Lütfen tabloyu rapor.xlsx olarak dışa aktar ve bu göreve ekle, bu çok önemli bir iş için.",
			"language: the text is mostly Turkish, which has no table"},
		{"Erstelle bericht.pdf und hänge ihn an. Hänge bericht.pdf nicht an.",
			"conflicting signals: a request and a negation of another language both bear on bericht.pdf"},
		{"Erstelle bericht.pdf. Antworte hier, keine Datei nötig.",
			"conflicting signals: a request and a negation of another language both bear on bericht.pdf"},
		{"Lies daten.csv. Antworte hier, keine Datei nötig.", ""},
		{"Erstelle bericht.pdf.\n\n## Hinweis\nAntworte hier, keine Datei nötig.",
			"conflicting signals: a request and a negation of another language both bear on bericht.pdf"},
		{"Erstelle bericht.pdf und hänge ihn an. Schicke mir auch bericht.pdf.", ""},
	} {
		assert.Equal(t, c.unsure, Detect(c.objective).Unsure, "%q", c.objective)
	}
}

// Every table holds the words each rule needs: a language without them
// would be read by the others' words only.
func TestLangTablesComplete(t *testing.T) {
	for _, l := range langTables {
		for _, field := range []string{"delivery", "output", "input", "reply", "edit", "negators", "deliverables",
			"inputs", "polite", "repo"} {
			assert.NotEmpty(t, l.cues[field], "%s (%s) has no %s words", l.name, l.code, field)
		}
		if l != langJA && l != langZH && l != langKO {
			assert.NotEmpty(t, l.cues["function"], "%s has no function words to be told by", l.name)
		}
	}
}

// A rule id names each foreign decision, as the English rules do.
func TestForeignRuleIDs(t *testing.T) {
	r := Detect("Bitte exportiere die Tabelle als umsatz.xlsx und hänge sie an. Lies vorher daten.csv.")
	assert.Equal(t, []string{"umsatz.xlsx"}, r.Files)
	ids := map[string]string{}
	for _, w := range r.Why {
		ids[w.File] = w.ID
	}
	assert.Equal(t, map[string]string{"umsatz.xlsx": "foreign-delivery", "daten.csv": "foreign-input"}, ids)
}

// A typo in a long delivery or output word still reads as that word; an
// inflection ending that differs does not ("escreve" is not "escreva").
func TestForeignTypos(t *testing.T) {
	for objective, files := range map[string][]string{
		"Bitte die Tabelle als umsatz.xlsx anhägen.":                        {"umsatz.xlsx"},
		"Bitte exportire die Tabelle als umsatz.xlsx und hänge sie an.":     {"umsatz.xlsx"},
		"Por favor ajdunta el archivo informe.pdf al ticket.":               {"informe.pdf"},
		"Hoje o comando escreve `saida/relatorio.html` sempre que é usado.": nil,
	} {
		assert.Equal(t, files, Detect(objective).Files, "%q", objective)
	}
	assert.True(t, oneTypo("anhagen", "anhangen"))
	assert.True(t, oneTypo("exportiern", "exportiren"))
	assert.False(t, oneTypo("escreve", "escreva"), "an ending differs")
	assert.False(t, oneTypo("anhangen", "anhangen"), "equal words")
}

// A table is read from its embedded file; a code without one is a programming error.
// Every field of every table is one a table has: a cue list (cueFields) or one of langFields.
func TestLangTableFields(t *testing.T) {
	files, err := filepath.Glob("lang_*.txt")
	require.NoError(t, err)
	require.Len(t, files, len(langTables)+1) // and lang_en.txt, the shared cues
	for _, f := range files {
		for field := range loadLang(strings.TrimSuffix(strings.TrimPrefix(f, "lang_"), ".txt")).cues {
			known := slices.Contains(langFields, field) || slices.ContainsFunc(cueFields, func(c cueField) bool { return c.name == field })
			assert.True(t, known, "%s: %q is no field of a language table", f, field)
		}
	}
}

// unsureLanguage skips the script look-up for a letter below otherScriptsFirst: no script of otherScripts has one.
func TestOtherScriptsFirst(t *testing.T) {
	for _, s := range otherScripts {
		for _, r := range s.table.R16 {
			assert.GreaterOrEqual(t, rune(r.Lo), rune(otherScriptsFirst), s.name)
		}
		for _, r := range s.table.R32 {
			assert.GreaterOrEqual(t, rune(r.Lo), rune(otherScriptsFirst), s.name)
		}
	}
	assert.Equal(t, "language: the text is mostly Greek, which has no table", unsureLanguage("Γεια σου κόσμε, καλημέρα"))
}

func TestLoadLang(t *testing.T) {
	assert.Equal(t, "German", loadLang("de").name)
	assert.PanicsWithValue(t, "reqdetect: open lang_xx.txt: file does not exist", func() { loadLang("xx") })
}

// foldWord returns a word with no rune beyond ASCII as strings.ToLower does: that holds while no accentFolds key is ASCII.
func TestAccentFoldsBeyondASCII(t *testing.T) {
	for r := range accentFolds {
		assert.GreaterOrEqual(t, r, rune(0x80), "accentFolds key %q", r)
	}
	assert.Equal(t, "exportiere", foldWord("Exportiere"))
	assert.Equal(t, "anhangen", foldWord("Anhängen"))
}
