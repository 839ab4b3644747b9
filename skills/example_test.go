package skills_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/airlockdev/airlock/skills"
)

func ExampleMaterialize() {
	src, _ := os.MkdirTemp("", "skills-src")
	state, _ := os.MkdirTemp("", "skills-state")
	defer os.RemoveAll(src)
	defer os.RemoveAll(state)

	// One usable skill, one without a SKILL.md.
	pdf := filepath.Join(src, "pdf")
	os.MkdirAll(pdf, 0o755)
	os.WriteFile(filepath.Join(pdf, "SKILL.md"), []byte("---\nname: pdf\ndescription: >\n  Fill and\n  sign PDF forms.\n---\nSteps…\n"), 0o644)
	os.MkdirAll(filepath.Join(src, "empty"), 0o755)

	b, err := skills.Materialize(context.Background(), state, []skills.Source{
		{Key: "acme/pdf", Name: "pdf", Dir: pdf},
		{Key: "acme/empty", Name: "empty", Dir: filepath.Join(src, "empty")},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, d := range b.Dropped {
		fmt.Printf("dropped %s: %s\n", d.Name, d.Reason)
	}
	fmt.Print(b.Prompt("/sandbox/.airlock/skills"))
	// Output:
	// dropped empty: SKILL.md is missing
	// The following skills were materialized for this run.
	// Skill root: /sandbox/.airlock/skills
	// Selected skills: pdf
	// - pdf: Fill and sign PDF forms. (file: /sandbox/.airlock/skills/pdf/SKILL.md)
	// Read a skill's SKILL.md from the skill root when the task calls for it.
}
