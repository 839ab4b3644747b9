// Package atomicfile replaces a file's content atomically on an afero.Fs:
// the new bytes go to a temporary file created exclusively beside it (or in
// a given directory of the same file system), which is written, synced,
// closed, given its mode and only then renamed over the file. Session
// records, deliverable records and the skills index are written this way.
//
// Guarantees: a reader sees the old content or the new, never a mix; on
// any failure the temporary file is removed (a failed removal is reported
// with its name) and the old content stays. Non-guarantees: the directory
// entry is not synced (callers that need the rename to survive a crash sync
// the directory themselves); the temporary directory must be on the same
// file system as name.
package atomicfile
