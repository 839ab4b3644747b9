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
		if strings.HasPrefix(s.File, "stage/stagetest/") {
			// The suites stage their own fixtures with the default; only the
			// source link-swap race goes through every policy on purpose.
			race := s.File == "stage/stagetest/hostile.go" && s.Links == "policies[i%len(policies)]"
			assert.True(t, s.Links == "SkipLinks" || race, "%s:%d stages with %s", s.File, s.Line, s.Links)
			continue
		}
		got = append(got, fmt.Sprintf("%s %s %s", s.File, s.Name, s.Links))
	}
	reviewed := []string{
		// The quickstart stages a skills bundle, which never holds a link.
		`examples/quickstart/main.go "skills" RejectLinks`,
		// So does the adapter example.
		`examples/adapter/adapter.go "skills" RejectLinks`,
		// And the bubblewrap example.
		`examples/bwrap/steps.go "skills" RejectLinks`,
		// The stage command stages what its user points it at, under the
		// policy its -links flag names (default skip).
		`examples/stage/main.go *name policy`,
		// The benchmark stages generated trees without links.
		`internal/cmd/benchstage/main.go "tree" SkipLinks`,
		`internal/cmd/benchwarm/main.go "airlock" SkipLinks`, // and its warm-connection one
		`internal/cmd/benchdelta/main.go "a" SkipLinks`,
	}
	assert.ElementsMatch(t, reviewed, got, "a staging site changed: review its link policy, then update this list")
	for _, s := range got {
		assert.NotContains(t, s, "FollowLinksWithin", "no library or example site follows links")
	}
}
