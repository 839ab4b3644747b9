package session_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/session"
	"github.com/airlockdev/airlock/skills"
)

// TestSkillsDigestBindsTheSkillSet: the session follows the skill set and
// nothing else about the skills. Two bundles materialized from the same
// sources under different state directories, rendered for different
// sandbox roots, have one Identity.Digest and give one Key (so a warm
// session resumes); another selection gives another Key, and resuming under
// it is drift naming skills_digest.
func TestSkillsDigestBindsTheSkillSet(t *testing.T) {
	ctx := t.Context()
	root := t.TempDir()
	src := filepath.Join(root, "src")
	for _, n := range []string{"pdf", "review"} {
		require.NoError(t, os.MkdirAll(filepath.Join(src, n), 0o755))
		md := "---\nname: " + n + "\ndescription: Does " + n + " things.\n---\n"
		require.NoError(t, os.WriteFile(filepath.Join(src, n, "SKILL.md"), []byte(md), 0o644))
	}
	sel := []skills.Source{{Key: "acme/pdf", Name: "pdf", Dir: filepath.Join(src, "pdf")}, {Key: "acme/review", Name: "review", Dir: filepath.Join(src, "review")}}
	a, err := skills.Materialize(ctx, filepath.Join(root, "state-a"), sel)
	require.NoError(t, err)
	b, err := skills.Materialize(ctx, filepath.Join(root, "state-b"), sel)
	require.NoError(t, err)
	require.NotEqual(t, a.Dir, b.Dir)
	require.NotEqual(t, a.Prompt("/sandbox-1/.airlock/skills"), b.Prompt("/sandbox-2/.airlock/skills"))
	assert.Equal(t, a.Identity.Digest, b.Identity.Digest, "the digest holds no host or sandbox path")

	ws := filepath.Join(root, "ws")
	require.NoError(t, os.Mkdir(ws, 0o755))
	p := session.Profile{Agent: "claude-code", Model: "m"}
	bind := func(stateDir, skillsDigest string) session.Binding {
		t.Helper()
		require.NoError(t, os.MkdirAll(stateDir, 0o755))
		bd, err := session.Bind(session.Config{SessionID: "s", Workspace: ws, StateDir: stateDir, Profile: p, Model: "m",
			PermissionMode: session.ApproveReads, SkillsDigest: skillsDigest})
		require.NoError(t, err)
		return bd
	}
	ba, bb := bind(filepath.Join(root, "state-a"), a.Identity.Digest), bind(filepath.Join(root, "state-b"), b.Identity.Digest)
	assert.Equal(t, ba.Key, bb.Key)

	store := session.NewStore(afero.NewOsFs(), filepath.Join(root, "records"))
	require.NoError(t, store.Save(ctx, ba.NewRecord(session.RecordIDs{RecordID: "r", BackendSessionID: "b", AgentSessionID: "a"})))
	res, err := store.Resume(ctx, bb)
	require.NoError(t, err)
	assert.Nil(t, res.Fresh, "the same skills at another path resume")

	fewer, err := skills.Materialize(ctx, filepath.Join(root, "state-a"), sel[:1])
	require.NoError(t, err)
	bf := bind(filepath.Join(root, "state-a"), fewer.Identity.Digest)
	assert.NotEqual(t, ba.Key, bf.Key)
	res, err = store.Resume(ctx, bf)
	require.NoError(t, err)
	require.NotNil(t, res.Fresh)
	assert.Equal(t, session.Drifted, res.Fresh.Reason)
	assert.Equal(t, []string{"skills_digest"}, res.Fresh.Fields)
	assert.ErrorIs(t, res.Fresh.Err, session.ErrDrift)
}
