// Package deliverable verifies and stores the files an agent delivers for a
// task, serves them, checks that a completion report cites them, and
// resolves stored references to places in workspace files.
//
// # Workspaces
//
// A Workspace is where the agent's files are: LocalWorkspace reads a
// directory on the host's disk by descriptor (package internal/tree);
// RemoteWorkspace reads a directory inside a sandbox through a sandbox.Runner,
// one command per file, which walks the path refusing links, reports the
// file's link count, size and times on stderr, streams its bytes on stdout
// and reports its state again at the end. When the Runner is also a
// sandbox.FileReader (remote.Host reads over SFTP) and the root is an absolute
// path, the bytes of a file of up to 16 MiB come through ReadFile instead,
// at most the announced size, and the same command then walks the path
// again and must find every directory and the file unchanged (SFTP follows
// links, so a link swapped in and out during the read is caught by the
// change times it leaves); anything else falls back to the stream. Both
// workspaces refuse a symbolic link in any component and report the file's
// type, size and link count; their File reads no more than the size
// announced at open and reports a file that changed while read.
//
// # Registering a file
//
// Registrar.Register takes an agent's Request naming a file of a Workspace
// and stores it as an Attachment of a task and run, returning a Receipt whose
// attachment id the agent cites as "deliverable:<id>". Before anything is
// stored the request is validated, the file is opened without following
// links, and it must be a regular file with one hard link whose size equals
// the declared one, whose SHA-256 computed here from the bytes received
// equals the declared one, and which did not change from open to the end of
// the read. Idempotency keys are scoped to task and run: a replay returns
// the stored receipt without reading the file or writing anything; a
// different request under a used key is a conflict, whose message says
// what differs; new keys for content the run already registered (same
// bytes under the same filename, from the same contentRef) get a
// Duplicate receipt naming the existing attachment. Text fields are
// trimmed; contentRef, a path, is not: white space around it, or a "/" at
// its end, is refused rather than changed. No field may hold a control
// character or an invisible format or separator character (Unicode Cf, Zl,
// Zp: bidirectional controls, zero-width characters, the byte order mark,
// the soft hyphen), except that the title may hold the zero-width joiner
// and non-joiner, which prose needs (Persian, the Indic scripts, emoji
// sequences).
//
// FileStore, the default Store, keeps blobs content-addressed on an afero.Fs
// and records as JSON files replaced atomically; see its documentation for
// the write order and what a failure can leave behind. OpenFileStore(dir)
// opens one in a directory of the host's disk, which processes may share
// (they lock it with flock(2)); NewFileStore takes any afero.Fs (tests,
// other stores). Its directory follows the rule of every
// airlock state directory (session.Bind's StateDir, skills.Materialize's):
// a missing one is created with its missing parents, mode 0700 before the
// umask; an existing one is used as it is, a link already on its path
// followed; a dangling link at or above it is never followed to create
// anything, and fails the call.
//
// # Work products, the host's ids and content types
//
// Every attachment has an artifact work product (ArtifactWorkProduct: type
// "artifact", provider "airlock", metadata canonicalized from the
// attachment id), which FileStore records with it and the Receipt carries.
// A file that stays in a workspace is recorded as a "workspace_file" work
// product (Registrar.RecordWorkspaceFile; its metadata is the WorkspaceRef's
// encoding): a signpost, never an upload. Registrar.RegisterFor takes a
// Binding whose Command, Revision and Entities are the host's own ids (this
// package has no tracker of its own): they are checked for shape, kept with
// the receipt and echoed back in it, replays included. Registrar.ContentTypes
// is an optional allow-list (DeliverableContentTypes: video, PDF, images,
// archives, reports, HTML, text); a type outside it is rejected
// (ErrContentTypeDenied) with the list. Package deliverable/mcptool offers
// Register to the agent as the Model Context Protocol tool
// "register_deliverable".
//
// # Errors for the agent and for the host
//
// Every rejection of the agent's request is a *RequestError: its Message is
// written for the agent, in the request's JSON field names (contentRef,
// byteSize, sha256, filename, …), under the configurable tool name
// (Registrar.ToolName, Evidence.ToolName; DefaultToolName when empty), and
// says what to do next. Everything that is not the agent's doing (a bad
// Registrar or Workspace, a failing Store or Tasks, a transport failure, a
// sandbox that breaks the file protocol, a cancelled context) is a
// *HostError, whose message never asks the agent to change its request. The
// sentinels (ErrPathDenied, ErrSizeMismatch, …) are reachable through both
// with errors.Is.
//
// # Evidence
//
// A host without a task table of its own uses FileStore.Tasks: a FileTasks
// keeps the tasks it is told about (id, parent, status, objective; Put,
// SetStatus) beside the attachments, is the Tasks (with WorkProducts and
// Locker) that ValidateEvidence reads, and its Complete checks a
// completion against the task's recorded objective and marks the task done.
//
// ValidateEvidence accepts a cited attachment when it is on the task itself
// or on a direct child task that is done, and requires that every file the
// task's objective asks for (DetectRequests) is covered by its own
// attachment the task registered in this run: one attachment never covers
// two requested files ("en/report.pdf" and "de/report.pdf" need two). When the host's Tasks implements
// WorkProducts, a cited workspace_file work product of the task is
// evidence for a task that asks for no file (a code fix), and never
// delivers a requested file. Rejections are *EvidenceError values whose
// message tells the agent what to do; each also unwraps to a *RequestError.
//
// # Requested files
//
// DetectRequests reads a task's objective (the text the host bound to the
// run, never the agent's own report) and returns Requests: File, whether
// the text asks for a file output at all, and Files, the output files it
// names, verbatim, de-duplicated and sorted; a named file makes File true.
// ValidateEvidence uses it to know which files a completion must deliver.
// The text is read by these rules (internal/reqdetect, the reader, refers
// to them by number):
//
//  1. Publishing asks for a file. A request to hand something over as a
//     file asks for one: attach, export as, save as, make downloadable, "as
//     a CSV" (or PDF, XLSX, …), or an output file named as the destination
//     ("write results to out.json").
//  2. Reading does not. A file the text asks to be read, summarized,
//     reviewed or discussed is an input ("summarize data.json", "review the
//     PDF and answer in chat", "a summary of this PDF in chat").
//  3. A format becomes an output file only through an output file name
//     ("results.json") or an explicit destination ("as JSON", "into JSON").
//     An input joined to a format by "to" is a text answer ("convert
//     users.csv to JSON" asks for no file); "as", "into" or a named output
//     file make it a file.
//  4. A "Deliverable:" or "Deliverables" label states outputs. A file named
//     on the label's line, or in the list right below it (blank lines
//     between items allowed), is requested, relative paths
//     ("dist/index.html") and web files ("index.html", "styles.css")
//     included. Within such an item these are not requested: a repository
//     change (a pull request, commit or branch); a file named as an input
//     ("a comparison of input.csv and baseline.csv"); a file the item
//     forbids ("do not create report.pdf"); a file edited in place ("update
//     styles.css") unless the item also asks to publish it; a file to be
//     written inline in the reply ("index.html and styles.css inline in
//     the reply"); and every file of an item that says no files are
//     created. An inline or no-upload instruction about another output of
//     the same item leaves a named file requested ("index.html and a short
//     summary in the reply" still requests index.html).
//  5. Negation asks for none: "do not create a file", "create no files",
//     "without any files", "don't attach".
//  6. A requested file is exempt when the very next sentence says it is
//     not a deliverable ("Write memory.txt. This is personal memory, not a
//     task deliverable."). Such a qualifier covers one file, named in the
//     request sentence right before it; separate requests may each have
//     their own. It exempts nothing when that sentence requests several
//     files, when the file is also to be made downloadable, attached or
//     sent to the user (a delivery verb wins, also after the qualifier),
//     or when the file is qualified only as "for internal verification".
//  7. A write that a negative test expects to be denied ("attempt a native
//     write to /outside/probe.txt; this negative test must be denied") is a
//     denied attempt, not a deliverable; it does not cancel a real output
//     named beside it.
//  8. Repository work is not a file deliverable: fixing, refactoring or
//     updating a source file, opening a pull request, creating a branch.
//  9. The rules hold in the language the task is written in: German,
//     French, Spanish, Portuguese, Italian, Dutch, Japanese, Chinese and
//     Korean as well as English. "Bitte exportiere die Tabelle als
//     umsatz.xlsx und hänge sie an" requests umsatz.xlsx, "請把結果整理成
//     summary.pdf 並附上" requests summary.pdf, "Lee notas.txt y responde
//     aquí" requests none; labels and headings in those languages
//     ("Ergebnis", "Livrables", "Entregables", "成果物", "交付物") work as
//     "Deliverables" does.
//  10. A file named as a model, template, example or earlier version ("use
//     template.docx", "in the same format as last-week.csv", "like the Q1
//     deck") is an input, even beside a request for a new file of the same
//     kind; so is a file listed under a heading or label for inputs,
//     context or references ("Inputs", "Context", "Background", "参考資料").
//  11. A product feature or bug that mentions a file the product writes
//     ("add a --output report.pdf flag", "the export writes a broken
//     invoices.csv") is repository work.
//
// A file named in a negated request (rule 5, or "do not create report.pdf"
// inside an item) is never requested, whatever else the text says. The worked cases in
// internal/reqdetect/testdata/requested-files.jsonl (one JSON object a
// line: objective, file, files, and the id of the reader's rule that
// decides it) are examples of these rules that the tests hold the reader
// to; DetectRequests documents what it guarantees and where it is only a
// heuristic. Where the reader has no table for the text's language, or
// its signals conflict, Requests.Unsure says so, and Evidence.Unsure
// chooses what ValidateEvidence does then (UnsurePolicy).
//
// # Workspace references
//
// A WorkspaceRef names a place in a file of a registered workspace by ids and
// a clean relative path, never by a host path. Its JSON form is closed and
// decoded strictly (DecodeWorkspaceRef). WorkspaceRef.Open resolves it only
// inside the workspaces the host's WorkspaceLookup registers for the issue
// (its execution workspace, then its project workspace, or another project
// workspace of the same company named by projectId and workspaceId), and
// opens the file with the same no-link rule as Register.
//
// # Serving
//
// Handler serves /api/attachments/<id>/content with the recorded type,
// nosniff, a content-hash ETag, range support, RFC 6266 filenames and a
// sandboxing Content-Security-Policy.
//
// # Guarantees
//
//   - On a LocalWorkspace no byte outside the workspace, and no byte reached
//     through a link, is ever stored or returned: every path component is
//     opened by descriptor without following links, and the path is checked
//     again to name the same file after the read.
//   - What is stored is exactly what was declared: the size and the SHA-256
//     of the bytes received are checked on the host while they stream into
//     the store, each byte hashed once; the store keeps (syncs and publishes)
//     its copy only when they matched, and writes exactly the bytes that were
//     hashed, so it does not read the copy back. A sandbox's own hash is
//     never asked for. Every FileStore Put, a Duplicate too, publishes its
//     own verified copy over whatever blob was at its name, so no receipt
//     names a copy written earlier and not checked since.
//   - Reading a remote file never takes more than its announced size (itself
//     checked against the declared size before any content is read); a
//     sandbox that sends more is cut off and its command cancelled.
//   - A WorkspaceRef never holds an absolute, home, URL or escaping path, and
//     Open never resolves one outside the workspaces the host registered.
//   - A Put is atomic with respect to Lookup, Put and Open.
//
// # Non-guarantees
//
//   - The file may be changed after Register returns; the attachment keeps the
//     verified bytes.
//   - A remote sandbox owns its file system: its link and change checks are
//     its own, and a hostile sandbox can serve any bytes it likes for a path.
//     The host only guarantees that it stores exactly the declared bytes and
//     reads no more than that.
//   - The remote change check compares link count, size, inode and
//     modification and change times; with only ls in the sandbox the times
//     have a resolution of a minute (and SFTP is not used).
//   - Over SFTP, a directory swapped for a link and back during the read is
//     detected through the directory's change time, which Linux file
//     systems update on rename but POSIX does not require; the directories
//     above the workspace root are trusted like the root itself. A change
//     to any directory on the path during the read (another file created
//     beside it) also fails the read, as changed.
//   - ContentType is the agent's claim; it is not checked against the bytes
//     (Handler sends nosniff and a sandboxing CSP instead).
//   - FileStore serializes across processes only on the operating system's
//     file system (OpenFileStore, or NewFileStore with afero.NewOsFs) of a
//     platform with flock(2), and only where the file system honours it
//     (local file systems do; NFS may not); on any other afero.Fs, within
//     its process.
//   - Handler does no authentication or authorization, and WorkspaceRef.Open
//     does no more authorization than the issue-and-company scoping above.
package deliverable
