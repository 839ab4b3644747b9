package deliverable

import (
	"fmt"
	"io/fs"
	"mime"
	"path"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/airlockdev/airlock/internal/digest"
)

// Request asks Register to verify and store one workspace file. All fields are
// supplied by the agent and are untrusted.
type Request struct {
	ContentRef     string `json:"contentRef"`     // workspace-relative path of the file
	Filename       string `json:"filename"`       // basename shown to the user
	ContentType    string `json:"contentType"`    // media type, e.g. "application/pdf"
	ByteSize       int64  `json:"byteSize"`       // exact size in bytes
	SHA256         string `json:"sha256"`         // 64 hex digits (either case)
	Title          string `json:"title"`          // short human description
	IdempotencyKey string `json:"idempotencyKey"` // unique per task and run
}

// Disposition says whether Register stored a new attachment.
type Disposition string

const (
	// Applied: a new attachment was stored.
	Applied Disposition = "applied"
	// Duplicate: this run had already registered the same bytes under the
	// same filename; the receipt names that attachment.
	Duplicate Disposition = "duplicate"
)

// Receipt is what Register returns and what the agent cites.
type Receipt struct {
	AttachmentID string      `json:"attachmentId"`
	TaskID       string      `json:"taskId"`
	RunID        string      `json:"runId"`
	Filename     string      `json:"filename"`
	ContentType  string      `json:"contentType"`
	SHA256       string      `json:"sha256"`
	ByteSize     int64       `json:"byteSize"`
	ContentPath  string      `json:"contentPath"`  // /api/attachments/<id>/content
	DownloadPath string      `json:"downloadPath"` // /api/attachments/<id>/content?download=1
	Disposition  Disposition `json:"disposition"`
}

// Attachment is a stored, verified file belonging to one task and run.
type Attachment struct {
	ID          string `json:"id"`
	TaskID      string `json:"taskId"`
	RunID       string `json:"runId"`
	Filename    string `json:"filename"`
	ContentType string `json:"contentType"`
	SHA256      string `json:"sha256"`
	ByteSize    int64  `json:"byteSize"`
	Title       string `json:"title"`
}

// ContentPath returns the URL path that serves the attachment with id.
func ContentPath(id string) string { return "/api/attachments/" + id + "/content" }

// DownloadPath returns the URL path that downloads the attachment with id.
func DownloadPath(id string) string { return ContentPath(id) + "?download=1" }

// Field bounds, in bytes.
const (
	maxRefLen   = 4096
	maxNameLen  = 255
	maxTypeLen  = 255
	maxTitleLen = 512
	maxKeyLen   = 256
	maxIDLen    = 256
)

// normalize trims and validates req, returning the normalized request and the
// cleaned, slash-separated content path.
func normalize(req Request, maxBytes int64) (Request, string, error) {
	var err error
	n := req
	if n.Filename, err = textField("Filename", n.Filename, maxNameLen); err != nil {
		return Request{}, "", err
	}
	if strings.ContainsAny(n.Filename, `/\`) || n.Filename == "." || n.Filename == ".." {
		return Request{}, "", fmt.Errorf("%w: Filename %q is not a base name; pass only the file's name, without directories", ErrInvalidRequest, n.Filename)
	}
	if n.ContentType, err = textField("ContentType", n.ContentType, maxTypeLen); err != nil {
		return Request{}, "", err
	}
	if n.ContentType, err = mediaType(n.ContentType); err != nil {
		return Request{}, "", err
	}
	if n.Title, err = textField("Title", n.Title, maxTitleLen); err != nil {
		return Request{}, "", err
	}
	if n.IdempotencyKey, err = textField("IdempotencyKey", n.IdempotencyKey, maxKeyLen); err != nil {
		return Request{}, "", err
	}
	n.SHA256 = strings.ToLower(strings.TrimSpace(n.SHA256))
	if !isHex(n.SHA256, 64) {
		return Request{}, "", fmt.Errorf("%w: SHA256 %q is not 64 hex digits; pass the file's SHA-256 in hex", ErrInvalidRequest, clip(req.SHA256))
	}
	if n.ByteSize < 1 || n.ByteSize > maxBytes {
		return Request{}, "", fmt.Errorf("%w: ByteSize %d is outside 1..%d; only non-empty files up to %d bytes can be registered", ErrSizeDenied, n.ByteSize, maxBytes, maxBytes)
	}
	n.ContentRef = strings.TrimSpace(n.ContentRef)
	rel, err := cleanRef("register", n.ContentRef)
	if err != nil {
		return Request{}, "", err
	}
	n.ContentRef = rel
	return n, rel, nil
}

// textField trims s and checks that it is non-empty, at most max bytes of valid
// UTF-8 and free of control and bidirectional-override characters.
func textField(name, s string, max int) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", fmt.Errorf("%w: %s is empty; it is required", ErrInvalidRequest, name)
	}
	if len(s) > max {
		return "", fmt.Errorf("%w: %s is %d bytes long; the limit is %d", ErrInvalidRequest, name, len(s), max)
	}
	if err := checkChars(s); err != nil {
		return "", fmt.Errorf("%w: %s %q %v", ErrInvalidRequest, name, clip(s), err)
	}
	return s, nil
}

// checkID validates a host-supplied id without changing it: non-empty, at
// most maxIDLen bytes, no surrounding space or control characters.
func checkID(name, id string) error {
	if t, err := textField(name, id, maxIDLen); err != nil {
		return err
	} else if t != id {
		return fmt.Errorf("%w: %s %q has surrounding white space", ErrInvalidRequest, name, clip(id))
	}
	return nil
}

// checkChars rejects invalid UTF-8, control characters and bidi controls.
func checkChars(s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("is not valid UTF-8")
	}
	for _, r := range s {
		if unicode.IsControl(r) || isBidiControl(r) {
			return fmt.Errorf("contains the control character %U; remove it", r)
		}
	}
	return nil
}

func isBidiControl(r rune) bool {
	return (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069) || r == 0x200E || r == 0x200F || r == 0x061C
}

// cleanRef checks an untrusted workspace-relative path lexically and returns it
// cleaned. It refuses absolute and home paths, URLs and other schemes,
// backslashes, NUL and control characters, and any ".." component.
func cleanRef(op, unsafePath string) (string, error) {
	deny := func(why string) error {
		return &fs.PathError{Op: op, Path: unsafePath, Err: fmt.Errorf("%w: %s", ErrPathDenied, why)}
	}
	switch {
	case unsafePath == "":
		return "", deny("the path is empty; pass the file's path relative to the workspace root")
	case len(unsafePath) > maxRefLen:
		return "", deny(fmt.Sprintf("the path is longer than %d bytes", maxRefLen))
	case checkChars(unsafePath) != nil:
		return "", deny("the path contains invalid UTF-8 or control characters")
	case hasScheme(unsafePath):
		return "", deny("the path is a URL or has a scheme; pass a path relative to the workspace root")
	case strings.HasPrefix(unsafePath, "/"):
		return "", deny("the path is absolute; pass a path relative to the workspace root")
	case strings.HasPrefix(unsafePath, "~"):
		return "", deny("the path is a home-directory path; pass a path relative to the workspace root")
	case strings.Contains(unsafePath, `\`):
		return "", deny(`the path contains a backslash; use "/" as the separator`)
	}
	for _, c := range strings.Split(unsafePath, "/") {
		if c == ".." {
			return "", deny(`the path contains ".."; pass a path inside the workspace`)
		}
	}
	clean := path.Clean(unsafePath)
	if clean == "." {
		return "", deny("the path names the workspace root, not a file")
	}
	return clean, nil
}

// hasScheme reports whether s starts with a URI scheme ("https:", "file:", "C:").
func hasScheme(s string) bool {
	i := strings.IndexByte(s, ':')
	if i < 1 {
		return false
	}
	for j := 0; j < i; j++ {
		c := s[j]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case j > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// clip shortens s for use in an error message.
func clip(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// fingerprint identifies a normalized request: the same idempotency key with a
// different fingerprint is a conflict.
func fingerprint(n Request) string {
	return digest.Fields("airlock.deliverable.request.v1", n.ContentRef, n.Filename, n.ContentType, strconv.FormatInt(n.ByteSize, 10), n.SHA256, n.Title)
}

// mediaType parses and re-formats a media type so that the stored value is canonical.
func mediaType(s string) (string, error) {
	t, params, err := mime.ParseMediaType(s)
	if err == nil {
		if f := mime.FormatMediaType(t, params); f != "" {
			return f, nil
		}
	}
	return "", fmt.Errorf("%w: ContentType %q is not a media type; pass one such as \"application/pdf\" or \"text/csv\"", ErrInvalidRequest, clip(s))
}
