package stagetest_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/stage/stagetest"
)

// TestRepositorySites pins the link policy of every stage.Asset literal in
// the library and examples/ (tests, which exercise every policy on purpose,
// are left out). A new staging site, or a changed policy, fails here until
// it is reviewed and added to the list.
func TestRepositorySites(t *testing.T) {
	sites, err := stagetest.ScanSites("../..")
	require.NoError(t, err)
	var got []string
	for _, s := range sites {
		if strings.HasSuffix(s.File, "_test.go") {
			continue
		}
		got = append(got, fmt.Sprintf("%s %s %s", s.File, s.Name, s.Links))
	}
	reviewed := []string{
		// The quickstart stages a skills bundle, which never holds a link.
		`examples/quickstart/main.go "skills" RejectLinks`,
	}
	// The conformance suite stages its own fixtures with the default.
	for _, name := range []string{`"skills"`, `"one"`, `"skills"`, `"skills"`, `"alpha"`, `"beta"`, `"empty"`,
		`name`, `"m"`, `"m"`, `"m"`, `"big"`, `"l"`, `"a"`, `"b"`, `"c"`, `"x"`, `"same"`, `"same"`} {
		reviewed = append(reviewed, "stage/stagetest/stagetest.go "+name+" SkipLinks")
	}
	assert.ElementsMatch(t, reviewed, got, "a staging site changed: review its link policy, then update this list")
	for _, s := range got {
		assert.NotContains(t, s, "FollowLinksWithin", "no library or example site follows links")
	}
}
