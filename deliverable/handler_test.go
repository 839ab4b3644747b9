package deliverable_test

import (
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable"
)

type served struct {
	srv   *httptest.Server
	store *deliverable.FileStore
}

func newServed(t *testing.T) *served {
	t.Helper()
	store, err := deliverable.NewFileStore(afero.NewMemMapFs(), "/s")
	require.NoError(t, err)
	srv := httptest.NewServer(deliverable.Handler(store))
	t.Cleanup(srv.Close)
	return &served{srv: srv, store: store}
}

func (s *served) put(t *testing.T, filename, contentType string, data []byte) deliverable.Receipt {
	t.Helper()
	e := entryFor("t", "r", filename, data)
	e.Filename, e.ContentType = filename, contentType
	rc, err := s.store.Put(t.Context(), e, contentOf(data))
	require.NoError(t, err)
	return rc
}

func (s *served) get(t *testing.T, method, path string, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, s.srv.URL+path, nil)
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := s.srv.Client().Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	return resp, body
}

func TestHandlerServesContent(t *testing.T) {
	s := newServed(t)
	data := []byte("%PDF-1.7 pretend")
	rc := s.put(t, "report.pdf", "application/pdf", data)

	resp, body := s.get(t, http.MethodGet, rc.ContentPath, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, data, body)
	assert.Equal(t, "application/pdf", resp.Header.Get("Content-Type"))
	assert.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
	assert.Equal(t, `"`+sum(data)+`"`, resp.Header.Get("ETag"))
	assert.Equal(t, `inline; filename="report.pdf"; filename*=UTF-8''report.pdf`, resp.Header.Get("Content-Disposition"))
	assert.Empty(t, resp.Header.Get("Content-Security-Policy"), "PDF viewers break under a sandbox CSP")

	resp, body = s.get(t, http.MethodHead, rc.ContentPath, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Empty(t, body)
	assert.Equal(t, "16", resp.Header.Get("Content-Length"))

	resp, body = s.get(t, http.MethodGet, rc.ContentPath, map[string]string{"Range": "bytes=1-3"})
	assert.Equal(t, http.StatusPartialContent, resp.StatusCode)
	assert.Equal(t, "PDF", string(body))
	assert.Equal(t, "bytes 1-3/16", resp.Header.Get("Content-Range"))

	resp, body = s.get(t, http.MethodGet, rc.ContentPath, map[string]string{"If-None-Match": `"` + sum(data) + `"`})
	assert.Equal(t, http.StatusNotModified, resp.StatusCode)
	assert.Empty(t, body)

	resp, _ = s.get(t, http.MethodGet, rc.ContentPath, map[string]string{"Range": "bytes=100-200"})
	assert.Equal(t, http.StatusRequestedRangeNotSatisfiable, resp.StatusCode)

	// Ids are case-insensitive.
	resp, body = s.get(t, http.MethodGet, "/api/attachments/"+strings.ToUpper(rc.AttachmentID)+"/content", nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, data, body)
}

func TestHandlerDownloadUnicodeFilename(t *testing.T) {
	s := newServed(t)
	name := `Bericht über Äpfel – 2024 "final" 100%.csv`
	data := []byte("a;b\n")
	rc := s.put(t, name, "text/csv; charset=utf-8", data)

	resp, body := s.get(t, http.MethodGet, rc.DownloadPath, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, data, body)
	assert.Equal(t, "text/csv; charset=utf-8", resp.Header.Get("Content-Type"))

	cd := resp.Header.Get("Content-Disposition")
	assert.Equal(t, `attachment; filename="Bericht _ber _pfel _ 2024 _final_ 100_.csv"; `+
		`filename*=UTF-8''Bericht%20%C3%BCber%20%C3%84pfel%20%E2%80%93%202024%20%22final%22%20100%25.csv`, cd)
	disposition, params, err := mime.ParseMediaType(cd)
	require.NoError(t, err)
	assert.Equal(t, "attachment", disposition)
	assert.Equal(t, name, params["filename"], "a client decoding RFC 6266 gets the original name")
}

func TestHandlerSandboxesActiveContent(t *testing.T) {
	s := newServed(t)
	for _, ct := range []string{"text/html", "image/svg+xml", "application/xhtml+xml", "text/plain"} {
		rc := s.put(t, "page-"+strings.ReplaceAll(ct, "/", "-"), ct, []byte("<script>alert(document.cookie)</script>"))
		resp, _ := s.get(t, http.MethodGet, rc.ContentPath, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, ct)
		csp := resp.Header.Get("Content-Security-Policy")
		assert.True(t, strings.HasPrefix(csp, "sandbox;"), "%s: CSP %q", ct, csp)
		assert.Contains(t, csp, "default-src 'none'", ct)
		assert.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), ct)
	}
}

func TestHandlerErrors(t *testing.T) {
	s := newServed(t)
	rc := s.put(t, "a.txt", "text/plain", []byte("a"))
	cases := []struct {
		name, method, path string
		want               int
	}{
		{"unknown id", http.MethodGet, "/api/attachments/00000000-0000-4000-8000-000000000000/content", http.StatusNotFound},
		{"malformed id", http.MethodGet, "/api/attachments/not-an-id/content", http.StatusNotFound},
		{"traversal in id", http.MethodGet, "/api/attachments/..%2f..%2fetc%2fpasswd/content", http.StatusNotFound},
		{"other path", http.MethodGet, "/api/attachments/" + rc.AttachmentID, http.StatusNotFound},
		{"trailing segment", http.MethodGet, rc.ContentPath + "/x", http.StatusNotFound},
		{"POST", http.MethodPost, rc.ContentPath, http.StatusMethodNotAllowed},
		{"DELETE", http.MethodDelete, rc.ContentPath, http.StatusMethodNotAllowed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, _ := s.get(t, tc.method, tc.path, nil)
			assert.Equal(t, tc.want, resp.StatusCode)
		})
	}
}

func TestContentDisposition(t *testing.T) {
	cases := []struct{ name, want string }{
		{"plain.txt", `attachment; filename="plain.txt"; filename*=UTF-8''plain.txt`},
		{`q"uote\back.txt`, `attachment; filename="q_uote_back.txt"; filename*=UTF-8''q%22uote%5Cback.txt`},
		{"日本.pdf", `attachment; filename="__.pdf"; filename*=UTF-8''%E6%97%A5%E6%9C%AC.pdf`},
		{"日本", `attachment; filename="download"; filename*=UTF-8''%E6%97%A5%E6%9C%AC`},
		{"a\r\nSet-Cookie: x=y", `attachment; filename="a__Set-Cookie: x=y"; filename*=UTF-8''a%0D%0ASet-Cookie%3A%20x%3Dy`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := deliverable.ContentDisposition("attachment", tc.name)
			assert.Equal(t, tc.want, got)
			assert.NotContains(t, got, "\r")
			assert.NotContains(t, got, "\n")
			_, params, err := mime.ParseMediaType(got)
			require.NoError(t, err)
			assert.Equal(t, tc.name, params["filename"])
		})
	}
}
