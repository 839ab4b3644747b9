// Package skills materializes the skills a user selected for an agent into an
// owned, content-addressed bundle on the host, ready to be staged into a
// sandbox.
//
// A skill is a directory holding a SKILL.md (YAML frontmatter with at least a
// name and a description, then instructions). [Materialize] copies each
// selected skill under <stateDir>/<id>/<Name>/, where <id> is derived from the
// bundle's [Identity].
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
//   - The identity holds no host path. It is a digest over a version tag and
//     the sorted (Key, Name, tree digest) of the surviving skills: moving the
//     state directory or rendering the prompt for another root never changes
//     it; any changed byte, mode, added, removed or renamed file, or change
//     of selection does. File names are bytes: the tree digest, the identity
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
//     changed within the last two seconds. Any other call copies each usable
//     skill once, hashing as it copies.
//
// Non-guarantees: the state directory is trusted: a bundle and an index
// entry already under it are reused without re-reading their bytes. A source
// rewritten in place with its size, inode and both times restored (which
// needs privileges to fake the change time) is not noticed by the index.
// Limits (see [Limits]) apply to each skill's tree separately. A crashed
// writer can leave a .tmp-* directory, removed by a later call after a day.
package skills
