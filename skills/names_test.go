package skills

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dirNames lists the names in dir, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestIdentityRawNames(t *testing.T) {
	ctx := context.Background()
	ff := skillDir(t, t.TempDir(), "raw", "f\xff:x")
	fe := skillDir(t, t.TempDir(), "raw", "f\xfe:x")
	a, err := Materialize(ctx, t.TempDir(), []Source{{Key: "k", Name: "raw", Dir: ff}})
	require.NoError(t, err)
	b, err := Materialize(ctx, t.TempDir(), []Source{{Key: "k", Name: "raw", Dir: fe}})
	require.NoError(t, err)
	require.Len(t, a.Skills, 1)
	require.Len(t, b.Skills, 1)
	assert.NotEqual(t, a.Skills[0].Digest, b.Skills[0].Digest)
	assert.NotEqual(t, a.Identity, b.Identity, "skills differing only in a name's invalid UTF-8 byte are different skills")
}

func TestMaterializeRenameRawName(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"copy", nil},
		{"index", []Option{func(o *options) { o.racy = 0 }}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			state := t.TempDir()
			dir := skillDir(t, t.TempDir(), "raw", "f\xff:x")
			sel := []Source{{Key: "k", Name: "raw", Dir: dir}}
			first, err := Materialize(ctx, state, sel, tc.opts...)
			require.NoError(t, err)
			assert.Equal(t, []string{"SKILL.md", "f\xff"}, dirNames(t, filepath.Join(first.Dir, "raw")))

			require.NoError(t, os.Rename(filepath.Join(dir, "f\xff"), filepath.Join(dir, "f\xfe")))
			second, err := Materialize(ctx, state, sel, tc.opts...)
			require.NoError(t, err)
			assert.NotEqual(t, first.Identity, second.Identity)
			assert.NotEqual(t, first.Dir, second.Dir, "a fresh bundle, not the stale one")
			assert.Equal(t, []string{"SKILL.md", "f\xfe"}, dirNames(t, filepath.Join(second.Dir, "raw")))
		})
	}
}

func TestMaterializeIndexRawNames(t *testing.T) {
	ctx := context.Background()
	state, src := t.TempDir(), t.TempDir()
	dir := skillDir(t, src, "raw", "d/")
	require.NoError(t, os.Symlink("SKILL.md", filepath.Join(dir, "d", "l\xff")))
	sel := []Source{{Key: "k", Name: "raw", Dir: dir}, {Key: "k/gone", Name: "gone", Dir: filepath.Join(src, "gone\xff")}}
	var copies []string
	spy := func(o *options) {
		o.racy = 0
		o.copied = func(name string) { copies = append(copies, name) }
	}
	first, err := Materialize(ctx, state, sel, spy)
	require.NoError(t, err)
	require.Len(t, first.Skills, 1)
	assert.Equal(t, []string{"d/l\xff"}, first.Skills[0].Skipped)
	require.Len(t, first.Dropped, 1)
	assert.Contains(t, first.Dropped[0].Reason, "gone\xff")
	assert.Equal(t, []string{"raw"}, copies)

	copies = nil
	again, err := Materialize(ctx, state, sel, spy)
	require.NoError(t, err)
	assert.Empty(t, copies, "served from the index")
	assert.Equal(t, first, again, "the index keeps names byte for byte")
}

func TestMaterializeIndexUsesCallerContext(t *testing.T) {
	state := t.TempDir()
	dir := skillDir(t, t.TempDir(), "ctx")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b, err := Materialize(ctx, state, []Source{{Key: "k", Name: "ctx", Dir: dir}}, func(o *options) {
		o.racy = 0
		o.beforeIndex = cancel // the caller gives up after the bundle is published
	})
	require.NoError(t, err, "the bundle was published before the cancel")
	require.Len(t, b.Skills, 1)
	idx, err := filepath.Glob(filepath.Join(state, ".index-*"))
	require.NoError(t, err)
	assert.Empty(t, idx, "a cancelled caller's context stops the index write")
}

func TestPromptDropsInvisibleAndControl(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    rune
		keep bool // turned into a space instead of dropped
	}{
		{"RLO U+202E", '\u202E', false},
		{"LRO U+202D", '\u202D', false},
		{"PDF U+202C", '\u202C', false},
		{"LRI U+2066", '\u2066', false},
		{"RLI U+2067", '\u2067', false},
		{"FSI U+2068", '\u2068', false},
		{"PDI U+2069", '\u2069', false},
		{"ZWSP U+200B", '\u200B', false},
		{"ZWJ U+200D", '\u200D', false},
		{"RLM U+200F", '\u200F', false},
		{"ALM U+061C", '\u061C', false},
		{"word joiner U+2060", '\u2060', false},
		{"BOM U+FEFF", '\uFEFF', false},
		{"soft hyphen U+00AD", '\u00AD', false},
		{"tag A U+E0041", '\U000E0041', false},
		{"ESC", '\x1b', true},
		{"NUL", '\x00', true},
		{"DEL", '\x7f', true},
		{"CSI U+009B", '\u009B', true},
		{"NEL U+0085", '\u0085', true},
		{"line feed", '\n', true},
		{"carriage return", '\r', true},
		{"line separator U+2028", '\u2028', true},
		{"paragraph separator U+2029", '\u2029', true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := string(tc.r)
			want := "Safeword: evil"
			if tc.keep {
				want = "Safe word: evil"
			}
			b := &Bundle{Skills: []Skill{{Name: "s" + r + "x", Description: "Safe" + r + "word:" + r + r + " " + r + "evil" + r}}}
			p := b.Prompt("/sb")
			if tc.r != '\n' {
				assert.NotContains(t, p, r)
			}
			assert.Contains(t, p, "- s")
			assert.Contains(t, p, want)
			for _, c := range p {
				assert.False(t, unicode.Is(unicode.Cf, c) || unicode.IsControl(c) && c != '\n', "rune %U in the prompt", c)
			}
			assert.Equal(t, 5, strings.Count(p, "\n"), "one line per skill, nothing split")

			got, cut := description("Safe" + r + "word:" + r + r + " " + r + "evil" + r)
			assert.Equal(t, want, got)
			assert.Nil(t, cut)
		})
	}
}

func TestMaterializeDescriptionDropsBidi(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bidi")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	md := "---\nname: bidi\ndescription: \"Reads \u202Etxt.exe\u202C files\u200B \u2066quietly\u2069\"\n---\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte(md), 0o644))
	b, err := Materialize(context.Background(), t.TempDir(), []Source{{Key: "k", Name: "bidi", Dir: dir}})
	require.NoError(t, err)
	require.Len(t, b.Skills, 1)
	assert.Equal(t, "Reads txt.exe files quietly", b.Skills[0].Description)
	assert.Contains(t, b.Prompt("/sb"), "- bidi: Reads txt.exe files quietly (file: /sb/bidi/SKILL.md)\n")
}
