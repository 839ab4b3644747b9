package session_test

// Attack tests written from go doc and issue 20 only: the skill set bound
// into the session (Config.SkillsDigest, skills_digest in the record).

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/session"
	"github.com/airlockdev/airlock/skills"
)

type a20Env struct {
	root, ws, state string
	store           *session.Store
	fs              afero.Fs
	recDir          string
}

func a20New(t *testing.T) *a20Env {
	t.Helper()
	root := t.TempDir()
	e := &a20Env{root: root, ws: filepath.Join(root, "ws"), state: filepath.Join(root, "state"), fs: afero.NewOsFs(), recDir: filepath.Join(root, "records")}
	require.NoError(t, os.Mkdir(e.ws, 0o755))
	require.NoError(t, os.Mkdir(e.state, 0o755))
	e.store = session.NewStore(e.fs, e.recDir)
	return e
}

func (e *a20Env) bind(t *testing.T, digest string) session.Binding {
	t.Helper()
	b, err := session.Bind(session.Config{SessionID: "sess-1", Workspace: e.ws, StateDir: e.state,
		Profile: session.Profile{Agent: "claude-code", Model: "anthropic/m"}, Model: "anthropic/m",
		PermissionMode: session.ApproveReads, SkillsDigest: digest})
	require.NoError(t, err)
	return b
}

func (e *a20Env) skill(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(e.root, dir, name)
	require.NoError(t, os.MkdirAll(p, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(p, "SKILL.md"), []byte("---\nname: "+name+"\ndescription: "+body+"\n---\n"), 0o644))
	return p
}

func (e *a20Env) digest(t *testing.T, state string, src ...skills.Source) string {
	t.Helper()
	b, err := skills.Materialize(context.Background(), filepath.Join(e.root, state), src)
	require.NoError(t, err)
	return b.Identity.Digest
}

func (e *a20Env) resume(t *testing.T, b session.Binding) session.Resumption {
	t.Helper()
	res, err := e.store.Resume(context.Background(), b)
	require.NoError(t, err)
	return res
}

func TestAttackSkillChangesDrift(t *testing.T) {
	e := a20New(t)
	a := e.skill(t, "src", "pdf", "Makes PDFs.")
	base := e.digest(t, "s0", skills.Source{Key: "acme/pdf", Name: "pdf", Dir: a})
	bb := e.bind(t, base)
	require.NoError(t, e.store.Save(context.Background(), bb.NewRecord(session.RecordIDs{RecordID: "r", BackendSessionID: "b", AgentSessionID: "a"})))

	// The same skill copied elsewhere on the host, materialized under another
	// state directory: same digest, same key, resumed.
	moved := e.skill(t, "elsewhere", "pdf", "Makes PDFs.")
	same := e.digest(t, "s1", skills.Source{Key: "acme/pdf", Name: "pdf", Dir: moved})
	assert.Equal(t, base, same, "the digest must not depend on the source's host path")
	assert.Equal(t, bb.Key, e.bind(t, same).Key)
	assert.Nil(t, e.resume(t, e.bind(t, same)).Fresh)

	changes := map[string]func() string{
		"one byte": func() string {
			return e.digest(t, "s2", skills.Source{Key: "acme/pdf", Name: "pdf", Dir: e.skill(t, "c1", "pdf", "Makes PDFS.")})
		},
		"another key": func() string {
			return e.digest(t, "s3", skills.Source{Key: "acme/pdf2", Name: "pdf", Dir: a})
		},
		"an added file": func() string {
			d := e.skill(t, "c2", "pdf", "Makes PDFs.")
			require.NoError(t, os.WriteFile(filepath.Join(d, "extra.md"), []byte("x"), 0o644))
			return e.digest(t, "s4", skills.Source{Key: "acme/pdf", Name: "pdf", Dir: d})
		},
		"a mode": func() string {
			d := e.skill(t, "c3", "pdf", "Makes PDFs.")
			require.NoError(t, os.Chmod(filepath.Join(d, "SKILL.md"), 0o755))
			return e.digest(t, "s5", skills.Source{Key: "acme/pdf", Name: "pdf", Dir: d})
		},
		"no skill": func() string { return "" },
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			d := change()
			assert.NotEqual(t, base, d)
			nb := e.bind(t, d)
			assert.NotEqual(t, bb.Key, nb.Key)
			res := e.resume(t, nb)
			require.NotNil(t, res.Fresh)
			assert.Equal(t, session.Drifted, res.Fresh.Reason)
			assert.Equal(t, []string{"skills_digest"}, res.Fresh.Fields)
			var de *session.DriftError
			require.ErrorAs(t, res.Fresh.Err, &de)
			assert.Contains(t, de.Error(), "skills_digest")
			assert.Nil(t, de.Unproven)
			err := nb.Verify(bb.Identity())
			assert.ErrorIs(t, err, session.ErrDrift)
		})
	}
}

func a20Record(schema string, extra map[string]any, drop ...string) map[string]any {
	r := map[string]any{
		"schema": schema, "session_id": "sess-1", "record_id": "r", "backend_session_id": "b", "agent_session_id": "a",
		"profile_digest": "", "workspace_digest": "", "skills_digest": "", "model": "anthropic/m", "permission_mode": "approve-reads",
	}
	for k, v := range extra {
		r[k] = v
	}
	for _, k := range drop {
		delete(r, k)
	}
	return r
}

// a20Good returns a valid v2 record of b as a map.
func a20Good(t *testing.T, b session.Binding) map[string]any {
	t.Helper()
	raw, err := b.NewRecord(session.RecordIDs{RecordID: "r", BackendSessionID: "b", AgentSessionID: "a"}).Encode()
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	return m
}

func TestAttackV1RecordsFailClosed(t *testing.T) {
	e := a20New(t)
	for _, digest := range []string{"", "sha256:" + strings.Repeat("ab", 32)} {
		b := e.bind(t, digest)
		v1 := a20Good(t, b)
		v1["schema"] = session.SchemaV1
		delete(v1, "skills_digest")
		raw, err := json.Marshal(v1)
		require.NoError(t, err)
		rec, err := session.DecodeRecord(raw)
		require.NoError(t, err, "a v1 record decodes")
		assert.Equal(t, session.SchemaV1, rec.Schema)
		err = b.Check(rec)
		var de *session.DriftError
		require.ErrorAs(t, err, &de, "digest %q: a v1 record never resumes", digest)
		assert.Equal(t, []string{"skills_digest"}, de.Unproven)
		assert.Contains(t, de.Fields, "skills_digest")

		// Through the Store, written on disk as a v1 writer did.
		require.NoError(t, e.store.Save(context.Background(), b.NewRecord(session.RecordIDs{RecordID: "r", BackendSessionID: "b", AgentSessionID: "a"})))
		path := a20RecordPath(t, e)
		require.NoError(t, os.WriteFile(path, raw, 0o600))
		res := e.resume(t, b)
		require.NotNil(t, res.Fresh, "a v1 record on disk was resumed")
		assert.Equal(t, session.Drifted, res.Fresh.Reason)
		assert.Equal(t, []string{"skills_digest"}, res.Fresh.Fields)
		_, err = e.store.Load(context.Background(), b)
		assert.ErrorIs(t, err, session.ErrDrift)

		// v1 with a skills_digest key: unknown in v1.
		v1["skills_digest"] = digest
		raw, _ = json.Marshal(v1)
		_, err = session.DecodeRecord(raw)
		assert.ErrorIs(t, err, session.ErrUnknownField)
	}
}

func a20RecordPath(t *testing.T, e *a20Env) string {
	t.Helper()
	entries, err := os.ReadDir(e.recDir)
	require.NoError(t, err)
	var files []string
	for _, en := range entries {
		if strings.HasSuffix(en.Name(), ".json") && !strings.HasPrefix(en.Name(), ".") {
			files = append(files, en.Name())
		}
	}
	require.Len(t, files, 1)
	return filepath.Join(e.recDir, files[0])
}

func TestAttackMalformedSkillsDigestInRecords(t *testing.T) {
	e := a20New(t)
	good := "sha256:" + strings.Repeat("0f", 32)
	b := e.bind(t, good)
	hex64 := strings.Repeat("0f", 32)
	for name, v := range map[string]any{
		"upper hex":      "sha256:" + strings.ToUpper(hex64),
		"upper prefix":   "SHA256:" + hex64,
		"other prefix":   "sha512:" + hex64,
		"bare hex":       hex64,
		"short":          "sha256:" + hex64[:63],
		"long":           "sha256:" + hex64 + "0",
		"padded":         " " + good,
		"newline":        good + "\n",
		"fullwidth":      "sha256:" + strings.Repeat("０", 64),
		"prefix only":    "sha256:",
		"null":           nil,
		"number":         123,
		"object":         map[string]any{"digest": good},
		"array":          []any{good},
		"non hex":        "sha256:" + strings.Repeat("zz", 32),
		"nul":            "sha256:" + hex64[:63] + "\x00",
		"colon inside":   "sha256::" + hex64[:63],
		"empty is fine?": "", // valid form, but drift against a binding with skills
	} {
		t.Run(name, func(t *testing.T) {
			m := a20Good(t, b)
			m["skills_digest"] = v
			raw, err := json.Marshal(m)
			require.NoError(t, err)
			_, err = session.DecodeRecord(raw)
			if v == "" {
				require.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, session.ErrMalformedRecord)
			}
			require.NoError(t, os.MkdirAll(e.recDir, 0o700))
			require.NoError(t, e.store.Save(context.Background(), b.NewRecord(session.RecordIDs{RecordID: "r", BackendSessionID: "b", AgentSessionID: "a"})))
			require.NoError(t, os.WriteFile(a20RecordPath(t, e), raw, 0o600))
			res := e.resume(t, b)
			require.NotNil(t, res.Fresh, "a record with skills_digest %v was resumed", v)
			if v == "" {
				assert.Equal(t, session.Drifted, res.Fresh.Reason)
			} else {
				assert.Equal(t, session.Undecodable, res.Fresh.Reason)
			}
		})
	}
}

func TestAttackRecordShapeAroundSkillsDigest(t *testing.T) {
	e := a20New(t)
	b := e.bind(t, "sha256:"+strings.Repeat("1a", 32))
	good := a20Good(t, b)
	goodRaw, err := json.Marshal(good)
	require.NoError(t, err)
	_, err = session.DecodeRecord(goodRaw)
	require.NoError(t, err)
	digest := good["skills_digest"].(string)
	base := strings.TrimSuffix(string(goodRaw), "}")
	rows := map[string]struct {
		raw  string
		want error
	}{
		"extra field":           {base + `,"skills":"x"}`, session.ErrUnknownField},
		"case variant":          {base + `,"Skills_Digest":"` + digest + `"}`, session.ErrUnknownField},
		"duplicate":             {base + `,"skills_digest":"` + digest + `"}`, session.ErrMalformedRecord},
		"escaped duplicate":     {base + `,"skills\u005fdigest":"` + digest + `"}`, session.ErrMalformedRecord},
		"v2 missing the digest": {mustJSON(t, a20Record(session.Schema, map[string]any{"profile_digest": good["profile_digest"], "workspace_digest": good["workspace_digest"]}, "skills_digest")), session.ErrMalformedRecord},
		"v3":                    {strings.Replace(string(goodRaw), session.Schema, "airlock.session-identity.v3", 1), session.ErrUnsupportedSchema},
		"trailing data":         {string(goodRaw) + `{}`, session.ErrMalformedRecord},
	}
	for name, row := range rows {
		t.Run(name, func(t *testing.T) {
			_, err := session.DecodeRecord([]byte(row.raw))
			assert.ErrorIs(t, err, row.want, "%s", row.raw)
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

func TestAttackBindRejectsMalformedSkillsDigest(t *testing.T) {
	e := a20New(t)
	hex64 := strings.Repeat("ab", 32)
	for _, d := range []string{"sha256:" + strings.ToUpper(hex64), "SHA256:" + hex64, hex64, "sha256:", " sha256:" + hex64, "sha256:" + hex64 + " ", "sha1:" + hex64[:40], "none", "\x00"} {
		_, err := session.Bind(session.Config{SessionID: "sess-1", Workspace: e.ws, StateDir: e.state,
			Profile: session.Profile{Model: "anthropic/m"}, Model: "anthropic/m", PermissionMode: session.ApproveReads, SkillsDigest: d})
		require.Error(t, err, "%q", d)
		assert.True(t, errors.Is(err, session.ErrInvalidSkillsDigest), "%q: %v", d, err)
		assert.Contains(t, err.Error(), "skills", "the message names the field: %v", err)
	}
}

func TestAttackVerifyClaimsAboutSkills(t *testing.T) {
	e := a20New(t)
	d := "sha256:" + strings.Repeat("cd", 32)
	withSkills, without := e.bind(t, d), e.bind(t, "")
	id := withSkills.Identity()
	id.SkillsDigest = ""
	var de *session.DriftError
	require.ErrorAs(t, withSkills.Verify(id), &de, "an absent claimed digest is a difference, never a wildcard")
	assert.Equal(t, []string{"skills_digest"}, de.Fields)
	require.ErrorAs(t, without.Verify(withSkills.Identity()), &de)
	assert.Equal(t, []string{"skills_digest"}, de.Fields)
	id = withSkills.Identity()
	id.SkillsDigest = strings.ToUpper(d)
	assert.ErrorIs(t, withSkills.Verify(id), session.ErrDrift)
	assert.NoError(t, withSkills.Verify(withSkills.Identity()))
}
