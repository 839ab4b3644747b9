package sandbox_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadmeQuotesExampleFromExec: the README's provider-SDK example is
// ExampleFromExec, which this package's tests compile and run, word for
// word from its fake SDK to its end.
func TestReadmeQuotesExampleFromExec(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	src, err := os.ReadFile("example_fromexec_test.go")
	require.NoError(t, err)
	start := strings.Index(string(src), "// providerSDK stands")
	require.GreaterOrEqual(t, start, 0, "example_fromexec_test.go lost its providerSDK comment")
	code := string(src[start:])
	require.Contains(t, string(readme), "```go\n"+code+"```\n",
		"README.md's Runners section must quote example_fromexec_test.go from providerSDK to the end")
}
