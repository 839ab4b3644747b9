package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestQuickstart(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out))
	for _, want := range []string{
		"kept    code-review: 3 files, links left out: [token]",
		"dropped half-done: SKILL.md is missing",
		"holds no link and no byte of the secret",
		"reused=false",
		"staged again unchanged: reused=true",
		"| Skill root: $BASE/sandbox/.airlock/runtime/skills",
		"resume under another model refused: drifted [profile_digest model]",
		"the task asks for files [report.md]",
		"citing the bare path is refused",
		"is accepted",
	} {
		assert.Contains(t, out.String(), want)
	}
}
