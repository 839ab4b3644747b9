package session

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/digest"
)

var (
	digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	keyRE    = regexp.MustCompile(`^airlock-[0-9a-f]{64}$`)
)

func testProfile() Profile {
	return Profile{
		Driver:           "acp",
		Protocol:         "acp/1",
		Agent:            "claude",
		AgentVersion:     "1.2.3",
		ServerPackage:    "@zed-industries/claude-code-acp",
		ServerVersion:    "0.5.0",
		CommandDigest:    "sha256:" + strings.Repeat("ab", 32),
		Model:            "claude-sonnet-4",
		PermissionPolicy: "workspace-write",
	}
}

// realTempDir returns t.TempDir with symbolic links resolved, so expected
// values compare with Bind's real paths on systems whose temp dir is a link.
func realTempDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	return d
}

// testConfig returns a valid Config over fresh workspace and state dirs.
func testConfig(t *testing.T) Config {
	t.Helper()
	root := realTempDir(t)
	ws := filepath.Join(root, "ws")
	rt := filepath.Join(root, "rt")
	require.NoError(t, os.Mkdir(ws, 0o755))
	require.NoError(t, os.Mkdir(rt, 0o755))
	p := testProfile()
	return Config{
		SessionID:      "session-1",
		Workspace:      ws,
		StateDir:       rt,
		Profile:        p,
		Model:          p.Model,
		PermissionMode: ApproveReads,
		SkillsDigest:   testSkillsDigest,
	}
}

func mustBind(t *testing.T, cfg Config) Binding {
	t.Helper()
	b, err := Bind(cfg)
	require.NoError(t, err)
	return b
}

func TestBindDerivesCanonicalBinding(t *testing.T) {
	cfg := testConfig(t)
	b := mustBind(t, cfg)

	assert.Equal(t, cfg.SessionID, b.SessionID)
	assert.Equal(t, cfg.Workspace, b.Workspace)
	assert.Equal(t, digest.Of([]byte(cfg.Workspace)), b.WorkspaceDigest)
	assert.Regexp(t, digestRE, b.WorkspaceDigest)
	assert.Equal(t, cfg.Profile.Digest(), b.ProfileDigest)
	assert.Equal(t, cfg.Model, b.Model)
	assert.Equal(t, cfg.PermissionMode, b.PermissionMode)
	assert.Equal(t, cfg.SkillsDigest, b.SkillsDigest)
	assert.Regexp(t, keyRE, b.Key)
	assert.Equal(t, filepath.Join(cfg.StateDir, "sessions", "session-1-"+digest.Hex([]byte("session-1"))[:16]), b.SessionDir)
	_, err := os.Lstat(b.SessionDir)
	assert.ErrorIs(t, err, fs.ErrNotExist, "Bind must not create the session directory")

	again := mustBind(t, cfg)
	assert.Equal(t, b, again, "Bind is deterministic")
}

func TestBindResolvesRealPaths(t *testing.T) {
	cfg := testConfig(t)
	want := mustBind(t, cfg)
	links := realTempDir(t)

	wsLink := filepath.Join(links, "ws-link")
	rtLink := filepath.Join(links, "rt-link")
	require.NoError(t, os.Symlink(cfg.Workspace, wsLink))
	require.NoError(t, os.Symlink(cfg.StateDir, rtLink))
	// A chain of links and a path with "..": still the same real directory.
	chain := filepath.Join(links, "chain")
	require.NoError(t, os.Symlink(wsLink, chain))
	sub := filepath.Join(cfg.Workspace, "sub")
	require.NoError(t, os.Mkdir(sub, 0o755))

	tests := []struct {
		name      string
		workspace string
		state     string
	}{
		{"workspace via symlink", wsLink, cfg.StateDir},
		{"state dir via symlink", cfg.Workspace, rtLink},
		{"both via symlink", wsLink, rtLink},
		{"workspace via symlink chain", chain, cfg.StateDir},
		{"workspace with dot-dot", sub + string(filepath.Separator) + "..", cfg.StateDir},
		{"workspace with trailing separator", cfg.Workspace + string(filepath.Separator), cfg.StateDir},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cfg
			c.Workspace, c.StateDir = tt.workspace, tt.state
			got := mustBind(t, c)
			assert.Equal(t, want, got)
			assert.Equal(t, cfg.Workspace, got.Workspace)
		})
	}
}

func TestBindRelativePathBecomesAbsolute(t *testing.T) {
	cfg := testConfig(t)
	want := mustBind(t, cfg)
	t.Chdir(filepath.Dir(cfg.Workspace))
	cfg.Workspace = filepath.Base(cfg.Workspace)
	got := mustBind(t, cfg)
	assert.Equal(t, want, got)
	assert.True(t, filepath.IsAbs(got.Workspace))
}

func TestBindRejectsBadDirectories(t *testing.T) {
	base := testConfig(t)
	dir := realTempDir(t)
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o600))
	fileLink := filepath.Join(dir, "file-link")
	require.NoError(t, os.Symlink(file, fileLink))
	rootLink := filepath.Join(dir, "root-link")
	require.NoError(t, os.Symlink("/", rootLink))
	dangling := filepath.Join(dir, "dangling")
	require.NoError(t, os.Symlink(filepath.Join(dir, "nowhere"), dangling))
	missing := filepath.Join(dir, "missing")

	tests := []struct {
		name   string
		path   string
		alsoIs error // an additional error the result must wrap, if any
		// workspaceOnly: a state directory is created there instead
		// (TestBindCreatesStateDir).
		workspaceOnly bool
		contains      string
	}{
		{name: "empty", path: "", contains: "blank"},
		{name: "blank", path: "  \t", contains: "blank"},
		{name: "does not exist", path: missing, alsoIs: fs.ErrNotExist, workspaceOnly: true},
		{name: "dangling symlink", path: dangling, alsoIs: fs.ErrNotExist},
		{name: "regular file", path: file, contains: "regular file"},
		{name: "symlink to regular file", path: fileLink, contains: "regular file"},
		{name: "filesystem root", path: "/", contains: "filesystem root"},
		{name: "symlink to filesystem root", path: rootLink, contains: "filesystem root"},
		{name: "root spelled with dot-dot", path: "/..", contains: "filesystem root"},
	}
	targets := []struct {
		name     string
		set      func(*Config, string)
		sentinel error
		other    error
	}{
		{"workspace", func(c *Config, p string) { c.Workspace = p }, ErrInvalidWorkspace, ErrInvalidStateDir},
		{"state dir", func(c *Config, p string) { c.StateDir = p }, ErrInvalidStateDir, ErrInvalidWorkspace},
	}
	for _, target := range targets {
		for _, tt := range tests {
			if tt.workspaceOnly && target.sentinel == ErrInvalidStateDir {
				continue
			}
			t.Run(target.name+"/"+tt.name, func(t *testing.T) {
				cfg := base
				target.set(&cfg, tt.path)
				b, err := Bind(cfg)
				require.Error(t, err)
				assert.Equal(t, Binding{}, b)
				assert.ErrorIs(t, err, target.sentinel)
				assert.NotErrorIs(t, err, target.other)
				if tt.alsoIs != nil {
					assert.ErrorIs(t, err, tt.alsoIs)
				}
				var pe *fs.PathError
				require.ErrorAs(t, err, &pe)
				assert.Equal(t, tt.path, pe.Path)
				assert.Contains(t, err.Error(), tt.contains)
				if tt.path != "" {
					assert.Contains(t, err.Error(), tt.path)
				}
				assert.NoDirExists(t, filepath.Join(dir, "nowhere"), "a dangling link's target is never created")
			})
		}
	}
}

func TestBindRejectsInvalidIdentity(t *testing.T) {
	tests := []struct {
		name     string
		mutate   func(*Config)
		sentinel error
	}{
		{"empty session id", func(c *Config) { c.SessionID = "" }, ErrInvalidSessionID},
		{"session id too long", func(c *Config) { c.SessionID = strings.Repeat("s", 241) }, ErrInvalidSessionID},
		{"session id with newline", func(c *Config) { c.SessionID = "a\nb" }, ErrInvalidSessionID},
		{"session id with NUL", func(c *Config) { c.SessionID = "a\x00b" }, ErrInvalidSessionID},
		{"session id with DEL", func(c *Config) { c.SessionID = "a\x7fb" }, ErrInvalidSessionID},
		{"session id with C1 control", func(c *Config) { c.SessionID = "a\u0085b" }, ErrInvalidSessionID},
		{"session id invalid UTF-8", func(c *Config) { c.SessionID = "a\xffb" }, ErrInvalidSessionID},
		{"unknown permission mode", func(c *Config) { c.PermissionMode = "approve-everything" }, ErrInvalidPermissionMode},
		{"absent permission mode", func(c *Config) { c.PermissionMode = "" }, ErrInvalidPermissionMode},
		{"permission mode wrong case", func(c *Config) { c.PermissionMode = "Approve-All" }, ErrInvalidPermissionMode},
		{"model differs from profile", func(c *Config) { c.Model = "gpt-5" }, ErrUnqualifiedModel},
		{"model set, profile model empty", func(c *Config) { c.Profile.Model = "" }, ErrUnqualifiedModel},
		{"model empty, profile model empty", func(c *Config) { c.Model, c.Profile.Model = "", "" }, ErrUnqualifiedModel},
		{"model empty, profile model too long", func(c *Config) { c.Model, c.Profile.Model = "", strings.Repeat("m", 241) }, ErrUnqualifiedModel},
		{"model empty, profile model with control character", func(c *Config) { c.Model, c.Profile.Model = "", "m\nx" }, ErrUnqualifiedModel},
		{"model differs from profile only in case", func(c *Config) { c.Model = strings.ToUpper(c.Profile.Model) }, ErrUnqualifiedModel},
		{"model too long", func(c *Config) { c.Model = strings.Repeat("m", 241); c.Profile.Model = c.Model }, ErrUnqualifiedModel},
		{"model with control character", func(c *Config) { c.Model = "m\tx"; c.Profile.Model = c.Model }, ErrUnqualifiedModel},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t)
			tt.mutate(&cfg)
			b, err := Bind(cfg)
			assert.ErrorIs(t, err, tt.sentinel)
			assert.Equal(t, Binding{}, b)
		})
	}
}

// TestBindModelHasOneSource pins that Profile.Model is the session's model:
// an empty Config.Model means it, and a Config.Model equal to it binds the
// very same session (same Binding, same Key).
func TestBindModelHasOneSource(t *testing.T) {
	for _, model := range []string{"claude-sonnet-4", "x", "openai/gpt-5 (2025-08)"} {
		t.Run(model, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.Profile.Model = model

			cfg.Model = ""
			implicit := mustBind(t, cfg)
			cfg.Model = model
			explicit := mustBind(t, cfg)

			assert.Equal(t, model, implicit.Model)
			assert.Equal(t, explicit, implicit, "an empty Config.Model must bind exactly as Config.Model = Profile.Model")
			assert.Equal(t, model, implicit.NewRecord(RecordIDs{}).Model)
			assert.Equal(t, model, implicit.Identity().Model)
		})
	}
}

func TestBindModelMismatchNamesBoth(t *testing.T) {
	cfg := testConfig(t)
	cfg.Model = "gpt-5"
	_, err := Bind(cfg)
	require.ErrorIs(t, err, ErrUnqualifiedModel)
	assert.EqualError(t, err, `session: bind: unqualified session model: Config.Model "gpt-5" differs from Profile.Model "claude-sonnet-4"; `+
		`leave Config.Model empty (it defaults to Profile.Model) or qualify the profile for this model`)

	cfg.Model, cfg.Profile.Model = "", ""
	_, err = Bind(cfg)
	require.ErrorIs(t, err, ErrUnqualifiedModel)
	assert.EqualError(t, err, "session: bind: unqualified session model: Profile.Model: empty; set Profile.Model to the qualified model")
}

func TestBindAcceptsBoundaryIDs(t *testing.T) {
	for _, id := range []string{"x", strings.Repeat("é", 120), "a/b:c d", "Sitzung-ß-🦀"} {
		cfg := testConfig(t)
		cfg.SessionID = id
		b := mustBind(t, cfg)
		assert.Equal(t, id, b.SessionID)
	}
}

func TestSessionDirsAreCollisionResistant(t *testing.T) {
	cfg := testConfig(t)
	ids := []string{"session-1", "session/1", "session_1", "session:1", "a/b", "a:b", "a_b",
		"../x", "..", ".", "...", strings.Repeat("x", 100), strings.Repeat("x", 101)}
	seen := map[string]string{}
	for _, id := range ids {
		c := cfg
		c.SessionID = id
		b := mustBind(t, c)
		sessions := filepath.Join(c.StateDir, "sessions")
		assert.Equal(t, sessions, filepath.Dir(b.SessionDir), "id %q must stay one level under sessions/", id)
		base := filepath.Base(b.SessionDir)
		assert.Regexp(t, `^[A-Za-z0-9._-]{1,80}-[0-9a-f]{16}$`, base)
		if prev, dup := seen[b.SessionDir]; dup {
			t.Errorf("ids %q and %q share the session directory %s", prev, id, b.SessionDir)
		}
		seen[b.SessionDir] = id
	}
}

func TestLabel(t *testing.T) {
	suffix := func(id string) string { return "-" + digest.Hex([]byte(id))[:16] }
	long := strings.Repeat("a", 79) + "/bcdef"
	tests := []struct {
		id, readable string
	}{
		{"session-1", "session-1"},
		{"session/1", "session_1"},
		{"a:b", "a_b"},
		{"Ab.9_-", "Ab.9_-"},
		{"é", "__"}, // two bytes, two replacements
		{".", "session"},
		{"..", "session"},
		{"....", "session"},
		{"../..", ".._.."},
		{"", "session"},
		{strings.Repeat("z", 81), strings.Repeat("z", 80)},
		{long, strings.Repeat("a", 79) + "_"},
		{strings.Repeat(".", 80) + "x", strings.Repeat(".", 80)}, // all-dots is judged before the cut; the hex suffix keeps it a plain name
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			assert.Equal(t, tt.readable+suffix(tt.id), label(tt.id))
		})
	}
}

func TestKeyChangesWithEveryBoundInput(t *testing.T) {
	base := testConfig(t)
	other := realTempDir(t)
	b0 := mustBind(t, base)

	tests := []struct {
		name   string
		mutate func(*Config)
	}{
		{"session id", func(c *Config) { c.SessionID = "session-2" }},
		{"workspace", func(c *Config) { c.Workspace = other }},
		{"profile driver", func(c *Config) { c.Profile.Driver = "acp2" }},
		{"profile protocol", func(c *Config) { c.Profile.Protocol = "acp/2" }},
		{"profile agent", func(c *Config) { c.Profile.Agent = "codex" }},
		{"profile agent version", func(c *Config) { c.Profile.AgentVersion = "1.2.4" }},
		{"profile server package", func(c *Config) { c.Profile.ServerPackage = "other" }},
		{"profile server version", func(c *Config) { c.Profile.ServerVersion = "0.5.1" }},
		{"profile command digest", func(c *Config) { c.Profile.CommandDigest = "sha256:" + strings.Repeat("cd", 32) }},
		{"profile permission policy", func(c *Config) { c.Profile.PermissionPolicy = "read-only" }},
		{"model (and profile model)", func(c *Config) { c.Model = "claude-opus-4"; c.Profile.Model = c.Model }},
		{"permission mode approve-all", func(c *Config) { c.PermissionMode = ApproveAll }},
		{"permission mode deny-all", func(c *Config) { c.PermissionMode = DenyAll }},
		{"skills digest", func(c *Config) { c.SkillsDigest = "sha256:" + strings.Repeat("4d", 32) }},
		{"no skills", func(c *Config) { c.SkillsDigest = "" }},
	}
	seen := map[string]string{b0.Key: "base"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base
			tt.mutate(&c)
			b := mustBind(t, c)
			assert.NotEqual(t, b0.Key, b.Key)
			if prev, dup := seen[b.Key]; dup {
				t.Errorf("%s and %s share key %s", prev, tt.name, b.Key)
			}
			seen[b.Key] = tt.name
		})
	}

	t.Run("state dir does not change the key", func(t *testing.T) {
		c := base
		c.StateDir = other
		b := mustBind(t, c)
		assert.Equal(t, b0.Key, b.Key)
		assert.NotEqual(t, b0.SessionDir, b.SessionDir)
	})
}

func TestProfileDigest(t *testing.T) {
	p := testProfile()
	d := p.Digest()
	assert.Regexp(t, digestRE, d)
	assert.Equal(t, d, testProfile().Digest())

	// Moving bytes between adjacent fields must change the digest.
	a, b := Profile{Driver: "ab", Protocol: "c"}, Profile{Driver: "a", Protocol: "bc"}
	assert.NotEqual(t, a.Digest(), b.Digest())

	mutators := []func(*Profile){
		func(p *Profile) { p.Driver += "x" },
		func(p *Profile) { p.Protocol += "x" },
		func(p *Profile) { p.Agent += "x" },
		func(p *Profile) { p.AgentVersion += "x" },
		func(p *Profile) { p.ServerPackage += "x" },
		func(p *Profile) { p.ServerVersion += "x" },
		func(p *Profile) { p.CommandDigest += "x" },
		func(p *Profile) { p.Model += "x" },
		func(p *Profile) { p.PermissionPolicy += "x" },
	}
	seen := map[string]int{d: -1}
	for i, m := range mutators {
		q := testProfile()
		m(&q)
		got := q.Digest()
		_, dup := seen[got]
		assert.False(t, dup, "mutator %d collides", i)
		seen[got] = i
	}
}

func TestCanonicalIsUnambiguous(t *testing.T) {
	assert.NotEqual(t, digest.Encode("t", "a", "bc"), digest.Encode("t", "ab", "c"))
	assert.NotEqual(t, digest.Encode("t", "a,", "b"), digest.Encode("t", "a", ",b"))
	assert.NotEqual(t, digest.Encode("t1", "x"), digest.Encode("t", "1x"))
	assert.Equal(t, []byte("1:t,1:a,0:,"), digest.Encode("t", "a", ""))
}

func TestBindRejectsMalformedSkillsDigest(t *testing.T) {
	for _, d := range []string{strings.Repeat("3c", 32), "sha256:" + strings.Repeat("3C", 32), "sha256:abc", " "} {
		cfg := testConfig(t)
		cfg.SkillsDigest = d
		_, err := Bind(cfg)
		require.ErrorIs(t, err, ErrInvalidSkillsDigest, d)
		assert.Contains(t, err.Error(), `pass the skills bundle's Identity.Digest, or "" when no skill was selected`)
	}
	b := mustBind(t, testConfig(t))
	b.SkillsDigest = "sha256:x"
	assert.ErrorIs(t, b.Verify(b.Identity()), ErrInvalidBinding, "a binding not made by Bind")
}

func TestBindErrorMessagesNameTheFix(t *testing.T) {
	cfg := testConfig(t)
	cfg.Workspace = "/"
	_, err := Bind(cfg)
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrInvalidWorkspace))
	assert.Contains(t, err.Error(), "pass a dedicated directory")
}
