package workspace

import "github.com/airlockdev/airlock/internal/owner"

// OwnerTagOf is the owner name of process pid in leftover names.
func OwnerTagOf(pid int) string { return owner.TagOf(pid) }
