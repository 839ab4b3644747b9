package session

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/airlockdev/airlock/internal/jsonlit"
)

// maxRecordSize bounds the bytes [DecodeRecord] accepts. A record with
// every field at its longest, fully \u-escaped, stays well below it.
const maxRecordSize = 64 << 10

// Record is the persisted, closed session record. Its JSON encoding is
// described in the package documentation. [Binding.NewRecord] makes one;
// the immutable fields (SessionID, ProfileDigest, WorkspaceDigest,
// SkillsDigest, Model, PermissionMode) are what [Binding.Check] compares.
type Record struct {
	// Schema is [Schema] for every record this package makes; a record
	// decoded from the v1 format has [SchemaV1] (and no SkillsDigest).
	Schema    string
	SessionID string // the binding's session id

	// RecordID is the host's own id for this record (for example the id of
	// the run, or of the database row, that saved it), so the host can tie
	// a loaded record back to its bookkeeping. It is stored and returned,
	// never compared: a resume does not depend on it.
	RecordID string

	// BackendSessionID is the id the backend assigned to the place the
	// agent runs: the provider's session around the agent, for example a
	// hosted sandbox's id (an E2B sandbox id, a Daytona workspace id) or a
	// provider API's session id. A resume passes it back to the provider
	// to reattach to that sandbox.
	BackendSessionID string

	// AgentSessionID is the id the agent assigned to its conversation: over
	// ACP, the sessionId that session/new returned. A resume passes it back
	// to the agent (ACP session/load) to continue that conversation.
	AgentSessionID string

	ProfileDigest   string         // "sha256:" + 64 lowercase hex
	WorkspaceDigest string         // "sha256:" + 64 lowercase hex
	SkillsDigest    string         // "sha256:" + 64 lowercase hex, or "" when no skill was selected
	Model           string         // the qualified model
	PermissionMode  PermissionMode // one of the known modes
}

// wireRecord fixes the JSON field names and their order.
type wireRecord struct {
	Schema           string `json:"schema"`
	SessionID        string `json:"session_id"`
	RecordID         string `json:"record_id"`
	BackendSessionID string `json:"backend_session_id"`
	AgentSessionID   string `json:"agent_session_id"`
	ProfileDigest    string `json:"profile_digest"`
	WorkspaceDigest  string `json:"workspace_digest"`
	SkillsDigest     string `json:"skills_digest"`
	Model            string `json:"model"`
	PermissionMode   string `json:"permission_mode"`
}

// wireRecordV1 is the closed v1 format: wireRecord without skills_digest.
type wireRecordV1 struct {
	Schema           string `json:"schema"`
	SessionID        string `json:"session_id"`
	RecordID         string `json:"record_id"`
	BackendSessionID string `json:"backend_session_id"`
	AgentSessionID   string `json:"agent_session_id"`
	ProfileDigest    string `json:"profile_digest"`
	WorkspaceDigest  string `json:"workspace_digest"`
	Model            string `json:"model"`
	PermissionMode   string `json:"permission_mode"`
}

// recordFields lists the JSON names of the current format in encoding
// order.
func recordFields() []string {
	return []string{
		"schema", "session_id", "record_id", "backend_session_id", "agent_session_id",
		"profile_digest", "workspace_digest", "skills_digest", "model", "permission_mode",
	}
}

// fieldsOf lists the JSON names of schema's format in encoding order: the
// v1 names for SchemaV1, the current ones for any other schema.
func fieldsOf(schema string) []string {
	if schema == SchemaV1 {
		return []string{
			"schema", "session_id", "record_id", "backend_session_id", "agent_session_id",
			"profile_digest", "workspace_digest", "model", "permission_mode",
		}
	}
	return recordFields()
}

// field returns a pointer to the string that holds the named JSON field.
func (w *wireRecord) field(name string) *string {
	switch name {
	case "schema":
		return &w.Schema
	case "session_id":
		return &w.SessionID
	case "record_id":
		return &w.RecordID
	case "backend_session_id":
		return &w.BackendSessionID
	case "agent_session_id":
		return &w.AgentSessionID
	case "profile_digest":
		return &w.ProfileDigest
	case "workspace_digest":
		return &w.WorkspaceDigest
	case "skills_digest":
		return &w.SkillsDigest
	case "model":
		return &w.Model
	case "permission_mode":
		return &w.PermissionMode
	}
	return nil
}

// Encode returns the canonical JSON encoding of r: one compact object with
// the fields of r's schema in the fixed order of the package documentation,
// no HTML escaping, no trailing newline. It first validates r exactly as
// [DecodeRecord] would, so whatever Encode returns decodes to r. (A
// [SchemaV1] record, as DecodeRecord returns one, encodes in the v1 format;
// [Binding.NewRecord] always makes a [Schema] record.)
func (r Record) Encode() ([]byte, error) {
	if err := validateRecord(r); err != nil {
		return nil, fmt.Errorf("session: encode record: %w", err)
	}
	w := wireRecord{
		Schema:           r.Schema,
		SessionID:        r.SessionID,
		RecordID:         r.RecordID,
		BackendSessionID: r.BackendSessionID,
		AgentSessionID:   r.AgentSessionID,
		ProfileDigest:    r.ProfileDigest,
		WorkspaceDigest:  r.WorkspaceDigest,
		SkillsDigest:     r.SkillsDigest,
		Model:            r.Model,
		PermissionMode:   string(r.PermissionMode),
	}
	var v any = w
	if r.Schema == SchemaV1 {
		v = wireRecordV1{Schema: w.Schema, SessionID: w.SessionID, RecordID: w.RecordID, BackendSessionID: w.BackendSessionID,
			AgentSessionID: w.AgentSessionID, ProfileDigest: w.ProfileDigest, WorkspaceDigest: w.WorkspaceDigest,
			Model: w.Model, PermissionMode: w.PermissionMode}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("session: encode record: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// DecodeRecord strictly decodes one record of schema [Schema] or
// [SchemaV1]. It accepts exactly one JSON object (surrounding whitespace
// allowed; field order free) holding every field of its schema's format
// once, each a string, and nothing else; keys match case-sensitively. A v1
// record decodes (its format is closed and still read by the v1 rules) but
// can never be resumed: see [SchemaV1]. Every failure wraps
// [ErrUnsupportedSchema], [ErrUnknownField] or [ErrMalformedRecord]; the
// caller's remedy is always the same: start a fresh session.
func DecodeRecord(data []byte) (Record, error) {
	r, err := decodeRecord(data)
	if err != nil {
		return Record{}, fmt.Errorf("session: decode record: %w; start a fresh session", err)
	}
	return r, nil
}

func decodeRecord(data []byte) (Record, error) {
	if len(data) > maxRecordSize {
		return Record{}, fmt.Errorf("%w: %d bytes, more than %d", ErrMalformedRecord, len(data), maxRecordSize)
	}
	if !utf8.Valid(data) {
		return Record{}, fmt.Errorf("%w: not valid UTF-8", ErrMalformedRecord)
	}
	members, err := jsonlit.Object(data)
	if err != nil {
		return Record{}, fmt.Errorf("%w: %w", ErrMalformedRecord, err)
	}
	values := make(map[string]json.RawMessage, len(members))
	keys := make([]string, 0, len(members))
	for _, m := range members {
		values[m.Key] = m.Value
		keys = append(keys, m.Key)
	}
	return fromValues(values, keys)
}

// fromValues builds the record from its decoded top-level values (keys in
// input order) under the rules of its schema's format.
func fromValues(values map[string]json.RawMessage, keys []string) (Record, error) {
	// A readable schema other than ours wins over every other complaint: the
	// record belongs to a different format version.
	var schema string
	if raw, ok := values["schema"]; ok {
		if isString(raw) && json.Unmarshal(raw, &schema) == nil && schema != Schema && schema != SchemaV1 {
			return Record{}, fmt.Errorf("%w: schema %q, want %q (or the closed %q)", ErrUnsupportedSchema, schema, Schema, SchemaV1)
		}
	}
	fields := fieldsOf(schema)
	format := Schema
	if schema == SchemaV1 {
		format = SchemaV1
	}
	for _, k := range keys {
		if slices.Contains(fields, k) {
			continue
		}
		for _, known := range fields {
			if strings.EqualFold(k, known) {
				return Record{}, fmt.Errorf("%w: %q is %q in the wrong case (field names are case-sensitive)", ErrUnknownField, k, known)
			}
		}
		return Record{}, fmt.Errorf("%w: %q is not a field of %s", ErrUnknownField, k, format)
	}
	if _, ok := values["schema"]; !ok {
		return Record{}, fmt.Errorf("%w: the record has no schema (the draft schema-less format); want %q", ErrUnsupportedSchema, Schema)
	}
	var w wireRecord
	var missing []string
	for _, name := range fields {
		raw, ok := values[name]
		if !ok {
			missing = append(missing, name)
			continue
		}
		if !isString(raw) {
			return Record{}, fmt.Errorf("%w: field %q is %s, want a string", ErrMalformedRecord, name, jsonType(raw))
		}
		if err := jsonlit.CheckSurrogates(raw); err != nil {
			return Record{}, fmt.Errorf("%w: field %q: %w", ErrMalformedRecord, name, err)
		}
		if err := json.Unmarshal(raw, w.field(name)); err != nil {
			return Record{}, fmt.Errorf("%w: field %q: %w", ErrMalformedRecord, name, err)
		}
	}
	if len(missing) > 0 {
		return Record{}, fmt.Errorf("%w: missing field(s) %s", ErrMalformedRecord, strings.Join(missing, ", "))
	}
	r := Record{
		Schema:           w.Schema,
		SessionID:        w.SessionID,
		RecordID:         w.RecordID,
		BackendSessionID: w.BackendSessionID,
		AgentSessionID:   w.AgentSessionID,
		ProfileDigest:    w.ProfileDigest,
		WorkspaceDigest:  w.WorkspaceDigest,
		SkillsDigest:     w.SkillsDigest,
		Model:            w.Model,
		PermissionMode:   PermissionMode(w.PermissionMode),
	}
	if err := validateRecord(r); err != nil {
		return Record{}, err
	}
	return r, nil
}

// validateRecord checks every field value of r against the rules of its
// schema.
func validateRecord(r Record) error {
	switch r.Schema {
	case Schema, SchemaV1:
	case "":
		return fmt.Errorf("%w: the record has no schema; want %q", ErrUnsupportedSchema, Schema)
	default:
		return fmt.Errorf("%w: schema %q, want %q (or the closed %q)", ErrUnsupportedSchema, r.Schema, Schema, SchemaV1)
	}
	ids := []struct{ name, value string }{
		{"session_id", r.SessionID},
		{"record_id", r.RecordID},
		{"backend_session_id", r.BackendSessionID},
		{"agent_session_id", r.AgentSessionID},
	}
	for _, f := range ids {
		if err := checkID(f.value); err != nil {
			return fmt.Errorf("%w: field %q: %w", ErrMalformedRecord, f.name, err)
		}
	}
	if err := checkDigest(r.ProfileDigest); err != nil {
		return fmt.Errorf("%w: field %q: %w", ErrMalformedRecord, "profile_digest", err)
	}
	if err := checkDigest(r.WorkspaceDigest); err != nil {
		return fmt.Errorf("%w: field %q: %w", ErrMalformedRecord, "workspace_digest", err)
	}
	if r.Schema == SchemaV1 && r.SkillsDigest != "" {
		return fmt.Errorf("%w: field %q: the %s format has no such field", ErrMalformedRecord, "skills_digest", SchemaV1)
	}
	if err := checkSkillsDigest(r.SkillsDigest); err != nil {
		return fmt.Errorf("%w: field %q: %w (\"\" when no skill was selected)", ErrMalformedRecord, "skills_digest", err)
	}
	if err := checkModel(r.Model); err != nil {
		return fmt.Errorf("%w: field %q: %w", ErrMalformedRecord, "model", err)
	}
	if !r.PermissionMode.valid() {
		return fmt.Errorf("%w: field %q: unknown permission mode %q", ErrMalformedRecord, "permission_mode", r.PermissionMode)
	}
	return nil
}

func isString(raw []byte) bool { return len(raw) > 0 && raw[0] == '"' }

func jsonType(raw []byte) string {
	if len(raw) == 0 {
		return "empty"
	}
	switch raw[0] {
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	}
	return "a number"
}
