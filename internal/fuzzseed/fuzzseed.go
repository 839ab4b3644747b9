// Package fuzzseed reads the seed files of a Go fuzz corpus
// (testdata/fuzz/<Fuzz>/<name>, "go test fuzz v1" format), so that a test
// can pin what each checked-in seed must decode to.
package fuzzseed

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// Bytes returns the single []byte value of the seed file at path, failing
// tb when the file is not a one-value []byte seed.
func Bytes(tb testing.TB, path string) []byte {
	tb.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	lines := strings.SplitN(strings.TrimSpace(string(raw)), "\n", 2)
	if len(lines) != 2 || lines[0] != "go test fuzz v1" {
		tb.Fatalf("%s: not a \"go test fuzz v1\" seed", path)
	}
	lit, ok := strings.CutPrefix(lines[1], "[]byte(")
	if ok {
		lit, ok = strings.CutSuffix(lit, ")")
	}
	if !ok {
		tb.Fatalf("%s: the seed is not one []byte value: %q", path, lines[1])
	}
	data, err := strconv.Unquote(lit)
	if err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	return []byte(data)
}
