package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/airlockdev/airlock/internal/jsonlit"
)

// maxRecordSize bounds the bytes [DecodeRecord] accepts. A v1 record with
// every field at its longest, fully \u-escaped, stays well below it.
const maxRecordSize = 64 << 10

// Record is the persisted, closed v1 session record. Its JSON encoding is
// described in the package documentation. [Binding.NewRecord] makes one;
// the immutable fields (SessionID, ProfileDigest, WorkspaceDigest, Model,
// PermissionMode) are what [Binding.Check] compares.
type Record struct {
	Schema    string // always [Schema]
	SessionID string // the binding's session id

	// RecordID is the host's own id for this record (for example the id of
	// the run, or of the database row, that saved it), so the host can tie
	// a loaded record back to its bookkeeping. It is stored and returned,
	// never compared: a resume does not depend on it.
	RecordID string

	// BackendSessionID and AgentSessionID are the ids the backend (the ACP
	// server) and the agent assigned to the session; they are what a resume
	// passes back to them.
	BackendSessionID string
	AgentSessionID   string // see BackendSessionID

	ProfileDigest   string         // "sha256:" + 64 lowercase hex
	WorkspaceDigest string         // "sha256:" + 64 lowercase hex
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
	Model            string `json:"model"`
	PermissionMode   string `json:"permission_mode"`
}

// recordFields lists the JSON names in encoding order.
func recordFields() [9]string {
	return [...]string{
		"schema", "session_id", "record_id", "backend_session_id", "agent_session_id",
		"profile_digest", "workspace_digest", "model", "permission_mode",
	}
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
	case "model":
		return &w.Model
	case "permission_mode":
		return &w.PermissionMode
	}
	return nil
}

// Encode returns the canonical JSON encoding of r: one compact object with
// the fields in the fixed order of the package documentation, no HTML
// escaping, no trailing newline. It first validates r exactly as
// [DecodeRecord] would, so whatever Encode returns decodes to r.
func (r Record) Encode() ([]byte, error) {
	if err := validateRecord(r); err != nil {
		return nil, fmt.Errorf("session: encode record: %w", err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(wireRecord{
		Schema:           r.Schema,
		SessionID:        r.SessionID,
		RecordID:         r.RecordID,
		BackendSessionID: r.BackendSessionID,
		AgentSessionID:   r.AgentSessionID,
		ProfileDigest:    r.ProfileDigest,
		WorkspaceDigest:  r.WorkspaceDigest,
		Model:            r.Model,
		PermissionMode:   string(r.PermissionMode),
	}); err != nil {
		return nil, fmt.Errorf("session: encode record: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// DecodeRecord strictly decodes one v1 record. It accepts exactly one JSON
// object (surrounding whitespace allowed; field order free) holding every
// field of the v1 format once, each a string, and nothing else; keys match
// case-sensitively. Every failure wraps [ErrUnsupportedSchema],
// [ErrUnknownField] or [ErrMalformedRecord]; the caller's remedy is always
// the same: start a fresh session.
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
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return Record{}, fmt.Errorf("%w: not a JSON object: %w", ErrMalformedRecord, syntaxErr(err))
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return Record{}, fmt.Errorf("%w: not a JSON object", ErrMalformedRecord)
	}
	values := make(map[string]json.RawMessage, 9)
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return Record{}, fmt.Errorf("%w: %w", ErrMalformedRecord, syntaxErr(err))
		}
		key, ok := tok.(string)
		if !ok {
			return Record{}, fmt.Errorf("%w: object key is not a string", ErrMalformedRecord)
		}
		if _, dup := values[key]; dup {
			return Record{}, fmt.Errorf("%w: duplicate key %q", ErrMalformedRecord, key)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return Record{}, fmt.Errorf("%w: field %q: %w", ErrMalformedRecord, key, syntaxErr(err))
		}
		values[key] = bytes.TrimSpace(raw)
		keys = append(keys, key)
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return Record{}, fmt.Errorf("%w: %w", ErrMalformedRecord, syntaxErr(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Record{}, fmt.Errorf("%w: trailing data after the record object", ErrMalformedRecord)
	}

	// A readable schema other than ours wins over every other complaint: the
	// record belongs to a different format version.
	if raw, ok := values["schema"]; ok {
		var s string
		if isString(raw) && json.Unmarshal(raw, &s) == nil && s != Schema {
			return Record{}, fmt.Errorf("%w: schema %q, want %q", ErrUnsupportedSchema, s, Schema)
		}
	}
	var w wireRecord
	for _, k := range keys {
		if w.field(k) != nil {
			continue
		}
		for _, known := range recordFields() {
			if strings.EqualFold(k, known) {
				return Record{}, fmt.Errorf("%w: %q is %q in the wrong case (field names are case-sensitive)", ErrUnknownField, k, known)
			}
		}
		return Record{}, fmt.Errorf("%w: %q is not a field of %s", ErrUnknownField, k, Schema)
	}
	if _, ok := values["schema"]; !ok {
		return Record{}, fmt.Errorf("%w: the record has no schema (the draft schema-less format); want %q", ErrUnsupportedSchema, Schema)
	}
	var missing []string
	for _, name := range recordFields() {
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
		Model:            w.Model,
		PermissionMode:   PermissionMode(w.PermissionMode),
	}
	if err := validateRecord(r); err != nil {
		return Record{}, err
	}
	return r, nil
}

// validateRecord checks every field value of r against the v1 rules.
func validateRecord(r Record) error {
	if r.Schema != Schema {
		if r.Schema == "" {
			return fmt.Errorf("%w: the record has no schema; want %q", ErrUnsupportedSchema, Schema)
		}
		return fmt.Errorf("%w: schema %q, want %q", ErrUnsupportedSchema, r.Schema, Schema)
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
	if err := checkID(r.Model); err != nil {
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

// syntaxErr turns a bare io.EOF or io.ErrUnexpectedEOF from the decoder into
// a readable error.
func syntaxErr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("unexpected end of input")
	}
	return err
}
