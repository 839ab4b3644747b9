package session

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/fuzzseed"
)

// FuzzDecodeRecord checks the decoder's closure property: whatever
// DecodeRecord accepts, Encode re-encodes to canonical bytes that decode to
// the same record and re-encode to the same bytes. Seeds live in
// testdata/fuzz/FuzzDecodeRecord and below.
func FuzzDecodeRecord(f *testing.F) {
	f.Add([]byte(canonicalJSON))
	f.Add([]byte(canonicalV1JSON))
	f.Add([]byte(strings.Replace(canonicalJSON, testSkillsDigest, "", 1)))
	f.Add([]byte(" " + canonicalJSON + "\n"))
	f.Add([]byte(strings.Replace(canonicalJSON, `"rec-1"`, `"rec-\ud83e\udd80 \u00e9 \"q\" \\"`, 1)))
	f.Add([]byte(strings.Replace(canonicalJSON, `"rec-1"`, `"rec-\ud800"`, 1)))
	f.Add([]byte(canonicalJSON + canonicalJSON))
	f.Add([]byte(strings.Replace(canonicalJSON, `"model"`, `"Model"`, 1)))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeRecord(data)
		if err != nil {
			if r != (Record{}) {
				t.Fatalf("a failed decode returned a non-zero record %+v", r)
			}
			return
		}
		enc, err := r.Encode()
		if err != nil {
			t.Fatalf("decoded record %+v does not encode: %v", r, err)
		}
		r2, err := DecodeRecord(enc)
		if err != nil {
			t.Fatalf("canonical encoding %q does not decode: %v", enc, err)
		}
		if r2 != r {
			t.Fatalf("round trip changed the record:\n got %+v\nwant %+v", r2, r)
		}
		enc2, err := r2.Encode()
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not canonical:\n%q\n%q", enc, enc2)
		}
	})
}

// TestFuzzSeeds pins what each checked-in seed is: the valid ones decode, the
// others fail with their sentinel, so the corpus keeps covering both sides.
func TestFuzzSeeds(t *testing.T) {
	want := map[string]error{
		"valid-v2":                 nil,
		"valid-v2-no-skills":       nil,
		"v2-missing-skills-digest": ErrMalformedRecord,
		"v1-with-skills-digest":    ErrUnknownField,
		"valid-pretty":             nil, // v1: decodes, and Check always finds skills_digest drifted
		"escaped-surrogate-pair":   nil,
		"draft-no-schema":          ErrUnsupportedSchema,
		"schema-v3":                ErrUnsupportedSchema,
		"bare-digest":              ErrMalformedRecord,
		"missing-permission-mode":  ErrMalformedRecord,
		"duplicate-key":            ErrMalformedRecord,
		"null-model":               ErrMalformedRecord,
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzDecodeRecord")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, len(want))
	for _, e := range entries {
		t.Run(e.Name(), func(t *testing.T) {
			sentinel, ok := want[e.Name()]
			require.True(t, ok, "unexpected seed %s", e.Name())
			_, err = DecodeRecord(fuzzseed.Bytes(t, filepath.Join(dir, e.Name())))
			if sentinel == nil {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, sentinel)
			}
		})
	}
}
