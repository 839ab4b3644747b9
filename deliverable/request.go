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
	"github.com/airlockdev/airlock/internal/jsonlit"
	"github.com/airlockdev/airlock/sandbox"
)

// Request asks Register to verify and store one workspace file. All fields are
// supplied by the agent and are untrusted. The jsonschema tags describe each
// field for the agent (package mcptool's input schema is inferred from them).
type Request struct {
	ContentRef     string `json:"contentRef" jsonschema:"the file's path relative to the workspace root, such as out/report.pdf: no absolute path, URL, .. or symbolic link"`
	Filename       string `json:"filename" jsonschema:"the file's base name, the last element of contentRef, as the user will see it"`
	ContentType    string `json:"contentType" jsonschema:"the file's media type, such as application/pdf, text/csv or image/png"`
	ByteSize       int64  `json:"byteSize" jsonschema:"the file's exact size in bytes, measured after the file is complete"`
	SHA256         string `json:"sha256" jsonschema:"the SHA-256 of the file's bytes as 64 hex digits, computed after the file is complete"`
	Title          string `json:"title" jsonschema:"a short description of the file for the user"`
	IdempotencyKey string `json:"idempotencyKey" jsonschema:"a key unique to this file in this run; send the same key again to retry after an unclear result, a new key for a new file"`
}

// Disposition says whether Register stored a new attachment.
type Disposition string

const (
	// Applied: a new attachment was stored.
	Applied Disposition = "applied"
	// Duplicate: this run had already registered the same bytes under the
	// same filename from the same contentRef; the receipt names that
	// attachment.
	Duplicate Disposition = "duplicate"
)

// Receipt is what Register returns and what the agent cites.
type Receipt struct {
	AttachmentID string      `json:"attachmentId"` // lowercase UUID; cite it as deliverable:<id>
	TaskID       string      `json:"taskId"`       // the task the attachment belongs to
	RunID        string      `json:"runId"`        // the run that registered it
	Filename     string      `json:"filename"`     // base name shown to the user
	ContentType  string      `json:"contentType"`  // canonical media type
	SHA256       string      `json:"sha256"`       // lowercase hex of the stored bytes
	ByteSize     int64       `json:"byteSize"`     // size of the stored bytes
	ContentPath  string      `json:"contentPath"`  // /api/attachments/<id>/content
	DownloadPath string      `json:"downloadPath"` // /api/attachments/<id>/content?download=1
	Disposition  Disposition `json:"disposition"`  // Applied or Duplicate

	// The host's ids from Registrar.RegisterFor's Binding, echoed back;
	// empty when the host supplied none (Register). A replay returns the
	// ones stored with the receipt.
	Command    string     `json:"command,omitempty"`   // the host's id of the command that registered it
	Revision   string     `json:"revision,omitempty"`  // the host's revision of the task it is bound to
	EntityRefs EntityRefs `json:"entityRefs,omitzero"` // the host's records it belongs to
	// WorkProductID is the id of the attachment's artifact work product
	// (ArtifactWorkProduct: the attachment's own id); "" only in receipts
	// stored before work products existed.
	WorkProductID string `json:"workProductId,omitempty"`
}

// Attachment is a stored, verified file belonging to one task and run.
type Attachment struct {
	ID          string `json:"id"`          // lowercase UUID
	TaskID      string `json:"taskId"`      // the task it belongs to
	RunID       string `json:"runId"`       // the run that registered it
	Filename    string `json:"filename"`    // base name shown to the user
	ContentType string `json:"contentType"` // canonical media type
	SHA256      string `json:"sha256"`      // lowercase hex of the content
	ByteSize    int64  `json:"byteSize"`    // size of the content
	Title       string `json:"title"`       // the agent's short description
	// ContentRef is the clean workspace-relative path the file was
	// registered from ("en/report.pdf"); "" in records stored before it was
	// kept, and in a host's own Tasks that does not keep it.
	// ValidateEvidence counts the attachments of one ContentRef as one
	// file, and prefers it when it matches a requested path.
	ContentRef string `json:"contentRef,omitempty"`
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

// Hints: what each field should hold, for the agent's messages.
const (
	hintContentRef  = `the file's path relative to the workspace root, such as "out/report.pdf"`
	hintFilename    = "the file's base name, the last element of contentRef"
	hintContentType = `a media type such as "application/pdf" or "text/csv"`
	hintSHA256      = "the SHA-256 of the file's bytes as 64 hex digits"
	hintTitle       = "a short description of the file for the user"
	hintKey         = "a key unique to this registration in this run"
)

// rejecter writes the agent's messages for one tool name.
type rejecter struct{ tool string }

// reject returns a *RequestError for field: Message is "<tool>: <problem>;
// <fix>." and Err wraps sentinel.
func (rj rejecter) reject(field string, sentinel error, problem, fix string) *RequestError {
	return &RequestError{Field: field, Message: rj.tool + ": " + problem + "; " + fix + ".", Err: fmt.Errorf("%w: %s", sentinel, problem)}
}

// rejectPath is reject for a problem with the file or its path: Err is an
// *fs.PathError whose Path is ref, the contentRef as given.
func (rj rejecter) rejectPath(field, ref string, sentinel error, problem, fix string, cause error) *RequestError {
	err := fmt.Errorf("%w: %s", sentinel, problem)
	if cause != nil {
		err = fmt.Errorf("%w: %s: %w", sentinel, problem, cause)
	}
	return &RequestError{Field: field, Message: rj.tool + ": " + problem + "; " + fix + ".", Err: &fs.PathError{Op: "register", Path: ref, Err: err}}
}

// normalize trims and validates req, returning the normalized request and the
// cleaned, slash-separated content path. Every error is a *RequestError.
func normalize(rj rejecter, req Request, maxBytes int64) (Request, string, error) {
	var err error
	n := req
	if n.Filename, err = textField(rj, "filename", n.Filename, maxNameLen, hintFilename); err != nil {
		return Request{}, "", err
	}
	if strings.ContainsAny(n.Filename, `/\`) || n.Filename == "." || n.Filename == ".." {
		return Request{}, "", rj.reject("filename", ErrInvalidRequest,
			fmt.Sprintf("filename %q is not a base name", n.Filename), "pass "+hintFilename+", without directories")
	}
	if n.ContentType, err = textField(rj, "contentType", n.ContentType, maxTypeLen, hintContentType); err != nil {
		return Request{}, "", err
	}
	if n.ContentType, err = mediaType(rj, n.ContentType); err != nil {
		return Request{}, "", err
	}
	if n.Title, err = textField(rj, "title", n.Title, maxTitleLen, hintTitle); err != nil {
		return Request{}, "", err
	}
	if n.IdempotencyKey, err = textField(rj, "idempotencyKey", n.IdempotencyKey, maxKeyLen, hintKey); err != nil {
		return Request{}, "", err
	}
	n.SHA256 = strings.ToLower(strings.TrimSpace(n.SHA256))
	if !isHex(n.SHA256, 64) {
		return Request{}, "", rj.reject("sha256", ErrInvalidRequest,
			fmt.Sprintf("sha256 %q is not 64 hex digits", clip(req.SHA256)), "pass "+hintSHA256)
	}
	if n.ByteSize < 1 || n.ByteSize > maxBytes {
		return Request{}, "", rj.reject("byteSize", ErrSizeDenied,
			fmt.Sprintf("byteSize %d is outside 1..%d", n.ByteSize, maxBytes),
			fmt.Sprintf("only a non-empty file of at most %d bytes can be registered; pass its exact size in bytes", maxBytes))
	}
	rel, err := contentRef(rj, req.ContentRef)
	if err != nil {
		return Request{}, "", err
	}
	n.ContentRef = rel
	return n, rel, nil
}

// contentRef checks the agent's contentRef and returns it cleaned. It is a
// path, not text: it is not trimmed, since white space around it would be
// part of the name (" f.txt" is not "f.txt"), and one that ends with "/"
// (or "/.") names a directory, not the file without it; both are refused.
// Other spellings of the same path ("./out/r.csv", "out//r.csv") name the
// same file and are cleaned.
func contentRef(rj rejecter, ref string) (string, error) {
	q := fmt.Sprintf("contentRef %q", clip(ref))
	reject := func(why, fix string) (string, error) {
		return "", rj.rejectPath("contentRef", ref, ErrPathDenied, q+" "+why, fix, nil)
	}
	if strings.TrimSpace(ref) == "" {
		return reject("is empty", "pass "+hintContentRef)
	}
	rel, why := cleanRef(ref)
	switch {
	case why != "":
		return reject(why, "pass "+hintContentRef)
	case strings.TrimSpace(ref) != ref:
		return reject("has white space at its start or end", "pass the path exactly as the file is named, with nothing around it")
	case strings.HasSuffix(ref, "/") || strings.HasSuffix(ref, "/."):
		return reject(`ends with "/", so it names a directory`, `pass the file's path without a "/" at its end`)
	}
	return rel, nil
}

// textField trims s and checks that it is non-empty, at most max bytes of valid
// UTF-8 and free of control and invisible format or separator characters
// (charProblem). name is the field's JSON name.
func textField(rj rejecter, name, s string, max int, hint string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", rj.reject(name, ErrInvalidRequest, name+" is empty", "pass "+hint)
	}
	if len(s) > max {
		return "", rj.reject(name, ErrInvalidRequest, fmt.Sprintf("%s is %d bytes long", name, len(s)), fmt.Sprintf("shorten it to at most %d bytes", max))
	}
	if why, fix := charProblem(s, name == "title"); why != "" {
		return "", rj.reject(name, ErrInvalidRequest, fmt.Sprintf("%s %q %s", name, clip(s), why), fix)
	}
	return s, nil
}

// checkID validates a host-supplied id without changing it: non-empty, at
// most maxIDLen bytes, no surrounding space or control characters. The
// error is the host's, not the agent's.
func checkID(name, id string) error {
	switch t := strings.TrimSpace(id); {
	case t == "":
		return fmt.Errorf("%s is empty", name)
	case len(id) > maxIDLen:
		return fmt.Errorf("%s is %d bytes long; the limit is %d", name, len(id), maxIDLen)
	case t != id:
		return fmt.Errorf("%s %q has surrounding white space", name, clip(id))
	}
	if why, _ := charProblem(id, false); why != "" {
		return fmt.Errorf("%s %q %s", name, clip(id), why)
	}
	return nil
}

// charProblem reports invalid UTF-8, control characters and invisible
// format and separator characters (invisibleRune) in s: what is wrong and
// what to do, or "" when nothing is. With joiners, the zero-width joiner
// and non-joiner (U+200D, U+200C) pass: prose needs them (Persian, the
// Indic scripts, emoji sequences), where a name does not.
func charProblem(s string, joiners bool) (why, fix string) {
	if !utf8.ValidString(s) {
		return "is not valid UTF-8", "pass UTF-8 text"
	}
	for _, r := range s {
		switch {
		case unicode.IsControl(r):
			return fmt.Sprintf("contains the control character %U", r), "remove it"
		case joiners && (r == 0x200C || r == 0x200D):
		case invisibleRune(r):
			return fmt.Sprintf("contains the invisible character %U", r), "remove it"
		}
	}
	return "", ""
}

// invisibleRune reports a character that changes how text is shown or
// breaks it without being seen: every Unicode format character (Cf: the
// bidirectional controls, zero-width space, joiner and non-joiner, the
// byte order mark, the soft hyphen, the interlinear annotation marks…) and
// the line and paragraph separators (Zl, Zp). Text fields and paths refuse
// them all, so that two names that look the same are the same.
func invisibleRune(r rune) bool {
	return unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
}

func isBidiControl(r rune) bool {
	return (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069) || r == 0x200E || r == 0x200F || r == 0x061C
}

// cleanRef checks an untrusted workspace-relative path lexically and returns
// it cleaned, or why it is refused ("is absolute", …). It refuses absolute
// and home paths, URLs and other schemes, backslashes, NUL and control
// characters, any ".." component, a component that is sandbox.RuntimeDir
// or .git in any case (airlock's and git's own files), and the root itself.
func cleanRef(unsafePath string) (clean, why string) {
	switch {
	case unsafePath == "":
		return "", "is empty"
	case len(unsafePath) > maxRefLen:
		return "", fmt.Sprintf("is longer than %d bytes", maxRefLen)
	case !utf8.ValidString(unsafePath):
		return "", "is not valid UTF-8"
	case strings.ContainsFunc(unsafePath, unicode.IsControl):
		return "", "contains a control character"
	case strings.ContainsFunc(unsafePath, invisibleRune):
		i := strings.IndexFunc(unsafePath, invisibleRune)
		r, _ := utf8.DecodeRuneInString(unsafePath[i:])
		return "", fmt.Sprintf("contains the invisible character %U", r)
	case hasScheme(unsafePath):
		return "", "is a URL or has a scheme"
	case strings.HasPrefix(unsafePath, "/"):
		return "", "is absolute"
	case strings.HasPrefix(unsafePath, "~"):
		return "", "is a home-directory path"
	case strings.Contains(unsafePath, `\`):
		return "", `contains a backslash ("/" is the separator)`
	}
	for _, c := range strings.Split(unsafePath, "/") {
		switch {
		case c == "..":
			return "", `contains ".."`
		case strings.EqualFold(c, sandbox.RuntimeDir):
			return "", "is in or names " + sandbox.RuntimeDir + ", airlock's own directory, which holds no deliverable"
		case strings.EqualFold(c, ".git"):
			return "", "is in or names .git, the repository's own data, which holds no deliverable"
		}
	}
	clean = path.Clean(unsafePath)
	if clean == "." {
		return "", "names the workspace root, not a file"
	}
	return clean, ""
}

// pathDenied is cleanRef's refusal as an *fs.PathError wrapping ErrPathDenied.
func pathDenied(op, unsafePath, why string) error {
	return &fs.PathError{Op: op, Path: unsafePath, Err: fmt.Errorf("%w: the path %s; pass a clean path relative to the workspace root", ErrPathDenied, why)}
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
func clip(s string) string { return jsonlit.Clip(s) }

// fingerprint identifies a normalized request: the same idempotency key with a
// different fingerprint is a conflict.
func fingerprint(n Request) string {
	return digest.Fields("airlock.deliverable.request.v1", n.ContentRef, n.Filename, n.ContentType, strconv.FormatInt(n.ByteSize, 10), n.SHA256, n.Title)
}

// mediaType parses and re-formats a media type so that the stored value is canonical.
func mediaType(rj rejecter, s string) (string, error) {
	t, params, err := mime.ParseMediaType(s)
	if err == nil {
		if f := mime.FormatMediaType(t, params); f != "" {
			return f, nil
		}
	}
	return "", rj.reject("contentType", ErrInvalidRequest, fmt.Sprintf("contentType %q is not a media type", clip(s)), "pass "+hintContentType)
}
