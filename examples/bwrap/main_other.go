//go:build !linux

package main

import (
	"fmt"
	"os"
)

// bubblewrap is Linux's: elsewhere the example says so and fails.
func main() {
	fmt.Fprintln(os.Stderr, "bwrap: bubblewrap sandboxes need Linux (namespaces); this example does not run here")
	os.Exit(1)
}
