package skills

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func TestParseMeta(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want Meta
		err  string
	}{
		{"full", "---\nname: pdf\ndescription: Reads PDFs.\nlicense: MIT\ncompatibility: linux\nallowed-tools: Bash Read\nmetadata:\n  author: me\n---\nbody", Meta{
			Name: "pdf", Description: "Reads PDFs.", License: "MIT", Compatibility: "linux", AllowedTools: "Bash Read", Metadata: map[string]string{"author": "me"}}, ""},
		{"bom and crlf", "\uFEFF---\r\nname: pdf\r\n---\r\n", Meta{Name: "pdf"}, ""},
		{"tools list", "---\nallowed-tools: [Bash, Read]\n---\n", Meta{AllowedTools: "Bash Read"}, ""},
		{"unknown keys", "---\nzeta: 1\nalpha: 2\n---\n", Meta{Unknown: []string{"alpha", "zeta"}}, ""},
		{"no frontmatter", "# Just text\n", Meta{}, ""},
		{"empty frontmatter", "---\n---\n", Meta{}, ""},
		{"unterminated", "---\nname: x\n", Meta{}, "no closing --- line"},
		{"not a mapping", "---\n- a\n---\n", Meta{}, "not a mapping"},
		{"bad yaml", "---\nname: [x\n---\n", Meta{}, "does not parse"},
		{"duplicate key", "---\nname: a\nname: b\n---\n", Meta{}, `key "name" appears twice`},
		{"list name", "---\nname: [a]\n---\n", Meta{}, "name must be a string"},
		{"null description", "---\ndescription:\n---\n", Meta{}, "description must be a string"},
		{"metadata not map", "---\nmetadata: x\n---\n", Meta{}, "metadata must be a mapping"},
		{"metadata nested", "---\nmetadata:\n  a: {b: c}\n---\n", Meta{}, "metadata a must be a string"},
		{"bad utf8", "---\nname: \xff\n---\n", Meta{}, "not valid UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseMeta([]byte(tc.in))
			if tc.err != "" {
				require.ErrorIs(t, err, ErrFrontmatter)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestMetaValidate(t *testing.T) {
	ok := Meta{Name: "pdf-tools", Description: "Reads PDFs."}
	require.NoError(t, ok.Validate("pdf-tools"))
	for _, name := range []string{"i18n-données", "データ-2", "ß-ǆ", "٣-x"} {
		require.NoError(t, Meta{Name: name, Description: strings.Repeat("d", 1024)}.Validate(name), name)
	}
	for _, tc := range []struct {
		name string
		m    Meta
		dir  string
		want string
	}{
		{"missing name", Meta{Description: "d"}, "x", "name is missing"},
		{"long name", Meta{Name: strings.Repeat("a", 65), Description: "d"}, strings.Repeat("a", 65), "at most 64"},
		{"upper", Meta{Name: "Pdf", Description: "d"}, "Pdf", `may hold only lowercase letters, digits and - (found 'P', U+0050)`},
		{"upper non-ASCII", Meta{Name: "données-É", Description: "d"}, "données-É", `(found 'É', U+00C9)`},
		{"underscore", Meta{Name: "pdf_tools", Description: "d"}, "pdf_tools", `(found '_', U+005F)`},
		{"a number that is no digit", Meta{Name: "v½", Description: "d"}, "v½", "U+00BD)"},
		{"decomposed accent", Meta{Name: "donne\u0301es", Description: "d"}, "donne\u0301es", "U+0301)"},
		{"leading hyphen", Meta{Name: "-pdf", Description: "d"}, "-pdf", "leading, trailing or double hyphen"},
		{"trailing hyphen", Meta{Name: "pdf-", Description: "d"}, "pdf-", "leading, trailing or double hyphen"},
		{"double hyphen", Meta{Name: "p--df", Description: "d"}, "p--df", "leading, trailing or double hyphen"},
		{"dir mismatch", Meta{Name: "pdf", Description: "d"}, "other", `differs from the directory name "other"`},
		{"no description", Meta{Name: "pdf", Description: "  "}, "pdf", "description is missing"},
		{"trailing spaces count", Meta{Name: "pdf", Description: strings.Repeat("d", 1024) + "  "}, "pdf", "description is 1026 characters; at most 1024"},
		{"long description", Meta{Name: "pdf", Description: strings.Repeat("é", 1025)}, "pdf", "description is 1025 characters"},
		{"long compatibility", Meta{Name: "pdf", Description: "d", Compatibility: strings.Repeat("c", 501)}, "pdf", "compatibility is 501"},
		{"unknown key", Meta{Name: "pdf", Description: "d", Unknown: []string{"version"}}, "pdf", `key "version" is not in the spec`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.m.Validate(tc.dir)
			require.ErrorIs(t, err, ErrSpec)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestDescription(t *testing.T) {
	got, cut := description("  a\n\tb \x1b c \r\n")
	assert.Equal(t, "a b c", got)
	assert.Nil(t, cut)
	long, cut := description(strings.Repeat("ü", 2000))
	assert.Equal(t, strings.Repeat("ü", 1023)+CutMarker, long, "no space at all: cut between characters")
	assert.Equal(t, &Cut{Original: 2000, Kept: 1023, At: CutCharacter}, cut)
}

// FuzzParseMeta checks that ParseMeta never panics, that every error wraps
// ErrFrontmatter, and that what it accepts survives a round trip: the meta
// rendered back as frontmatter parses to the same meta.
func FuzzParseMeta(f *testing.F) {
	f.Add([]byte("---\nname: pdf\ndescription: Reads PDFs.\nmetadata:\n  a: b\n---\nbody"))
	f.Add([]byte("---\nallowed-tools: [a, b]\nx: 1\n---\n"))
	f.Add([]byte("no frontmatter"))
	f.Add([]byte("---\nname: &a x\ndescription: *a\n---\n"))
	f.Add([]byte("---\nname: x\ndescription: Use when: a \"b\" \\ c:\n---\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseMeta(data)
		lm, lenient, lerr := ParseMetaLenient(data)
		if lerr != nil && !errors.Is(lerr, ErrFrontmatter) {
			t.Fatalf("lenient error does not wrap ErrFrontmatter: %v", lerr)
		}
		if err == nil && (lerr != nil || lenient != nil || !assert.ObjectsAreEqual(m, lm)) {
			t.Fatalf("valid YAML read otherwise leniently: %#v, %v, %v; strict %#v", lm, lenient, lerr, m)
		}
		if err != nil {
			if !errors.Is(err, ErrFrontmatter) {
				t.Fatalf("error does not wrap ErrFrontmatter: %v", err)
			}
			return
		}
		doc := map[string]any{}
		if m.Name != "" {
			doc["name"] = m.Name
		}
		if m.Description != "" {
			doc["description"] = m.Description
		}
		if m.License != "" {
			doc["license"] = m.License
		}
		if m.Compatibility != "" {
			doc["compatibility"] = m.Compatibility
		}
		if m.AllowedTools != "" {
			doc["allowed-tools"] = m.AllowedTools
		}
		if m.Metadata != nil {
			doc["metadata"] = m.Metadata
		}
		for _, k := range m.Unknown {
			doc[k] = "x"
		}
		out, err := yaml.Marshal(doc)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		again, err := ParseMeta([]byte("---\n" + string(out) + "---\n"))
		if err != nil {
			t.Fatalf("round trip of %q failed: %v\n%s", data, err, out)
		}
		if len(m.Metadata) == 0 && m.Metadata != nil {
			again.Metadata = map[string]string{}
		}
		if !assert.ObjectsAreEqual(m, again) {
			t.Fatalf("round trip changed the meta:\n%#v\n%#v", m, again)
		}
	})
}

func TestParseMetaLenient(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     Meta
		lenient  []string
		err      string
	}{
		{"valid YAML untouched", "---\nname: a\ndescription: \"Use when: x\"\n---\n", Meta{Name: "a", Description: "Use when: x"}, nil, ""},
		{"unquoted colon", "---\nname: a\ndescription: Use when: x\n---\n", Meta{Name: "a", Description: "Use when: x"}, []string{"description"}, ""},
		{"trailing colon, quotes and backslash", "---\ndescription: Say \"hi\" \\ then:  \ncompatibility: Needs: git\n---\n",
			Meta{Description: `Say "hi" \ then:`, Compatibility: "Needs: git"}, []string{"description", "compatibility"}, ""},
		{"quotes cannot inject a key", "---\nname: a\ndescription: a: b\", name: \"evil\n---\n",
			Meta{Name: "a", Description: `a: b", name: "evil`}, []string{"description"}, ""},
		{"a comment is text", "---\ndescription: Use when: x # y\n---\n", Meta{Description: "Use when: x # y"}, []string{"description"}, ""},
		{"nested lines are not read leniently", "---\nmetadata:\n  a: b: c\n---\n", Meta{}, nil, "does not parse"},
		{"indicator first: not a plain scalar", "---\ndescription: [a: b\n---\n", Meta{}, nil, "does not parse"},
		{"continuation line still fails", "---\ndescription: Use when: x\n  and more\n---\n", Meta{}, nil, "mapping values are not allowed"},
		{"a lone CR ends a line, as in YAML", "---\rname: a\rdescription: Use when: x\rcompatibility: y\r---\r",
			Meta{Name: "a", Description: "Use when: x", Compatibility: "y"}, []string{"description"}, ""},
		{"a lone CR in a lenient value ends it", "---\r\ndescription: \rmd\r%*\r\retad k: v\r\n---\r\n", Meta{}, nil, "does not parse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, lenient, err := ParseMetaLenient([]byte(tc.in))
			if tc.err != "" {
				require.ErrorIs(t, err, ErrFrontmatter)
				assert.Contains(t, err.Error(), tc.err)
				assert.Nil(t, lenient)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.lenient, lenient)
			if tc.lenient != nil {
				_, err := ParseMeta([]byte(tc.in))
				require.ErrorIs(t, err, ErrFrontmatter, "ParseMeta stays strict")
			}
		})
	}
}

func TestParseMetaLinear(t *testing.T) {
	// A SKILL.md under the size limit made of a million short lines once
	// took minutes; one scan must do.
	md := "---\n" + strings.Repeat("\n", MaxSkillMD-8) + "---\n"
	start := time.Now()
	_, err := ParseMeta([]byte(md))
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 5*time.Second)
	_, err = ParseMeta([]byte("---\n" + strings.Repeat("\n", MaxSkillMD-4)))
	require.ErrorIs(t, err, ErrFrontmatter)
}
