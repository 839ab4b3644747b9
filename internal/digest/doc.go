// Package digest holds airlock's two ways of naming content by SHA-256: a
// "sha256:<64 hex>" digest of bytes, and an unambiguous encoding of a tag
// and a list of strings to hash (keys, fingerprints, file names derived from
// ids). Every package that derives an identity uses these, so two encodings
// of one idea cannot drift apart.
package digest
