package stage

import (
	"context"
	"io"
)

// Target is the sandbox side of a stage: where assets are written. Stage is
// its only consumer. Paths are in-sandbox: root is an absolute, clean path
// and name one path segment (Stage validates both before calling).
//
// Layout under root, which every implementation keeps: the asset directory
// <root>/<name> holds exactly the published tree; the manifest it was
// published with lives outside it, beside it, so the agent sees only the
// source tree. Names starting with ".airlock" are the target's own.
//
// Implementations in this module: *Dir (a host directory), *Bridge (any
// sandbox that runs shell commands) and remote.Host (SSH). Every
// implementation must pass stagetest.TestTarget.
type Target interface {
	// Probe returns, for each name, the manifest stored by the last
	// successful Publish of <root>/<name>, or nil when there is none (no
	// asset, no manifest, a manifest over MaxManifestBytes, a missing root)
	// or its copy is gone: a manifest whose <root>/<name> is missing, a
	// link or no directory (changed in the sandbox) is nil, so that Stage
	// publishes the asset again instead of reporting it Reused with nothing
	// there.
	// The result has one element per name. The bytes come from the sandbox
	// and are untrusted: Stage compares their digest and parses them
	// strictly. One round trip to the sandbox for all names.
	Probe(ctx context.Context, root string, names []string) ([][]byte, error)

	// Publish replaces <root>/<name> with the tree src streams, atomically:
	// it creates root if needed, writes into a fresh temporary directory
	// (created exclusively, files created exclusively), stores the manifest
	// src.Walk returned, and only then moves the new tree into place. On any
	// failure or cancellation the previous complete copy (or nothing) stays
	// and the temporary directory is removed. A symbolic link found at root
	// or at <root>/<name> is replaced, never written through. An error from
	// src.Walk is returned wrapped.
	Publish(ctx context.Context, root, name string, src *Tree) error

	// Fetch reads the directory <root>/<name> back from the sandbox and
	// calls fn for every entry below it (not the directory itself), in any
	// order. Directories and regular files are reported as such (for a
	// file, r yields its content and is valid only until fn returns); a
	// symbolic link or a special file is reported with its type bits and no
	// content, and never followed. An error from fn stops the read and is
	// returned wrapped. A <root>/<name> that is missing (or whose root is),
	// is a link or another non-directory, or cannot be read is reported as
	// an error wrapping ErrMismatch that names the path, so that WithVerify
	// publishes the asset again. Stage uses Fetch for WithVerify; stagetest
	// uses it to check what a target wrote.
	Fetch(ctx context.Context, root, name string, fn func(e Entry, r io.Reader) error) error
}
