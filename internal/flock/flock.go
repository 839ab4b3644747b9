// Package flock takes exclusive flock(2) locks on open files, the way
// every airlock state directory marks what a live process is writing: the
// kernel drops a lock when its file is closed or its holder exits, so a
// lock that can be taken is a dead writer's, and a lock file left by a
// killed process is simply taken again.
package flock

// RandPart reports whether s is n characters of rand.Text's alphabet
// (A–Z, 2–7): the random part of a temporary name that its writer locks.
func RandPart(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'A' && c <= 'Z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}
