// Command gentree writes a benchmark tree into a new directory, for
// bench.sh: internal/treegen's Standard (20 skills x 100 files, about
// 25 MB, the tree stage/bench_test.go measures) or, with the shape "pages",
// its Pages (38,000 small files):
//
//	go run ./examples/stage/internal/gentree DIR [standard|pages]
package main

import (
	"fmt"
	"os"

	"github.com/airlockdev/airlock/internal/treegen"
)

func main() {
	shape := "standard"
	if len(os.Args) == 3 {
		shape = os.Args[2]
	}
	s, ok := treegen.Shapes[shape]
	if len(os.Args) < 2 || len(os.Args) > 3 || !ok {
		fmt.Fprintln(os.Stderr, "usage: gentree DIR [standard|pages] (DIR must not exist)")
		os.Exit(1)
	}
	if err := os.Mkdir(os.Args[1], 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "gentree:", err)
		os.Exit(1)
	}
	t, err := treegen.Write(os.Args[1], s)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gentree:", err)
		os.Exit(1)
	}
	fmt.Printf("%d files, %d bytes in %s\n", t.Files, t.Bytes, os.Args[1])
}
