// Command gentree writes the standard benchmark tree (internal/treegen
// Standard: 20 skills x 100 files, about 25 MB) into a new directory, the
// tree stage/bench_test.go measures, for bench.sh:
//
//	go run ./examples/stage/internal/gentree DIR
package main

import (
	"fmt"
	"os"

	"github.com/airlockdev/airlock/internal/treegen"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gentree DIR (DIR must not exist)")
		os.Exit(1)
	}
	if err := os.Mkdir(os.Args[1], 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "gentree:", err)
		os.Exit(1)
	}
	t, err := treegen.Write(os.Args[1], treegen.Standard)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gentree:", err)
		os.Exit(1)
	}
	fmt.Printf("%d files, %d bytes in %s\n", t.Files, t.Bytes, os.Args[1])
}
