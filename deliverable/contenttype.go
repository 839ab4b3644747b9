package deliverable

import (
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
