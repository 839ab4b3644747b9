// Package deliverable verifies and stores the files an agent delivers for a
// task, serves them, and checks that a completion report cites them.
//
// # Registering a file
//
// Registrar.Register takes an agent's Request naming a workspace file and
// stores it as an Attachment of a task and run, returning a Receipt whose
// attachment id the agent cites as "deliverable:<id>". Before anything is
// stored the file is opened beneath the workspace by descriptor without
// following links (package internal/tree), and must be a regular file with
// one hard link whose size and streamed SHA-256 equal the declared ones and
// whose identity and size do not change from open to the end of the read.
// Idempotency keys are scoped to task and run: a replay returns the stored
// receipt without reading the file or writing anything; a different request
// under a used key is a conflict; new keys for content the run already
// registered (same bytes under the same filename) get a Duplicate receipt
// naming the existing attachment.
//
// FileStore, the default Store, keeps blobs content-addressed on an afero.Fs
// and records as JSON files replaced atomically; see its documentation for
// the write order and what a failure can leave behind.
//
// # Evidence
//
// ValidateEvidence accepts a cited attachment when it is on the task itself
// or on a direct child task that is done, and requires that every file the
// task's objective asks for (DetectRequests) is covered by an attachment the
// task registered in this run. Rejections are *EvidenceError values whose
// message tells the agent what to do.
//
// # Serving
//
// Handler serves /api/attachments/<id>/content with the recorded type,
// nosniff, a content-hash ETag, range support, RFC 6266 filenames and a
// sandboxing Content-Security-Policy.
//
// # Guarantees
//
//   - No byte outside the workspace, and no byte reached through a link, is
//     ever stored: every path component is opened without following links.
//   - What is stored is exactly what was declared: size and SHA-256 are checked
//     while reading and again on the stored copy.
//   - A Put is atomic with respect to Lookup, Put and Open.
//
// # Non-guarantees
//
//   - The file may be changed after Register returns; the attachment keeps the
//     verified bytes.
//   - ContentType is the agent's claim; it is not checked against the bytes
//     (Handler sends nosniff and a sandboxing CSP instead).
//   - FileStore serializes within one process only.
//   - Handler does no authentication or authorization.
//   - WorkspaceRef.Resolve is a point-in-time check that returns a path; it
//     does not hold the file open.
package deliverable
