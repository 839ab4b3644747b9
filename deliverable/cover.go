package deliverable

import (
	"maps"
	"path"
	"slices"
	"strings"
)

// uncovered returns the requested files (DetectRequests' Files) that own,
// the attachments the task registered in the run, does not cover, each
// file by its own attachment: a matching of requested files to distinct
// registered files, never one attachment for two requested files.
//
//   - A registered file is an attachment, except that the attachments
//     of one ContentRef are one file (the same path registered again).
//   - A requested file may be covered by a registered file with its base
//     name (the documented rule): "en/report.pdf" by any "report.pdf".
//   - A registered file whose ContentRef is the requested path, or ends
//     with it ("out/en/report.pdf" for "en/report.pdf"), is matched to it
//     first, so that the file reported missing is the one not registered.
//   - A requested name that is a path suffix of another requested name
//     ("report.pdf" beside "en/report.pdf"), or the same path written
//     otherwise ("./out.json" beside "out.json"), names that file again:
//     it needs no attachment of its own.
//
// Files of different base names never compete, so each base name is
// matched on its own; within one every registered file may cover every
// requested one, and the most files are covered by matching the preferred
// pairs first (maximum matching on those), then the rest in order.
func uncovered(files []string, own []Attachment) []string {
	want := distinctRequests(files)
	type source struct{ name, ref string }
	var sources []source
	seenRef := map[string]bool{}
	for _, a := range own {
		if a.ContentRef != "" {
			if seenRef[a.ContentRef] {
				continue
			}
			seenRef[a.ContentRef] = true
		}
		sources = append(sources, source{a.Filename, a.ContentRef})
	}
	var missing []string
	for _, base := range slices.Sorted(maps.Keys(want)) {
		group := want[base] // requested paths with this base name
		var refs []string   // registered files with this base name
		for _, s := range sources {
			if s.name == base {
				refs = append(refs, s.ref)
			}
		}
		missing = append(missing, matchGroup(group, refs)...)
	}
	// Report each as the task first wrote it, in the order of files.
	var out []string
	for _, f := range files {
		if i := slices.Index(missing, requestPath(f)); i >= 0 {
			out = append(out, f)
			missing = slices.Delete(missing, i, i+1)
		}
	}
	return out
}

// matchGroup matches the requested paths of one base name to the registered
// files refs of that base name (their ContentRef, "" when unknown) and
// returns the paths left without one.
func matchGroup(paths, refs []string) []string {
	owner := make([]int, len(refs)) // ref -> index in paths, or -1
	for i := range owner {
		owner[i] = -1
	}
	matched := make([]bool, len(paths))
	// The preferred pairs: maximum matching (augmenting paths) on them.
	var augment func(p int, seen []bool) bool
	augment = func(p int, seen []bool) bool {
		for r, ref := range refs {
			if seen[r] || !pathMatches(ref, paths[p]) {
				continue
			}
			seen[r] = true
			if owner[r] < 0 || augment(owner[r], seen) {
				owner[r] = p
				return true
			}
		}
		return false
	}
	for p := range paths {
		matched[p] = augment(p, make([]bool, len(refs)))
	}
	// Any registered file of the base name covers any requested path.
	r := 0
	var missing []string
	for p := range paths {
		if matched[p] {
			continue
		}
		for r < len(refs) && owner[r] >= 0 {
			r++
		}
		if r == len(refs) {
			missing = append(missing, paths[p])
			continue
		}
		owner[r] = p
	}
	return missing
}

// pathMatches reports whether the registered path ref is the requested
// path p or ends with it at a component boundary.
func pathMatches(ref, p string) bool {
	return ref != "" && (ref == p || strings.HasSuffix(ref, "/"+p))
}

// distinctRequests groups the requested files by base name, each as
// requestPath, leaving out a path that another requested path of the same
// base name ends with (it names that file again).
func distinctRequests(files []string) map[string][]string {
	var paths []string
	for _, f := range files {
		if p := requestPath(f); !slices.Contains(paths, p) {
			paths = append(paths, p)
		}
	}
	out := map[string][]string{}
	for _, p := range paths {
		if slices.ContainsFunc(paths, func(q string) bool { return q != p && strings.HasSuffix(q, "/"+p) }) {
			continue
		}
		base := path.Base(p)
		out[base] = append(out[base], p)
	}
	return out
}

// requestPath is a requested file's name as a slash-separated clean path
// without a leading "./" ("./out\\a.json" is "out/a.json"); its base name
// is the name an attachment must have.
func requestPath(f string) string {
	return path.Clean(strings.ReplaceAll(f, `\`, "/"))
}
