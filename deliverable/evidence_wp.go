package deliverable

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// resolveWorkProducts reads the "work_product:<id>" citations of ev when
// tasks implements WorkProducts: an artifact's becomes the citation of its
// attachment, a workspace_file one of the task is taken out of the refs
// and returned as a signpost (its display path); any other is rejected.
// Without WorkProducts, ev is returned unchanged (such refs are ignored).
func resolveWorkProducts(ctx context.Context, tasks Tasks, ev Evidence) (Evidence, []string, error) {
	wps, ok := tasks.(WorkProducts)
	if !ok {
		return ev, nil, nil
	}
	var refs, signposts []string
	n := 0
	for _, ref := range ev.Refs {
		s := strings.TrimSpace(ref)
		if len(s) < len(workProductScheme) || !strings.EqualFold(s[:len(workProductScheme)], workProductScheme) {
			refs = append(refs, ref)
			continue
		}
		if n++; n > maxCitations {
			return ev, nil, &EvidenceError{Ref: ref, Message: fmt.Sprintf("Completion cites more than %d work products; cite at most %d.", maxCitations, maxCitations)}
		}
		reject := func(detail string) error {
			return &EvidenceError{Ref: ref, Detail: detail, Message: fmt.Sprintf(
				"Completion cites %q, which is not a work product of this task. Cite this task's work products, "+
					"or use %s for a file and cite deliverable:<attachmentId> from its receipt.", clip(ref), toolName(ev.ToolName))}
		}
		id := strings.TrimSpace(s[len(workProductScheme):])
		if err := checkID("work product id", id); err != nil {
			return ev, nil, reject(err.Error())
		}
		if canon, ok := parseUUID(id); ok {
			id = canon
		}
		wp, err := wps.WorkProduct(ctx, id)
		switch {
		case isNotFound(err):
			return ev, nil, reject("no such work product")
		case err != nil:
			return ev, nil, hostErr("validate evidence", fmt.Errorf("deliverable: read work product %s: %w", id, err))
		case wp.Type == WorkProductArtifact:
			refs = append(refs, citationScheme+wp.ID) // judged as the attachment it is
		case wp.Type != WorkProductWorkspaceFile:
			refs = append(refs, ref) // the host's own kind (a pull request, …): not judged here
		case wp.TaskID != ev.TaskID:
			return ev, nil, reject(fmt.Sprintf("it belongs to task %q", clip(wp.TaskID)))
		default:
			r, err := wp.WorkspaceRef()
			if err != nil {
				return ev, nil, hostErr("validate evidence", fmt.Errorf("deliverable: work product %s: %w", id, err))
			}
			signposts = append(signposts, workProductScheme+wp.ID+" ("+r.DisplayPath+")")
		}
	}
	ev.Refs = refs
	return ev, signposts, nil
}

// explainSignposts adds to a missing-file rejection that the workspace
// files cited do not deliver anything.
func explainSignposts(err error, signposts []string) error {
	var ee *EvidenceError
	if len(signposts) == 0 || !errors.As(err, &ee) || len(ee.Missing) == 0 {
		return err
	}
	out := *ee
	out.Message += " " + strings.Join(signposts, ", ") + " names a file that stays in the workspace: it is a signpost, not an upload, and delivers no requested file."
	return &out
}
