// Package skills materializes the skills a user selected for an agent into an
// owned, content-addressed bundle on the host, ready to be staged into a
// sandbox.
//
// A skill is a directory holding a SKILL.md (YAML frontmatter with at least a
// name and a description, then instructions). [Materialize] copies each
// selected skill under <stateDir>/<id>/<Name>/, where <id> is derived from the
// bundle's [Identity].
//
// The state directory follows the rule every airlock state directory
// follows (session.Bind's StateDir, deliverable.FileStore): a missing one is
// created, with its missing parents, mode 0700 before the umask (once there
// is something to copy); an existing one is used as it is, a link already on
// its path followed; a dangling link at or above it is never followed to
// create anything, and fails the call. It must be an absolute path.
//
// Guarantees:
//   - A bundle holds copies, never links: a symbolic link at any depth of a
//     skill is neither copied nor followed (it is listed in [Skill.Skipped]),
//     and so are FIFOs, sockets and devices. Reads are descriptor-based
//     (see the walker in internal/tree), so a link planted while the copy runs
//     cannot pull a host file into the bundle. Files keep their permission bits.
//   - A skill without a usable SKILL.md (missing, a link, not a regular file,
//     empty, over 1 MiB, invalid UTF-8, frontmatter that does not parse) is
//     dropped: listed in [Bundle.Dropped], logged at Warn, and absent from the
//     bundle, the prompt and the identity. So is a skill whose directory is
//     missing, a link or not a directory.
//   - A description is never cut silently. One longer than [MaxDescription]
//     characters in prompt form is, in default mode, cut at the last
//     sentence boundary that fits (else clause, else word, else between
//     two user-perceived characters, never inside one such as "e" plus a
//     combining accent or a flag; see [Cut]), ended with [CutMarker], reported in [Skill.DescriptionCut] and logged
//     at Warn with the skill and both lengths on every call that returns
//     it; the full text stays in the SKILL.md the prompt names. In strict
//     mode ([WithStrictSpec]) such a skill is dropped.
//   - The identity holds no host path. It is a digest over a version tag and
//     the sorted (Key, Name, tree digest) of the surviving skills only:
//     moving the state directory or rendering the prompt for another root
//     never changes it, and neither does a dropped skill or a link or
//     special file a copy left out; any changed byte, mode, added, removed
//     or renamed file of a surviving skill, or change of the surviving set,
//     does. File names are bytes: the tree digest, the identity
//     and the index are injective over them, so names that differ only in
//     bytes that are not valid UTF-8 (f\xff and f\xfe) give different
//     identities, and renaming one gives a fresh bundle.
//   - Text a skill author controls cannot reorder or hide what the agent
//     reads: [Bundle.Prompt] (and [Skill.Description]) drop every Unicode
//     format character (category Cf: bidirectional overrides and isolates
//     such as U+202E and U+2066–U+2069, zero-width characters such as
//     U+200B, tag characters), turn every other control character and line
//     or paragraph separator into a space, and collapse white space, so a
//     skill's entry stays on one line.
//   - Identical selections share one bundle. Concurrent calls, from
//     goroutines or processes, serialize on an flock(2) lock per bundle
//     (released by the kernel when its holder dies, so a crashed holder never
//     wedges the next caller) and publish with one atomic rename.
//   - An unchanged selection is served from an index in the state directory
//     without reading or writing any content: each source's metadata (paths,
//     types, modes, sizes, inode numbers, modification and change times) is
//     fingerprinted, as git's index does, and trusted only when nothing in it
//     changed within the last two seconds. That holds whatever survives: a
//     selection of which every skill is dropped is indexed too (it needs the
//     state directory, which exists once anything was copied). Any other
//     call copies each usable skill once, hashing as it copies; the copy
//     takes the listing and lstat the fingerprint pass took (so the tree
//     is listed once, and each file is checked against the metadata its
//     index entry is keyed by), and a skill that changed since that pass
//     is copied again from a fresh listing.
//
// # Default and strict mode against the Agent Skills spec
//
// By default a SKILL.md that departs from the spec (agentskills.io, whose
// reference validator is skills-ref) is kept and the departure logged at
// Warn ("skill violates the Agent Skills spec"); [WithStrictSpec] drops it
// with the same reason. Strict mode is the spec: it keeps exactly what the
// spec accepts. The cases where airlock and skills-ref were found to differ,
// and what airlock does (TestSpecEdgeCases holds one row for each):
//
//   - No frontmatter (no first line "---"): the spec requires one. Default
//     mode keeps the skill with an empty description and logs "SKILL.md has
//     no frontmatter": the user selected it, and the prompt still names it
//     and its file. Strict mode drops it.
//   - description: "" (or only white space): the spec requires a
//     non-empty description. Default mode keeps the skill, logging that the
//     agent is told only its name; strict mode drops it. (description: with
//     no value is a YAML null, not a string, and is dropped in both modes.)
//   - description: Use when: x — the unquoted ": " makes the YAML invalid,
//     and skills-ref rejects it, but it is what authors write and what agent
//     CLIs accept. Default mode reads such a top-level value as plain text to
//     the end of its line ([ParseMetaLenient]: "Use when: x"), only when the
//     block does not parse otherwise, and logs the key to quote; strict mode
//     reads YAML only and drops the skill.
//   - name: i18n-données: the spec allows lowercase letters, and skills-ref
//     accepts those of any script, so airlock does too (letters that are
//     neither upper nor title case, digits, "-"). Unlike skills-ref, airlock
//     does not NFKC-normalize names: a name that passes only once normalized
//     (a decomposed accent) is a violation, and the directory name must
//     match byte for byte.
//   - A leading byte order mark: accepted in both modes. YAML allows one at
//     the start of a stream and it is an encoding signature, not text before
//     the frontmatter; skills-ref rejects it only because it reads the file
//     with the BOM kept and checks for a leading "---".
//   - A description of 1,024 characters and trailing spaces: the limit is
//     counted on the value as written, as the spec and skills-ref count it.
//     A quoted value keeps its spaces (1,027 characters: a violation,
//     logged, and in strict mode a drop; the prompt form, trimmed, fits and
//     is not cut); a plain value loses them in YAML and is valid.
//
// Non-guarantees: the state directory is trusted: a bundle and an index
// entry already under it are reused without re-reading their bytes. A source
// rewritten in place with its size, inode and both times restored (which
// needs privileges to fake the change time) is not noticed by the index.
// Limits (see [Limits]) apply to each skill's tree separately. A writer
// that died (a killed process) leaves its .tmp-* directory; the next call
// that copies removes it (the writer's flock(2) on it is gone), and leaves
// every name of another shape alone.
package skills
