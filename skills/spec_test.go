package skills

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// verdict is what one reading of a SKILL.md concludes: kept or not, and the
// reason logged (a spec warning when kept, the drop reason when not; ""
// for a skill kept without a word).
type verdict struct {
	kept   bool
	reason string
}

// TestSpecEdgeCases sets airlock beside the Agent Skills spec on the cases
// where it and the reference validator (skills-ref) were found to differ.
// spec is the spec's verdict as skills/doc.go reads it; ref is skills-ref's
// (read from its source, not run here); def and strict are airlock's, in
// default and strict mode. Strict mode must agree with the spec on every
// row; default mode keeps what the spec rejects only with a logged reason.
func TestSpecEdgeCases(t *testing.T) {
	d1024 := strings.Repeat("d", 1024)
	for _, tc := range []struct {
		name, dir, md string
		spec, ref     bool
		def, strict   verdict
		desc          string // the description default mode keeps
	}{
		{"no frontmatter", "notes", "# Notes\nUse grep.\n", false, false,
			verdict{true, "SKILL.md has no frontmatter (a first line ---); name is missing; description is missing"},
			verdict{false, "SKILL.md has no frontmatter"}, ""},
		{"empty description", "blank", "---\nname: blank\ndescription: \"\"\n---\n", false, false,
			verdict{true, "description is missing (the agent is told only the skill's name)"},
			verdict{false, "description is missing"}, ""},
		{"unquoted colon", "colon", "---\nname: colon\ndescription: Use when: the user asks for a PDF\n---\n", false, false,
			verdict{true, `description: the value holds an unquoted ": ", which is not valid YAML; read as text to the end of the line (quote the value)`},
			verdict{false, "SKILL.md frontmatter does not parse: not valid YAML"}, "Use when: the user asks for a PDF"},
		{"non-ASCII lowercase name", "i18n-données", "---\nname: i18n-données\ndescription: Translates.\n---\n", true, true,
			verdict{true, ""}, verdict{true, ""}, "Translates."},
		{"byte order mark", "bom", "\uFEFF---\nname: bom\ndescription: Has a BOM.\n---\n", true, false,
			verdict{true, ""}, verdict{true, ""}, "Has a BOM."},
		{"1024 characters and quoted trailing spaces", "spaces", "---\nname: spaces\ndescription: \"" + d1024 + "   \"\n---\n", false, false,
			verdict{true, "description is 1027 characters; at most 1024"},
			verdict{false, "description is 1027 characters; at most 1024"}, d1024},
		{"1024 characters and plain trailing spaces (YAML drops them)", "plain", "---\nname: plain\ndescription: " + d1024 + "   \n---\n", true, true,
			verdict{true, ""}, verdict{true, ""}, d1024},
		{"1025 characters", "long", "---\nname: long\ndescription: " + d1024 + "d\n---\n", false, false,
			verdict{true, "description is 1025 characters; at most 1024"},
			verdict{false, "description is 1025 characters; at most 1024"}, d1024[:1023] + CutMarker},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.spec, tc.strict.kept, "strict mode is the spec")
			dir := filepath.Join(t.TempDir(), tc.dir)
			writeMD(t, dir, tc.md)
			sel := []Source{{Key: "k/" + tc.dir, Name: tc.dir, Dir: dir}}
			for _, mode := range []struct {
				name string
				want verdict
				opts []Option
			}{{"default", tc.def, nil}, {"strict", tc.strict, []Option{WithStrictSpec()}}} {
				var logs bytes.Buffer
				opts := append(mode.opts, WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
				b, err := Materialize(context.Background(), t.TempDir(), sel, opts...)
				require.NoError(t, err)
				got := verdict{kept: len(b.Skills) == 1}
				if got.kept {
					got.reason = logged(t, &logs, "skill violates the Agent Skills spec")
					assert.Equal(t, tc.desc, b.Skills[0].Description, mode.name)
				} else {
					require.Len(t, b.Dropped, 1)
					got.reason = b.Dropped[0].Reason
					assert.Equal(t, got.reason, logged(t, &logs, "skill dropped"), "%s: the drop is logged", mode.name)
				}
				assert.Equal(t, mode.want.kept, got.kept, "%s: kept", mode.name)
				if mode.want.reason == "" {
					assert.Empty(t, got.reason, "%s: nothing logged", mode.name)
				} else {
					assert.Contains(t, got.reason, mode.want.reason, mode.name)
				}
			}
		})
	}
}

// logged returns the reason of the log record with message msg, or "".
func logged(t *testing.T, logs *bytes.Buffer, msg string) string {
	t.Helper()
	for line := range bytes.Lines(logs.Bytes()) {
		var rec map[string]any
		require.NoError(t, json.Unmarshal(line, &rec))
		if rec["msg"] == msg {
			reason, _ := rec["reason"].(string)
			return reason
		}
	}
	return ""
}
