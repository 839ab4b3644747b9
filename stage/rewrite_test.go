package stage_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/airlockdev/airlock/stage"
)

func TestRewrite(t *testing.T) {
	rt := &stage.Runtime{Root: "/s", Assets: []stage.StagedAsset{
		{Name: "skills", Source: "/h/skills", Path: "/s/skills"},
		{Name: "x", Source: "/h/skills/x", Path: "/s/x"},
		{Name: "tools", Source: "/h/tools", Path: "/s/tools"},
	}}
	cases := []struct{ in, want string }{
		{"/h/skills", "/s/skills"},
		{"/h/skills/", "/s/skills/"},
		{"/h/skills/y/SKILL.md", "/s/skills/y/SKILL.md"},
		{"/h/skills/x", "/s/x"},
		{"/h/skills/x/SKILL.md", "/s/x/SKILL.md"},
		{"/h/skills/xy", "/s/skills/xy"},
		{"/h/skills-old", "/h/skills-old"},
		{"/h/skills-old/x", "/h/skills-old/x"},
		{"/h/skills_old", "/h/skills_old"},
		{"/h/skills.bak", "/h/skills.bak"},
		{"/h/skills.d/x", "/h/skills.d/x"},
		{"/h/skillsé", "/h/skillsé"},
		{"/h/skills2", "/h/skills2"},
		{"/x/h/skills", "/x/h/skills"},
		{"foo/h/skills", "foo/h/skills"},
		{"./h/skills", "./h/skills"},
		{"~/h/skills", "~/h/skills"},
		{"//h/skills", "//h/skills"},
		{"/h/skills//x", "/s/skills//x"},
		{"/h/skills/h/skills", "/s/skills/h/skills"},
		{"/h/skill", "/h/skill"},
		{"", ""},
		{"no paths here", "no paths here"},
		{"see /h/skills.", "see /s/skills."},
		{"see /h/skills. Then", "see /s/skills. Then"},
		{"see /h/skills, /h/tools; and '/h/skills'", "see /s/skills, /s/tools; and '/s/skills'"},
		{`"/h/skills/a b"`, `"/s/skills/a b"`},
		{"PATH=/h/tools:/h/skills/bin", "PATH=/s/tools:/s/skills/bin"},
		{"[link](/h/tools)", "[link](/s/tools)"},
		{"file:///h/skills/x/SKILL.md", "file:///s/x/SKILL.md"},
		{"<FILE:///h/tools>", "<FILE:///s/tools>"},
		{"[f](file:///h/skills)", "[f](file:///s/skills)"},
		{"xfile:///h/skills", "xfile:///h/skills"},
		{"file:////h/skills", "file:////h/skills"},
		{"file://host/h/skills", "file://host/h/skills"},
		// Non-ASCII after a match: punctuation and symbols end the path,
		// letters, digits and combining marks continue it.
		{"see /h/skills…", "see /s/skills…"},
		{"“/h/skills”", "“/s/skills”"},
		{"«/h/skills/x»", "«/s/x»"},
		{"/h/skills→/h/tools", "/s/skills→/s/tools"},
		{"/h/skills and", "/s/skills and"},
		{"/h/skills/é.md", "/s/skills/é.md"},
		{"/h/skillsé/x", "/h/skillsé/x"},
		{"/h/skillś", "/h/skillś"},
		{"/h/skills٣", "/h/skills٣"},
		{"/h/skills漢", "/h/skills漢"},
		{"/h/skillsÿ", "/h/skillsÿ"},
		// Non-ASCII before a match: a space, an opening quote or bracket, or
		// a symbol starts a path; an ellipsis or a letter does not.
		{"…/h/skills", "…/h/skills"},
		{"é/h/skills", "é/h/skills"},
		{"ÿ/h/skills", "ÿ/h/skills"},
		{"—/h/skills", "—/h/skills"},
		// A trailing run of dots ends the path unless a name or slash follows.
		{"see /h/skills...", "see /s/skills..."},
		{"see /h/skills... then", "see /s/skills... then"},
		{"(/h/skills..)", "(/s/skills..)"},
		{"/h/skills.…", "/s/skills.…"},
		{"/h/skills..x", "/h/skills..x"},
		{"/h/skills../x", "/h/skills../x"},
		{"/h/skills...d", "/h/skills...d"},
		{"/h/skills-old…", "/h/skills-old…"},
		{"/h/skills-old...", "/h/skills-old..."},
		{"Skill root: /h/skills\n- a: does a (file: /h/skills/a/SKILL.md)\n- x: does x (file: /h/skills/x/SKILL.md)\n",
			"Skill root: /s/skills\n- a: does a (file: /s/skills/a/SKILL.md)\n- x: does x (file: /s/x/SKILL.md)\n"},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			assert.Equal(t, c.want, rt.Rewrite(c.in))
		})
	}
}

func TestRewriteEdgeRuntimes(t *testing.T) {
	var nilRT *stage.Runtime
	assert.Equal(t, "/h/skills", nilRT.Rewrite("/h/skills"))
	_, ok := nilRT.Path("skills")
	assert.False(t, ok)
	empty := &stage.Runtime{Root: "/s"}
	assert.Equal(t, "/h/skills", empty.Rewrite("/h/skills"))
	// The first of two assets with the same source wins.
	dup := &stage.Runtime{Assets: []stage.StagedAsset{
		{Name: "a", Source: "/h/d", Path: "/s/a"},
		{Name: "b", Source: "/h/d", Path: "/s/b"},
	}}
	assert.Equal(t, "/s/a/f", dup.Rewrite("/h/d/f"))
}
