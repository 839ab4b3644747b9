package mcptool_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable/mcptool"
)

// TestReadmeQuotesTheDescription: the README shows the agent's view of the
// tool word for word; a change to the description must be made there too.
func TestReadmeQuotesTheDescription(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	assert.True(t, strings.Contains(string(readme), "```text\n"+mcptool.Description("register_deliverable")+"\n```"),
		"README.md's section on register_deliverable must quote mcptool.Description in a text block")
}
