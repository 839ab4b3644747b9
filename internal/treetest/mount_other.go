//go:build !linux

package treetest

import "testing"

// BindMount mounts the directory from at to for the rest of the test: on
// Linux only; elsewhere the test is skipped, saying so.
func BindMount(t testing.TB, from, to string) {
	t.Helper()
	t.Skip("bind mounts are tested on Linux only")
}
