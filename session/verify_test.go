package session

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestVerify(t *testing.T) {
	b := mustBind(t, testConfig(t))
	otherDigest := "sha256:" + strings.Repeat("ff", 32)

	tests := []struct {
		name   string
		mutate func(*Identity)
		fields []string // nil: no drift
	}{
		{"same identity", func(*Identity) {}, nil},
		{"other session id", func(id *Identity) { id.SessionID = "session-2" }, []string{"session_id"}},
		{"other workspace", func(id *Identity) { id.WorkspaceDigest = otherDigest }, []string{"workspace_digest"}},
		{"other profile", func(id *Identity) { id.ProfileDigest = otherDigest }, []string{"profile_digest"}},
		{"other model", func(id *Identity) { id.Model = "claude-opus-4" }, []string{"model"}},
		{"other permission mode", func(id *Identity) { id.PermissionMode = ApproveAll }, []string{"permission_mode"}},
		{"absent permission mode", func(id *Identity) { id.PermissionMode = "" }, []string{"permission_mode"}},
		{"absent model", func(id *Identity) { id.Model = "" }, []string{"model"}},
		{"absent workspace digest", func(id *Identity) { id.WorkspaceDigest = "" }, []string{"workspace_digest"}},
		{"bare workspace digest", func(id *Identity) { id.WorkspaceDigest = strings.TrimPrefix(b.WorkspaceDigest, "sha256:") }, []string{"workspace_digest"}},
		{"session id differing in case", func(id *Identity) { id.SessionID = strings.ToUpper(b.SessionID) }, []string{"session_id"}},
		{"other skills", func(id *Identity) { id.SkillsDigest = otherDigest }, []string{"skills_digest"}},
		{"absent skills digest", func(id *Identity) { id.SkillsDigest = "" }, []string{"skills_digest"}},
		{"zero identity", func(id *Identity) { *id = Identity{} }, []string{"session_id", "workspace_digest", "profile_digest", "skills_digest", "model", "permission_mode"}},
		{"two fields", func(id *Identity) { id.Model = "m"; id.SessionID = "s" }, []string{"session_id", "model"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := b.Identity()
			tt.mutate(&id)
			err := b.Verify(id)
			if tt.fields == nil {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, ErrDrift)
			var de *DriftError
			require.ErrorAs(t, err, &de)
			assert.Equal(t, tt.fields, de.Fields)
			for _, f := range tt.fields {
				assert.Contains(t, err.Error(), f)
			}
			assert.Contains(t, err.Error(), "start a fresh session")
		})
	}
}

func TestIdentityAndNewRecordCarryTheBinding(t *testing.T) {
	b := mustBind(t, testConfig(t))
	assert.Equal(t, Identity{
		SessionID:       b.SessionID,
		WorkspaceDigest: b.WorkspaceDigest,
		ProfileDigest:   b.ProfileDigest,
		SkillsDigest:    testSkillsDigest,
		Model:           b.Model,
		PermissionMode:  b.PermissionMode,
	}, b.Identity())

	r := b.NewRecord(RecordIDs{RecordID: "rec-1", BackendSessionID: "backend-1", AgentSessionID: "agent-1"})
	assert.Equal(t, Record{
		Schema:           Schema,
		SessionID:        b.SessionID,
		RecordID:         "rec-1",
		BackendSessionID: "backend-1",
		AgentSessionID:   "agent-1",
		ProfileDigest:    b.ProfileDigest,
		WorkspaceDigest:  b.WorkspaceDigest,
		SkillsDigest:     testSkillsDigest,
		Model:            b.Model,
		PermissionMode:   b.PermissionMode,
	}, r)
	require.NoError(t, b.Check(r))
	data, err := r.Encode()
	require.NoError(t, err)
	got, err := DecodeRecord(data)
	require.NoError(t, err)
	assert.NoError(t, b.Check(got))
}

func TestCheck(t *testing.T) {
	cfg := testConfig(t)
	b := mustBind(t, cfg)
	otherDigest := "sha256:" + strings.Repeat("ee", 32)

	tests := []struct {
		name     string
		mutate   func(*Record)
		sentinel error    // nil: no error
		fields   []string // for ErrDrift
	}{
		{"same binding", func(*Record) {}, nil, nil},
		{"other record ids are not bound", func(r *Record) { r.RecordID, r.BackendSessionID, r.AgentSessionID = "r2", "b2", "a2" }, nil, nil},
		{"other session id", func(r *Record) { r.SessionID = "session-2" }, ErrDrift, []string{"session_id"}},
		{"other workspace", func(r *Record) { r.WorkspaceDigest = otherDigest }, ErrDrift, []string{"workspace_digest"}},
		{"other profile", func(r *Record) { r.ProfileDigest = otherDigest }, ErrDrift, []string{"profile_digest"}},
		{"other model", func(r *Record) { r.Model = "gpt-5" }, ErrDrift, []string{"model"}},
		{"other permission mode", func(r *Record) { r.PermissionMode = DenyAll }, ErrDrift, []string{"permission_mode"}},
		{"other skills", func(r *Record) { r.SkillsDigest = otherDigest }, ErrDrift, []string{"skills_digest"}},
		{"no skills recorded", func(r *Record) { r.SkillsDigest = "" }, ErrDrift, []string{"skills_digest"}},
		{"v1 record", func(r *Record) { r.Schema, r.SkillsDigest = SchemaV1, "" }, ErrDrift, []string{"skills_digest"}},
		{"v1 record and another model", func(r *Record) { r.Schema, r.SkillsDigest, r.Model = SchemaV1, "", "m" }, ErrDrift, []string{"skills_digest", "model"}},
		{"v1 record with a skills digest", func(r *Record) { r.Schema = SchemaV1 }, ErrMalformedRecord, nil},
		{"everything", func(r *Record) {
			r.SessionID, r.WorkspaceDigest, r.ProfileDigest, r.SkillsDigest, r.Model, r.PermissionMode = "s", otherDigest, otherDigest, otherDigest, "m", ApproveAll
		}, ErrDrift, []string{"session_id", "workspace_digest", "profile_digest", "skills_digest", "model", "permission_mode"}},
		{"absent permission mode", func(r *Record) { r.PermissionMode = "" }, ErrMalformedRecord, nil},
		{"missing schema", func(r *Record) { r.Schema = "" }, ErrUnsupportedSchema, nil},
		{"other schema", func(r *Record) { r.Schema = "airlock.session-identity.v0" }, ErrUnsupportedSchema, nil},
		{"bare profile digest", func(r *Record) { r.ProfileDigest = strings.TrimPrefix(b.ProfileDigest, "sha256:") }, ErrMalformedRecord, nil},
		{"empty record id", func(r *Record) { r.RecordID = "" }, ErrMalformedRecord, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := b.NewRecord(RecordIDs{RecordID: "rec-1", BackendSessionID: "backend-1", AgentSessionID: "agent-1"})
			tt.mutate(&r)
			err := b.Check(r)
			if tt.sentinel == nil {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, tt.sentinel)
			var de *DriftError
			if tt.fields != nil {
				require.ErrorAs(t, err, &de)
				assert.Equal(t, tt.fields, de.Fields)
			} else {
				assert.False(t, errors.As(err, &de), "a malformed record is not reported as drift")
			}
		})
	}
}

func TestCheckAcrossBindings(t *testing.T) {
	cfg := testConfig(t)
	b := mustBind(t, cfg)
	r := b.NewRecord(RecordIDs{RecordID: "rec-1", BackendSessionID: "backend-1", AgentSessionID: "agent-1"})

	other := cfg
	other.Workspace = realTempDir(t)
	other.Profile.AgentVersion = "9.9.9"
	other.PermissionMode = DenyAll
	b2 := mustBind(t, other)

	err := b2.Check(r)
	var de *DriftError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, []string{"workspace_digest", "profile_digest", "permission_mode"}, de.Fields)
}

func TestInvalidBindingNeverMatches(t *testing.T) {
	valid := mustBind(t, testConfig(t))
	tests := []struct {
		name string
		b    Binding
	}{
		{"zero binding", Binding{}},
		{"no session id", func() Binding { b := valid; b.SessionID = ""; return b }()},
		{"bare workspace digest", func() Binding {
			b := valid
			b.WorkspaceDigest = strings.TrimPrefix(b.WorkspaceDigest, "sha256:")
			return b
		}()},
		{"no profile digest", func() Binding { b := valid; b.ProfileDigest = ""; return b }()},
		{"no model", func() Binding { b := valid; b.Model = ""; return b }()},
		{"no permission mode", func() Binding { b := valid; b.PermissionMode = ""; return b }()},
		{"bare skills digest", func() Binding {
			b := valid
			b.SkillsDigest = strings.TrimPrefix(b.SkillsDigest, "sha256:")
			return b
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.ErrorIs(t, tt.b.Verify(tt.b.Identity()), ErrInvalidBinding)
			assert.ErrorIs(t, tt.b.Check(tt.b.NewRecord(RecordIDs{RecordID: "r", BackendSessionID: "b", AgentSessionID: "a"})), ErrInvalidBinding)
		})
	}
}

func TestDriftErrorIs(t *testing.T) {
	err := error(&DriftError{Fields: []string{"model"}})
	assert.ErrorIs(t, err, ErrDrift)
	assert.NotErrorIs(t, err, ErrMalformedRecord)
	assert.Equal(t, "session: identity drift in model: the session was created under a different binding; start a fresh session", err.Error())
}

// TestCheckV1RecordFailsClosed: a record written before skills_digest
// existed is read (its format is closed and valid) but never resumed, even
// by a binding without skills, and the drift says why.
func TestCheckV1RecordFailsClosed(t *testing.T) {
	cfg := testConfig(t)
	cfg.SkillsDigest = ""
	b := mustBind(t, cfg)
	r := b.NewRecord(RecordIDs{RecordID: "rec-1", BackendSessionID: "backend-1", AgentSessionID: "agent-1"})
	require.NoError(t, b.Check(r), "the v2 record of a binding without skills resumes")
	r.Schema = SchemaV1
	data, err := r.Encode()
	require.NoError(t, err)
	decoded, err := DecodeRecord(data)
	require.NoError(t, err)
	require.Equal(t, r, decoded)

	err = b.Check(decoded)
	require.ErrorIs(t, err, ErrDrift)
	var de *DriftError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, &DriftError{Fields: []string{"skills_digest"}, Unproven: []string{"skills_digest"}, Schema: SchemaV1}, de)
	assert.Equal(t, "session: identity drift in skills_digest (the record, schema airlock.session-identity.v1, predates skills_digest and cannot prove it): "+
		"the session was created under a different binding; start a fresh session", err.Error())
}
