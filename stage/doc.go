// Package stage puts host directories ("assets": skills, tools, prompts)
// into a sandbox and says where they landed.
//
// [Stage] copies each [Asset] into <root>/<Name> on a [Target] and returns a
// [Runtime] mapping every host Source to its in-sandbox Path;
// [Runtime.Rewrite] turns host paths in text (a skills prompt) into sandbox
// paths. Targets: [NewDir] (a host directory playing the sandbox),
// [NewBridge] (any sandbox that runs shell commands, through a [Runner]),
// and remote.Host in stage/remote (SSH). A [Sandbox] is a Target that is
// also a Runner, the one value a run stages into and runs commands in:
// remote.Host is one, and [Over] makes one of any Runner (through a
// Bridge). stagetest.TestTarget is the
// conformance suite every Target passes (and stagetest.TestRunner every
// Runner). A [Cache] keeps a session's Runtime between turns; an [Index]
// ([NewIndex] in memory, [OpenIndex] on disk, shared by processes) lets a
// re-stage skip hashing an unchanged source. [Unstage] and [WithPrune]
// remove what is no longer selected.
//
// Guarantees:
//   - Host sources are read only through internal/tree: descriptor-based,
//     no link is ever followed except under [FollowLinksWithin], which never
//     leaves Source. A link swapped in while a stage runs cannot pull a host
//     file into the sandbox.
//   - Publishing is atomic per asset: the tree is written into a fresh
//     temporary directory (exclusive mkdir, exclusive file creation) with its
//     manifest, checked, then moved into place. A failure or a cancellation
//     at any point leaves the previous complete copy (or nothing) and removes
//     the temporary directory. A sandbox command (or, for [Dir], the
//     host) killed between moving the old manifest away and putting the
//     new one in place leaves a copy without a manifest: the asset's
//     sweep marker stays beside it as its record, [Pruner] Assets lists it
//     (so a prune removes it), and the next stage of it sends it whole. A link the
//     sandbox plants at the root or at <root>/<Name> is replaced, never
//     written through; [Dir] never writes outside its directory. Where the
//     sandbox shares the host's file system (a directory, a container with
//     a bind mount), a publish whose <root>/<Name> is the Source itself or
//     a directory above it (by device and inode, through links) moves
//     nothing and fails with [ErrBadRoot]: replacing it would delete the
//     Source's links and excluded files, or all else in a directory above.
//     A prune ([WithPrune], through a [GuardedPruner]) likewise removes
//     nothing and fails with ErrBadRoot when an asset it would remove is
//     the Source of an asset of the call, or above one. A copy with a file
//     system mounted inside it (a bind mount, a volume) is never deleted
//     through the mount: a publish that would retire it, a prune and
//     Unstage move nothing and fail with ErrBadRoot (where the sandbox has
//     /proc/self/mountinfo: Linux). A sandbox that cannot make these
//     checks (neither stat nor ls; no awk and a path its sh cannot
//     compare) is refused with ErrTool: nothing is moved unchecked.
//   - The manifest (path, type, mode, size, SHA-256 per entry; canonical
//     JSON) lives beside the asset, outside it, so the agent sees exactly the
//     source tree. Staging identical content again costs one round trip
//     (two with [WithPrune], which lists the root's assets first),
//     writes nothing and reports Reused (one exception: a Source whose
//     times moved, with an Index, through a Bridge that has learnt that
//     sending costs less than comparing; see [WithIndex]). [WithVerify] re-reads the sandbox
//     copy and checks every hash; a reused copy that differs, is missing or
//     is no longer a directory is published again.
//   - Delta publish: re-staging changed content sends only the files that
//     differ from the stored manifest ([StagedAsset].Sent counts what was
//     sent); the others come from the previous copy. [Dir] copies them
//     into the fresh directory and checks their SHA-256. [Bridge] has the
//     sandbox record each file's stamp (inode, size, modification and
//     change time) when it publishes a copy; at the next publish, while
//     the sandbox's manifest is still the one the host compared with (no
//     other stage published in between), a file whose stamp and mode are
//     unchanged is hard-linked into the fresh
//     copy unread (the previous copy is deleted right after the publish,
//     so each file ends with one link), and the others are copied and
//     hashed there; [WithVerify] still reads back every byte. A sandbox
//     without awk, or without sha256sum and openssl, gets every file
//     again. A file rewritten in place within the file system's clock
//     tick of the publish, keeping its size, passes the stamp check: the
//     staged copy is no boundary against the sandbox that holds it.
//   - File names are bytes: a name that is not valid UTF-8 is staged as it
//     is, and the manifest records it losslessly (a "path_hex" key), so
//     every digest is injective over the tree.
//   - Every input is checked before anything is written: asset names (one
//     path segment, not starting with ".airlock"), duplicates, sources
//     (absolute, existing directories, not links), exclude patterns, and the
//     root (absolute, clean).
//   - [Bridge] control operations run under a deadline of at most
//     [MaxControlTimeout] (shorter when the Runner is a [ControlTimeouter]:
//     [ControlDeadline]), enforced on the host even when the Runner ignores
//     its context, and fail with [ErrTransport]; an uncertain write is never
//     replayed. The data transfer is bounded only by the caller's context;
//     once the command has the stream's last byte, the wait for its end is
//     a control step again ([Watch]), so a Runner that never returns cannot
//     hold a Stage.
//   - A sandbox that breaks the protocol (a garbled, oversized or
//     out-of-order reply, a tar stream with a member outside its
//     directory) fails the operation with sandbox.ErrProtocol, wrapped with
//     what was being done (a reply over its bound stops the command at
//     once); a lost connection or an expired deadline with
//     [ErrTransport], and so does a command whose run failed on the
//     transport by itself, whatever it printed (an exec engine that failed
//     before it reached the sandbox prints its own error where the reply
//     should be: only the output of a command that ended normally is
//     judged); a failure on the host's side that the Runner reports
//     as an *fs.PathError (a full disk where it writes) keeps its own
//     class, so sandbox.Retryable answers from its errno. The scripts,
//     the lines they print and their bounded parsers live in
//     internal/shell.
//   - Deleting an old copy is no part of any control step: a publish's and
//     an unstage's control step is their renames; the deletion follows in
//     the same command, and a deletion that fails or is cut is the next
//     sweep's.
//   - [Runner] commands receive secrets through Command.Env, never argv:
//     byte-exact up to [MaxEnvEntryBytes] a variable and [MaxEnvBytes] in
//     all ([CheckEnv] refuses more before anything runs).
//   - A Runner may offer optional capabilities ([FileReader],
//     sandbox.FileStater, [ControlTimeouter]) that the engine uses when
//     present (a Bridge over a FileReader probes an unchanged asset with
//     no command; over a FileStater too, it also sees a copy replaced by a
//     link); the shell protocol itself (internal/shell) is shared by
//     Bridge, remote.Host and workspace.
//
// Non-guarantees:
//   - The sandbox owns its file system: a sandbox process that races a
//     publish can damage its own copy (the next [WithVerify] stage repairs
//     it); it cannot make the host read or write host files. A copy whose
//     directory is deleted, or replaced by a file (or, where the Target
//     can tell, a link), is published again by the next stage, with or
//     without WithVerify.
//   - Run the Runner as the user that owns the stage root (the agent's,
//     or one the agent cannot write as). What a publish makes is not
//     writable by other users, and its scratch directories under the root
//     are its own (mode 700), but its commands work by name under the
//     root: run as root against a root another user can write, they can
//     be led through that user's links to write where that user cannot.
//   - A Source edited while it is staged: each file arrives whole as one
//     state of it, or the stage fails with [ErrChanged] (a file that
//     changed while it was read), but an edit of several files that lands
//     mid-walk can leave a copy that holds one file as it was before the
//     edit and another as it is after (as tar's or rsync's copy would).
//     Stage a quiet Source (skills.Materialize makes one); with an
//     [Index], the next stage of the quiet Source sends what differs.
//   - Publishes of one asset from two processes at once are not coordinated;
//     calls through one Target value are serialized per asset.
//   - Nothing is fsynced: after a machine crash a published copy may be
//     incomplete; the next stage with [WithVerify] finds and replaces it.
//   - After a control timeout, or a cancelled transfer whose Runner does
//     not return, the sandbox may keep a temporary directory (named in the
//     error) whose command could still be running. The next stage or
//     unstage of the same root removes every such directory, and whatever a
//     killed host left, once its owner process in the sandbox is gone (dead
//     or a zombie), never one whose owner is alive. A temporary directory
//     is made under a name that holds its maker's process id and gets its
//     owner file before it takes its temporary name, and takes such a name
//     again before it is deleted, so a host killed at any point leaves
//     nothing the next sweep cannot judge; a temporary directory with no
//     owner file (made by something else) stays until removed by hand. Through a FileReader, a stage with nothing to
//     publish leaves the sweep to the next publish or unstage.
//   - File times and ownership are not copied; content identity never
//     depends on them.
//   - A sandbox without mv --exchange (GNU coreutils 9.5+) sees an
//     asset's directory absent for an instant while a new copy replaces it
//     (never partial); with it, the old and new copies trade places in one
//     rename. [Dir] always exchanges (renameat2) on Linux.
package stage
