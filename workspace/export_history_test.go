package workspace

// OwnerTagOf is the owner name of process pid in leftover names.
func OwnerTagOf(pid int) string { return ownerTagOf(pid) }
