// Package tree is airlock's one reader of host directory trees. Every package
// that reads a host directory (skills, stage, workspace, deliverable) goes
// through it.
//
// Guarantees:
//   - Reads are descriptor-based. On Linux every lookup is openat2(2) relative
//     to the already-open parent directory with RESOLVE_BENEATH,
//     RESOLVE_NO_SYMLINKS and RESOLVE_NO_MAGICLINKS. Where openat2 is not
//     available (ENOSYS, or EPERM from a seccomp filter) the walker falls back to
//     one [os.Root] per directory, Lstat's each entry, opens it and requires
//     [os.SameFile] between the lstat and the fstat of the opened descriptor.
//     [Result.Mode] says which reader ran.
//   - A symbolic link is never followed, except under [FollowLinksWithin], where
//     it is followed only when its target resolves inside the walked root.
//     The walker resolves such a link itself, one component at a time from
//     the link's real place (so ".." after a link means what the kernel
//     means), with at most 40 links in one resolution; the target is then
//     opened by its link-free path like any other entry. Absolute targets
//     and targets above the root fail with [ErrLink].
//   - Walking is linear in what is on disk, also under [FollowLinksWithin]:
//     each directory (by device and inode) is walked at most once through
//     links. A link to a directory already walked through a link (through
//     any path), and a directory below a followed link that was already
//     walked through a link, are left out and reported in [Result.Skipped].
//     Every directory is thus walked at most twice: at its real place, and
//     through the first link, in walk order, that reaches it. A DAG of links
//     with exponentially many paths costs no more than its directories.
//   - Names are bytes. An entry's Path holds the raw name bytes, valid UTF-8
//     or not, and every encoding derived from a tree (the canonical
//     manifest, its digest, [Fingerprint]) is injective over those bytes:
//     trees that differ in any byte of any name never share a digest. In
//     the canonical manifest a path that is not valid UTF-8 is written as
//     "path_hex" (lowercase hex of the raw bytes) in place of "path".
//   - Only regular files and directories are read. FIFOs, sockets and devices
//     are never opened on purpose (a FIFO cannot hang the walk: every open is
//     O_NONBLOCK) and are reported in [Result.Skipped].
//   - Limits (files, total bytes, bytes per file, depth, path length) are
//     enforced while streaming; each has a sentinel error.
//   - Files are hashed in the same pass that streams them. A file whose size,
//     identity, modification or change time differs between the lstat and
//     the fstat taken after its last byte was read fails the walk with
//     [ErrChanged]. Exactly the lstat's size is read: a file that grew
//     shows a new size and times, so there is no read for end of file.
//     The times move when a write begins, before its data lands, so a
//     file modified under 50 ms before its read ends is read and
//     hashed again once 50 ms have passed and must give the same bytes
//     (a write under way when the read began would tear it unseen); a
//     write slower than that can still go unseen.
//     A walk given what a fingerprint pass saw ([Options.Seen]) takes that
//     pass's listing and lstat for every directory the pass listed and the
//     walk opened as the same directory (device and inode), so it lists
//     and lstat's the tree once; the checks are the same, against the
//     pass's lstat.
//   - Regular files are opened, read, hashed and (Copy) written by a
//     bounded pool of workers ([Options.Workers], GOMAXPROCS by default);
//     a large file is hashed on one goroutine while another reads and
//     writes it. The walk proper — listing, lstat, links, limits, Exclude,
//     a Walk callback — stays on the calling goroutine, in walk order, so
//     the Result and the error a failing walk reports are the same for any
//     number of workers.
//   - A copy creates each entry exclusively, by one name relative to an
//     open directory of the copy, never through a link, with its final
//     mode when the umask (read from /proc, never changed) and the absence
//     of a default ACL make that exact; otherwise it chmods.
//
// Non-guarantees: the walker does not take a snapshot. A tree that changes
// while it is walked yields either an error or a manifest describing the files
// as they were read, never bytes from outside the root. Under the os.Root
// fallback, a directory renamed inside the root during the walk can make the
// walker read a sibling's bytes under the old name; the bytes still come from
// inside the root.
package tree
