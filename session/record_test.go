package session

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	testProfileDigest   = "sha256:" + strings.Repeat("1a", 32)
	testWorkspaceDigest = "sha256:" + strings.Repeat("2b", 32)
	testSkillsDigest    = "sha256:" + strings.Repeat("3c", 32)
)

func testRecord() Record {
	return Record{
		Schema:           Schema,
		SessionID:        "session-1",
		RecordID:         "rec-1",
		BackendSessionID: "backend-1",
		AgentSessionID:   "agent-1",
		ProfileDigest:    testProfileDigest,
		WorkspaceDigest:  testWorkspaceDigest,
		SkillsDigest:     testSkillsDigest,
		Model:            "claude-sonnet-4",
		PermissionMode:   ApproveReads,
	}
}

// canonicalJSON is testRecord's exact encoding.
var canonicalJSON = `{"schema":"airlock.session-identity.v2","session_id":"session-1","record_id":"rec-1",` +
	`"backend_session_id":"backend-1","agent_session_id":"agent-1",` +
	`"profile_digest":"` + testProfileDigest + `","workspace_digest":"` + testWorkspaceDigest + `",` +
	`"skills_digest":"` + testSkillsDigest + `",` +
	`"model":"claude-sonnet-4","permission_mode":"approve-reads"}`

// canonicalV1JSON is the closed v1 encoding of testRecord without its
// skills digest: a record written before skills_digest existed.
var canonicalV1JSON = `{"schema":"airlock.session-identity.v1","session_id":"session-1","record_id":"rec-1",` +
	`"backend_session_id":"backend-1","agent_session_id":"agent-1",` +
	`"profile_digest":"` + testProfileDigest + `","workspace_digest":"` + testWorkspaceDigest + `",` +
	`"model":"claude-sonnet-4","permission_mode":"approve-reads"}`

// testRecordV1 is what canonicalV1JSON decodes to.
func testRecordV1() Record {
	r := testRecord()
	r.Schema, r.SkillsDigest = SchemaV1, ""
	return r
}

// recordJSON renders testRecord as a JSON object after edit changes the
// field map (set a value to nil for JSON null, delete a key to drop it).
// Fields are written in canonical order, then any extra keys sorted.
func recordJSON(t *testing.T, edit func(m map[string]any)) string {
	t.Helper()
	m := map[string]any{}
	require.NoError(t, json.Unmarshal([]byte(canonicalJSON), &m))
	edit(m)
	var sb strings.Builder
	sb.WriteByte('{')
	first := true
	write := func(k string, v any) {
		if !first {
			sb.WriteByte(',')
		}
		first = false
		kb, err := json.Marshal(k)
		require.NoError(t, err)
		vb, err := json.Marshal(v)
		require.NoError(t, err)
		sb.Write(kb)
		sb.WriteByte(':')
		sb.Write(vb)
	}
	for _, k := range recordFields() {
		if v, ok := m[k]; ok {
			write(k, v)
			delete(m, k)
		}
	}
	for k, v := range m { // at most one extra key in every use
		write(k, v)
	}
	sb.WriteByte('}')
	return sb.String()
}

func TestEncodeIsCanonical(t *testing.T) {
	got, err := testRecord().Encode()
	require.NoError(t, err)
	assert.Equal(t, canonicalJSON, string(got))

	r := testRecord()
	r.Model = "<model & co>"
	got, err = r.Encode()
	require.NoError(t, err)
	assert.Contains(t, string(got), `"model":"<model & co>"`, "no HTML escaping")
}

func TestRecordRoundTrip(t *testing.T) {
	records := map[string]Record{
		"plain": testRecord(),
		"unicode and quotes": func() Record {
			r := testRecord()
			r.SessionID = `a/b "quoted" \ back`
			r.BackendSessionID = "Sitzung-ß-🦀"
			r.AgentSessionID = strings.Repeat("é", 120)
			r.Model = "<model & co>\u2028"
			r.PermissionMode = DenyAll
			return r
		}(),
		"approve-all": func() Record { r := testRecord(); r.PermissionMode = ApproveAll; return r }(),
		"no skills":   func() Record { r := testRecord(); r.SkillsDigest = ""; return r }(),
		"v1":          testRecordV1(),
	}
	for name, r := range records {
		t.Run(name, func(t *testing.T) {
			data, err := r.Encode()
			require.NoError(t, err)
			got, err := DecodeRecord(data)
			require.NoError(t, err)
			assert.Equal(t, r, got)
			again, err := got.Encode()
			require.NoError(t, err)
			assert.Equal(t, data, again)
		})
	}
}

func TestDecodeAcceptsEquivalentSpellings(t *testing.T) {
	want := testRecord()
	tests := map[string]string{
		"surrounding whitespace": " \n\t" + canonicalJSON + "\n\r ",
		"reordered fields": `{"permission_mode":"approve-reads","model":"claude-sonnet-4",` +
			`"skills_digest":"` + testSkillsDigest + `",` +
			`"workspace_digest":"` + testWorkspaceDigest + `","profile_digest":"` + testProfileDigest + `",` +
			`"agent_session_id":"agent-1","backend_session_id":"backend-1","record_id":"rec-1",` +
			`"session_id":"session-1","schema":"airlock.session-identity.v2"}`,
		"escaped characters": strings.Replace(canonicalJSON, `"rec-1"`, `"rec\u002d1"`, 1),
	}
	var pretty bytes.Buffer
	require.NoError(t, json.Indent(&pretty, []byte(canonicalJSON), "", "  "))
	tests["pretty printed"] = pretty.String()
	for name, data := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := DecodeRecord([]byte(data))
			require.NoError(t, err)
			assert.Equal(t, want, got)
		})
	}

	t.Run("v1", func(t *testing.T) {
		got, err := DecodeRecord([]byte(canonicalV1JSON))
		require.NoError(t, err)
		assert.Equal(t, testRecordV1(), got)
		again, err := got.Encode()
		require.NoError(t, err)
		assert.Equal(t, canonicalV1JSON, string(again), "a v1 record re-encodes in the v1 format")
	})

	t.Run("escaped surrogate pair", func(t *testing.T) {
		data := strings.Replace(canonicalJSON, `"rec-1"`, `"rec-\ud83e\udd80"`, 1)
		got, err := DecodeRecord([]byte(data))
		require.NoError(t, err)
		assert.Equal(t, "rec-🦀", got.RecordID)
	})
}

func TestDecodeRejectsMalformedRecords(t *testing.T) {
	set := func(k string, v any) func(map[string]any) { return func(m map[string]any) { m[k] = v } }
	del := func(k string) func(map[string]any) { return func(m map[string]any) { delete(m, k) } }
	bareHex := strings.Repeat("1a", 32)

	type tc struct {
		name     string
		data     string
		sentinel error
		contains string
	}
	tests := []tc{
		// Structure.
		{"empty input", ``, ErrMalformedRecord, "not a JSON object"},
		{"whitespace only", " \n", ErrMalformedRecord, "not a JSON object"},
		{"array", `[` + canonicalJSON + `]`, ErrMalformedRecord, "not a JSON object"},
		{"string", `"record"`, ErrMalformedRecord, "not a JSON object"},
		{"null document", `null`, ErrMalformedRecord, "not a JSON object"},
		{"number", `1`, ErrMalformedRecord, "not a JSON object"},
		{"truncated", canonicalJSON[:len(canonicalJSON)-1], ErrMalformedRecord, "end of input"},
		{"trailing comma", canonicalJSON[:len(canonicalJSON)-1] + `,}`, ErrMalformedRecord, "invalid character"},
		{"trailing object", canonicalJSON + `{}`, ErrMalformedRecord, "trailing data"},
		{"trailing record", canonicalJSON + canonicalJSON, ErrMalformedRecord, "trailing data"},
		{"trailing garbage", canonicalJSON + ` x`, ErrMalformedRecord, "trailing data"},
		{"trailing NUL", canonicalJSON + "\x00", ErrMalformedRecord, "trailing data"},
		{"invalid UTF-8 in value", strings.Replace(canonicalJSON, "rec-1", "rec-\xff", 1), ErrMalformedRecord, "UTF-8"},
		{"invalid UTF-8 in key", strings.Replace(canonicalJSON, `"model"`, "\"mod\xc3\"", 1), ErrMalformedRecord, "UTF-8"},
		{"overlong UTF-8", strings.Replace(canonicalJSON, "rec-1", "rec-\xc0\xaf", 1), ErrMalformedRecord, "UTF-8"},
		{"UTF-16 surrogate as UTF-8", strings.Replace(canonicalJSON, "rec-1", "rec-\xed\xa0\x80", 1), ErrMalformedRecord, "UTF-8"},
		{"escaped lone high surrogate", strings.Replace(canonicalJSON, "rec-1", `rec-\ud800`, 1), ErrMalformedRecord, "surrogate"},
		{"escaped lone low surrogate", strings.Replace(canonicalJSON, "rec-1", `rec-\udc00x`, 1), ErrMalformedRecord, "surrogate"},
		{"escaped reversed surrogates", strings.Replace(canonicalJSON, "rec-1", `\udd80\ud83e`, 1), ErrMalformedRecord, "surrogate"},
		{"too large", `{"schema":"` + strings.Repeat(" ", maxRecordSize) + `"}`, ErrMalformedRecord, "more than"},

		// Keys.
		{"duplicate key", canonicalJSON[:len(canonicalJSON)-1] + `,"model":"claude-sonnet-4"}`, ErrMalformedRecord, `duplicate key "model"`},
		{"duplicate key with other value", canonicalJSON[:len(canonicalJSON)-1] + `,"permission_mode":"approve-all"}`, ErrMalformedRecord, "duplicate key"},
		{"duplicate key spelled with escape", canonicalJSON[:len(canonicalJSON)-1] + `,"mod\u0065l":"x"}`, ErrMalformedRecord, "duplicate key"},
		{"duplicate schema", `{"schema":"` + Schema + `",` + canonicalJSON[1:], ErrMalformedRecord, `duplicate key "schema"`},
		{"unknown field", recordJSON(t, set("extra", "x")), ErrUnknownField, `"extra"`},
		{"unknown field with object value", recordJSON(t, set("extra", map[string]any{"a": 1})), ErrUnknownField, `"extra"`},
		{"draft command_digest field", recordJSON(t, set("command_digest", testProfileDigest)), ErrUnknownField, `"command_digest"`},
		{"field in wrong case", strings.Replace(canonicalJSON, `"model"`, `"Model"`, 1), ErrUnknownField, "wrong case"},
		{"field in upper case", strings.Replace(canonicalJSON, `"session_id"`, `"SESSION_ID"`, 1), ErrUnknownField, "wrong case"},
		{"Go field name", strings.Replace(canonicalJSON, `"session_id"`, `"SessionID"`, 1), ErrUnknownField, `"SessionID"`},
		{"schema key in wrong case", strings.Replace(canonicalJSON, `"schema"`, `"Schema"`, 1), ErrUnknownField, "wrong case"},
		{"Kelvin sign folds to k", strings.Replace(canonicalJSON, `"backend_session_id"`, `"bac\u212aend_session_id"`, 1), ErrUnknownField, "wrong case"},
		{"key with trailing space", strings.Replace(canonicalJSON, `"model"`, `"model "`, 1), ErrUnknownField, `"model "`},

		// Missing fields and schema.
		{"empty object", `{}`, ErrUnsupportedSchema, "no schema"},
		{"missing schema (draft format)", recordJSON(t, del("schema")), ErrUnsupportedSchema, "draft"},
		{"missing session_id", recordJSON(t, del("session_id")), ErrMalformedRecord, "missing field(s) session_id"},
		{"missing record_id", recordJSON(t, del("record_id")), ErrMalformedRecord, "record_id"},
		{"missing backend_session_id", recordJSON(t, del("backend_session_id")), ErrMalformedRecord, "backend_session_id"},
		{"missing agent_session_id", recordJSON(t, del("agent_session_id")), ErrMalformedRecord, "agent_session_id"},
		{"missing profile_digest", recordJSON(t, del("profile_digest")), ErrMalformedRecord, "profile_digest"},
		{"missing workspace_digest", recordJSON(t, del("workspace_digest")), ErrMalformedRecord, "workspace_digest"},
		{"missing skills_digest", recordJSON(t, del("skills_digest")), ErrMalformedRecord, "missing field(s) skills_digest"},
		{"missing model", recordJSON(t, del("model")), ErrMalformedRecord, "model"},
		{"missing permission_mode", recordJSON(t, del("permission_mode")), ErrMalformedRecord, "missing field(s) permission_mode"},
		{"schema v3", recordJSON(t, set("schema", "airlock.session-identity.v3")), ErrUnsupportedSchema, "v3"},
		{"schema v0", recordJSON(t, set("schema", "airlock.session-identity.v0")), ErrUnsupportedSchema, "v0"},
		{"schema v3 with new fields", recordJSON(t, func(m map[string]any) { m["schema"] = "airlock.session-identity.v3"; m["extra"] = "x" }), ErrUnsupportedSchema, "v3"},

		// The closed v1 format: read by its own rules.
		{"v1 with skills_digest", recordJSON(t, set("schema", SchemaV1)), ErrUnknownField, `"skills_digest" is not a field of airlock.session-identity.v1`},
		{"v1 missing model", strings.Replace(canonicalV1JSON, `"model":"claude-sonnet-4",`, "", 1), ErrMalformedRecord, "missing field(s) model"},
		{"v1 field in wrong case", strings.Replace(canonicalV1JSON, `"model"`, `"MODEL"`, 1), ErrUnknownField, "wrong case"},
		{"v1 with extra field", canonicalV1JSON[:len(canonicalV1JSON)-1] + `,"extra":"x"}`, ErrUnknownField, `"extra"`},
		{"v1 bare digest", strings.Replace(canonicalV1JSON, testProfileDigest, bareHex, 1), ErrMalformedRecord, "prefix"},
		{"empty schema", recordJSON(t, set("schema", "")), ErrUnsupportedSchema, "schema"},
		{"schema in wrong case", recordJSON(t, set("schema", "AIRLOCK.SESSION-IDENTITY.V1")), ErrUnsupportedSchema, "schema"},

		// Nulls and types.
		{"null schema", recordJSON(t, set("schema", nil)), ErrMalformedRecord, `"schema" is null`},
		{"null session_id", recordJSON(t, set("session_id", nil)), ErrMalformedRecord, "null"},
		{"null permission_mode", recordJSON(t, set("permission_mode", nil)), ErrMalformedRecord, `"permission_mode" is null`},
		{"number schema", recordJSON(t, set("schema", 1)), ErrMalformedRecord, "a number"},
		{"number record_id", recordJSON(t, set("record_id", 42)), ErrMalformedRecord, "a number"},
		{"bool model", recordJSON(t, set("model", true)), ErrMalformedRecord, "a boolean"},
		{"array digest", recordJSON(t, set("profile_digest", []string{testProfileDigest})), ErrMalformedRecord, "an array"},
		{"object permission mode", recordJSON(t, set("permission_mode", map[string]any{"mode": "deny-all"})), ErrMalformedRecord, "an object"},

		// Values.
		{"bare command digest", recordJSON(t, set("profile_digest", bareHex)), ErrMalformedRecord, "prefix"},
		{"bare workspace digest", recordJSON(t, set("workspace_digest", bareHex)), ErrMalformedRecord, "prefix"},
		{"digest with other prefix", recordJSON(t, set("profile_digest", "sha512:"+bareHex)), ErrMalformedRecord, "prefix"},
		{"digest prefix in upper case", recordJSON(t, set("profile_digest", "SHA256:"+bareHex)), ErrMalformedRecord, "prefix"},
		{"digest in upper-case hex", recordJSON(t, set("profile_digest", "sha256:"+strings.ToUpper(bareHex))), ErrMalformedRecord, "lowercase hex"},
		{"short digest", recordJSON(t, set("workspace_digest", "sha256:"+bareHex[:40])), ErrMalformedRecord, "want 64"},
		{"long digest", recordJSON(t, set("workspace_digest", "sha256:"+bareHex+"00")), ErrMalformedRecord, "want 64"},
		{"empty digest", recordJSON(t, set("workspace_digest", "")), ErrMalformedRecord, "prefix"},
		{"bare skills digest", recordJSON(t, set("skills_digest", bareHex)), ErrMalformedRecord, `field "skills_digest"`},
		{"skills digest in upper-case hex", recordJSON(t, set("skills_digest", "sha256:"+strings.ToUpper(bareHex))), ErrMalformedRecord, "lowercase hex"},
		{"null skills digest", recordJSON(t, set("skills_digest", nil)), ErrMalformedRecord, `"skills_digest" is null`},
		{"unknown permission mode", recordJSON(t, set("permission_mode", "approve-everything")), ErrMalformedRecord, "unknown permission mode"},
		{"empty permission mode", recordJSON(t, set("permission_mode", "")), ErrMalformedRecord, "unknown permission mode"},
		{"permission mode in wrong case", recordJSON(t, set("permission_mode", "Deny-All")), ErrMalformedRecord, "unknown permission mode"},
		{"empty session_id", recordJSON(t, set("session_id", "")), ErrMalformedRecord, "empty"},
		{"empty agent_session_id", recordJSON(t, set("agent_session_id", "")), ErrMalformedRecord, "agent_session_id"},
		{"session_id too long", recordJSON(t, set("session_id", strings.Repeat("s", 241))), ErrMalformedRecord, "longer than 240"},
		{"escaped control character", strings.Replace(canonicalJSON, "rec-1", `rec\n1`, 1), ErrMalformedRecord, "control character"},
		{"escaped NUL", strings.Replace(canonicalJSON, "backend-1", `backend\u00001`, 1), ErrMalformedRecord, "control character"},
		{"empty model", recordJSON(t, set("model", "")), ErrMalformedRecord, `"model"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := DecodeRecord([]byte(tt.data))
			require.Error(t, err)
			assert.Equal(t, Record{}, r)
			assert.ErrorIs(t, err, tt.sentinel)
			for _, other := range []error{ErrMalformedRecord, ErrUnknownField, ErrUnsupportedSchema} {
				if other != tt.sentinel {
					assert.NotErrorIs(t, err, other)
				}
			}
			assert.Contains(t, err.Error(), tt.contains)
			assert.Contains(t, err.Error(), "start a fresh session")
		})
	}
}

func TestEncodeRejectsWhatDecodeRejects(t *testing.T) {
	tests := []struct {
		name     string
		mutate   func(*Record)
		sentinel error
	}{
		{"zero record", func(r *Record) { *r = Record{} }, ErrUnsupportedSchema},
		{"other schema", func(r *Record) { r.Schema = "airlock.session-identity.v3" }, ErrUnsupportedSchema},
		{"v1 with a skills digest", func(r *Record) { r.Schema = SchemaV1 }, ErrMalformedRecord},
		{"bare skills digest", func(r *Record) { r.SkillsDigest = strings.Repeat("3c", 32) }, ErrMalformedRecord},
		{"empty record id", func(r *Record) { r.RecordID = "" }, ErrMalformedRecord},
		{"invalid UTF-8 backend id", func(r *Record) { r.BackendSessionID = "\xff" }, ErrMalformedRecord},
		{"control character in agent id", func(r *Record) { r.AgentSessionID = "a\rb" }, ErrMalformedRecord},
		{"bare digest", func(r *Record) { r.ProfileDigest = strings.Repeat("1a", 32) }, ErrMalformedRecord},
		{"absent permission mode", func(r *Record) { r.PermissionMode = "" }, ErrMalformedRecord},
		{"model too long", func(r *Record) { r.Model = strings.Repeat("m", 241) }, ErrMalformedRecord},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := testRecord()
			tt.mutate(&r)
			data, err := r.Encode()
			assert.ErrorIs(t, err, tt.sentinel)
			assert.Nil(t, data)
		})
	}
}
