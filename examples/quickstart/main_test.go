package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"

	"github.com/airlockdev/airlock/internal/sshdtest"
	"github.com/airlockdev/airlock/stage/remote"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
)

func TestQuickstart(t *testing.T) {
	var stdout, stderr bytes.Buffer
	sum, err := run(t.Context(), Options{JSON: true}, &stdout, &stderr)
	require.NoError(t, err, "stderr:\n%s", stderr.String())
	assert.True(t, strings.HasPrefix(sum.Sandbox, "remotetest 127.0.0.1:"), sum.Sandbox)
	checkSummary(t, sum, &stdout, &stderr)
}

// TestQuickstartOverSSHD runs the same steps the way -ssh ALIAS
// -ssh-config FILE does, against a real OpenSSH sshd (skipped, saying how
// to install it, when there is none) that the file names as "sandbox", and
// checks every step's result as TestQuickstart does; the remote workspace
// is removed afterwards.
func TestQuickstartOverSSHD(t *testing.T) {
	srv := sshdtest.Start(t)
	config := filepath.Join(t.TempDir(), "config")
	require.NoError(t, os.WriteFile(config, []byte(srv.SSHConfig("sandbox")), 0o600))
	o := Options{JSON: true, SSH: "sandbox", SSHConfig: config, RemoteDir: srv.Dir() + "/work"}
	var stdout, stderr bytes.Buffer
	sum, err := run(t.Context(), o, &stdout, &stderr)
	require.NoError(t, err, "stderr:\n%s\nsshd log:\n%s", stderr.String(), srv.Log())
	assert.Equal(t, "ssh "+srv.User()+"@"+srv.Addr(), sum.Sandbox)
	assert.Equal(t, o.RemoteDir, sum.RemoteDir)
	checkSummary(t, sum, &stdout, &stderr)
	assert.NoDirExists(t, o.RemoteDir, "the remote workspace is removed without -keep")
}

// checkSummary checks what every step of a -json run reported, and that the
// run printed it and one progress line per step.
func checkSummary(t *testing.T, sum *Summary, stdout, stderr *bytes.Buffer) {
	t.Helper()
	var printed Summary
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &printed), "-json prints the summary")
	assert.Equal(t, *sum, printed)
	lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
	require.Len(t, lines, 7, "one progress line per step:\n%s", stderr.String())
	for i, l := range lines {
		assert.True(t, strings.HasPrefix(l, "quickstart: "+string(rune('1'+i))+"/7 "), l)
	}
	assert.NoDirExists(t, sum.Dir, "the temporary directory is removed without -keep")

	sk := sum.Skills
	assert.Equal(t, []string{"code-review", "release-notes"}, sk.Kept)
	assert.Equal(t, map[string]string{"borrowed": "SKILL.md is a symbolic link; links are never followed"}, sk.Dropped)
	assert.Equal(t, map[string][]string{"code-review": {"refs/token"}}, sk.LeftOut)
	assert.True(t, sk.NoLink && sk.NoSecret)
	assert.True(t, strings.HasPrefix(sk.Identity, "sha256:"), sk.Identity)
	assert.Equal(t, sk.Identity, sk.IdentityMoved, "the identity holds no path")

	st := sum.Stage
	assert.Equal(t, sum.RemoteDir+"/.airlock", st.Root)
	assert.Equal(t, st.Root+"/skills", st.Path)
	assert.Equal(t, 5, st.Files, "code-review: SKILL.md, checklist.md, scripts/diffstat.sh; release-notes: SKILL.md, template.md")
	assert.Equal(t, st.Files, st.FirstSent)
	assert.True(t, st.AgainReused)
	assert.Equal(t, "code-review/checklist.md", st.Changed)
	assert.Equal(t, 1, st.ChangedSent)
	assert.False(t, st.ChangedReused)
	assert.True(t, st.NoLink && st.NoSecret)

	p := sum.Prompt
	assert.Equal(t, st.Path, p.SkillRoot)
	assert.Contains(t, p.Text, "\nSkill root: "+st.Path+"\n")
	assert.Equal(t, []string{st.Path + "/code-review/SKILL.md", st.Path + "/release-notes/SKILL.md"}, p.Files)
	assert.NotContains(t, p.Text, "borrowed")
	assert.NotContains(t, p.Text, filepath.Join(sum.Dir, "host"), "no host path in the prompt")

	se := sum.Session
	assert.True(t, strings.HasPrefix(se.Key, "airlock-"), se.Key)
	assert.Equal(t, "airlock.session-identity.v2", se.Schema)
	assert.True(t, se.Resumed)
	assert.Equal(t, "agent-9", se.AgentID)
	assert.Equal(t, []string{"profile_digest", "model"}, se.DriftFields)
	assert.True(t, strings.HasPrefix(se.SkillsDigest, "sha256:"), se.SkillsDigest)
	assert.NotEqual(t, sk.Identity, se.SkillsDigest, "bound to the bundle staged after the edit of step 2, whose prompt the agent gets")
	assert.Equal(t, []string{"skills_digest"}, se.SkillsDriftFields)
	assert.Contains(t, lines[3], "skill set changed (release-notes deselected): drifted [skills_digest]")

	w := sum.Workspace
	assert.Len(t, w.Round, 24)
	assert.Contains(t, w.Status, " M app.txt\n")
	assert.Contains(t, w.Status, "?? notes.txt\n")
	assert.Equal(t, p.Files[0], w.SkillRead, "the agent read the file the prompt names")
	assert.Positive(t, w.SkillBytes)
	assert.Len(t, w.Commit, 40)
	assert.Equal(t, "report.md", w.Report)

	d := sum.Deliverable
	assert.Len(t, d.AttachmentID, 36)
	assert.Equal(t, "applied", d.Disposition)
	assert.Positive(t, d.ByteSize)
	assert.Len(t, d.SHA256, 64)
	assert.Equal(t, "deliverable:"+d.AttachmentID, d.Citation, "the agent cites the tool's receipt")
	assert.True(t, d.Replayed && d.Accepted && d.ChildAccepted)
	assert.NotEqual(t, d.AttachmentID, d.ChildAttachmentID)
	assert.Equal(t, []string{"report.md"}, d.ChildAloneMissing)

	r := sum.Restore
	assert.Equal(t, 1, r.Commits)
	assert.Equal(t, w.Commit, r.Head)
	assert.Equal(t, []string{"CHANGELOG.md", "report.md"}, r.Updated)
	assert.Contains(t, r.Runtime, ".airlock/skills", "the staged skills are listed apart from refusals")
	assert.False(t, r.RuntimeDirHome)
	assert.True(t, r.RemotesEmpty)
}

// TestQuickstartKeep: -keep leaves the directory; without -json the prompt
// is printed.
func TestQuickstartKeep(t *testing.T) {
	var stdout, stderr bytes.Buffer
	sum, err := run(t.Context(), Options{Keep: true}, &stdout, &stderr)
	require.NoError(t, err, "stderr:\n%s", stderr.String())
	t.Cleanup(func() { _ = os.RemoveAll(sum.Dir) })
	assert.DirExists(t, filepath.Join(sum.Dir, "host", "workspace", ".git"))
	assert.Contains(t, stderr.String(), "quickstart: kept "+sum.Dir)
	assert.Equal(t, "| "+strings.ReplaceAll(strings.TrimSuffix(sum.Prompt.Text, "\n"), "\n", "\n| ")+"\n", stdout.String())
}

// TestQuickstartFailsNamingTheStep: fixtures that do not behave as the
// steps say fail the run, and the error names the step.
func TestQuickstartFailsNamingTheStep(t *testing.T) {
	fixtures := filepath.Join(t.TempDir(), "skills")
	require.NoError(t, os.CopyFS(fixtures, os.DirFS("../../testdata/skills")))
	// A second planted link, which step 1 does not expect.
	require.NoError(t, os.Symlink("../secret.txt", filepath.Join(fixtures, "release-notes", "key")))

	var stdout, stderr bytes.Buffer
	_, err := run(t.Context(), Options{Skills: fixtures, JSON: true}, &stdout, &stderr)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "step 1 (materialize): links left out map[code-review:[refs/token] release-notes:[key]]")
	assert.Empty(t, stdout.String(), "no summary for a failed run")
}

// TestSSHRefusals: -ssh goes through remote.LoadSSHConfig, so a host
// whose key known_hosts does not list is refused with the production
// *remote.HostKeyError, and a configuration that turns the check off is
// refused before anything is dialled.
func TestSSHRefusals(t *testing.T) {
	srv := remotetest.NewServer(t)
	dir := t.TempDir()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	block, err := ssh.MarshalPrivateKey(priv, "")
	require.NoError(t, err)
	key := filepath.Join(dir, "id_ed25519")
	require.NoError(t, os.WriteFile(key, pem.EncodeToMemory(block), 0o600))
	known := filepath.Join(dir, "known_hosts")
	require.NoError(t, os.WriteFile(known, nil, 0o600))
	host, port, err := net.SplitHostPort(srv.Addr())
	require.NoError(t, err)
	config := filepath.Join(dir, "config")
	require.NoError(t, os.WriteFile(config, []byte("Host sandbox\n  HostName "+host+"\n  Port "+port+"\n  IdentityFile "+key+
		"\n  IdentitiesOnly yes\n  UserKnownHostsFile "+known+"\n  GlobalKnownHostsFile none\nHost insecure\n  StrictHostKeyChecking no\n"), 0o600))

	var stdout, stderr bytes.Buffer
	_, err = run(t.Context(), Options{SSH: "sandbox", SSHConfig: config}, &stdout, &stderr)
	var he *remote.HostKeyError
	require.ErrorAs(t, err, &he)
	assert.ErrorIs(t, err, remote.ErrUnknownHost)
	assert.Equal(t, ssh.FingerprintSHA256(srv.HostKey()), he.Fingerprint)
	assert.True(t, strings.HasPrefix(err.Error(), "connect to the sandbox: remote: "+srv.Addr()+": host is not in known_hosts"), err.Error())

	_, err = run(t.Context(), Options{SSH: "insecure", SSHConfig: config}, &stdout, &stderr)
	assert.ErrorContains(t, err, `connect to the sandbox: remote: ssh config for host "insecure": StrictHostKeyChecking no would trust any host key`)
	assert.Empty(t, stdout.String())
}
