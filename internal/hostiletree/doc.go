// Package hostiletree is the one table of hostile trees that the attack
// suite (internal/attack) and the packages' own tests share: link chains,
// links to ".." at every depth, absolute and dangling links, type changes
// between rounds, hard links, FIFOs, sockets, setuid files, names with a
// newline, invalid UTF-8, U+202E, 255 bytes or a spelling of ".git",
// case-fold twins, many empty files and a sparse file far larger than any
// limit.
//
// A Case is data; Write materializes one round of it into a directory, so
// the same case serves as a host directory to stage from and as what a
// sandbox leaves in its work tree for a restore or a remote register (every
// sandbox of the test suites sees this machine's files). LinksOutside and
// Describe are the checks every builder runs afterwards: no link resolves
// outside the destination, and nothing outside it changed.
//
// The trees are built from the same parts as internal/treegen's benchmark
// trees (a root of directories and files); stage/stagetest's hostile cases
// are another attack (links the sandbox plants into a Target's copy while
// it stages) and stay there.
//
// Guarantees: Write creates only below the directory it is given (it
// refuses a node path that is not clean and relative), follows no link it
// created, and never reads or writes through one. Non-guarantees: FIFOs and
// sockets need mknod(2) without privilege (Linux, the BSDs); setuid bits
// are kept only when the caller may set them.
package hostiletree
