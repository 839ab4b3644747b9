package session

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readFaultFs fails every open for reading with errInjected: a real I/O
// failure, not a missing or bad record.
type readFaultFs struct{ afero.Fs }

func (f readFaultFs) Open(name string) (afero.File, error) {
	return nil, &fs.PathError{Op: "open", Path: name, Err: errInjected}
}

// OpenFile fails an open for reading (the store opens its records with
// OpenFile and O_NONBLOCK) and passes any other through.
func (f readFaultFs) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	if !forWriting(flag) {
		return f.Open(name)
	}
	return f.Fs.OpenFile(name, flag, perm)
}

// shortReadFs opens files whose reads fail midway.
type shortReadFs struct{ afero.Fs }

func (f shortReadFs) Open(name string) (afero.File, error) {
	file, err := f.Fs.Open(name)
	if err != nil {
		return nil, err
	}
	return failingRead{file}, nil
}

// OpenFile opens a file for reading as Open does and passes any other
// open through.
func (f shortReadFs) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	if !forWriting(flag) {
		return f.Open(name)
	}
	return f.Fs.OpenFile(name, flag, perm)
}

// forWriting reports whether open flags may write or create.
func forWriting(flag int) bool {
	return flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND) != 0
}

type failingRead struct{ afero.File }

func (failingRead) Read([]byte) (int, error) { return 0, errInjected }

func TestStoreResume(t *testing.T) {
	ctx := t.Context()
	cfg := testConfig(t)
	b := mustBind(t, cfg)
	rec := b.NewRecord(RecordIDs{RecordID: "rec-1", BackendSessionID: "backend-1", AgentSessionID: "agent-1"})
	good, err := rec.Encode()
	require.NoError(t, err)
	file := filepath.Join("/state", label(b.SessionID)+".json")
	drifted := cfg
	drifted.PermissionMode, drifted.Model, drifted.Profile.Model = ApproveAll, "claude-opus-4", "claude-opus-4"
	otherSkills, noSkills := cfg, cfg
	otherSkills.SkillsDigest, noSkills.SkillsDigest = "sha256:"+strings.Repeat("4d", 32), ""
	v1rec := rec
	v1rec.Schema, v1rec.SkillsDigest = SchemaV1, ""
	v1, err := v1rec.Encode()
	require.NoError(t, err)
	require.NotContains(t, string(v1), "skills_digest")

	cases := []struct {
		name    string
		plant   func(t *testing.T, fsys afero.Fs)
		binding Binding
		reason  FreshReason // "": resume
		fields  []string
		err     error // what StartFresh.Err wraps
	}{
		{"saved record", func(t *testing.T, fsys afero.Fs) {
			require.NoError(t, afero.WriteFile(fsys, file, good, 0o600))
		}, b, "", nil, nil},
		{"no record", func(t *testing.T, fsys afero.Fs) {}, b, NoRecord, nil, fs.ErrNotExist},
		{"no store directory either", nil, b, NoRecord, nil, fs.ErrNotExist},
		{"drift", func(t *testing.T, fsys afero.Fs) {
			require.NoError(t, afero.WriteFile(fsys, file, good, 0o600))
		}, mustBind(t, drifted), Drifted, []string{"profile_digest", "model", "permission_mode"}, ErrDrift},
		{"skill set changed", func(t *testing.T, fsys afero.Fs) {
			require.NoError(t, afero.WriteFile(fsys, file, good, 0o600))
		}, mustBind(t, otherSkills), Drifted, []string{"skills_digest"}, ErrDrift},
		{"skills no longer selected", func(t *testing.T, fsys afero.Fs) {
			require.NoError(t, afero.WriteFile(fsys, file, good, 0o600))
		}, mustBind(t, noSkills), Drifted, []string{"skills_digest"}, ErrDrift},
		{"v1 record: cannot prove the skill set", func(t *testing.T, fsys afero.Fs) {
			require.NoError(t, afero.WriteFile(fsys, file, v1, 0o600))
		}, b, Drifted, []string{"skills_digest"}, ErrDrift},
		{"v1 record, even without skills", func(t *testing.T, fsys afero.Fs) {
			require.NoError(t, afero.WriteFile(fsys, file, v1, 0o600))
		}, mustBind(t, noSkills), Drifted, []string{"skills_digest"}, ErrDrift},
		{"another schema", func(t *testing.T, fsys afero.Fs) {
			data := strings.Replace(string(good), Schema, "airlock.session-identity.v3", 1)
			require.NoError(t, afero.WriteFile(fsys, file, []byte(data), 0o600))
		}, b, Undecodable, nil, ErrUnsupportedSchema},
		{"unknown field", func(t *testing.T, fsys afero.Fs) {
			data := strings.Replace(string(good), "{", `{"resume":"always",`, 1)
			require.NoError(t, afero.WriteFile(fsys, file, []byte(data), 0o600))
		}, b, Undecodable, nil, ErrUnknownField},
		{"garbage", func(t *testing.T, fsys afero.Fs) {
			require.NoError(t, afero.WriteFile(fsys, file, []byte("\x00\xff not json"), 0o600))
		}, b, Undecodable, nil, ErrMalformedRecord},
		{"directory in place of the record", func(t *testing.T, fsys afero.Fs) {
			require.NoError(t, fsys.MkdirAll(file, 0o700))
		}, b, Undecodable, nil, ErrMalformedRecord},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fsys := afero.NewMemMapFs()
			if tc.plant != nil {
				require.NoError(t, fsys.MkdirAll("/state", 0o700))
				tc.plant(t, fsys)
			}
			got, err := NewStore(fsys, "/state").Resume(ctx, tc.binding)
			require.NoError(t, err, "a reason to start fresh is an answer, not an error")
			if tc.reason == "" {
				assert.Nil(t, got.Fresh)
				assert.Equal(t, rec, got.Record)
				return
			}
			require.NotNil(t, got.Fresh)
			assert.Equal(t, Record{}, got.Record)
			assert.Equal(t, tc.reason, got.Fresh.Reason)
			assert.Equal(t, tc.fields, got.Fresh.Fields)
			assert.ErrorIs(t, got.Fresh.Err, tc.err)
			var pe *fs.PathError
			require.ErrorAs(t, got.Fresh.Err, &pe)
			assert.Equal(t, file, pe.Path)

			// Load gives the same verdict as an error.
			_, lerr := NewStore(fsys, "/state").Load(ctx, tc.binding)
			assert.ErrorIs(t, lerr, tc.err)
		})
	}
}

func TestStoreResumeRealFailuresAreErrors(t *testing.T) {
	b := mustBind(t, testConfig(t))
	good := afero.NewMemMapFs()
	require.NoError(t, NewStore(good, "/state").Save(t.Context(), b.NewRecord(RecordIDs{RecordID: "r", BackendSessionID: "b", AgentSessionID: "a"})))
	canceled, cancel := context.WithCancel(t.Context())
	cancel()

	for _, tc := range []struct {
		name  string
		ctx   context.Context
		store *Store
		b     Binding
		want  error
	}{
		{"open fails", t.Context(), NewStore(readFaultFs{good}, "/state"), b, errInjected},
		{"read fails", t.Context(), NewStore(shortReadFs{good}, "/state"), b, errInjected},
		{"context canceled", canceled, NewStore(good, "/state"), b, context.Canceled},
		{"binding not made by Bind", t.Context(), NewStore(good, "/state"), Binding{}, ErrInvalidBinding},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.store.Resume(tc.ctx, tc.b)
			require.ErrorIs(t, err, tc.want)
			assert.Equal(t, Resumption{}, got)
		})
	}
	_, err := NewStore(nil, "/state").Resume(t.Context(), b)
	assert.EqualError(t, err, "session: store has no file system; create it with NewStore")
}

func TestStoreResumeOnDisk(t *testing.T) {
	b := mustBind(t, testConfig(t))
	dir := filepath.Join(t.TempDir(), "sessions")
	s := NewStore(afero.NewOsFs(), dir)
	got, err := s.Resume(t.Context(), b)
	require.NoError(t, err)
	require.NotNil(t, got.Fresh)
	assert.Equal(t, NoRecord, got.Fresh.Reason)

	rec := b.NewRecord(RecordIDs{RecordID: "r", BackendSessionID: "b", AgentSessionID: "a"})
	require.NoError(t, s.Save(t.Context(), rec))
	got, err = s.Resume(t.Context(), b)
	require.NoError(t, err)
	assert.Equal(t, Resumption{Record: rec}, got)
}
