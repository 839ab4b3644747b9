package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/airlockdev/airlock/internal/sshdtest"
	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/stage/remote"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
)

// TestMain runs the command itself when TestExitStatus re-executes the
// test binary.
func TestMain(m *testing.M) {
	if os.Getenv("AIRLOCK_EXAMPLE_STAGE_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func writeSource(t *testing.T) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "skills")
	for name, content := range map[string]string{"SKILL.md": "# s\n", "a/b.txt": "bee", "run.sh": "#!/bin/sh\n"} {
		p := filepath.Join(src, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(src, "link")))
	return src
}

// runJSON runs the command with -json and decodes its report.
func runJSON(t *testing.T, sshCfg *remote.Config, args ...string) report {
	t.Helper()
	var out, errOut bytes.Buffer
	require.NoError(t, run(context.Background(), append(args, "-json"), &out, &errOut, sshCfg))
	var r report
	dec := json.NewDecoder(&out)
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&r))
	assert.Empty(t, errOut.String())
	return r
}

// roundTrip stages, stages again unchanged, and stages again after one
// file changed, checking the copy in hostDest (DEST as seen on the host).
func roundTrip(t *testing.T, dest, hostDest, wantPath string, sshCfg *remote.Config) {
	src := writeSource(t)
	args := []string{"-src", src, "-to", dest, "-state", filepath.Join(t.TempDir(), "state")}

	first := runJSON(t, sshCfg, args...)
	assert.Equal(t, wantPath, first.Path)
	assert.Equal(t, 3, first.Files)
	assert.Equal(t, 3, first.Sent)
	assert.Equal(t, int64(3+4+10), first.Bytes)
	assert.Equal(t, 1, first.Skipped, "the link is left out")
	assert.False(t, first.Reused)
	assert.Contains(t, first.Digest, "sha256:")
	assert.Positive(t, first.Seconds)
	got, err := os.ReadFile(filepath.Join(hostDest, "skills", "a", "b.txt"))
	require.NoError(t, err)
	assert.Equal(t, "bee", string(got))

	again := runJSON(t, sshCfg, args...)
	assert.True(t, again.Reused)
	assert.Equal(t, 0, again.Sent)
	assert.Equal(t, first.Digest, again.Digest)

	require.NoError(t, os.WriteFile(filepath.Join(src, "a", "b.txt"), []byte("wasp"), 0o644))
	changed := runJSON(t, sshCfg, args...)
	assert.False(t, changed.Reused)
	assert.Equal(t, 3, changed.Files)
	assert.Equal(t, 1, changed.Sent, "only the changed file crosses")
	assert.NotEqual(t, first.Digest, changed.Digest)
	got, err = os.ReadFile(filepath.Join(hostDest, "skills", "a", "b.txt"))
	require.NoError(t, err)
	assert.Equal(t, "wasp", string(got))
}

func TestLocal(t *testing.T) {
	dest := filepath.Join(t.TempDir(), "rt")
	roundTrip(t, dest, dest, filepath.Join(dest, "skills"), nil)
}

func TestSSH(t *testing.T) {
	srv := remotetest.NewServer(t)
	cfg := srv.Config()
	dest := "ssh://" + cfg.User + "@" + srv.Addr() + srv.Dir() + "/rt"
	roundTrip(t, dest, filepath.Join(srv.Dir(), "rt"), dest+"/skills", &cfg)
}

func TestTextOutput(t *testing.T) {
	src := writeSource(t)
	dest := filepath.Join(t.TempDir(), "rt")
	var out, errOut bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-src", src, "-to", dest, "-name", "tools", "-state", t.TempDir()}, &out, &errOut, nil))
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	require.Len(t, lines, 6, out.String())
	assert.Equal(t, "staged  "+filepath.Join(dest, "tools"), lines[0])
	assert.Regexp(t, `^digest  sha256:[0-9a-f]{64}$`, lines[1])
	assert.Equal(t, "files   3 (sent 3, links and special files left out 1)", lines[2])
	assert.Equal(t, "bytes   17", lines[3])
	assert.Equal(t, "reused  false", lines[4])
	assert.Regexp(t, `^took    [0-9.]+(ms|s)$`, lines[5])
	// stderr is not a terminal: progress comes as plain lines (progress_test.go).
	assert.Regexp(t, `^(progress tools \d+% \(\d/3 files, \d+/17 bytes\)\n)*progress tools 100% \(3/3 files, 17/17 bytes\)\n$`, errOut.String())
	assert.FileExists(t, filepath.Join(dest, "tools", "SKILL.md"))
}

func TestLinksFlag(t *testing.T) {
	src := writeSource(t)
	for _, links := range []string{"reject", "within"} {
		t.Run(links, func(t *testing.T) {
			err := run(context.Background(), []string{"-src", src, "-to", filepath.Join(t.TempDir(), "rt"), "-links", links, "-state", t.TempDir()}, new(bytes.Buffer), new(bytes.Buffer), nil)
			assert.ErrorIs(t, err, stage.ErrLink, "the link leaves -src")
		})
	}
	require.NoError(t, os.Remove(filepath.Join(src, "link")))
	require.NoError(t, os.Symlink("a/b.txt", filepath.Join(src, "link")))
	r := runJSON(t, nil, "-src", src, "-to", filepath.Join(t.TempDir(), "rt"), "-links", "within", "-state", t.TempDir())
	assert.Equal(t, 4, r.Files, "-links within follows a link that stays inside -src")
	assert.Equal(t, 0, r.Skipped)
}

// TestSSHConfigFlag dials remotetest as a user's ssh configuration
// (-ssh-config) says, with no injected configuration: the host key is
// checked against the file's UserKnownHostsFile, and the file's key is
// offered as the user the destination names.
func TestSSHConfigFlag(t *testing.T) {
	srv := remotetest.NewServer(t)
	dir := t.TempDir()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	block, err := ssh.MarshalPrivateKey(priv, "")
	require.NoError(t, err)
	key := filepath.Join(dir, "id_ed25519")
	require.NoError(t, os.WriteFile(key, pem.EncodeToMemory(block), 0o600))
	host, port, err := net.SplitHostPort(srv.Addr())
	require.NoError(t, err)
	config := func(known string) string {
		f := filepath.Join(t.TempDir(), "config")
		require.NoError(t, os.WriteFile(f, []byte("Host sandbox\n  HostName "+host+"\n  Port "+port+"\n  IdentityFile "+key+
			"\n  IdentitiesOnly yes\n  UserKnownHostsFile "+known+"\n  GlobalKnownHostsFile none\n"), 0o600))
		return f
	}
	empty := filepath.Join(dir, "empty_known_hosts")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	known := filepath.Join(dir, "known_hosts")
	require.NoError(t, os.WriteFile(known, []byte(knownhosts.Line([]string{knownhosts.Normalize(srv.Addr())}, srv.HostKey())+"\n"), 0o600))
	dest := "ssh://someone@sandbox" + srv.Dir() + "/rt"
	args := []string{"-src", writeSource(t), "-to", dest, "-state", filepath.Join(dir, "state")}

	err = run(context.Background(), append(args, "-ssh-config", config(empty)), new(bytes.Buffer), new(bytes.Buffer), nil)
	assert.ErrorIs(t, err, remote.ErrUnknownHost)
	err = run(context.Background(), append(args, "-ssh-config", config(known)), new(bytes.Buffer), new(bytes.Buffer), nil)
	require.Error(t, err, "the host key passes; the unknown client key is refused")
	assert.NotErrorIs(t, err, remote.ErrUnknownHost)
	assert.NotErrorIs(t, err, remote.ErrHostKeyMismatch)
	assert.Contains(t, err.Error(), `"someone"`, "the error names the user from -to")
	assert.Contains(t, err.Error(), srv.Addr(), "the address comes from the file")
	assert.NoDirExists(t, filepath.Join(srv.Dir(), "rt"))
}

// TestSSHD stages into a real sshd with nothing but flags: the host alias
// in -to and the configuration file that names it.
func TestSSHD(t *testing.T) {
	srv := sshdtest.Start(t)
	config := filepath.Join(t.TempDir(), "config")
	require.NoError(t, os.WriteFile(config, []byte(srv.SSHConfig("sandbox")), 0o600))
	src := writeSource(t)
	var out, errOut bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-src", src, "-to", "ssh://sandbox" + srv.Dir() + "/rt", "-ssh-config", config,
		"-state", t.TempDir(), "-json"}, &out, &errOut, nil), "sshd log:\n%s", srv.Log())
	var r report
	require.NoError(t, json.Unmarshal(out.Bytes(), &r))
	assert.Equal(t, "ssh://sandbox"+srv.Dir()+"/rt/skills", r.Path)
	assert.Equal(t, 3, r.Sent)
	got, err := os.ReadFile(filepath.Join(srv.Dir(), "rt", "skills", "a", "b.txt"))
	require.NoError(t, err)
	assert.Equal(t, "bee", string(got))
}

func TestUsageErrors(t *testing.T) {
	src := writeSource(t)
	state := t.TempDir()
	insecure := filepath.Join(state, "insecure_config")
	require.NoError(t, os.WriteFile(insecure, []byte("Host h\n  StrictHostKeyChecking no\n"), 0o600))
	usage := "usage: stage -src DIR -to DEST [-name NAME] [-links skip|reject|within] [-json] [-state DIR] [-ssh-config FILE]"
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"NoSource", []string{"-to", "/tmp/x"}, usage},
		{"NoDest", []string{"-src", src}, usage},
		{"ExtraArg", []string{"-src", src, "-to", "/tmp/x", "more"}, usage},
		{"UnknownFlag", []string{"-frobnicate"}, "flag provided but not defined: -frobnicate"},
		{"BadLinks", []string{"-src", src, "-to", "/tmp/x", "-links", "follow"}, `-links "follow": want skip, reject or within`},
		{"RootDest", []string{"-src", src, "-to", "/"}, "-to /: pick a directory below /"},
		{"SSHRelative", []string{"-src", src, "-to", "ssh://u@h:22rt"}, `-to: parse "ssh://u@h:22rt": invalid port ":22rt" after host`},
		{"SSHNotClean", []string{"-src", src, "-to", "ssh://u@h/a/../b"}, `-to "ssh://u@h/a/../b": the path "/a/../b" must be absolute, clean and below /`},
		{"SSHSlash", []string{"-src", src, "-to", "ssh://u@h/"}, `-to "ssh://u@h/": the path "/" must be absolute, clean and below /`},
		{"SSHPassword", []string{"-src", src, "-to", "ssh://u:pw@h/rt"}, `-to "ssh://u:pw@h/rt": want ssh://[user@]host[:port]/abs/path (no password, query or fragment)`},
		{"SSHMissingConfig", []string{"-src", src, "-to", "ssh://u@h/rt", "-ssh-config", filepath.Join(state, "noconfig")},
			"remote: reading ssh config: open " + filepath.Join(state, "noconfig") + ": no such file or directory"},
		{"SSHInsecureConfig", []string{"-src", src, "-to", "ssh://u@h/rt", "-ssh-config", insecure},
			`remote: ssh config for host "h": StrictHostKeyChecking no would trust any host key, so a machine in the middle could read and change everything sent; remove that line for this host, or set it to yes (trust the keys known_hosts lists) or accept-new (remember a new host's key, refuse a changed one)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := run(context.Background(), append(c.args, "-state", state), new(bytes.Buffer), new(bytes.Buffer), nil)
			assert.EqualError(t, err, c.want)
		})
	}
}

// TestExitStatus runs the command as a process: a failure is one line on
// stderr and exit status 1.
func TestExitStatus(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	missing := filepath.Join(t.TempDir(), "missing")
	cmd := exec.Command(exe, "-src", missing, "-to", filepath.Join(t.TempDir(), "rt"), "-state", t.TempDir())
	cmd.Env = append(os.Environ(), "AIRLOCK_EXAMPLE_STAGE_MAIN=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 1, ee.ExitCode())
	assert.Empty(t, stdout.String())
	line := stderr.String()
	assert.Equal(t, 1, strings.Count(line, "\n"), "one line: %q", line)
	assert.Equal(t, "stage: invalid asset: asset \"missing\": lstat "+missing+": no such file or directory\n", line)
}
