//go:build !linux

package treetest

import "testing"

// BindMount mounts the directory from at to for the rest of the test: on
// Linux only; elsewhere the test is skipped, saying so.
func BindMount(t testing.TB, from, to string) {
	t.Helper()
	t.Skip("bind mounts are tested on Linux only")
}

// Tmpfs mounts a small tmpfs: on Linux only; elsewhere the test is
// skipped, saying so.
func Tmpfs(t testing.TB, size string) string {
	t.Helper()
	t.Skip("a small tmpfs (a full file system) is mounted on Linux only")
	return ""
}
