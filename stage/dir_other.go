//go:build !linux

package stage

import "os"

// swapIn moves <tmp>/tree to name in rr: the entry at name (the old copy, a
// planted link) is first moved into tmp, then the new tree takes its place.
// Both renames go through rr, so nothing outside it is touched.
func swapIn(rr, _ *os.Root, tmp, name string) error { return swapPortable(rr, tmp, name) }

// renameBetween renames <tmp>/old to new in rr.
func renameBetween(rr, _ *os.Root, tmp, old, new string) error { return rr.Rename(tmp+"/"+old, new) }

// renameNoReplace renames old to new in rr, failing when new exists (an
// entry made at new between the check and the rename is not detected).
func renameNoReplace(rr *os.Root, old, new string) error { return renamePortable(rr, old, new) }
