// Package digest holds airlock's two ways of naming content by SHA-256: a
// "sha256:<64 hex>" digest of bytes, and an unambiguous encoding of a tag
// and a list of strings to hash (keys, fingerprints, file names derived from
// ids). Every package that derives an identity uses these, so two encodings
// of one idea cannot drift apart.
//
// Both are injective over bytes: strings are taken as raw bytes, never as
// text, so names that are not valid UTF-8 are never merged (no U+FFFD
// replacement, no escaping).
package digest
