// Package session binds a durable agent session (an ACP provider session of
// Claude, Codex, Pi, …) to the workspace, agent profile, model, permission
// mode, skill set and session id that created it, persists that binding as one closed
// record format, and refuses to resume under anything else.
//
// # Binding
//
// [Bind] resolves Config.Workspace and Config.StateDir to real paths
// (absolute, every symbolic link evaluated; a relative path is joined to the
// working directory as getcwd(2) reports it, never $PWD) and requires each to
// be a directory that is not a filesystem root (a path equal to its own
// parent). The workspace must exist; the state directory is created when
// missing (see State directories below). From the result it derives:
//
//   - WorkspaceDigest: "sha256:" + hex SHA-256 of the real workspace path.
//   - SessionDir, the session's own directory on the host:
//     <real StateDir>/sessions/<readable>-<16 hex>, where
//     readable is the session id with every byte outside [A-Za-z0-9._-]
//     replaced by '_', "session" if that leaves only dots, then cut to 80
//     bytes; the suffix is the first 16 hex digits of SHA-256 of the
//     raw id, so "a/b", "a:b" and "a_b" get three different directories.
//   - ProfileDigest: [Profile.Digest], over every profile field.
//   - SkillsDigest: Config.SkillsDigest as given: the skills bundle's
//     Identity.Digest (skills.Bundle.Identity), or "" when the run selected
//     no skill. It names the skill set the agent's prompt lists and holds no
//     path, so the same skills staged at another sandbox path, or
//     materialized under another state directory, keep it, while any change
//     to the selected set changes it.
//   - Key, the provider session key: "airlock-" + hex SHA-256 over a
//     length-prefixed encoding of the session id, workspace path, workspace
//     digest, profile digest, skills digest, model and permission mode. It names the
//     session wherever a provider or a cache needs a name for it (an ACP
//     session key, a stage.Cache key), so nothing kept under it is reused
//     under another binding.
//
// # Names
//
// The package says "runtime" nowhere, so that its directories are not
// confused with stage's: sandbox.RuntimeDir is the ".airlock" directory each
// workspace reserves, stage.Runtime maps host sources to sandbox paths, and
// the stage root is the sandbox directory assets are staged into.
// Config.StateDir is the host's state directory and Binding.SessionDir one
// session's directory under it; both are on the host, outside the workspace
// and the sandbox. A record id ([Record].RecordID) is the host's own id for
// a saved record (the run or row that saved it); it is stored, never
// compared.
//
// Session ids, record ids and models are 1–240 bytes of UTF-8 without control
// characters. A model must also have a visible character: one made only of
// white space, format and other invisible characters (" ", U+00A0, U+3000,
// U+200B, the Hangul filler U+3164, the Braille blank U+2800, …) is
// refused, by Bind with [ErrUnqualifiedModel] and in a record with
// [ErrMalformedRecord].
//
// The session's model has one source: Profile.Model, the model the profile
// was qualified for. It is digested with the rest of the profile and is also
// bound, compared and persisted on its own (Binding.Model, the record's
// "model"), so a drift report names it. Config.Model may be left empty, which
// means Profile.Model; a non-empty Config.Model is kept for callers that name
// the model twice and must equal Profile.Model exactly
// ([ErrUnqualifiedModel] otherwise), so the two can never disagree.
//
// A record carries two ids from outside the host besides its own RecordID
// (see [Record]):
//
//   - AgentSessionID is the agent's id for its conversation: over ACP, the
//     sessionId that session/new returned, which session/load takes back
//     to continue it.
//   - BackendSessionID is the backend's id for the place the agent runs:
//     the provider's session around the agent, such as a hosted sandbox's
//     id (an E2B sandbox id, a Daytona workspace id) or a provider API's
//     session id, so the host can reattach to the same sandbox before it
//     asks the agent to resume.
//
// Neither is compared on resume (the binding is); both are stored and
// returned so the host can pass each back to the side that issued it.
//
// # State directories
//
// One rule for the host's state directories, shared by [Bind]
// (Config.StateDir), skills.Materialize and deliverable.FileStore (and
// [OpenStore]): a missing directory is created, with its missing parents,
// mode 0700 before the umask; an existing one is used as it is, whatever
// its mode. The host's own state directory is trusted, so a link already
// on its path is followed (Bind then records the real path). A link is
// never followed to create something: a dangling link at or above the
// directory fails the call ([ErrInvalidStateDir] wrapping fs.ErrNotExist)
// and creates nothing where it points. Bind creates what is missing
// through an os.Root on the real path of the deepest existing directory
// above it, and requires the result to resolve to exactly the directories
// it made: a link planted on the path while it works is refused, not
// followed out. A missing path with a ".." component is refused (pass its
// real path). Bind creates the state directory only, never SessionDir.
//
// # Record format (schema airlock.session-identity.v2)
//
// A [Record] is encoded as one JSON object whose keys are exactly, in this
// order as written by [Record.Encode]:
//
//	schema              "airlock.session-identity.v2"
//	session_id          the session id
//	record_id           the caller's id for this record
//	backend_session_id  the backend's id (a hosted sandbox or provider session)
//	agent_session_id    the agent's id (the sessionId of ACP session/new)
//	profile_digest      "sha256:" + 64 lowercase hex
//	workspace_digest    "sha256:" + 64 lowercase hex
//	skills_digest       "sha256:" + 64 lowercase hex, or "" (no skill selected)
//	model               the qualified model
//	permission_mode     "approve-all", "approve-reads" or "deny-all"
//
// Every value is a non-null JSON string. [Record.Encode] writes the compact
// form without HTML escaping or a trailing newline. [DecodeRecord] accepts keys
// in any order and insignificant whitespace, and rejects everything else:
//
//   - [ErrUnsupportedSchema]: no schema field (the draft, schema-less format)
//     or a schema string other than [Schema] and [SchemaV1] ("…v3", "…v0",
//     "").
//   - [ErrUnknownField]: a key that is not one of the ten above (the nine
//     of v1, below), including a known key in another case ("Model",
//     "SESSION_ID").
//   - [ErrMalformedRecord]: invalid UTF-8 (also an escaped lone surrogate),
//     anything but one JSON object, trailing data, a duplicate key (compared
//     after unescaping), a missing field, a null or non-string value, a digest
//     that is not "sha256:" + 64 lowercase hex (a bare digest, another prefix,
//     upper case, another length), an unknown permission mode, an invalid id
//     or model.
//
// A record whose schema string is readable and different is reported as
// [ErrUnsupportedSchema] even if its other fields are also foreign.
//
// # Records written before skills_digest (schema airlock.session-identity.v1)
//
// The v1 format is the v2 format without skills_digest: the same nine other
// keys, read by the same closed rules (a skills_digest key in a v1 record is
// [ErrUnknownField]). [DecodeRecord] still decodes one, to a Record with
// Schema [SchemaV1] and an empty SkillsDigest, which [Record.Encode]
// re-encodes in the v1 format. Such a record cannot prove which skills its
// session was told about, so it fails closed: [Binding.Check] always
// reports drift in skills_digest ([DriftError.Unproven] names it, even for
// a binding without skills), and [Store.Resume] answers [Drifted]. The host
// starts a fresh session and saves its v2 record over the old one.
//
// # Store
//
// A [Store] keeps one record per session id at <dir>/<readable>-<16 hex>.json
// (the same name as the session's SessionDir, plus ".json") on an
// [github.com/spf13/afero.Fs] ([OpenStore] for a directory of the host,
// [NewStore] for any afero.Fs), written atomically (hidden temporary file
// ".<name>.tmp-<random>" created exclusively, fsync, rename, directory fsync)
// with mode 0600. The name depends on the session id only, so a record saved
// under another binding of the same session id is found and rejected with
// [ErrDrift] instead of being silently ignored.
//
// [Store.Resume] is the call a host makes before starting a provider
// session: it returns the record to resume, or a [StartFresh] naming the
// reason ([NoRecord], [Drifted] with the drifted fields, [Undecodable]);
// only real failures (I/O, a cancelled context, a binding not made by Bind)
// are errors. A record path that is not a regular file (a directory, a
// FIFO, a device) is Undecodable: the record is opened without blocking and
// checked on the opened handle before it is read.
//
// # Guarantees
//
//   - Fail closed: [Binding.Verify], [Binding.Check], [Store.Load] and
//     [Store.Resume] compare
//     every immutable field (session_id, workspace_digest, profile_digest,
//     skills_digest, model, permission_mode) exactly and report each
//     difference in a [*DriftError] (errors.Is(err, [ErrDrift])). Nothing is ever repaired
//     from the current request; on any error the caller starts a fresh
//     session.
//   - A binding must be one [Bind] produced: Verify, Check, Load and Resume
//     refuse with [ErrInvalidBinding] the zero value, a field Bind could
//     not have produced, and fields that are not what Bind derives: a Key
//     that is not the key of the binding's other fields, a WorkspaceDigest
//     that is not the digest of Workspace, a SessionDir that is not
//     <directory>/sessions/<readable>-<16 hex> of the session id. So a
//     binding changed after Bind, or a literal built by hand with another
//     key, never verifies.
//   - Whatever [DecodeRecord] accepts, [Record.Encode] re-encodes to bytes
//     that decode to the same record, and Encode refuses what Decode would.
//   - The package never launches a process and never reads the environment
//     (a test pins this by scanning the package's own source).
//     It touches the host file system only in [Bind] (to create a missing
//     state directory, and to resolve and stat the
//     two directories), in [OpenStore] (to create the store's directory)
//     and through a [Store]'s afero.Fs.
//
// # Non-guarantees
//
//   - Bind resolves paths once; it cannot stop a directory from being
//     replaced or re-linked afterwards. The workspace digest binds the path,
//     not the directory's contents.
//   - Bind does not create the session directory.
//   - The binding check is an integrity check, not authentication, and it
//     does not touch the disk: the Key is a checksum anyone can recompute,
//     so a binding assembled by hand with a recomputed Key passes (as does
//     one a host stores and restores field by field); whether Workspace
//     and the state directory above SessionDir exist, are real paths and
//     are the ones passed to Bind, and which profile ProfileDigest
//     digests, is not checked again.
//   - The Store trusts its directory (the host's own state directory is not
//     hostile); it does not lock, and concurrent saves of one session are
//     last-writer-wins.
//   - Profile fields other than Model are not interpreted, only digested;
//     SkillsDigest is checked for its form only, not recomputed: the host
//     passes the digest of the bundle whose prompt the agent gets.
//   - The package logs nothing; every outcome is a return value.
package session
