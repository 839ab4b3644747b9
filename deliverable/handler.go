package deliverable

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"
)

// Handler serves attachment content from store:
//
//	GET /api/attachments/<id>/content             inline
//	GET /api/attachments/<id>/content?download=1  as a download
//
// (HEAD too). The response carries the recorded Content-Type,
// X-Content-Type-Options: nosniff, an ETag made of the SHA-256, a
// Content-Disposition with the original filename (RFC 6266: an ASCII fallback
// and a UTF-8 filename* parameter), and a Content-Security-Policy "sandbox" for every
// type but PDF so that an agent-made HTML or SVG file cannot run script in the
// host's origin. Range and conditional requests are handled by
// http.ServeContent. An unknown or malformed id is 404; other methods are 405.
//
// Handler does no authentication or authorization: mount it behind the host's.
func Handler(store Store) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/api/attachments/{id}/content", func(w http.ResponseWriter, r *http.Request) {
		serveContent(store, w, r)
	})
	return mux
}

func serveContent(store Store, w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	id, ok := parseUUID(r.PathValue("id"))
	if !ok {
		http.NotFound(w, r)
		return
	}
	a, content, err := store.Open(r.Context(), id)
	if errors.Is(err, ErrNotFound) {
		http.NotFound(w, r)
		return
	}
	if err != nil {
		http.Error(w, "attachment content unavailable", http.StatusInternalServerError)
		return
	}
	defer func() { _ = content.Close() }() // read-only

	h := w.Header()
	h.Set("Content-Type", a.ContentType)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("ETag", `"`+a.SHA256+`"`)
	h.Set("Cache-Control", "private")
	if t, _, err := mime.ParseMediaType(a.ContentType); err != nil || t != "application/pdf" {
		h.Set("Content-Security-Policy", "sandbox; default-src 'none'; img-src 'self' data:; media-src 'self'; style-src 'unsafe-inline'")
	}
	disposition := "inline"
	if d := r.URL.Query().Get("download"); d == "1" || d == "true" {
		disposition = "attachment"
	}
	h.Set("Content-Disposition", ContentDisposition(disposition, a.Filename))
	http.ServeContent(w, r, "", time.Time{}, content)
}

// ContentDisposition formats a Content-Disposition header value (RFC 6266) for
// filename: an ASCII fallback in filename="…" (non-ASCII, quotes, backslashes
// and control characters replaced by "_") and the exact name in the
// filename* parameter (UTF-8, RFC 8187 percent-encoding). disposition is
// "inline" or "attachment".
func ContentDisposition(disposition, filename string) string {
	var fallback, ext strings.Builder
	for _, r := range filename {
		switch {
		case r == utf8.RuneError || r < 0x20 || r == 0x7f || r >= utf8.RuneSelf || r == '"' || r == '\\' || r == '%' || r == '/':
			fallback.WriteByte('_')
		default:
			fallback.WriteRune(r)
		}
	}
	for i := 0; i < len(filename); i++ {
		c := filename[i]
		if isAttrChar(c) {
			ext.WriteByte(c)
		} else {
			fmt.Fprintf(&ext, "%%%02X", c)
		}
	}
	fb := strings.TrimSpace(fallback.String())
	if strings.Trim(fb, "_.") == "" {
		fb = "download"
	}
	return fmt.Sprintf(`%s; filename="%s"; filename*=UTF-8''%s`, disposition, fb, ext.String())
}

// isAttrChar reports RFC 8187 attr-char: ALPHA / DIGIT / "!" / "#" / "$" /
// "&" / "+" / "-" / "." / "^" / "_" / "`" / "|" / "~".
func isAttrChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$&+-.^_`|~", c) >= 0
}
