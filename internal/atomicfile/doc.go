// Package atomicfile replaces a file's content atomically: the new bytes go
// to a temporary file created exclusively beside it (or, for [Write], in a
// given directory of the same file system), which is written, synced, given
// its mode and closed, and only then renamed over the file. [WriteFile]
// works on the operating system's file system and needs nothing but a path;
// [Write] works on an afero.Fs (session and deliverable records). Both share
// one implementation.
//
// Guarantees: a reader sees the old content or the new, never a mix; the
// file's mode is exactly perm (the umask does not apply); a cancelled
// context is honoured right before the rename, so a cancelled write never
// publishes; on any failure before the rename the temporary file is removed
// (a failed removal is reported with its name) and the old content stays.
// [WriteFile] also syncs the directory after the rename, so the new content
// survives a crash once it returns nil.
//
// Non-guarantees: [Write] does not sync the directory entry (callers that
// need the rename to survive a crash sync the directory themselves); the
// temporary directory must be on the same file system as the target; path
// itself is not confined — a symlink in its directory chain is followed, so
// callers pass paths they trust.
package atomicfile
