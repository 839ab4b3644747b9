package session

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/digest"
)

// a46IDs are the ids of every record these tests save.
var a46IDs = RecordIDs{RecordID: "r", BackendSessionID: "b", AgentSessionID: "a"}

// a46NotBound is the part of every ErrInvalidBinding message for a binding
// whose fields are well formed but not the ones Bind derives.
const a46NotBound = "the binding was changed after Bind or was not made by Bind; create the binding with Bind"

// a46Rekey sets b.Key to the key of b's other fields, as a forger who
// edits a field and recomputes the key would.
func a46Rekey(b Binding) Binding {
	b.Key = bindingKey(b)
	return b
}

// readOpenRecorder records how the store opens files for reading: every
// Open, and the flags of every OpenFile that neither writes nor creates.
type readOpenRecorder struct {
	afero.Fs
	opens     []string       // names passed to Open
	readFlags map[string]int // name → flags of its last OpenFile for reading
}

func (f *readOpenRecorder) Open(name string) (afero.File, error) {
	f.opens = append(f.opens, name)
	return f.Fs.Open(name)
}

func (f *readOpenRecorder) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	if !forWriting(flag) {
		f.readFlags[name] = flag
	}
	return f.Fs.OpenFile(name, flag, perm)
}

// TestAttack46FIFORecordIsUndecodable: a FIFO at the record's path is not
// a regular file. Resume answers Undecodable and Load fails with
// ErrMalformedRecord, both at once, instead of blocking in open(2) until a
// writer comes (which no context interrupts); a Save then replaces the
// FIFO with a record that resumes.
func TestAttack46FIFORecordIsUndecodable(t *testing.T) {
	b := mustBind(t, testConfig(t))
	dir := filepath.Join(realTempDir(t), "sessions")
	s := NewStore(afero.NewOsFs(), dir)
	rec := b.NewRecord(a46IDs)
	require.NoError(t, s.Save(t.Context(), rec))
	p := s.path(b.SessionID)
	require.NoError(t, os.Remove(p))
	require.NoError(t, syscall.Mkfifo(p, 0o600))

	// within runs call with a 2 s context and fails the test if it has not
	// returned 3 s later; it then opens the FIFO for writing, which lets a
	// reader blocked in open(2) go on, so that call ends.
	within := func(what string, call func(ctx context.Context)) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		done := make(chan struct{})
		go func() {
			defer close(done)
			call(ctx)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Errorf("%s blocks on a FIFO record past its 2 s context", what)
			if w, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				assert.NoError(t, w.Close())
			}
			<-done
		}
	}

	var got Resumption
	var err error
	within("Resume", func(ctx context.Context) { got, err = s.Resume(ctx, b) })
	require.NoError(t, err, "a FIFO is a reason to start fresh, not a failure")
	require.NotNil(t, got.Fresh, "a FIFO is never resumed")
	assert.Equal(t, Record{}, got.Record)
	assert.Equal(t, Undecodable, got.Fresh.Reason)
	assert.ErrorIs(t, got.Fresh.Err, ErrMalformedRecord)
	var pe *fs.PathError
	require.ErrorAs(t, got.Fresh.Err, &pe)
	assert.Equal(t, "session.Store.Load", pe.Op)
	assert.Equal(t, p, pe.Path)
	assert.Contains(t, got.Fresh.Err.Error(), "the record is a FIFO, not a regular file; remove it and start a fresh session")

	var loaded Record
	within("Load", func(ctx context.Context) { loaded, err = s.Load(ctx, b) })
	assert.Equal(t, Record{}, loaded)
	require.ErrorIs(t, err, ErrMalformedRecord)
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, p, pe.Path)
	assert.Contains(t, err.Error(), "is a FIFO, not a regular file")

	within("Save", func(ctx context.Context) { err = s.Save(ctx, rec) })
	require.NoError(t, err, "a save replaces the FIFO")
	fi, err := os.Lstat(p)
	require.NoError(t, err)
	assert.True(t, fi.Mode().IsRegular(), "the FIFO was replaced by a record: %v", fi.Mode())
	got, err = s.Resume(t.Context(), b)
	require.NoError(t, err)
	assert.Equal(t, Resumption{Record: rec}, got)
}

// TestAttack46StoreOpensForReadingWithoutBlocking: the store never uses a
// plain Open (a blocking open(2) on the OS file system); the record (Load,
// Resume) and the directory it syncs (Save) are opened read-only with
// O_NONBLOCK, which afero.MemMapFs accepts, so records on it still round
// trip.
func TestAttack46StoreOpensForReadingWithoutBlocking(t *testing.T) {
	b := mustBind(t, testConfig(t))
	fsys := &readOpenRecorder{Fs: afero.NewMemMapFs(), readFlags: map[string]int{}}
	s := NewStore(fsys, "/state")
	rec := b.NewRecord(a46IDs)
	require.NoError(t, s.Save(t.Context(), rec))
	got, err := s.Resume(t.Context(), b)
	require.NoError(t, err)
	assert.Equal(t, Resumption{Record: rec}, got)
	loaded, err := s.Load(t.Context(), b)
	require.NoError(t, err)
	assert.Equal(t, rec, loaded)

	assert.Empty(t, fsys.opens, "the store opens nothing with a plain (blocking) Open")
	record := filepath.Join("/state", label(b.SessionID)+".json")
	for _, name := range []string{record, "/state"} {
		flag, ok := fsys.readFlags[name]
		if assert.True(t, ok, "%s was not opened for reading with OpenFile", name) {
			assert.Equal(t, os.O_RDONLY, flag&(os.O_RDONLY|os.O_WRONLY|os.O_RDWR), "%s: read-only", name)
			assert.NotZero(t, flag&syscall.O_NONBLOCK, "%s: opened without O_NONBLOCK", name)
		}
	}
}

// TestAttack46BindingChangedAfterBindIsRefused: a Binding is one Bind
// produced or nothing. Changing any field after Bind (with or without
// recomputing the Key) makes Verify, Check, Resume and Load fail with
// ErrInvalidBinding and a message saying so, even with a record made
// from the changed binding itself; the untouched binding, a copy rebuilt
// field by field, and a SessionDir under another state directory (which
// Bind gives for another StateDir, with the same Key) still pass.
func TestAttack46BindingChangedAfterBindIsRefused(t *testing.T) {
	cfg := testConfig(t)
	b := mustBind(t, cfg)
	otherWS := realTempDir(t)
	otherDigest := "sha256:" + strings.Repeat("5e", 32)
	stateDirOf := filepath.Dir(filepath.Dir(b.SessionDir))

	tests := []struct {
		name   string
		change func(x *Binding)
		want   string // the part of the message naming what does not match
	}{
		{"session id", func(x *Binding) { x.SessionID = "session-2" }, "session directory"},
		{"session id and its session dir", func(x *Binding) {
			x.SessionID = "session-2"
			x.SessionDir = filepath.Join(stateDirOf, "sessions", label("session-2"))
		}, `key "airlock-`},
		{"workspace", func(x *Binding) { x.Workspace = otherWS }, "is not the digest of workspace"},
		{"workspace and its digest", func(x *Binding) {
			x.Workspace, x.WorkspaceDigest = otherWS, digest.Of([]byte(otherWS))
		}, `key "airlock-`},
		{"workspace digest", func(x *Binding) { x.WorkspaceDigest = otherDigest }, "is not the digest of workspace"},
		{"profile digest", func(x *Binding) { x.ProfileDigest = otherDigest }, `key "airlock-`},
		{"skills digest", func(x *Binding) { x.SkillsDigest = otherDigest }, `key "airlock-`},
		{"no skills", func(x *Binding) { x.SkillsDigest = "" }, `key "airlock-`},
		{"model", func(x *Binding) { x.Model = "claude-opus-4" }, `key "airlock-`},
		{"permission mode", func(x *Binding) { x.PermissionMode = ApproveAll }, `key "airlock-`},
		{"key", func(x *Binding) { x.Key = "airlock-" + strings.Repeat("0", 64) }, `key "airlock-`},
		{"key in upper case", func(x *Binding) { x.Key = strings.ToUpper(x.Key) }, `key "AIRLOCK-`},
		{"no key", func(x *Binding) { x.Key = "" }, `key ""`},
		{"session dir elsewhere", func(x *Binding) { x.SessionDir = "/tmp/elsewhere" }, `session directory "/tmp/elsewhere"`},
		{"no session dir", func(x *Binding) { x.SessionDir = "" }, `session directory ""`},
		{"session dir relative", func(x *Binding) { x.SessionDir = filepath.Join("sessions", label(x.SessionID)) }, "session directory"},
		{"session dir not under sessions", func(x *Binding) {
			x.SessionDir = filepath.Join(stateDirOf, "other", label(x.SessionID))
		}, "session directory"},
		{"session dir not clean", func(x *Binding) {
			x.SessionDir = stateDirOf + "/x/../sessions/" + label(x.SessionID)
		}, "session directory"},
		{"session dir under a root", func(x *Binding) { x.SessionDir = filepath.Join("/", "sessions", label(x.SessionID)) }, "session directory"},
		{"workspace root, rekeyed", func(x *Binding) {
			x.Workspace, x.WorkspaceDigest = "/", digest.Of([]byte("/"))
			*x = a46Rekey(*x)
		}, `workspace "/" is not an absolute, clean path below a filesystem root`},
		{"workspace relative, rekeyed", func(x *Binding) {
			x.Workspace, x.WorkspaceDigest = "ws", digest.Of([]byte("ws"))
			*x = a46Rekey(*x)
		}, `workspace "ws"`},
		{"workspace not clean, rekeyed", func(x *Binding) {
			x.Workspace = x.Workspace + "/."
			x.WorkspaceDigest = digest.Of([]byte(x.Workspace))
			*x = a46Rekey(*x)
		}, "is not an absolute, clean path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := b
			tt.change(&x)
			require.NotEqual(t, b, x)

			err := x.Verify(x.Identity())
			require.ErrorIs(t, err, ErrInvalidBinding)
			assert.NotErrorIs(t, err, ErrDrift)
			assert.Contains(t, err.Error(), "session: invalid session binding: ")
			assert.Contains(t, err.Error(), tt.want)
			assert.True(t, strings.HasSuffix(err.Error(), a46NotBound), err.Error())

			own := x.NewRecord(a46IDs)
			err = x.Check(own)
			require.ErrorIs(t, err, ErrInvalidBinding)
			assert.Contains(t, err.Error(), a46NotBound)

			fsys := afero.NewMemMapFs()
			s := NewStore(fsys, "/state")
			// The record of x itself, written as Save would (Save names the
			// file by the session id only and checks no binding).
			data, err := own.Encode()
			require.NoError(t, err)
			require.NoError(t, fsys.MkdirAll("/state", 0o700))
			require.NoError(t, afero.WriteFile(fsys, s.path(x.SessionID), data, 0o600))
			got, err := s.Resume(t.Context(), x)
			require.ErrorIs(t, err, ErrInvalidBinding, "a changed binding is a failure, never an answer")
			assert.Contains(t, err.Error(), a46NotBound)
			assert.Equal(t, Resumption{}, got)
			loaded, err := s.Load(t.Context(), x)
			require.ErrorIs(t, err, ErrInvalidBinding)
			assert.Equal(t, Record{}, loaded)
		})
	}

	t.Run("untouched, rebuilt field by field, or under another state dir", func(t *testing.T) {
		rebuilt := Binding{
			SessionID: b.SessionID, Workspace: b.Workspace, WorkspaceDigest: b.WorkspaceDigest,
			SessionDir: b.SessionDir, ProfileDigest: b.ProfileDigest, SkillsDigest: b.SkillsDigest,
			Model: b.Model, PermissionMode: b.PermissionMode, Key: b.Key,
		}
		other := cfg
		other.StateDir = realTempDir(t)
		moved := mustBind(t, other)
		require.Equal(t, b.Key, moved.Key, "the state directory is not in the key")
		relocated := b
		relocated.SessionDir = moved.SessionDir
		require.Equal(t, moved, relocated)
		for _, ok := range []Binding{b, rebuilt, relocated} {
			require.NoError(t, ok.Verify(ok.Identity()))
			rec := ok.NewRecord(a46IDs)
			require.NoError(t, ok.Check(rec))
			s := NewStore(afero.NewMemMapFs(), "/state")
			require.NoError(t, s.Save(t.Context(), rec))
			got, err := s.Resume(t.Context(), ok)
			require.NoError(t, err)
			assert.Equal(t, Resumption{Record: rec}, got)
		}
	})
}

// TestAttack46HandBuiltBindingRefused: a Binding literal with well-formed
// fields (as a host might restore one from its database) whose Key is not
// the one Bind derives is refused by Verify, Check and Resume, whether its
// workspace digest and session directory are consistent or not.
func TestAttack46HandBuiltBindingRefused(t *testing.T) {
	d := "sha256:" + strings.Repeat("a", 64)
	consistent := Binding{
		SessionID: "s1", Workspace: "/srv/ws", WorkspaceDigest: digest.Of([]byte("/srv/ws")),
		SessionDir: "/srv/state/sessions/" + label("s1"), ProfileDigest: d, SkillsDigest: "",
		Model: "m", PermissionMode: ApproveAll, Key: "airlock-" + strings.Repeat("0", 64),
	}
	arbitrary := consistent
	arbitrary.WorkspaceDigest, arbitrary.SessionDir = d, "/srv/state/sessions/s1-0000000000000000"
	for name, tc := range map[string]struct {
		b    Binding
		want string
	}{
		"consistent paths, arbitrary key": {consistent, `key "airlock-0000000000000000000000000000000000000000000000000000000000000000" is not the key Bind derives`},
		"arbitrary digest and dir":        {arbitrary, `workspace digest "` + d + `" is not the digest of workspace "/srv/ws"`},
	} {
		t.Run(name, func(t *testing.T) {
			err := tc.b.Verify(tc.b.Identity())
			require.ErrorIs(t, err, ErrInvalidBinding)
			assert.True(t, strings.HasPrefix(err.Error(), "session: invalid session binding: "), err.Error())
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), a46NotBound)

			rec := tc.b.NewRecord(a46IDs)
			require.ErrorIs(t, tc.b.Check(rec), ErrInvalidBinding)
			s := NewStore(afero.NewMemMapFs(), "/state")
			require.NoError(t, s.Save(t.Context(), rec), "the record itself is valid")
			got, err := s.Resume(t.Context(), tc.b)
			require.ErrorIs(t, err, ErrInvalidBinding)
			assert.Equal(t, Resumption{}, got)
		})
	}
}

// a46Blanks are models without a visible character: white space (ASCII,
// no-break, ideographic, line separator) and format characters (zero
// width space, word joiner, byte order mark), alone or mixed.
var a46Blanks = []string{" ", "   ", "\u00a0", "\u3000", "\u200b", "\u2060", "\ufeff", "\u2028", " \u200b\u00a0\u3000",
	// An outside attack (48): characters that render as nothing, though
	// neither white space nor format characters.
	"\u3164", "\u2800", "\u115f", "\u1160", "\uffa0", "\u034f", "\ufe0f", "\u3164\u2800 \ufe00"}

// TestAttack46BlankModelRefused: a model with no visible character is
// refused by Bind (ErrUnqualifiedModel, whether Config.Model repeats it or
// not), by Encode, DecodeRecord and Save (ErrMalformedRecord), by Resume
// (Undecodable), and in a binding (ErrInvalidBinding); a model with a
// visible character keeps binding and round-tripping, white space and
// format characters around it included.
func TestAttack46BlankModelRefused(t *testing.T) {
	for _, m := range a46Blanks {
		t.Run(fmt.Sprintf("%q", m), func(t *testing.T) {
			for _, configModel := range []string{"", m} {
				cfg := testConfig(t)
				cfg.Profile.Model, cfg.Model = m, configModel
				b, err := Bind(cfg)
				require.ErrorIs(t, err, ErrUnqualifiedModel)
				assert.Equal(t, Binding{}, b)
				assert.Equal(t, fmt.Sprintf("session: bind: unqualified session model: Profile.Model: %q has no visible character "+
					"(only white space, format and other invisible characters); set Profile.Model to the qualified model", m), err.Error())
			}

			good := mustBind(t, testConfig(t))
			rec := good.NewRecord(a46IDs)
			rec.Model = m
			_, err := rec.Encode()
			require.ErrorIs(t, err, ErrMalformedRecord)
			assert.Contains(t, err.Error(), fmt.Sprintf(`field "model": %q has no visible character`, m))

			data, err := good.NewRecord(a46IDs).Encode()
			require.NoError(t, err)
			modelJSON := `"model":"` + good.Model + `"`
			require.Contains(t, string(data), modelJSON)
			for _, spelled := range []string{m, fmt.Sprintf(`\u%04x`, []rune(m)[0]) + string([]rune(m)[1:])} {
				blank := strings.Replace(string(data), modelJSON, `"model":"`+spelled+`"`, 1)
				_, err = DecodeRecord([]byte(blank))
				require.ErrorIs(t, err, ErrMalformedRecord, blank)
				assert.Contains(t, err.Error(), `field "model"`)

				fsys := afero.NewMemMapFs()
				s := NewStore(fsys, "/state")
				require.NoError(t, fsys.MkdirAll("/state", 0o700))
				require.NoError(t, afero.WriteFile(fsys, s.path(good.SessionID), []byte(blank), 0o600))
				got, err := s.Resume(t.Context(), good)
				require.NoError(t, err)
				require.NotNil(t, got.Fresh)
				assert.Equal(t, Undecodable, got.Fresh.Reason)
				assert.ErrorIs(t, got.Fresh.Err, ErrMalformedRecord)
			}

			s := NewStore(afero.NewMemMapFs(), "/state")
			err = s.Save(t.Context(), rec)
			require.ErrorIs(t, err, ErrMalformedRecord)

			forged := good
			forged.Model = m
			forged = a46Rekey(forged)
			err = forged.Verify(forged.Identity())
			require.ErrorIs(t, err, ErrInvalidBinding)
			assert.Contains(t, err.Error(), "model: ")
			assert.Contains(t, err.Error(), "has no visible character")
		})
	}

	for _, m := range []string{"m", " m", "m ", "\u00a0m\u00a0", "m\u200b", "\u200bm", "\u3000claude\u3000", "<model & co>\u2028", "é", "\u3164m", "ㅤ한", "\u2801"} {
		t.Run(fmt.Sprintf("accepted %q", m), func(t *testing.T) {
			cfg := testConfig(t)
			cfg.Profile.Model, cfg.Model = m, ""
			b := mustBind(t, cfg)
			assert.Equal(t, m, b.Model)
			rec := b.NewRecord(a46IDs)
			s := NewStore(afero.NewMemMapFs(), "/state")
			require.NoError(t, s.Save(t.Context(), rec))
			got, err := s.Resume(t.Context(), b)
			require.NoError(t, err)
			assert.Equal(t, Resumption{Record: rec}, got)
		})
	}
}

// TestAttack46SaveFailuresArePathErrors: every Save failure of a usable
// store, an invalid record and a cancelled context included, is a
// *fs.PathError (Op "session.Store.Save") naming the path the record of
// its session id has, with the sentinel still reachable; nothing is
// written, and a previous record stays as it was.
func TestAttack46SaveFailuresArePathErrors(t *testing.T) {
	b := mustBind(t, testConfig(t))
	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	tests := []struct {
		name   string
		ctx    context.Context
		change func(r *Record)
		want   error
		says   string
	}{
		{"NUL in record id", t.Context(), func(r *Record) { r.RecordID = "r\x00" }, ErrMalformedRecord, `field "record_id": contains control character U+0000`},
		{"no backend session id", t.Context(), func(r *Record) { r.BackendSessionID = "" }, ErrMalformedRecord, `field "backend_session_id": empty`},
		{"no session id", t.Context(), func(r *Record) { r.SessionID = "" }, ErrMalformedRecord, `field "session_id": empty`},
		{"blank model", t.Context(), func(r *Record) { r.Model = "\u00a0" }, ErrMalformedRecord, `field "model": "\u00a0" has no visible character`},
		{"unknown permission mode", t.Context(), func(r *Record) { r.PermissionMode = "x" }, ErrMalformedRecord, `unknown permission mode "x"`},
		{"v1 with skills", t.Context(), func(r *Record) { r.Schema = SchemaV1 }, ErrMalformedRecord, `field "skills_digest"`},
		{"another schema", t.Context(), func(r *Record) { r.Schema = "airlock.session-identity.v3" }, ErrUnsupportedSchema, `schema "airlock.session-identity.v3"`},
		{"no schema", t.Context(), func(r *Record) { r.Schema = "" }, ErrUnsupportedSchema, "the record has no schema"},
		{"canceled context", canceled, func(*Record) {}, context.Canceled, "context canceled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := b.NewRecord(a46IDs)
			tt.change(&r)
			want := filepath.Join("/state", label(r.SessionID)+".json")

			fsys := afero.NewMemMapFs()
			err := NewStore(fsys, "/state").Save(tt.ctx, r)
			require.ErrorIs(t, err, tt.want)
			var pe *fs.PathError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, "session.Store.Save", pe.Op)
			assert.Equal(t, want, pe.Path)
			assert.True(t, strings.HasPrefix(err.Error(), "session.Store.Save "+want+": record not saved, the previous record is unchanged: "), err.Error())
			assert.Contains(t, err.Error(), tt.says)
			if tt.want != context.Canceled {
				assert.True(t, strings.HasSuffix(err.Error(), "; save a record made by Binding.NewRecord with every id set"), err.Error())
			}
			exists, err := afero.Exists(fsys, "/state")
			require.NoError(t, err)
			assert.False(t, exists, "a refused save creates nothing")

			if r.SessionID == b.SessionID {
				base := afero.NewMemMapFs()
				s := NewStore(base, "/state")
				old := b.NewRecord(RecordIDs{RecordID: "old", BackendSessionID: "b", AgentSessionID: "a"})
				require.NoError(t, s.Save(t.Context(), old))
				require.ErrorIs(t, s.Save(tt.ctx, r), tt.want)
				got, err := s.Load(t.Context(), b)
				require.NoError(t, err)
				assert.Equal(t, old, got, "the previous record is unchanged")
				assert.Equal(t, []string{label(b.SessionID) + ".json"}, dirNames(t, base, "/state"))
			}
		})
	}

	var nilStore *Store
	err := nilStore.Save(t.Context(), b.NewRecord(a46IDs))
	assert.EqualError(t, err, "session: store has no file system; create it with NewStore", "an unusable store has no path to name")
}
