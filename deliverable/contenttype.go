package deliverable

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"strings"
)

// ErrContentTypeDenied: the contentType is a media type, but not one
// Registrar.ContentTypes allows.
var ErrContentTypeDenied = errors.New("deliverable: content type not allowed")

// DeliverableContentTypes returns an allow-list for Registrar.ContentTypes
// of the usual kinds of deliverables: video, PDF, images, archives,
// reports (CSV, JSON, Markdown, office documents, spreadsheets and
// presentations), HTML and text. Each call returns a new slice.
func DeliverableContentTypes() []string {
	return []string{
		"video/*",
		"application/pdf",
		"image/*",
		// archives
		"application/zip", "application/gzip", "application/x-gzip", "application/x-tar", "application/x-bzip2",
		"application/x-xz", "application/x-7z-compressed", "application/zstd",
		// reports
		"text/csv", "application/json", "text/markdown", "application/xml", "application/vnd.ms-excel",
		"application/msword", "application/vnd.ms-powerpoint",
		"application/vnd.openxmlformats-officedocument.wordprocessingml.document",
		"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
		"application/vnd.openxmlformats-officedocument.presentationml.presentation",
		"application/vnd.oasis.opendocument.text", "application/vnd.oasis.opendocument.spreadsheet",
		"application/vnd.oasis.opendocument.presentation",
		// HTML and text
		"text/html", "text/*",
	}
}

// checkContentType rejects ct (canonical, as normalize made it) unless
// allow is empty or names it or its top-level type.
func checkContentType(rj rejecter, allow []string, ct string) error {
	if len(allow) == 0 {
		return nil
	}
	t, _, err := mime.ParseMediaType(ct)
	if err != nil {
		t = ct // normalize already parsed it; keep the whole value
	}
	top, _, _ := strings.Cut(t, "/")
	for _, a := range allow {
		a = strings.ToLower(strings.TrimSpace(a))
		if a == t || a == top+"/*" {
			return nil
		}
	}
	return rj.reject("contentType", ErrContentTypeDenied,
		fmt.Sprintf("contentType %q is not accepted here", clip(t)),
		"deliver the file in one of these types, converting it if needed: "+strings.Join(allow, ", "))
}

// RecordWorkspaceFile records a workspace_file work product: a file that
// stays in a workspace, named by ref (see WorkspaceRef), for the task and
// run of b. It is a signpost for the user and for a code-fix completion
// (ValidateEvidence accepts it as a citation when the objective asks for no
// file); it stores no bytes and never delivers a requested file. Its id is
// fresh; the work product is returned. Registrar.Store must implement
// WorkProductRecorder (FileStore does). Errors are *HostError values, but
// an invalid ref, which wraps ErrInvalidRequest or ErrPathDenied.
func (r *Registrar) RecordWorkspaceFile(ctx context.Context, b Binding, ref WorkspaceRef, title string) (WorkProduct, error) {
	rec, ok := r.Store.(WorkProductRecorder)
	if !ok {
		return WorkProduct{}, hostErr("record workspace file", fmt.Errorf("Registrar.Store (%T) does not implement WorkProductRecorder; use a FileStore or implement RecordWorkProduct", r.Store))
	}
	if err := b.check(); err != nil {
		return WorkProduct{}, hostErr("record workspace file", err)
	}
	wp, err := WorkspaceFileWorkProduct(newUUID(), b.TaskID, b.RunID, title, ref)
	if err != nil {
		return WorkProduct{}, err
	}
	if err := rec.RecordWorkProduct(ctx, wp); err != nil {
		return WorkProduct{}, hostErr("record workspace file", err)
	}
	return wp, nil
}
